package ovn

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
)

// OVN-Kubernetes names ovnbgp reads (ovn/internal/ovnk; docs/ovn-nb.md).
const (
	extIDNetwork  = ovnk.ExtIDNetwork
	extIDTopology = ovnk.ExtIDTopology
	extIDRole     = ovnk.ExtIDRole

	// other_config keys of a Logical_Switch. subnet holds IPv4 prefixes
	// (space or comma separated); ipv6_prefix holds only the address of an
	// IPv6 subnet.
	cfgSubnet     = ovnk.CfgSubnet
	cfgIPv6Prefix = ovnk.CfgIPv6Prefix

	// Switch names (after the network prefix) of the layer2 and localnet
	// topologies. A layer3 network has one switch per node named after the
	// node.
	layer2SwitchName   = ovnk.Layer2Switch
	localnetSwitchName = ovnk.LocalnetSwitch

	tableLogicalSwitch = "Logical_Switch"
)

// The topologies of an OVN-Kubernetes network (k8s.ovn.org/topology).
const (
	TopologyLayer3   = ovnk.TopologyLayer3
	TopologyLayer2   = ovnk.TopologyLayer2
	TopologyLocalnet = ovnk.TopologyLocalnet
)

// ipv6NodePrefixLen is the length of the IPv6 subnet whose address
// other_config:ipv6_prefix holds.
const ipv6NodePrefixLen = 64

// switchRow is the part of a Logical_Switch row ovnbgp uses, copied out of
// the libovsdb cache so that the snapshot builder is pure and the last good
// rows survive a disconnect.
type switchRow struct {
	UUID       string
	Name       string
	Network    string // external_ids:k8s.ovn.org/network, "" on the default network
	Topology   string // external_ids:k8s.ovn.org/topology
	Role       string // external_ids:k8s.ovn.org/role
	Subnet     string // other_config:subnet
	IPv6Prefix string // other_config:ipv6_prefix
}

// networkPrefix is the prefix of a network's entity names.
func networkPrefix(network string) string { return ovnk.NetworkPrefix(network) }

// buildResult is what the rows say, for one node.
type buildResult struct {
	// Snapshot is the node's networks and their pod subnets.
	Snapshot model.Snapshot
	// Cluster is every pod subnet on every node in every network, the
	// prefixes ovnbgp must never import (ARCHITECTURE.md, safety rule 2).
	Cluster []model.Subnet
	// Problems describes each row that was skipped, sorted.
	Problems []string
}

// build turns Logical_Switch rows into node's view. It is pure and
// deterministic: networks are sorted by name with the default network first,
// subnets by address family, address and length.
//
// Which switch belongs to node, per topology of its network:
//   - layer3 (and the default network): the switch named <p><node>; its
//     IPv4 subnet(s) from other_config:subnet and its IPv6 /64 from the
//     address in other_config:ipv6_prefix;
//   - layer2: the switch <p>ovn_layer2_switch, whose subnets are the whole
//     network's, from other_config:subnet (and ipv6_prefix, read as a /64);
//   - localnet: the switch <p>ovn_localnet_switch; the network is listed with
//     no subnets, since its addresses belong to the physical network and are
//     not this node's to advertise.
//
// A row of unexpected shape is skipped whole and described in Problems; the
// rest of the snapshot is unaffected. Cluster keeps every well-formed prefix
// of every row, even of skipped rows: for the never-import list, more is
// safer.
func build(rows []switchRow, node string) buildResult {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b switchRow) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.UUID, b.UUID))
	})
	names := make(map[string]int, len(rows))
	for _, r := range rows {
		names[r.Name]++
	}

	var (
		problems []string
		cluster  []model.Subnet
		nets     = map[string]*model.Network{}
		netRows  = map[string][]string{} // network -> names of its rows for this node
		sawNode  bool
	)
	problem := func(name, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s %s: %s", tableLogicalSwitch, name, fmt.Sprintf(format, args...)))
	}

	for _, r := range rows {
		subnets, bad := parseSubnets(r)
		cluster = append(cluster, subnets...)

		network, topology, ok := classify(r, node)
		if r.Network == "" && r.Name == node {
			sawNode = true
		}
		if !ok {
			// Not this node's switch: only its subnets matter (Cluster), and
			// a malformed one is still worth saying.
			for _, b := range bad {
				problem(r.Name, "%s", b)
			}
			continue
		}
		switch {
		case names[r.Name] > 1:
			if r.UUID == firstUUID(rows, r.Name) {
				problem(r.Name, "%d rows have this name; all skipped", names[r.Name])
			}
			continue
		case topology != TopologyLayer3 && topology != TopologyLayer2 && topology != TopologyLocalnet:
			problem(r.Name, "unknown topology %q in external_ids:%s; skipped", topology, extIDTopology)
			continue
		case len(bad) > 0:
			for _, b := range bad {
				problem(r.Name, "%s; row skipped", b)
			}
			continue
		case len(subnets) == 0 && topology != TopologyLocalnet:
			problem(r.Name, "no other_config:%s or other_config:%s; skipped", cfgSubnet, cfgIPv6Prefix)
			continue
		}
		if topology == TopologyLocalnet {
			subnets = []model.Subnet{}
		}
		netRows[network] = append(netRows[network], r.Name)
		if n, dup := nets[network]; dup {
			n.Subnets = append(n.Subnets, subnets...)
			continue
		}
		nets[network] = &model.Network{Name: network, Topology: topology, Role: r.Role, Subnets: subnets}
	}

	if !sawNode && node != "" {
		problem(node, "no such row: the default network has no switch for node %q (is node.name right?)", node)
	}

	snap := model.Snapshot{Node: node, Networks: []model.Network{}}
	for name, n := range nets {
		if len(netRows[name]) > 1 {
			problems = append(problems, fmt.Sprintf("network %s: several switches for this node (%s); all skipped",
				name, strings.Join(netRows[name], ", ")))
			continue
		}
		n.Subnets = sortSubnets(n.Subnets)
		snap.Networks = append(snap.Networks, *n)
	}
	slices.SortFunc(snap.Networks, func(a, b model.Network) int {
		da, db := a.Name == model.DefaultNetwork, b.Name == model.DefaultNetwork
		if da != db {
			if da {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})

	slices.Sort(problems)
	return buildResult{Snapshot: snap, Cluster: sortSubnets(cluster), Problems: slices.Compact(problems)}
}

// classify says whether r is node's switch of its network, and names the
// network and its topology.
func classify(r switchRow, node string) (network, topology string, ok bool) {
	network, topology = r.Network, r.Topology
	if network == "" || network == model.DefaultNetwork {
		// The default network is layer3 and carries no k8s.ovn.org keys.
		return model.DefaultNetwork, TopologyLayer3, node != "" && r.Name == node
	}
	p := networkPrefix(network)
	rest, found := strings.CutPrefix(r.Name, p)
	if !found {
		return network, topology, false
	}
	if topology == "" {
		// Older OVN-Kubernetes did not always set the topology key; the
		// switch name still tells.
		switch rest {
		case layer2SwitchName:
			topology = TopologyLayer2
		case localnetSwitchName:
			topology = TopologyLocalnet
		default:
			topology = TopologyLayer3
		}
	}
	switch topology {
	case TopologyLayer3:
		return network, topology, node != "" && rest == node
	case TopologyLayer2:
		return network, topology, rest == layer2SwitchName
	case TopologyLocalnet:
		return network, topology, rest == localnetSwitchName
	default:
		// Unknown topology: it is this node's switch if named like one, so
		// that the problem is reported.
		return network, topology, node != "" && (rest == node || rest == layer2SwitchName || rest == localnetSwitchName)
	}
}

// parseSubnets reads the pod subnets of one row. It returns every
// well-formed prefix (deduplicated) and a description of each malformed one.
func parseSubnets(r switchRow) (subnets []model.Subnet, bad []string) {
	seen := map[netip.Prefix]bool{}
	add := func(p netip.Prefix, col string) {
		if seen[p] {
			return
		}
		seen[p] = true
		subnets = append(subnets, model.Subnet{
			Prefix: p,
			Source: fmt.Sprintf("%s %s other_config:%s", tableLogicalSwitch, r.Name, col),
		})
	}
	for _, f := range splitList(r.Subnet) {
		p, err := parseIPv4Subnet(f)
		if err != nil {
			bad = append(bad, fmt.Sprintf("other_config:%s %q: %v", cfgSubnet, f, err))
			continue
		}
		add(p, cfgSubnet)
	}
	for _, f := range splitList(r.IPv6Prefix) {
		p, err := parseIPv6Prefix(f)
		if err != nil {
			bad = append(bad, fmt.Sprintf("other_config:%s %q: %v", cfgIPv6Prefix, f, err))
			continue
		}
		add(p, cfgIPv6Prefix)
	}
	return subnets, bad
}

// splitList splits a list of prefixes separated by spaces or commas.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n'
	})
}

// What a pod subnet read from NB may be (docs/ovn-nb.md, "What is
// refused"): a CIDR netip parses (any spelling it accepts; it is used and
// shown in canonical form), with no host bits set, no zone, not
// IPv4-mapped, of the family of its column, and not a default route: a /0
// is never a pod subnet, and advertising one would send every peer's
// traffic to this node.

// parsePrefix parses a CIDR and refuses one with host bits set (OVN would
// reject it and advertising it would be wrong either way) or of length 0.
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR")
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zone not allowed")
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv4-mapped IPv6 prefix")
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("a default route, not a pod subnet")
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("host bits set (network is %s)", p.Masked())
	}
	return p, nil
}

// parseIPv4Subnet reads one prefix of other_config:subnet, the IPv4 column:
// OVN-Kubernetes writes IPv6 subnets to other_config:ipv6_prefix.
func parseIPv4Subnet(s string) (netip.Prefix, error) {
	p, err := parsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("an IPv6 prefix in the IPv4 column (OVN-Kubernetes writes IPv6 to other_config:%s)", cfgIPv6Prefix)
	}
	return p, nil
}

// parseIPv6Prefix reads other_config:ipv6_prefix: an IPv6 address naming a
// /64. A value in CIDR form is accepted too.
func parseIPv6Prefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := parsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if !p.Addr().Is6() {
			return netip.Prefix{}, fmt.Errorf("not an IPv6 prefix")
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an IPv6 address")
	}
	if !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("not a plain IPv6 address")
	}
	if a.IsUnspecified() {
		return netip.Prefix{}, fmt.Errorf("the unspecified address, not a pod subnet")
	}
	p := netip.PrefixFrom(a, ipv6NodePrefixLen)
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("host bits set beyond /%d (network is %s)", ipv6NodePrefixLen, p.Masked())
	}
	return p, nil
}

// sortSubnets sorts by prefix (IPv4 first) and drops repeated prefixes,
// keeping the first source. It never returns nil.
func sortSubnets(s []model.Subnet) []model.Subnet {
	out := slices.Clone(s)
	if out == nil {
		out = []model.Subnet{}
	}
	slices.SortStableFunc(out, func(a, b model.Subnet) int { return comparePrefix(a.Prefix, b.Prefix) })
	return slices.CompactFunc(out, func(a, b model.Subnet) bool { return a.Prefix == b.Prefix })
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// firstUUID is the UUID of the first row named name in rows (sorted).
func firstUUID(rows []switchRow, name string) string {
	for _, r := range rows {
		if r.Name == name {
			return r.UUID
		}
	}
	return ""
}
