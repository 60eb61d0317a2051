package ovn

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// Issue 18: one egress IP or VIP change among 10,000 must cost what one
// among 1,000 costs. These tests count what one change costs at both sizes
// (operations or bytes allocated, never time) and bound the ratio.

// protectedRun is n host entries from base (198.18.0.0 for the VIPs,
// 198.19.0.0 for the egress IPs), sorted, each once.
func protectedRun(base netip.Addr, n int, why string) []model.ProtectedPrefix {
	out := make([]model.ProtectedPrefix, 0, n)
	a := base
	for range n {
		out = append(out, hostProtected(a, why))
		a = a.Next()
	}
	return out
}

// TestMergeProtectedComparisonsPerChange (issue 18): the protected prefixes
// of a node with n/2 Service VIPs and n/2 egress IPs, merged with the
// node's few addresses and subnets as one change rebuilds them, take
// O(stretches × log n) comparisons: about as many at 10,000 as at 1,000.
// The k-way merge it replaced compared every entry with the other runs'
// heads (5,008 comparisons at 10,000, ten times 1,000's 508).
func TestMergeProtectedComparisonsPerChange(t *testing.T) {
	cost := func(n int) int {
		vips := protectedRun(netip.MustParseAddr("198.18.0.0"), n/2, "vip")
		eips := protectedRun(netip.MustParseAddr("198.19.0.0"), n-n/2, "eip")
		subnets := []model.ProtectedPrefix{
			{Prefix: netip.MustParsePrefix("10.128.0.0/14"), Why: "cluster"},
			{Prefix: netip.MustParsePrefix("100.64.0.0/16"), Why: "join"},
		}
		nodes := []model.ProtectedPrefix{hostProtected(netip.MustParseAddr("172.18.0.2"), "node")}
		calls := 0
		got := mergeProtectedBy(func(a, b netip.Prefix) int { calls++; return model.ComparePrefix(a, b) }, subnets, vips, eips, nodes, nil)
		if want := refMergeProtected(subnets, vips, eips, nodes, nil); !reflect.DeepEqual(got, want) {
			t.Fatalf("n=%d: the merge differs from the k-way merge's", n)
		}
		return calls
	}
	small, big := cost(1000), cost(10000)
	t.Logf("comparisons: %d at 1,000, %d at 10,000", small, big)
	if big > 2*small {
		t.Errorf("merging the protected prefixes of 10,000 took %d comparisons, of 1,000 %d: more than twice (O(n) per change)", big, small)
	}
}

// TestMergeProtectedAsKWay: the galloping merge gives what the k-way merge
// it replaced gave (refMergeProtected), the earliest run's entry of equal
// prefixes kept, on runs that interleave and collide at random.
func TestMergeProtectedAsKWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 3))
	for round := range 2000 {
		var runs [][]model.ProtectedPrefix
		for r := range rng.IntN(6) {
			var run []model.ProtectedPrefix
			for range rng.IntN(40) {
				var p netip.Prefix
				if rng.IntN(5) == 0 {
					p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), 0, 0}), 14+rng.IntN(3)).Masked()
				} else {
					p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), 0, byte(rng.IntN(60))}), 32)
				}
				run = append(run, model.ProtectedPrefix{Prefix: p, Why: fmt.Sprintf("run %d", r)})
			}
			runs = append(runs, sortProtected(run))
		}
		got, want := mergeProtected(runs...), refMergeProtected(runs...)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: runs %v\nmerged %v\nwant %v", round, runs, got, want)
		}
	}
}

// refMergeProtected is the k-way merge mergeProtected replaced.
func refMergeProtected(runs ...[]model.ProtectedPrefix) []model.ProtectedPrefix {
	out := []model.ProtectedPrefix{}
	next := make([]int, len(runs))
	for {
		best := -1
		for i, r := range runs {
			if next[i] < len(r) && (best < 0 || model.ComparePrefix(r[next[i]].Prefix, runs[best][next[best]].Prefix) < 0) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		p := runs[best][next[best]]
		next[best]++
		if len(out) > 0 && out[len(out)-1].Prefix == p.Prefix {
			continue
		}
		out = append(out, p)
	}
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestSetRouterRemovalAllocsPerChange (issue 18): an egress IP removed from
// a gateway router whose nat column holds n NATs costs the router's memo a
// walk, not a set of the n UUIDs built for it (~400 KB at 10,000): the
// bytes allocated at 10,000 are about those at 1,000.
func TestSetRouterRemovalAllocsPerChange(t *testing.T) {
	cost := func(n int) uint64 {
		m := newNATMemo(newEIPIndex())
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%08x-0000-0000-0000-%012x", i, i)
		}
		lr := &nbdb.LogicalRouter{UUID: "r1", Name: "GR_node1", Nat: ids}
		m.setRouter("r1", lr, map[string]struct{}{})
		var total uint64
		const changes = 20
		for i := range changes {
			// One NAT removed, then put back, as an egress IP's
			// removal and addition rewrite the column.
			less := &nbdb.LogicalRouter{UUID: "r1", Name: "GR_node1", Nat: slices.Delete(slices.Clone(ids), i, i+1)}
			affected := map[string]struct{}{}
			total += allocated(func() { m.setRouter("r1", less, affected) })
			if _, ok := affected[ids[i]]; !ok || len(affected) != 1 {
				t.Fatalf("n=%d: removing %s affected %v", n, ids[i], affected)
			}
			if len(m.owners[ids[i]]) != 0 || len(m.routers["r1"].nats) != n-1 {
				t.Fatalf("n=%d: %s still owned after its removal", n, ids[i])
			}
			m.setRouter("r1", lr, map[string]struct{}{})
		}
		return total / changes
	}
	small, big := cost(1000), cost(10000)
	t.Logf("bytes a removal allocates: %d at 1,000, %d at 10,000", small, big)
	if big > 2*small+4096 {
		t.Errorf("a removal from a router of 10,000 NATs allocated %d bytes, of 1,000 %d (O(n) per change)", big, small)
	}
}

// TestSameProtectedButAsWalk: sameProtectedBut, which finds own's host
// entries by binary search and compares the stretches between them, says
// what the walk of every entry it replaced says (sameProtectedButWalk), on
// sorted lists that differ at random at own's addresses and elsewhere.
func TestSameProtectedButAsWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 4))
	addr := func() netip.Addr {
		if rng.IntN(5) == 0 {
			return netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.IntN(20))})
		}
		return netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(40))})
	}
	list := func() []model.ProtectedPrefix {
		var l []model.ProtectedPrefix
		for range rng.IntN(30) {
			a := addr()
			p := netip.PrefixFrom(a, a.BitLen())
			if rng.IntN(6) == 0 {
				p = netip.PrefixFrom(a, a.BitLen()-8).Masked()
			}
			l = append(l, model.ProtectedPrefix{Prefix: p, Why: []string{"x", "y"}[rng.IntN(2)]})
		}
		return sortProtected(l)
	}
	seen := map[bool]int{}
	for round := range 20000 {
		a := list()
		b := slices.Clone(a)
		var own []netip.Addr
		for range rng.IntN(4) {
			own = append(own, addr())
		}
		// Edits at own's addresses (added, removed, reason changed), and
		// at times elsewhere.
		for range rng.IntN(4) {
			o := addr()
			if len(own) > 0 && rng.IntN(4) > 0 {
				o = own[rng.IntN(len(own))]
			}
			p := netip.PrefixFrom(o, o.BitLen())
			b = slices.DeleteFunc(b, func(e model.ProtectedPrefix) bool { return e.Prefix == p })
			if rng.IntN(2) == 0 {
				b = sortProtected(append(b, model.ProtectedPrefix{Prefix: p, Why: "z"}))
			}
		}
		slices.SortFunc(own, netip.Addr.Compare)
		got, want := sameProtectedBut(a, b, own), sameProtectedButWalk(a, b, own)
		if got != want {
			t.Fatalf("round %d: a %v\nb %v\nown %v: %v, the walk says %v", round, a, b, own, got, want)
		}
		seen[want]++
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("only one answer in 20,000 rounds: %v", seen)
	}
}

// clusterRows is a central NB of nodes nodes (a layer3 switch, a gateway
// router with its external port, an interconnect route each) with egress
// IPs eips egress IPs on node1's gateway router, sorted as readRows sorts.
func clusterRows(nodes, eips int) nbRows {
	var in nbRows
	for i := range nodes {
		name := fmt.Sprintf("node%d", i+1)
		in.Switches = append(in.Switches, switchRow{UUID: fmt.Sprintf("s%05d", i), Name: name,
			Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>7), byte(i << 1), 0}), 23).String()})
		in.Ports = append(in.Ports, routerPortRow{UUID: fmt.Sprintf("p%05d", i), Name: "rtoe-GR_" + name,
			Networks: []string{netip.AddrFrom4([4]byte{172, 18, byte(i >> 8), byte(i)}).String() + "/16"}})
		in.Routers = append(in.Routers, routerRow{UUID: fmt.Sprintf("r%05d", i), Name: "GR_" + name})
		in.Routes = append(in.Routes, routeRow{UUID: fmt.Sprintf("t%05d", i), Router: "ovn_cluster_router",
			IPPrefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>7), byte(i << 1), 0}), 23).String(),
			Nexthop:  netip.AddrFrom4([4]byte{100, 88, byte(i >> 8), byte(i)}).String(), ICNode: name})
	}
	slices.SortFunc(in.Switches, func(a, b switchRow) int { return cmpString(a.Name, b.Name) })
	slices.SortFunc(in.Ports, func(a, b routerPortRow) int { return cmpString(a.Name, b.Name) })
	slices.SortFunc(in.Routers, func(a, b routerRow) int { return cmpString(a.Name, b.Name) })
	for i := range eips {
		a := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		in.NATs = append(in.NATs, natRow{UUID: fmt.Sprintf("n%05d", i), Router: "GR_node1", Type: "snat",
			ExternalIP: a.String(), LogicalIP: "10.128.0.10", Name: fmt.Sprintf("eip%d_ns/pod%d", i, i), Controller: "default-network-controller"})
	}
	return in
}

// TestBuildContextPerChange (issue 18): after one egress IP's change (new
// NAT rows, the same switches, router ports, routes and routers),
// buildNBMemo builds neither the node's networks and the cluster's subnets
// from every switch again, nor the router ports' and interconnect routes'
// protected addresses: the bytes it allocates, but for the new lists of
// protected prefixes and node addresses (one copy of each per change, of
// every node's), are about the same with 100 and 1,000 nodes, and the
// snapshot is buildNB's.
func TestBuildContextPerChange(t *testing.T) {
	cost := func(nodes int) uint64 {
		in := clusterRows(nodes, 20)
		memo := &buildMemo{}
		buildNBMemo(in, "node1", memo)
		var total uint64
		const changes = 10
		for i := range changes {
			next := in
			next.NATs = slices.Clone(in.NATs[:len(in.NATs)-1-i%2])
			var res buildResult
			total += allocated(func() { res = buildNBMemo(next, "node1", memo) })
			// Less the protected prefixes' and the node addresses' new
			// lists: of every node, one copy each per change still.
			total -= uint64(cap(res.Snapshot.Protected))*uint64(unsafe.Sizeof(model.ProtectedPrefix{})) +
				uint64(cap(res.Snapshot.NodeAddresses))*uint64(unsafe.Sizeof(netip.Addr{}))
			want := buildNB(next, "node1")
			if !reflect.DeepEqual(res, want) {
				t.Fatalf("nodes=%d change %d: the memo's build differs from buildNB's:\n%+v\nwant\n%+v", nodes, i, res.Snapshot, want.Snapshot)
			}
		}
		return total / changes
	}
	small, big := cost(100), cost(1000)
	t.Logf("bytes a build allocates after an egress IP's change: %d with 100 nodes, %d with 1,000", small, big)
	if big > 2*small {
		t.Errorf("a build after an egress IP's change allocated %d bytes with 1,000 nodes, %d with 100 (O(nodes) per change)", big, small)
	}
}
