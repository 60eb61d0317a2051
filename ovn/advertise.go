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

// OVN-Kubernetes' masquerade subnets (config.Gateway.V4MasqueradeSubnet,
// V6MasqueradeSubnet): defaults 169.254.169.0/29 and fd69::/125 upstream,
// 169.254.0.0/17 and fd69::/112 in OpenShift. A VIP key there (the
// ETP=Local node-port VIP 169.254.169.3 on node_switch rows) is internal,
// and a backend there (169.254.169.2, fd69::2: a host-network endpoint on
// the node, on node_router rows) stands for a node address the other rows
// hold as it is. Neither is advertised nor counted.
var (
	masqueradeV4 = netip.MustParsePrefix("169.254.0.0/16")
	masqueradeV6 = netip.MustParsePrefix("fd69::/112")
)

// isMasquerade says whether a is in OVN-Kubernetes' masquerade subnets.
func isMasquerade(a netip.Addr) bool {
	return masqueradeV4.Contains(a) || masqueradeV6.Contains(a)
}

// maxSourceNames is how many row names a Source lists before "+N more":
// a central NB holds per-node rows of every node.
const maxSourceNames = 3

// sourceNames joins names, the first maxSourceNames of them.
func sourceNames(names []string) string {
	if len(names) <= maxSourceNames {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s +%d more", strings.Join(names[:maxSourceNames], ", "), len(names)-maxSourceNames)
}

// networkName is the model's name of a network read from external_ids.
func networkName(n string) string {
	if n == "" {
		return model.DefaultNetwork
	}
	return n
}

// compareNetworks orders networks with the default network first.
func compareNetworks(a, b string) int {
	da, db := a == model.DefaultNetwork, b == model.DefaultNetwork
	switch {
	case da && !db:
		return -1
	case db && !da:
		return 1
	}
	return cmp.Compare(a, b)
}

// buildEgressIPs returns the egress IPs node holds (docs/ovn-nb.md,
// "Advertise: egress IPs and Service VIPs"): the external_ip of the
// EgressIP SNAT rows on node's gateway router of each network,
// GR_<prefix><node>, one entry per (address, network). Rows on other
// routers (other nodes') are not node's. A row whose external_ip does not
// parse is left out; buildProtectedAddresses reports it. A k8s.ovn.org/name
// not of the form <egressip>_<namespace>/<pod> is a problem; the address is
// still listed, with no namespace.
func buildEgressIPs(nats []natRow, node string) (out []model.EgressIP, problems []string) {
	if node == "" {
		return nil, nil
	}
	type key struct {
		network string
		ip      netip.Addr
	}
	type acc struct {
		router     string
		names      []string // k8s.ovn.org/name of each row
		eips       []string // EgressIP objects
		namespaces []string
	}
	byKey := make(map[key]*acc, len(nats))
	keys := make([]key, 0, len(nats))
	for i := range nats {
		n := &nats[i]
		network := networkName(n.RouterNetwork)
		if n.Router == "" || n.Router != gatewayRouterName(network, node) {
			continue
		}
		a, eip, ns, ok, problem := eipContrib(n)
		if problem != "" {
			problems = append(problems, problem)
		}
		if !ok {
			continue
		}
		k := key{network, a}
		e := byKey[k]
		if e == nil {
			e = &acc{router: n.Router}
			byKey[k] = e
			keys = append(keys, k)
		}
		e.names = append(e.names, n.Name)
		e.eips = append(e.eips, eip)
		if ns != "" {
			e.namespaces = append(e.namespaces, ns)
		}
	}
	// The keys are sorted, not the (bigger) entries: (network, IP) is
	// unique, so the order is the same.
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(compareNetworks(a.network, b.network), a.ip.Compare(b.ip))
	})
	out = make([]model.EgressIP, 0, len(keys))
	for _, k := range keys {
		e := byKey[k]
		out = append(out, eipEntry(k.ip, k.network, e.router, e.names, e.eips, e.namespaces))
	}
	return out, problems
}

// buildServiceVIPs returns every VIP address of every Service load balancer,
// one entry per (address, network, Service) with the backends of every
// port, protocol and row merged (docs/ovn-nb.md, "Advertise: egress IPs and
// Service VIPs"). Template keys (^NODEIP...) and keys in the masquerade
// subnets are skipped; a key that does not parse is left out
// (buildProtectedAddresses reports it). A backend that does not parse is
// left out and reported; the VIP keeps its other backends. A row whose
// k8s.ovn.org/owner is not <namespace>/<name> is reported and its VIPs left
// out (they are still protected). The parsing is
// done once per row version (newLBRow): after one change, only the
// merge runs over the other rows.
func buildServiceVIPs(lbs []*lbRow) (out []model.ServiceVIP, problems []string) {
	// Networks ranked default first, then by name.
	rank := map[string]int32{}
	for _, lb := range lbs {
		rank[networkName(lb.Network)] = 0
	}
	names := make([]string, 0, len(rank))
	for n := range rank {
		names = append(names, n)
	}
	slices.SortFunc(names, compareNetworks)
	for i, n := range names {
		rank[n] = int32(i)
	}

	// One ref per VIP address of each row, sorted by (network, VIP,
	// Service, row): the refs of one output are then adjacent, in output
	// order.
	type ref struct {
		vip     netip.Addr
		network int32
		lb, a   int32
	}
	n := 0
	for _, lb := range lbs {
		n += len(lb.VIPs)
	}
	refs := make([]ref, 0, n)
	for i, lb := range lbs {
		if ns, name, ok := strings.Cut(lb.Owner, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			problems = append(problems, fmt.Sprintf("%s %s: external_ids %s %q is not <namespace>/<name>; its VIPs are not advertised",
				tableLoadBalancer, lb.Name, ovnk.ExtIDLBOwner, lb.Owner))
			continue
		}
		for j, v := range lb.VIPs {
			if v.template() || !v.Addr.IsValid() || isMasquerade(v.Addr) {
				// A template names node addresses; a key that does not
				// parse is reported by buildProtectedAddresses.
				continue
			}
			if why := specialPurpose(netip.PrefixFrom(v.Addr, v.Addr.BitLen())); why != "" {
				problems = append(problems, fmt.Sprintf("%s %s vips[%q]: %s %s: never advertised", tableLoadBalancer, lb.Name, v.Key, v.Addr, why))
				continue
			}
			for b := range lb.badOf(j) {
				problems = append(problems, fmt.Sprintf("%s %s vips[%q] backend %q: not IP:PORT, [IPv6]:PORT or an address; left out",
					tableLoadBalancer, lb.Name, v.Key, b))
			}
		}
		r := rank[networkName(lb.Network)]
		for j, a := range lb.addrs() {
			if special(a) {
				continue // said above, per vips key
			}
			refs = append(refs, ref{vip: a, network: r, lb: int32(i), a: int32(j)})
		}
	}
	slices.SortFunc(refs, func(a, b ref) int {
		if c := cmp.Compare(a.network, b.network); c != 0 {
			return c
		}
		if c := a.vip.Compare(b.vip); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(lbs[a.lb].Owner, lbs[b.lb].Owner), cmp.Compare(a.lb, b.lb))
	})

	out = make([]model.ServiceVIP, 0, len(refs))
	var rows []string
	for i := 0; i < len(refs); {
		first := refs[i]
		service := lbs[first.lb].Owner
		var backends []netip.Addr
		merged := false
		rows = rows[:0]
		for ; i < len(refs) && refs[i].network == first.network && refs[i].vip == first.vip && lbs[refs[i].lb].Owner == service; i++ {
			lb := lbs[refs[i].lb]
			if len(rows) == 0 || rows[len(rows)-1] != lb.Name {
				rows = append(rows, lb.Name)
			}
			bs := lb.backendsAt(int(refs[i].a))
			switch {
			case len(bs) == 0 || slices.Equal(backends, bs):
			case backends == nil:
				backends = bs // sorted already; shared until a second list comes
			default:
				backends = append(slices.Clip(backends), bs...)
				merged = true
			}
		}
		if merged {
			slices.SortFunc(backends, netip.Addr.Compare)
			backends = slices.Compact(backends)
		}
		// Not copied: a list of one row is its parsed list (read-only,
		// shared between builds, as the rows are); a merged one is new.
		// Capped, so that an append by a reader never writes into it.
		// Empty, not nil, when there is no endpoint.
		if backends == nil {
			backends = []netip.Addr{}
		}
		backends = slices.Clip(backends)
		out = append(out, model.ServiceVIP{
			Service: service, Network: names[first.network], VIP: first.vip, Backends: backends,
			Source: vipSource(lbs[first.lb], rows),
		})
	}
	return out, problems
}
