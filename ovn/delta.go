package ovn

import (
	"cmp"
	"net/netip"
	"reflect"
	"slices"

	"github.com/ovnbgp/ovnbgp/model"
)

// deltaBase is the snapshot SnapshotDelta handed out last: what the next
// call's delta is against.
type deltaBase struct {
	node string
	gen  uint64
	snap model.Snapshot
}

// SnapshotDelta is Snapshot with the generation of the rows it was built
// from and what differs from the snapshot of generation since: pass the
// gen the previous call returned for the same node. The generation moves
// only when the rows read from NB change. delta.All is set when the client
// cannot say: since is 0 or not the generation of the client's previous
// SnapshotDelta (another caller, too old), that call was for another
// node, or a new NB session (a reconnect) came in between. Otherwise the
// delta is exact: the Service VIP addresses come from the rows each cache
// event named (no walk of the Service VIPs), the egress IPs from the
// entries the egress IP index changed (eipIndex), the owned routes
// and the rest (Context) from comparing this node's snapshots, only when a
// table they come from changed.
//
// ok and the fail-static rules are Snapshot's: ok is false (and All set)
// until a first full sync; while NB is away the last good snapshot comes
// with an empty delta.
func (c *Client) SnapshotDelta(node string, since uint64) (snap model.Snapshot, delta model.SnapshotDelta, gen uint64, ok bool) {
	c.mu.Lock()
	rows, synced, base := c.rows, c.synced, c.base
	c.mu.Unlock()
	if !synced {
		return model.Snapshot{Node: node, Networks: []model.Network{}}, model.SnapshotDelta{All: true}, 0, false
	}
	res := buildNBMemo(rows, node, c.build)
	c.setProblems(res.Problems)
	snap, gen = res.Snapshot, rows.gen
	delta = c.delta(base, node, since, snap, gen)
	if res.WorkloadsNewer {
		delta = model.SnapshotDelta{All: true}
	}
	c.mu.Lock()
	c.base = &deltaBase{node: node, gen: gen, snap: snap}
	c.mu.Unlock()
	return snap, delta, gen, true
}

// delta is what differs from base (the snapshot of generation since) to
// snap, of generation gen.
func (c *Client) delta(base *deltaBase, node string, since uint64, snap model.Snapshot, gen uint64) model.SnapshotDelta {
	if base == nil || since == 0 || base.node != node || base.gen != since {
		return model.SnapshotDelta{All: true}
	}
	ch, ok := c.memo.changesSince(since, gen)
	if !ok {
		return model.SnapshotDelta{All: true}
	}
	d := model.SnapshotDelta{ServiceVIPs: ch.vips}
	old := base.snap
	if ch.tables&tWorkloads != 0 {
		if ch.wlsUnknown || ch.wlNode != node {
			d.WorkloadIPs = workloadIPsDiffer(old.WorkloadIPs, snap.WorkloadIPs)
		} else {
			d.WorkloadIPs = workloadIPsChanged(old.WorkloadIPs, snap.WorkloadIPs, ch.wls)
		}
	}
	// The workload addresses are neither context nor protected.
	if ch.tables&^(tLoadBalancers|tWorkloads) != 0 {
		// Any table but the load balancers' (their Service VIPs are
		// above; their protected addresses unchanged without
		// tLBProtected) may change the rest: compare.
		if ch.eipsUnknown {
			d.EgressIPs = egressIPsDiffer(old.EgressIPs, snap.EgressIPs)
		} else {
			d.EgressIPs = egressIPsChanged(old.EgressIPs, snap.EgressIPs, ch.eips, node)
		}
		d.OwnedRoutes = !reflect.DeepEqual(old.OwnedRoutes, snap.OwnedRoutes)
		// The protected entries that come and go with the entries named:
		// the VIPs, and the egress IP NAT rows of any node that changed
		// (natProtected lists every node's; a row not yet on a router
		// is an entry of no node).
		own := slices.Concat(d.ServiceVIPs, d.EgressIPs)
		var others []netip.Addr
		for _, c := range ch.eips {
			own = append(own, c.ip)
			if c.group.router != gatewayRouterName(c.group.network, node) {
				others = append(others, c.ip)
			}
		}
		d.Protected = protectedChanged(old.Protected, snap.Protected, others, own)
		slices.SortFunc(own, netip.Addr.Compare)
		own = slices.Compact(own)
		d.Context = !sameContext(old, snap, own)
	}
	return d
}

// protectedChanged is the addresses of cands (the egress IP rows of no
// group of this node's that changed) whose protected host entries differ
// between a and b, sorted and unique, without those the delta lists as
// entries (listed, unsorted): O(cands × log n).
func protectedChanged(a, b []model.ProtectedPrefix, cands, listed []netip.Addr) []netip.Addr {
	if len(cands) == 0 {
		return nil
	}
	at := func(l []model.ProtectedPrefix, p netip.Prefix) []model.ProtectedPrefix {
		i, _ := slices.BinarySearchFunc(l, p, func(e model.ProtectedPrefix, p netip.Prefix) int { return model.ComparePrefix(e.Prefix, p) })
		j := i
		for j < len(l) && l[j].Prefix == p {
			j++
		}
		return l[i:j]
	}
	var out []netip.Addr
	for _, c := range cands {
		if slices.Contains(listed, c) {
			continue
		}
		p := netip.PrefixFrom(c, c.BitLen())
		if !slices.Equal(at(a, p), at(b, p)) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// sameContext says whether a and b agree on what is not egress IPs,
// Service VIPs or owned routes. The protected prefixes are compared without
// the host prefixes of own (sorted): the addresses whose egress IP or VIP
// entries the delta names, whose protected entry comes and goes with them.
func sameContext(a, b model.Snapshot, own []netip.Addr) bool {
	return a.Node == b.Node && a.Northd == b.Northd && slices.Equal(a.NodeAddresses, b.NodeAddresses) &&
		sameProtectedBut(a.Protected, b.Protected, own) &&
		reflect.DeepEqual(a.Networks, b.Networks) && sameRoutersBut(a.Routers, b.Routers)
}

// sameRoutersBut says whether a and b are the same gateway routers but for
// their StaticRoutes, which follow the owned routes (OwnedRoutes says when
// they change): every OVN write of route import changes them.
func sameRoutersBut(a, b []model.GatewayRouter) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.StaticRoutes, y.StaticRoutes = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// sameProtectedBut says whether a and b are equal once the host prefixes
// of own (sorted) are left out of both. The host entries of own are found
// by binary search and the stretches between them compared whole (an
// egress IP's change compares its few neighbours' positions, then memory,
// not every entry against own): O(own × log n) searches and one compare
// of the rest, no copy.
func sameProtectedBut(a, b []model.ProtectedPrefix, own []netip.Addr) bool {
	// at is the stretch of l whose prefix is p (l sorted by prefix).
	at := func(l []model.ProtectedPrefix, p netip.Prefix) (i, j int) {
		i, _ = slices.BinarySearchFunc(l, p, func(e model.ProtectedPrefix, p netip.Prefix) int { return model.ComparePrefix(e.Prefix, p) })
		j = i
		for j < len(l) && l[j].Prefix == p {
			j++
		}
		return i, j
	}
	ia, ib := 0, 0
	for k, o := range own {
		if k > 0 && own[k-1] == o {
			continue
		}
		p := netip.PrefixFrom(o, o.BitLen())
		sa, ea := at(a, p)
		sb, eb := at(b, p)
		if sa < ia || sb < ib {
			// own is not sorted as the lists are (an address of another
			// family first): fall back to a walk of every entry.
			return sameProtectedButWalk(a, b, own)
		}
		if !slices.Equal(a[ia:sa], b[ib:sb]) {
			return false
		}
		ia, ib = ea, eb
	}
	return slices.Equal(a[ia:], b[ib:])
}

// sameProtectedButWalk is sameProtectedBut by one walk of both lists,
// each entry checked against own.
func sameProtectedButWalk(a, b []model.ProtectedPrefix, own []netip.Addr) bool {
	ownHost := func(p netip.Prefix) bool {
		if len(own) == 0 || !p.IsSingleIP() {
			return false
		}
		_, found := slices.BinarySearchFunc(own, p.Addr(), netip.Addr.Compare)
		return found
	}
	i, j := 0, 0
	for {
		for i < len(a) && ownHost(a[i].Prefix) {
			i++
		}
		for j < len(b) && ownHost(b[j].Prefix) {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if a[i] != b[j] {
			return false
		}
		i, j = i+1, j+1
	}
}

// egressIPsChanged is the addresses of the entries of node's groups in
// changes (eipIndex.apply's, since the base) whose entries differ between
// a and b, sorted and unique: O(changes × log n), where egressIPsDiffer
// walks every entry. An entry changed and changed back is not one.
func egressIPsChanged(a, b []model.EgressIP, changes []eipChange, node string) []netip.Addr {
	find := func(l []model.EgressIP, c eipChange) (model.EgressIP, bool) {
		i, ok := slices.BinarySearchFunc(l, c, func(e model.EgressIP, c eipChange) int {
			return cmp.Or(compareNetworks(e.Network, c.group.network), e.IP.Compare(c.ip))
		})
		if !ok {
			return model.EgressIP{}, false
		}
		return l[i], true
	}
	var out []netip.Addr
	for _, c := range changes {
		if c.group.router != gatewayRouterName(c.group.network, node) {
			continue
		}
		x, inA := find(a, c)
		y, inB := find(b, c)
		if inA != inB || inA && !sameEIP(x, y) {
			out = append(out, c.ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// egressIPsDiffer is the addresses whose egress IP entries differ between
// a and b, sorted and unique.
func egressIPsDiffer(a, b []model.EgressIP) []netip.Addr {
	type key struct {
		network string
		ip      netip.Addr
	}
	idx := make(map[key]model.EgressIP, len(a))
	for _, e := range a {
		idx[key{e.Network, e.IP}] = e
	}
	var out []netip.Addr
	for _, e := range b {
		k := key{e.Network, e.IP}
		if o, ok := idx[k]; !ok || !reflect.DeepEqual(o, e) {
			out = append(out, e.IP)
		}
		delete(idx, k)
	}
	for k := range idx {
		out = append(out, k.ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// workloadEntries is the entries of key k in l (sorted as
// model.Snapshot.WorkloadIPs).
func workloadEntries(l []*model.WorkloadIP, k wlKey) []*model.WorkloadIP {
	at := func(e *model.WorkloadIP, k wlKey) int {
		return cmp.Or(compareNetworks(e.Network, k.network), e.IP.Compare(k.ip))
	}
	i, _ := slices.BinarySearchFunc(l, k, at)
	j := i
	for j < len(l) && at(l[j], k) == 0 {
		j++
	}
	return l[i:j]
}

// sameWorkloads says whether a and b hold equal entries, in order (the
// entries, not the pointers: an entry computed again is a new one).
func sameWorkloads(a, b []*model.WorkloadIP) bool {
	return slices.EqualFunc(a, b, func(x, y *model.WorkloadIP) bool { return x == y || *x == *y })
}

// workloadIPsChanged is the addresses of keys (the index's changes since
// the base) whose entries differ between a and b, sorted and unique:
// O(keys × log n). An entry changed and changed back is not one.
func workloadIPsChanged(a, b []*model.WorkloadIP, keys []wlKey) []netip.Addr {
	var out []netip.Addr
	for _, k := range keys {
		if !sameWorkloads(workloadEntries(a, k), workloadEntries(b, k)) {
			out = append(out, k.ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// workloadIPsDiffer is the addresses whose workload entries differ
// between a and b, sorted and unique.
func workloadIPsDiffer(a, b []*model.WorkloadIP) []netip.Addr {
	keys := make(map[wlKey]struct{}, len(a)+len(b))
	for _, l := range [][]*model.WorkloadIP{a, b} {
		for _, e := range l {
			keys[wlKey{e.Network, e.IP}] = struct{}{}
		}
	}
	var out []netip.Addr
	for k := range keys {
		if !sameWorkloads(workloadEntries(a, k), workloadEntries(b, k)) {
			out = append(out, k.ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
