package ovn

import (
	"cmp"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"sync"

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
	tableRouterPort    = "Logical_Router_Port"
	tableStaticRoute   = "Logical_Router_Static_Route"
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

// routerPortRow is the part of a Logical_Router_Port row ovnbgp uses: the
// port joining a router to a switch carries the real lengths of the
// switch's subnets (docs/ovn-nb.md).
type routerPortRow struct {
	UUID     string
	Name     string
	Networks []string // "address/length", the router's address in each subnet
}

// routeRow is a Logical_Router_Static_Route ovnbgp reads: one that
// OVN-Kubernetes' interconnect mode writes on a cluster router towards
// another node's subnet (external_ids:ic-node), one of ovnbgp's
// (ovnbgp.io/owner), or one of OVN-Kubernetes' route import
// (k8s.ovn.org/owner-controller=RouteImport).
type routeRow struct {
	UUID            string
	Router          string // name of the Logical_Router holding it, "" if none
	IPPrefix        string
	Nexthop         string
	OutputPort      string // "" if unset
	ICNode          string // external_ids:ic-node
	Owner           string // external_ids:ovnbgp.io/owner
	Rule            string // external_ids:ovnbgp.io/rule
	OwnerController string // external_ids:k8s.ovn.org/owner-controller
}

// routerRow is a gateway router (a Logical_Router named GR_...).
type routerRow struct {
	UUID         string
	Name         string
	Network      string   // external_ids:k8s.ovn.org/network, "" on the default network
	StaticRoutes []string // UUIDs, sorted
}

// nbRows is everything the snapshot is built from, copied out of the
// libovsdb cache, sorted by name (routes by UUID).
type nbRows struct {
	Switches []switchRow
	Ports    []routerPortRow
	Routes   []routeRow
	Routers  []routerRow
	// LoadBalancers are the Service load balancers, NATs the egress IP
	// SNATs (protected.go); read-only: readRows shares unchanged ones
	// between reads.
	LoadBalancers []*lbRow
	NATs          []natRow
	// vips is the Service VIPs of LoadBalancers, as readRows keeps them
	// row by row (vipIndex); nil in rows made by hand: the builder builds
	// them (buildServiceVIPs).
	vips *lbVIPs
	// eips is the egress IPs of NATs, as readRows keeps them row by row
	// (eipIndex); nil in rows made by hand: the builder builds them
	// (buildEgressIPs).
	eips *natEIPs
	// Northd is NB_Global options:northd_internal_version, "" when NB
	// has none (readNBGlobal).
	Northd string
	// VMRoutes are KubeVirt's static routes on ovn_cluster_router
	// (k8s.ovn.org/vm), by UUID.
	VMRoutes []vmRouteRow
	// wl is node's workload addresses, as readRows keeps them row by row
	// (wlIndex); nil when the switch ports are not read.
	wl *wlView
	// gen is the generation of rows read by readRows: it moves only when
	// the rows differ from the last read's (rowMemo); 0 in rows made by
	// hand.
	gen uint64
}

// networkPrefix is the prefix of a network's entity names.
func networkPrefix(network string) string { return ovnk.NetworkPrefix(network) }

// buildResult is what the rows say, for one node.
type buildResult struct {
	// Snapshot is the node's networks and their pod subnets.
	Snapshot model.Snapshot
	// Cluster is every pod subnet on every node in every network, the
	// prefixes ovnbgp must never import (docs/architecture.md, "Safety rules",
	// rule 2).
	Cluster []model.Subnet
	// Problems describes each row that was skipped, sorted.
	Problems []string
	// WorkloadsNewer: the workload addresses are the index's, newer than the
	// rows' read (wlView.forNode): SnapshotDelta says All.
	WorkloadsNewer bool
}

// build turns Logical_Switch rows into node's view. It is pure and
// deterministic: networks are sorted by name with the default network first,
// subnets by address family, address and length.
//
// Which switch belongs to node, per topology of its network:
//   - layer3 (and the default network): the switch named <p><node>; its
//     IPv4 subnet(s) from other_config:subnet and its IPv6 subnet from the
//     address in other_config:ipv6_prefix (see buildNB for the length);
//   - layer2: the switch <p>ovn_layer2_switch, whose subnets are the whole
//     network's (see buildNB: the IPv6 length is on its router port);
//   - localnet: the switch <p>ovn_localnet_switch; the network is listed with
//     no subnets, since its addresses belong to the physical network and are
//     not this node's to advertise.
//
// A row of unexpected shape is skipped whole and described in Problems; the
// rest of the snapshot is unaffected. Cluster keeps every well-formed prefix
// of every row, even of skipped rows: for the never-import list, more is
// safer.
func build(rows []switchRow, node string) buildResult {
	return buildNB(nbRows{Switches: rows}, node)
}

// buildNB is build with the router ports and interconnect routes too.
//
// The subnets of a switch S (resolveSubnets): IPv4 from other_config:subnet;
// IPv6 from other_config:ipv6_prefix, an address whose length is that of
// the network of the router port on S (trtos-S, or rtos-S) that starts at
// it, or /64 on a layer3 switch without such a port (OVN-Kubernetes allows
// only /64 IPv6 host subnets); a family missing from the switch's
// other_config (OVN-Kubernetes before 1.3 kept only one family of a
// dual-stack layer2 switch) comes from the router port's networks. A
// layer2 IPv6 subnet whose length is nowhere in NB is not advertised, and
// said in Problems; the rest of the switch is.
//
// Cluster also holds the prefixes of the static routes interconnect mode
// writes towards other nodes (external_ids:ic-node): in that mode this NB
// has no switch of theirs.
func buildNB(in nbRows, node string) buildResult {
	return buildNBMemo(in, node, nil)
}

// buildNBMemo is buildNB, reusing from memo (may be nil) the egress IPs and
// Service VIPs of the last build whose NAT or load-balancer rows were the
// same slice: rows are replaced, never mutated, and readRows shares a
// table's rows until the table changes, so after one Service's change the
// egress IPs are not built again, nor the VIPs after an egress IP's. Rows
// from readRows carry their Service VIPs (nbRows.vips, kept row by row),
// and the load balancers' protected addresses, kept row by row (lbPart).
// What comes of the switches, router ports, routes and routers (networks,
// cluster subnets, import, their protected prefixes) is the last build's
// when they are the same slices (buildMemo.context, portsAndRoutes): one
// egress IP's or VIP's change costs no walk of every node's rows (issue 18).
func buildNBMemo(in nbRows, node string, memo *buildMemo) buildResult {
	// The node addresses, for advertisable: no pod subnet may hold one.
	// The protected prefixes of the last build, if built from the same
	// rows: after one Service's backends changed, none of them differ.
	prot := memo.protected(in, node)
	nodeAddrs, addrProblems := prot.nodeAddrs, prot.problems
	var addrRuns [][]model.ProtectedPrefix // protectedRuns', merged below
	if !prot.ok {
		addrRuns, nodeAddrs, addrProblems = protectedRuns(in, memo)
		slices.SortFunc(nodeAddrs, netip.Addr.Compare)
		nodeAddrs = slices.Compact(nodeAddrs)
	}

	// The switches, router ports, routes and routers: the last build's
	// when they are the same rows (an egress IP's or a VIP's change
	// leaves them), else built again.
	ctx := memo.context(in, node, nodeAddrs)

	snap := model.Snapshot{Node: node, Networks: ctx.networks}
	snap.Routers, snap.OwnedRoutes = ctx.imp.Routers, ctx.imp.Owned
	snap.NodeAddresses = nodeAddrs
	if in.Northd != "" {
		snap.Northd = parseNorthdVersion(in.Northd)
	}
	// The address runs are sorted, each address once: merged with the
	// subnets' in one pass, not sorted again (the first of equal prefixes
	// kept, as sortProtected of the three would).
	if prot.ok {
		snap.Protected = prot.final
	} else {
		snap.Protected = mergeProtected(append([][]model.ProtectedPrefix{ctx.subnetProt}, addrRuns...)...)
		prot.nodeAddrs, prot.problems, prot.final = nodeAddrs, addrProblems, snap.Protected
		memo.setProtected(prot)
	}
	problems := slices.Concat(ctx.problems, addrProblems)
	var wlNewer bool
	if node != "" {
		// Only a node's snapshot advertises (ClusterSubnets passes "").
		var eipProblems, vipProblems []string
		if in.eips != nil {
			snap.EgressIPs, eipProblems = in.eips.forNode(node)
		} else {
			snap.EgressIPs, eipProblems = memo.egressIPs(in.NATs, node)
		}
		if in.vips != nil {
			snap.ServiceVIPs, vipProblems = in.vips.list, in.vips.problems
		} else {
			snap.ServiceVIPs, vipProblems = memo.serviceVIPs(in.LoadBalancers)
		}
		problems = append(problems, eipProblems...)
		problems = append(problems, vipProblems...)
		var wlProblems []string
		snap.WorkloadIPs, wlProblems, wlNewer = in.wl.forNode(node)
		problems = append(problems, wlProblems...)
	}

	slices.Sort(problems)
	return buildResult{Snapshot: snap, Cluster: ctx.cluster, Problems: slices.Compact(problems), WorkloadsNewer: wlNewer}
}

// ctxBuild is what buildNBMemo makes of the switches, router ports, routes
// and routers of node (buildContext), by the rows it was made from
// (compared as slices); read-only, shared between snapshots.
type ctxBuild struct {
	switches []switchRow
	ports    []routerPortRow
	routes   []routeRow
	routers  []routerRow
	node     string
	// networks is the snapshot's, cluster the build's (sorted), subnetProt
	// the protected pod, join and transit subnets and interconnect routes
	// (sortProtected), problems those of the switches, routes and import.
	networks   []model.Network
	cluster    []model.Subnet
	subnetProt []model.ProtectedPrefix
	imp        importResult
	problems   []string
}

// context returns the last build's ctxBuild when in's switches, router
// ports, routes and routers and node are what it was made from, else
// builds it (buildContext) and records it. The node addresses come from the
// router ports: the same rows, the same addresses.
func (m *buildMemo) context(in nbRows, node string, nodeAddrs []netip.Addr) *ctxBuild {
	if m == nil {
		return buildContext(in, node, nodeAddrs)
	}
	m.mu.Lock()
	c := m.ctx
	m.mu.Unlock()
	if c != nil && c.node == node && sameRows(c.switches, in.Switches) && sameRows(c.ports, in.Ports) &&
		sameRows(c.routes, in.Routes) && sameRows(c.routers, in.Routers) {
		return c
	}
	c = buildContext(in, node, nodeAddrs)
	m.mu.Lock()
	m.ctx = c
	m.mu.Unlock()
	return c
}

// buildContext is buildNB's part of the switches (node's networks, every
// pod subnet), the interconnect routes and the gateway routers
// (buildImport); nodeAddrs are the node addresses no pod subnet may hold.
func buildContext(in nbRows, node string, nodeAddrs []netip.Addr) *ctxBuild {
	rows := slices.Clone(in.Switches)
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
		guarded  []model.ProtectedPrefix
		nets     = map[string]*model.Network{}
		netRows  = map[string][]string{} // network -> names of its rows for this node
		sawNode  bool
	)
	problem := func(name, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s %s: %s", tableLogicalSwitch, name, fmt.Sprintf(format, args...)))
	}

	ports := make(map[string]routerPortRow, len(in.Ports))
	for _, p := range in.Ports {
		ports[p.Name] = p
	}

	for _, r := range rows {
		network, topology, ok := classify(r, node)
		subnets, protect, bad, unresolved := resolveSubnets(r, topology, ports)
		cluster = append(cluster, subnets...)
		cluster = append(cluster, protect...)
		for _, sn := range slices.Concat(subnets, protect) {
			guarded = append(guarded, model.ProtectedPrefix{Prefix: sn.Prefix, Why: "pod subnet (" + sn.Source + ")"})
		}

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
		case len(unresolved) > 0 && topology != TopologyLocalnet:
			for _, u := range unresolved {
				problem(r.Name, "%s", u)
			}
			if len(subnets) == 0 {
				continue
			}
		case len(subnets) == 0 && topology != TopologyLocalnet:
			problem(r.Name, "no other_config:%s or other_config:%s; skipped", cfgSubnet, cfgIPv6Prefix)
			continue
		}
		if topology == TopologyLocalnet {
			subnets = []model.Subnet{}
		}
		subnets = advertisable(subnets, nodeAddrs, func(format string, args ...any) { problem(r.Name, format, args...) })
		netRows[network] = append(netRows[network], r.Name)
		if n, dup := nets[network]; dup {
			n.Subnets = append(n.Subnets, subnets...)
			continue
		}
		nets[network] = &model.Network{Name: network, Topology: topology, Role: r.Role, Subnets: subnets}
	}

	for _, rt := range in.Routes {
		if rt.ICNode == "" {
			continue
		}
		p, err := parsePrefix(rt.IPPrefix)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s on %s (%s=%s): ip_prefix %q: %v; not protected",
				tableStaticRoute, rt.UUID, rt.Router, ovnk.ExtIDICNode, rt.ICNode, rt.IPPrefix, err))
			continue
		}
		cluster = append(cluster, model.Subnet{Prefix: p,
			Source: fmt.Sprintf("%s on %s to node %s (%s)", tableStaticRoute, rt.Router, rt.ICNode, ovnk.ExtIDICNode)})
		guarded = append(guarded, model.ProtectedPrefix{Prefix: p,
			Why: fmt.Sprintf("interconnect route to node %s (%s on %s ip_prefix, %s=%s)",
				rt.ICNode, tableStaticRoute, rt.Router, ovnk.ExtIDICNode, rt.ICNode)})
	}

	if !sawNode && node != "" {
		problem(node, "no such row: the default network has no switch for node %q (is node.name right?)", node)
	}

	networks := []model.Network{}
	for name, n := range nets {
		if len(netRows[name]) > 1 {
			problems = append(problems, fmt.Sprintf("network %s: several switches for this node (%s); all skipped",
				name, strings.Join(netRows[name], ", ")))
			continue
		}
		n.Subnets = sortSubnets(n.Subnets)
		networks = append(networks, *n)
	}
	slices.SortFunc(networks, func(a, b model.Network) int {
		da, db := a.Name == model.DefaultNetwork, b.Name == model.DefaultNetwork
		if da != db {
			if da {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})

	imp := buildImport(in, node)
	problems = append(problems, imp.Problems...)
	return &ctxBuild{switches: in.Switches, ports: in.Ports, routes: in.Routes, routers: in.Routers, node: node,
		networks: networks, cluster: sortSubnets(cluster), subnetProt: sortProtected(slices.Concat(guarded, imp.Protected)),
		imp: imp, problems: problems}
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

// resolveSubnets reads the pod subnets of one switch (see buildNB). It
// returns every well-formed prefix (deduplicated), a description of each
// malformed value (the row is skipped), and of each subnet whose length
// could not be found (that subnet alone is left out).
//
// A layer2 IPv6 subnet whose length is not in NB is still protected (in
// protect, never advertised): by the widest prefix its address allows, as
// the real subnet lies inside it, and for the never-import list more is
// safer.
func resolveSubnets(r switchRow, topology string, ports map[string]routerPortRow) (subnets, protect []model.Subnet, bad, unresolved []string) {
	seen := map[netip.Prefix]bool{}
	add := func(p netip.Prefix, source string) {
		if seen[p] {
			return
		}
		seen[p] = true
		subnets = append(subnets, model.Subnet{Prefix: p, Source: source})
	}
	column := func(col string) string {
		return fmt.Sprintf("%s %s other_config:%s", tableLogicalSwitch, r.Name, col)
	}

	// The router's side of the switch: its networks are the router's
	// address in each subnet, with the subnet's length.
	type portNet struct {
		prefix netip.Prefix // masked
		port   string
	}
	var nets []portNet
	for _, name := range []string{ovnk.TransitRouterToSwitch + r.Name, ovnk.RouterToSwitch + r.Name} {
		p, ok := ports[name]
		if !ok {
			continue
		}
		// rtos- of a layer2 switch is the gateway router's port: it also
		// holds the router's join subnet address, which is never the
		// subnet's first address as the gateway's is.
		firstOnly := topology == TopologyLayer2 && strings.HasPrefix(name, ovnk.RouterToSwitch)
		for _, n := range p.Networks {
			pfx, err := netip.ParsePrefix(n)
			if err != nil || pfx.Bits() == 0 || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() {
				unresolved = append(unresolved, fmt.Sprintf("%s %s networks %q: not an address/length; ignored", tableRouterPort, name, n))
				continue
			}
			if firstOnly && pfx.Addr() != pfx.Masked().Addr().Next() {
				continue
			}
			nets = append(nets, portNet{prefix: pfx.Masked(), port: name})
		}
	}
	fromPorts := func(is6 bool) {
		for _, n := range nets {
			if n.prefix.Addr().Is6() == is6 {
				add(n.prefix, fmt.Sprintf("%s %s networks", tableRouterPort, n.port))
			}
		}
	}

	v4 := splitList(r.Subnet)
	for _, f := range v4 {
		p, err := parseIPv4Subnet(f)
		if err != nil {
			bad = append(bad, fmt.Sprintf("other_config:%s %q: %v", cfgSubnet, f, err))
			continue
		}
		add(p, column(cfgSubnet))
	}
	if len(v4) == 0 {
		fromPorts(false)
	}

	v6 := splitList(r.IPv6Prefix)
	for _, f := range v6 {
		if strings.Contains(f, "/") {
			// Not what OVN-Kubernetes writes, but unambiguous.
			p, err := parsePrefix(f)
			switch {
			case err != nil:
				bad = append(bad, fmt.Sprintf("other_config:%s %q: %v", cfgIPv6Prefix, f, err))
			case !p.Addr().Is6():
				bad = append(bad, fmt.Sprintf("other_config:%s %q: not an IPv6 prefix", cfgIPv6Prefix, f))
			default:
				add(p, column(cfgIPv6Prefix))
			}
			continue
		}
		a, err := parseIPv6Address(f)
		if err != nil {
			bad = append(bad, fmt.Sprintf("other_config:%s %q: %v", cfgIPv6Prefix, f, err))
			continue
		}
		found := false
		for _, n := range nets {
			if n.prefix.Addr() == a {
				add(n.prefix, fmt.Sprintf("%s, length from %s %s networks", column(cfgIPv6Prefix), tableRouterPort, n.port))
				found = true
			}
		}
		if found {
			continue
		}
		if topology == TopologyLayer2 {
			wide := widestPrefix(a)
			unresolved = append(unresolved, fmt.Sprintf("other_config:%s %q: the length of this IPv6 subnet is not in NB "+
				"(no router port %s%s or %s%s has a network starting there); not advertised, %s protected",
				cfgIPv6Prefix, f, ovnk.TransitRouterToSwitch, r.Name, ovnk.RouterToSwitch, r.Name, wide))
			protect = append(protect, model.Subnet{Prefix: wide,
				Source: column(cfgIPv6Prefix) + ", length unknown: the widest prefix its address allows"})
			continue
		}
		p := netip.PrefixFrom(a, ipv6NodePrefixLen)
		if p.Masked() != p {
			bad = append(bad, fmt.Sprintf("other_config:%s %q: host bits set beyond /%d (network is %s)", cfgIPv6Prefix, f, ipv6NodePrefixLen, p.Masked()))
			continue
		}
		add(p, column(cfgIPv6Prefix))
	}
	if len(v6) == 0 {
		fromPorts(true)
	}
	return subnets, protect, bad, unresolved
}

// widestPrefix is the shortest prefix (at most /64, OVN-Kubernetes' longest
// IPv6 subnet) that has a as its network address: every subnet starting at
// a lies inside it.
func widestPrefix(a netip.Addr) netip.Prefix {
	b := a.As16()
	tz := 0
	for i := 15; i >= 0; i-- {
		if b[i] != 0 {
			tz += bits.TrailingZeros8(b[i])
			break
		}
		tz += 8
	}
	l := max(128-tz, 1)
	l = min(l, ipv6NodePrefixLen)
	return netip.PrefixFrom(a, l).Masked()
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

// parseIPv6Address reads the address form of other_config:ipv6_prefix.
func parseIPv6Address(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("not an IPv6 address")
	}
	if !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("not a plain IPv6 address")
	}
	if a.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("the unspecified address, not a pod subnet")
	}
	return a, nil
}

// sortSubnets sorts by prefix (IPv4 first) and drops repeated prefixes,
// keeping the first source. It never returns nil.
func sortSubnets(s []model.Subnet) []model.Subnet {
	out := slices.Clone(s)
	if out == nil {
		out = []model.Subnet{}
	}
	slices.SortStableFunc(out, func(a, b model.Subnet) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
	return slices.CompactFunc(out, func(a, b model.Subnet) bool { return a.Prefix == b.Prefix })
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

// buildMemo keeps the egress IPs and Service VIPs of the last build, by the
// rows they were built from (the same slice: the same rows). The results
// are shared by the snapshots built from the same rows; nobody mutates a
// snapshot.
type buildMemo struct {
	mu          sync.Mutex
	eipsOK      bool // eips and eipProblems were built
	vipsOK      bool // vips and vipProblems were built
	nats        []natRow
	node        string
	eips        []model.EgressIP
	eipProblems []string
	lbs         []*lbRow
	vips        []model.ServiceVIP
	vipProblems []string
	// The protected addresses of the load balancers and NATs
	// (protectedFrom), by the rows they came from.
	lbProtOK, natProtOK bool
	lbProtRows          []*lbRow
	lbProt              protectedPart
	natProtRows         []natRow
	natProt             protectedPart
	prot                *protBuild // the last build's protected prefixes
	ctx                 *ctxBuild  // the last build's switches, routes and routers
	// The router ports' and interconnect routes' protected addresses
	// (portsAndRoutes), by the rows they came from.
	portsOK, icOK bool
	portRows      []routerPortRow
	portProt      protectedPart
	portAddrs     []netip.Addr
	icRows        []routeRow
	icProt        protectedPart
}

// protBuild is the protected prefixes of one build (buildNBMemo), by the
// rows they were built from: the load-balancer and NAT parts
// (lbProtected, natProtected), the switches, router ports, routes and
// routers (compared as slices: readRows shares a table's rows until they
// change), and the node. Read-only.
type protBuild struct {
	ok        bool // built from the same rows: use as is
	lb, nat   []model.ProtectedPrefix
	in        nbRows
	node      string
	nodeAddrs []netip.Addr
	problems  []string
	final     []model.ProtectedPrefix // the snapshot's
}

// protected returns the last build's protected prefixes if in and node are
// what they were built from (ok), else the key to record the new ones
// under (setProtected).
func (m *buildMemo) protected(in nbRows, node string) protBuild {
	if m == nil {
		return protBuild{}
	}
	lb, nat := lbPart(in, m), natPart(in, m)
	key := protBuild{lb: lb.prot, nat: nat.prot, in: nbRows{Switches: in.Switches, Ports: in.Ports, Routes: in.Routes, Routers: in.Routers}, node: node}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.prot; p != nil && p.node == node && sameRows(p.lb, key.lb) && sameRows(p.nat, key.nat) &&
		sameRows(p.in.Switches, in.Switches) && sameRows(p.in.Ports, in.Ports) && sameRows(p.in.Routes, in.Routes) &&
		sameRows(p.in.Routers, in.Routers) {
		return *p
	}
	return key
}

// setProtected records a build's protected prefixes.
func (m *buildMemo) setProtected(p protBuild) {
	if m == nil {
		return
	}
	p.ok = true
	m.mu.Lock()
	m.prot = &p
	m.mu.Unlock()
}

// lbProtected is lbProtected(lbs), the last build's when lbs are the same
// rows (rows readRows did not index: lbPart).
func (m *buildMemo) lbProtected(lbs []*lbRow) protectedPart {
	if m == nil {
		return lbProtected(lbs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lbProtOK || !sameRows(m.lbProtRows, lbs) {
		m.lbProtRows, m.lbProt, m.lbProtOK = lbs, lbProtected(lbs), true
	}
	return m.lbProt
}

func (m *buildMemo) natProtected(nats []natRow) protectedPart {
	if m == nil {
		return natProtected(nats)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.natProtOK || !sameRows(m.natProtRows, nats) {
		m.natProtRows, m.natProt, m.natProtOK = nats, natProtected(nats), true
	}
	return m.natProt
}

// portsAndRoutes is portProtected(ports) and icProtected(routes), the last
// build's when they are the same rows: an egress IP's or a VIP's change
// leaves them (a central NB has every node's).
func (m *buildMemo) portsAndRoutes(ports []routerPortRow, routes []routeRow) (protectedPart, []netip.Addr, protectedPart) {
	if m == nil {
		p, addrs := portProtected(ports)
		return p, addrs, icProtected(routes)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.portsOK || !sameRows(m.portRows, ports) {
		m.portRows, m.portsOK = ports, true
		m.portProt, m.portAddrs = portProtected(ports)
	}
	if !m.icOK || !sameRows(m.icRows, routes) {
		m.icRows, m.icOK = routes, true
		m.icProt = icProtected(routes)
	}
	// A copy of the addresses: buildNBMemo sorts them.
	return m.portProt, slices.Clone(m.portAddrs), m.icProt
}

// sameRows says whether a and b are the same slice of rows (both empty
// counts: nothing to build).
func sameRows[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (m *buildMemo) egressIPs(nats []natRow, node string) ([]model.EgressIP, []string) {
	if m == nil {
		return buildEgressIPs(nats, node)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.eipsOK || m.node != node || !sameRows(m.nats, nats) {
		eips, problems := buildEgressIPs(nats, node)
		m.nats, m.node, m.eips, m.eipProblems, m.eipsOK = nats, node, eips, problems, true
	}
	return m.eips, m.eipProblems
}

func (m *buildMemo) serviceVIPs(lbs []*lbRow) ([]model.ServiceVIP, []string) {
	if m == nil {
		return buildServiceVIPs(lbs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.vipsOK || !sameRows(m.lbs, lbs) {
		vips, problems := buildServiceVIPs(lbs)
		m.lbs, m.vips, m.vipProblems, m.vipsOK = lbs, vips, problems, true
	}
	return m.vips, m.vipProblems
}
