package ovn

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
)

const (
	tableLoadBalancer = "Load_Balancer"
	tableNAT          = "NAT"
)

// lbRow is a Service load balancer (external_ids k8s.ovn.org/kind=Service),
// parsed once per row version (newLBRow): its VIP keys (protected,
// advertised) and their backends (advertised). It keeps only what the
// builders read, in strings of the cached model's but Why. Read-only,
// shared between reads and builds.
type lbRow struct {
	UUID    string
	Name    string
	Owner   string // external_ids:k8s.ovn.org/owner, "<namespace>/<name>"
	Network string // external_ids:k8s.ovn.org/network, "" on the default network
	// VIPs are the entries of vips, sorted by address (templates and
	// keys that do not parse first), then key: the entries (ports) of
	// one address are next to each other (addrs, backendsOf).
	VIPs []lbVIP
	// Bad are the backends that do not parse, in the order of VIPs; nil
	// in most rows.
	Bad []lbBad
	// Why is the reason its VIPs are protected (protectWhy), made once per
	// row version: every snapshot names it for every VIP.
	Why string
}

// lbVIP is one vips entry of a load balancer, parsed.
type lbVIP struct {
	// Key is the vips key as written: "IP:PORT", "[IPv6]:PORT", "IP" or
	// a template (^NODEIP...).
	Key string
	// Addr is the VIP address; invalid when Key is a template or does not
	// parse.
	Addr netip.Addr
	// Backends are the backend addresses, sorted and unique, without the
	// masquerade ones (isMasquerade); nil for none. Read-only, shared
	// between builds (and with the entry before when equal).
	Backends []netip.Addr
}

// template says whether v's key is a template (^NODEIP...): node
// addresses, not a VIP.
func (v lbVIP) template() bool { return strings.HasPrefix(v.Key, "^") }

// lbBad is a backend of VIPs[VIP] that does not parse, as written.
type lbBad struct {
	VIP     int
	Backend string
}

// badOf is the backends of VIPs[i] that do not parse.
func (lb *lbRow) badOf(i int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, b := range lb.Bad {
			if b.VIP == i && !yield(b.Backend) {
				return
			}
		}
	}
}

// protectWhy is why lb's VIPs are protected addresses.
func (lb *lbRow) protectWhy() string { return lb.Why }

func protectWhy(owner, name string) string {
	return "Service VIP of " + owner + " (" + tableLoadBalancer + " " + name + " vips)"
}

// source is "Load_Balancer <name> vips", the Source of a Service VIP
// entry of lb's alone: the end of its Why, so that both name one string.
func (lb *lbRow) source() string {
	n := len(tableLoadBalancer) + len(" ") + len(lb.Name) + len(" vips")
	return lb.Why[len(lb.Why)-len(")")-n : len(lb.Why)-len(")")]
}

// newLBRow is the Service load balancer uuid, parsed: its vips keys
// and values in the same order (missing values are empty).
func newLBRow(uuid, name, owner, network string, keys, values []string) *lbRow {
	lb := &lbRow{UUID: uuid, Name: name, Owner: owner, Network: network, Why: protectWhy(owner, name)}
	type key struct {
		i    int
		addr netip.Addr
	}
	order := make([]key, len(keys))
	for i, k := range keys {
		order[i].i = i
		if a, ok := parseVIP(k); ok && !strings.HasPrefix(k, "^") {
			order[i].addr = a.Unmap()
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(a.addr.Compare(b.addr), strings.Compare(keys[a.i], keys[b.i]))
	})
	out := make([]lbVIP, len(keys))
	for i, o := range order {
		v := lbVIP{Key: keys[o.i], Addr: o.addr}
		if v.template() {
			out[i] = v
			continue
		}
		var bs string
		if o.i < len(values) {
			bs = values[o.i]
		}
		if bs != "" {
			// Sized once: appends would leave room for up to twice
			// the backends.
			v.Backends = make([]netip.Addr, 0, strings.Count(bs, ",")+1)
		}
		for b := range strings.SplitSeq(bs, ",") {
			b = strings.TrimSpace(b)
			if b == "" {
				continue
			}
			a, ok := parseVIP(b)
			if !ok {
				lb.Bad = append(lb.Bad, lbBad{VIP: i, Backend: b})
				continue
			}
			if a = a.Unmap(); !isMasquerade(a) {
				v.Backends = append(v.Backends, a)
			}
		}
		slices.SortFunc(v.Backends, netip.Addr.Compare)
		v.Backends = slices.Clip(slices.Compact(v.Backends))
		if len(v.Backends) == 0 {
			v.Backends = nil
		}
		// The ports of one address mostly have the same endpoints: one
		// list, read-only.
		if i > 0 && len(v.Backends) > 0 && slices.Equal(out[i-1].Backends, v.Backends) {
			v.Backends = out[i-1].Backends
		}
		out[i] = v
	}
	lb.VIPs = out
	return lb
}

// addrs is lb's distinct VIP addresses (not templates, not masquerade
// addresses), sorted, each with the index in VIPs of its first entry.
func (lb *lbRow) addrs() iter.Seq2[int, netip.Addr] {
	return func(yield func(int, netip.Addr) bool) {
		for i, v := range lb.VIPs {
			if !v.Addr.IsValid() || isMasquerade(v.Addr) || i > 0 && lb.VIPs[i-1].Addr == v.Addr {
				continue
			}
			if !yield(i, v.Addr) {
				return
			}
		}
	}
}

// backendsAt is the backends of the entries of VIPs[i]'s address, from
// i on: of all its ports, merged (sorted and unique); the entry's own
// list, shared, when they are equal or the others have none.
func (lb *lbRow) backendsAt(i int) []netip.Addr {
	var (
		backends []netip.Addr
		merged   bool
	)
	for _, v := range lb.VIPs[i:] {
		if v.Addr != lb.VIPs[i].Addr {
			break
		}
		switch {
		case len(v.Backends) == 0 || slices.Equal(backends, v.Backends):
		case backends == nil:
			backends = v.Backends
		default:
			backends = append(slices.Clip(backends), v.Backends...)
			merged = true
		}
	}
	if merged {
		slices.SortFunc(backends, netip.Addr.Compare)
		backends = slices.Clip(slices.Compact(backends))
	}
	return backends
}

// sameLB says whether two versions of a row read the same: what they
// give the builders (nil: not a Service load balancer).
func sameLB(a, b *lbRow) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UUID == b.UUID && a.Name == b.Name && a.Owner == b.Owner && a.Network == b.Network &&
		slices.EqualFunc(a.VIPs, b.VIPs, func(x, y lbVIP) bool {
			return x.Key == y.Key && x.Addr == y.Addr && slices.Equal(x.Backends, y.Backends)
		}) && slices.Equal(a.Bad, b.Bad)
}

// sameProtected says whether two versions of a row give lbProtected the
// same: its VIP keys, in rows of the same name and owner (no VIP key: no
// protected address).
func sameProtected(a, b *lbRow) bool {
	if a != nil && len(a.VIPs) == 0 {
		a = nil
	}
	if b != nil && len(b.VIPs) == 0 {
		b = nil
	}
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Owner == b.Owner &&
		slices.EqualFunc(a.VIPs, b.VIPs, func(x, y lbVIP) bool { return x.Key == y.Key })
}

// natRow is an egress IP SNAT (external_ids k8s.ovn.org/owner-type=EgressIP).
type natRow struct {
	UUID   string
	Router string // name of the Logical_Router holding it, "" if none
	// RouterNetwork is the router's external_ids:k8s.ovn.org/network, ""
	// on the default network.
	RouterNetwork string
	Type          string
	ExternalIP    string
	LogicalIP     string
	Name          string // external_ids:k8s.ovn.org/name
	Controller    string // external_ids:k8s.ovn.org/owner-controller
}

// buildProtectedAddresses returns the addresses NB holds that belong to
// the cluster, each as a host prefix with the row it comes from
// (docs/ovn-nb.md, "Protected addresses"; docs/architecture.md, "Safety
// rules", rule 2):
//   - every Service load-balancer VIP (vips keys; the port is dropped;
//     template keys such as "^NODEIP_IPv4_0:30080" name node addresses,
//     protected below, and are skipped);
//   - every egress IP: external_ip of the NAT rows OVN-Kubernetes owns as
//     EgressIP, on any node's gateway router and of any network;
//   - every node address NB holds: the networks of every gateway router's
//     external port (rtoe-GR_*), any node's (a central NB has them all);
//   - in interconnect mode, the next hops of the routes towards other
//     nodes (external_ids ic-node): their transit switch addresses. Their
//     ip_prefix (pod subnets, join addresses) is protected in buildNB.
//
// A value that does not parse is left out and said in problems. A repeated
// address is reported once, with its first reason (in row order).
func buildProtectedAddresses(in nbRows) (prot []model.ProtectedPrefix, nodeAddrs []netip.Addr, problems []string) {
	return protectedFrom(in, nil)
}

// protectedFrom is buildProtectedAddresses with the load-balancer and NAT
// parts of memo's last build when their rows are the same slice (memo may
// be nil). The result is sorted by prefix (sortProtected's order), each
// address once with its first reason in the order above: each part is
// sorted on its own, then the parts are merged, the first part winning.
func protectedFrom(in nbRows, memo *buildMemo) (prot []model.ProtectedPrefix, nodeAddrs []netip.Addr, problems []string) {
	runs, nodeAddrs, problems := protectedRuns(in, memo)
	return mergeProtected(runs...), nodeAddrs, problems
}

// protectedRuns is protectedFrom's parts before they are merged, in the
// order mergeProtected takes them: buildNBMemo merges them with the
// subnets' in one pass.
func protectedRuns(in nbRows, memo *buildMemo) (runs [][]model.ProtectedPrefix, nodeAddrs []netip.Addr, problems []string) {
	lb, nat := lbPart(in, memo), natPart(in, memo)
	ports, nodeAddrs, ic := memo.portsAndRoutes(in.Ports, in.Routes)
	problems = slices.Concat(lb.problems, nat.problems, ports.problems)
	slices.Sort(problems)
	return [][]model.ProtectedPrefix{lb.prot, nat.prot, ports.prot, ic.prot}, nodeAddrs, problems
}

// lbPart is the load balancers' protected addresses of in: kept row by
// row when readRows read them (vipIndex: a new VIP is an edit, not a sort
// of every VIP), else lbProtected's (memo's last when the same rows).
func lbPart(in nbRows, memo *buildMemo) protectedPart {
	if in.vips != nil {
		return protectedPart{prot: in.vips.prot, problems: in.vips.protProblems}
	}
	return memo.lbProtected(in.LoadBalancers)
}

// natPart is the NATs' protected addresses of in: kept row by row when
// readRows read them (eipIndex), else natProtected's (memo's last when
// the same rows).
func natPart(in nbRows, memo *buildMemo) protectedPart {
	if in.eips != nil {
		return protectedPart{prot: in.eips.prot, problems: in.eips.protProblems}
	}
	return memo.natProtected(in.NATs)
}

// protectedPart is the protected addresses of one kind of row, sorted by
// prefix, each once with its first reason (sortProtected), and the rows
// that did not parse; read-only, shared between builds.
type protectedPart struct {
	prot     []model.ProtectedPrefix
	problems []string
}

// hostProtected is a as a host prefix, with why.
// editHostProtected is old (sorted by prefix, one entry a prefix) with the
// host entries of the addresses in affected made again, in one merge pass:
// why gives each one's reason, false for none (the entry goes).
func editHostProtected(old []model.ProtectedPrefix, affected map[netip.Addr]struct{}, why func(netip.Addr) (string, bool)) []model.ProtectedPrefix {
	edits := make([]netip.Prefix, 0, len(affected))
	for a := range affected {
		edits = append(edits, netip.PrefixFrom(a, a.BitLen()))
	}
	slices.SortFunc(edits, model.ComparePrefix)
	out := make([]model.ProtectedPrefix, 0, len(old)+len(edits))
	at := 0
	for _, p := range edits {
		i, found := slices.BinarySearchFunc(old[at:], p, func(e model.ProtectedPrefix, p netip.Prefix) int { return model.ComparePrefix(e.Prefix, p) })
		i += at
		out = append(out, old[at:i]...)
		at = i
		if found {
			at++
		}
		if w, ok := why(p.Addr()); ok {
			out = append(out, hostProtected(p.Addr(), w))
		}
	}
	out = append(out, old[at:]...)
	return slices.Clip(out)
}

func hostProtected(a netip.Addr, why string) model.ProtectedPrefix {
	a = a.Unmap()
	return model.ProtectedPrefix{Prefix: netip.PrefixFrom(a, a.BitLen()), Why: why}
}

// lbProtected: every Service VIP.
func lbProtected(lbs []*lbRow) protectedPart {
	// Sized once: a big cluster has tens of thousands of VIPs.
	n := 0
	for _, lb := range lbs {
		n += len(lb.VIPs)
	}
	var out protectedPart
	prot := make([]model.ProtectedPrefix, 0, n)
	for _, lb := range lbs {
		for _, vip := range lb.VIPs {
			if vip.template() {
				continue // a template: node addresses, from the gateway routers
			}
			if !vip.Addr.IsValid() {
				out.problems = append(out.problems, fmt.Sprintf("%s %s vips key %q: not IP:PORT, [IPv6]:PORT or an address; not protected nor advertised",
					tableLoadBalancer, lb.Name, vip.Key))
				continue
			}
			// Made once per row version: one per Service, 10,000 on a
			// big cluster.
			prot = append(prot, hostProtected(vip.Addr, lb.protectWhy()))
		}
	}
	out.prot = sortProtected(prot)
	return out
}

// natProtected: every egress IP.
func natProtected(natRows []natRow) protectedPart {
	var out protectedPart
	// The rows come sorted by UUID, which differs on every load: sort
	// by what the reason names, so that a shared address (an egress IP on
	// several pods) always shows the same one.
	// Pointers are sorted: a row is eight strings.
	nats := make([]*natRow, len(natRows))
	for i := range natRows {
		nats[i] = &natRows[i]
	}
	slices.SortFunc(nats, compareNATProt)
	prot := make([]model.ProtectedPrefix, 0, len(nats))
	seen := make(map[netip.Addr]bool, len(nats))
	for _, n := range nats {
		a, bad := natBadIP(n)
		if bad != "" {
			out.problems = append(out.problems, bad)
			continue
		}
		if seen[a] {
			continue // the reason is the first one's
		}
		seen[a] = true
		prot = append(prot, hostProtected(a, natWhy(n)))
	}
	out.prot = sortProtected(prot)
	return out
}

// portProtected: every gateway router's external addresses, which are
// also the node addresses.
func portProtected(ports []routerPortRow) (protectedPart, []netip.Addr) {
	var out protectedPart
	var prot []model.ProtectedPrefix
	var nodeAddrs []netip.Addr
	for _, p := range ports {
		if !strings.HasPrefix(p.Name, ovnk.GatewayRouterToExtSwitch+ovnk.GatewayRouterPrefix) {
			continue
		}
		for _, s := range p.Networks {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() || pfx.Addr().IsUnspecified() {
				out.problems = append(out.problems, fmt.Sprintf("%s %s networks %q: not an address/length; not protected", tableRouterPort, p.Name, s))
				continue
			}
			nodeAddrs = append(nodeAddrs, pfx.Addr().Unmap())
			prot = append(prot, hostProtected(pfx.Addr(), fmt.Sprintf("node address (%s %s networks)", tableRouterPort, p.Name)))
		}
	}
	out.prot = sortProtected(prot)
	return out, nodeAddrs
}

// icProtected: the interconnect next hops towards other nodes.
func icProtected(routes []routeRow) protectedPart {
	var ic []routeRow
	for _, rt := range routes {
		if rt.ICNode != "" {
			ic = append(ic, rt)
		}
	}
	slices.SortFunc(ic, func(a, b routeRow) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), cmp.Compare(a.ICNode, b.ICNode), cmp.Compare(a.Nexthop, b.Nexthop), cmp.Compare(a.UUID, b.UUID))
	})
	var prot []model.ProtectedPrefix
	for _, rt := range ic {
		a, err := netip.ParseAddr(rt.Nexthop)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			// ip_prefix is what matters; buildNB reports a bad one.
			continue
		}
		prot = append(prot, hostProtected(a, fmt.Sprintf("interconnect next hop to node %s (%s on %s nexthop, %s=%s)",
			rt.ICNode, tableStaticRoute, rt.Router, ovnk.ExtIDICNode, rt.ICNode)))
	}
	return protectedPart{prot: sortProtected(prot)}
}

// mergeProtected merges runs sorted by prefix (sortProtected's order, each
// prefix once) into one: of equal prefixes, the earliest run's is kept, as
// sortProtected keeps the first of their concatenation. Each step copies
// the longest stretch of the run with the least head that comes before the
// other runs' heads, found by a galloping search: runs that interleave
// little (the Service VIPs and the egress IPs, next to a few node
// addresses and subnets) cost a copy and O(stretches × log n) comparisons,
// not a comparison per entry and run (issue 18: one egress IP's change
// merged every protected address so, twice).
func mergeProtected(runs ...[]model.ProtectedPrefix) []model.ProtectedPrefix {
	return mergeProtectedBy(func(a, b netip.Prefix) int { return model.ComparePrefix(a, b) }, runs...)
}

// mergeProtectedBy is mergeProtected with the order compare (a test counts
// the comparisons).
func mergeProtectedBy(compare func(a, b netip.Prefix) int, runs ...[]model.ProtectedPrefix) []model.ProtectedPrefix {
	n := 0
	live := make([][]model.ProtectedPrefix, 0, len(runs))
	for _, r := range runs {
		n += len(r)
		if len(r) > 0 {
			live = append(live, r)
		}
	}
	out := make([]model.ProtectedPrefix, 0, n)
	for len(live) > 0 {
		// The run with the least head, the earliest of equal ones, and
		// the least head of the others.
		best := 0
		for i := 1; i < len(live); i++ {
			if compare(live[i][0].Prefix, live[best][0].Prefix) < 0 {
				best = i
			}
		}
		r := live[best]
		k := len(r)
		if len(out) > 0 && out[len(out)-1].Prefix == r[0].Prefix {
			k = 1 // an earlier run's entry is out already: skipped
		} else {
			var bound netip.Prefix
			has := false
			for i, o := range live {
				if i != best && (!has || compare(o[0].Prefix, bound) < 0) {
					bound, has = o[0].Prefix, true
				}
			}
			if has {
				// r's entries before bound; at least its head (equal to
				// bound: kept, the later runs' equal heads skipped).
				k = max(1, gallop(r, bound, compare))
			}
			out = append(out, r[:k]...)
		}
		if k == len(r) {
			live = slices.Delete(live, best, best+1)
		} else {
			live[best] = r[k:]
		}
	}
	return out
}

// gallop is the number of r's entries (sorted by compare) before p: an
// exponential search from r's start, then a binary one, O(log of the
// answer).
func gallop(r []model.ProtectedPrefix, p netip.Prefix, compare func(a, b netip.Prefix) int) int {
	lo, hi := 0, 1 // r[:lo] are before p
	for hi < len(r) && compare(r[hi].Prefix, p) < 0 {
		lo, hi = hi, 2*hi
	}
	hi = min(hi, len(r))
	i, _ := slices.BinarySearchFunc(r[lo:hi], p, func(e model.ProtectedPrefix, p netip.Prefix) int {
		if compare(e.Prefix, p) < 0 {
			return -1
		}
		return 1
	})
	return lo + i
}

// parseVIP reads a vips key of a Load_Balancer: "IP:PORT", "[IPv6]:PORT",
// or an address alone (OVN allows a VIP without a port).
func parseVIP(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := ap.Addr()
		return a, a.Zone() == "" && !a.IsUnspecified()
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil || a.Zone() != "" || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a, true
}
