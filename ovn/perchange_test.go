package ovn

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"testing"

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
