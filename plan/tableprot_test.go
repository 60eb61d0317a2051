package plan

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/model"
)

// protPool are the protected entries NB may add and remove in
// TestTableSetProtectedEqualsRebuild: VIP and egress IP host prefixes
// equal to a learned prefix, inside one, outside all, equal to a next
// hop the peers use; and shorter prefixes equal to, covering and inside
// learned ones.
var protPool = []model.ProtectedPrefix{
	{Prefix: pfx("192.0.2.1/32"), Why: "Service VIP of ns/a"},             // a learned /32, and tor-a's own address
	{Prefix: pfx("192.0.2.99/32"), Why: "Service VIP of ns/b"},            // tor-a's other next hop
	{Prefix: pfx("198.51.100.1/32"), Why: "egress IP of ns/e"},            // tor-c's next hop
	{Prefix: pfx("10.1.0.5/32"), Why: "Service VIP of ns/c"},              // inside learned 10.1.0.0/16
	{Prefix: pfx("10.1.0.5/32"), Why: "egress IP of ns/f"},                // the same, another why
	{Prefix: pfx("10.200.0.1/32"), Why: "Service VIP of ns/d"},            // outside every learned prefix
	{Prefix: pfx("172.17.3.4/32"), Why: "Service VIP of ns/g"},            // a learned /32 (randomProtPath)
	{Prefix: pfx("10.3.0.0/16"), Why: "pod subnet of default on node n7"}, // covering learned 10.3.0.0/24
	{Prefix: pfx("10.5.0.0/24"), Why: "pod subnet of default on node n8"}, // equal to learned 10.5.0.0/24
	{Prefix: pfx("10.0.0.0/8"), Why: "protected wide"},                    // covering almost everything
	{Prefix: pfx("10.6.0.128/25"), Why: "inside a learned /24"},           // inside learned 10.6.0.0/24
	{Prefix: pfx("2001:db8:100::5/128"), Why: "Service VIP of ns/h"},
	{Prefix: pfx("2001:db8:100::/48"), Why: "Service VIP range"}, // equal to a learned /48
	{Prefix: pfx("2001:db8::2/128"), Why: "egress IP of ns/i"},   // tor-6's next hop
}

// randomProtPath is randomPath, or a host-prefix path a VIP may equal.
func randomProtPath(rng *rand.Rand) model.LearnedPath {
	if rng.IntN(6) == 0 {
		hosts := []string{"172.17.3.4/32", "10.1.0.5/32", "192.0.2.1/32"}
		return path([]string{"tor-a", "tor-b"}[rng.IntN(2)], hosts[rng.IntN(len(hosts))], "192.0.2.1")
	}
	return randomPath(rng)
}

// protSnapshot is base with the chosen pool entries added to its
// protected prefixes, sorted by prefix as NB gives them.
func protSnapshot(base model.Snapshot, chosen []bool) model.Snapshot {
	snap := base
	snap.Protected = slices.Clone(snap.Protected)
	for i, c := range chosen {
		if c {
			snap.Protected = append(snap.Protected, protPool[i])
		}
	}
	slices.SortStableFunc(snap.Protected, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
	return snap
}

// TestTableSetProtectedEqualsRebuild: random protected entries come and
// go (VIP /32s and /128s, some equal to or inside learned prefixes, some
// covering them, some next hops; shorter prefixes too), between random
// path changes; after each SetSnapshotProtected the table's every
// decision (Result, Decided, Desired, the counts) equals a table built
// anew on the new snapshot, and every prefix whose desired routes changed
// was returned.
func TestTableSetProtectedEqualsRebuild(t *testing.T) {
	for _, maxRoutes := range []int{0, 1000} {
		for seed := range uint64(30) {
			rng := rand.New(rand.NewPCG(seed, 11))
			in := tableFixture(maxRoutes)
			chosen := make([]bool, len(protPool))
			live := map[model.Key]model.LearnedPath{}
			for range 40 {
				p := randomProtPath(rng)
				live[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
				in.Learned = append(in.Learned, p)
			}
			base := in.Snapshot
			in.Snapshot = protSnapshot(base, chosen)
			table := NewImportTable(in)
			for step := range 60 {
				if rng.IntN(3) == 0 {
					var c TableChange
					for range 1 + rng.IntN(4) {
						p := randomProtPath(rng)
						if rng.IntN(3) == 0 {
							c.Gone = append(c.Gone, model.Key{Peer: p.Peer, Prefix: p.Prefix})
						} else {
							c.Paths = append(c.Paths, p)
						}
					}
					table.Update(c) // Gone first, then Paths
					for _, k := range c.Gone {
						delete(live, k)
					}
					for _, p := range c.Paths {
						live[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
					}
				}
				for range 1 + rng.IntN(3) {
					i := rng.IntN(len(protPool))
					chosen[i] = !chosen[i]
				}
				before := table.Result()
				in.Snapshot = protSnapshot(base, chosen)
				if rng.IntN(8) == 0 {
					// NB's order is not the point: entries that stay
					// may move.
					slices.Reverse(in.Snapshot.Protected)
				}
				touched, ok := table.SetSnapshotProtected(in.Snapshot)
				if !ok {
					t.Fatalf("max %d seed %d step %d: SetSnapshotProtected refused a change of protected entries only", maxRoutes, seed, step)
				}
				fresh := in
				fresh.Learned = nil
				for _, p := range live {
					fresh.Learned = append(fresh.Learned, p)
				}
				rebuilt := NewImportTable(fresh)
				where := fmt.Sprintf("max %d seed %d step %d (protected %v)", maxRoutes, seed, step, in.Snapshot.Protected)
				compareTables(t, where, table, rebuilt)
				changed := map[netip.Prefix]bool{}
				got := table.Result()
				for _, op := range DiffOVN(got.OVN, before.OVN) {
					changed[op.Route.Prefix] = true
				}
				for _, op := range DiffKernel(got.Kernel, before.Kernel) {
					changed[op.Route.Prefix] = true
				}
				for p := range changed {
					if !slices.Contains(touched, p) {
						t.Fatalf("%s: %s's desired routes changed, but SetSnapshotProtected did not return it (%v)", where, p, touched)
					}
				}
				if !slices.IsSortedFunc(touched, model.ComparePrefix) {
					t.Fatalf("%s: touched not in prefix order: %v", where, touched)
				}
			}
		}
	}
}

// compareTables fails the test if got's decisions differ from want's:
// Result, Decided and Desired of every prefix, and the kept counts.
func compareTables(t *testing.T, where string, got, want *ImportTable) {
	t.Helper()
	gr, wr := got.Result(), want.Result()
	for _, r := range []*ImportResult{&gr, &wr} {
		slices.SortFunc(r.Paths, func(a, b model.LearnedPath) int {
			return cmp.Or(strings.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
		})
		slices.Sort(r.Problems)
	}
	if !reflect.DeepEqual(gr, wr) {
		t.Fatalf("%s: the table differs from a new one (-new +set):\n%s", where, gocmp.Diff(wr, gr, cmpAddrs, cmpopts.EquateEmpty()))
	}
	gd, wd := got.Decided().Paths(), want.Decided().Paths()
	for _, d := range [][]model.LearnedPath{gd, wd} {
		slices.SortFunc(d, func(a, b model.LearnedPath) int {
			return cmp.Or(strings.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
		})
	}
	if !reflect.DeepEqual(gd, wd) {
		t.Fatalf("%s: Decided differs (-new +set):\n%s", where, gocmp.Diff(wd, gd, cmpAddrs, cmpopts.EquateEmpty()))
	}
	var all []netip.Prefix
	for pfx := range want.prefixes {
		all = append(all, pfx)
	}
	go1, gk := got.Desired(all)
	wo, wk := want.Desired(all)
	if !reflect.DeepEqual(go1, wo) || !reflect.DeepEqual(gk, wk) {
		t.Fatalf("%s: Desired differs:\n%s\n%s", where, gocmp.Diff(wo, go1, cmpAddrs, cmpopts.EquateEmpty()), gocmp.Diff(wk, gk, cmpAddrs, cmpopts.EquateEmpty()))
	}
	if gc, wc := got.Count(nil), want.Count(nil); !reflect.DeepEqual(gc, wc) {
		t.Fatalf("%s: counts differ: %+v, new %+v", where, gc, wc)
	}
	checkCounts(t, got)
}

// TestTableSetProtectedRefuses: a snapshot whose gateway routers, node or
// northd version differ is not a change of protected entries only: refused, the table
// unchanged.
func TestTableSetProtectedRefuses(t *testing.T) {
	in := tableFixture(0)
	in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
	table := NewImportTable(in)
	before := table.Result()
	snap := in.Snapshot
	snap.Routers = slices.Clone(snap.Routers)
	snap.Routers[0].ExternalPort = "other"
	snap.Protected = append(slices.Clone(snap.Protected), model.ProtectedPrefix{Prefix: pfx("10.1.0.0/16"), Why: "VIP"})
	if _, ok := table.SetSnapshotProtected(snap); ok {
		t.Fatal("a change of the gateway router was taken")
	}
	snap = in.Snapshot
	snap.Node = "n2"
	if _, ok := table.SetSnapshotProtected(snap); ok {
		t.Fatal("a change of the node was taken")
	}
	// northd's version decides whether OVN takes an IPv4 prefix via an
	// IPv6 next hop.
	snap = in.Snapshot
	snap.Northd = model.NorthdVersion{Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"}
	if _, ok := table.SetSnapshotProtected(snap); ok {
		t.Fatal("a change of northd's version was taken")
	}
	if got := table.Result(); !reflect.DeepEqual(got, before) {
		t.Fatalf("a refused change changed the table:\n%s", gocmp.Diff(before, got, cmpAddrs, cmpopts.EquateEmpty()))
	}
	// Routers' static route lists are not read by import.
	snap = in.Snapshot
	snap.Routers = slices.Clone(snap.Routers)
	snap.Routers[0].StaticRoutes = []string{"r1"}
	snap.Protected = append(slices.Clone(snap.Protected), model.ProtectedPrefix{Prefix: pfx("10.1.0.0/16"), Why: "VIP"})
	touched, ok := table.SetSnapshotProtected(snap)
	if !ok || !slices.Equal(touched, []netip.Prefix{pfx("10.1.0.0/16")}) {
		t.Fatalf("SetSnapshotProtected = %v, %v; want [10.1.0.0/16], true", touched, ok)
	}
	if p := table.Result().Paths[0]; p.Accepted || !strings.Contains(p.Reason, "is protected: VIP") {
		t.Fatalf("after the VIP: %+v", p)
	}
}

// BenchmarkSetProtected: one protected /32 (a Service VIP) comes or goes
// in a table of 100,000 paths, equal to a learned /32, with 0 or 5,000
// other VIPs in NB: SetSnapshotProtected against the NewImportTable a
// full pass made.
func BenchmarkSetProtected(b *testing.B) {
	in := importFixture()
	in.Config.Import[0].MaxRoutes = 200000
	in.Config.Import[0].Accept[0].MaxLength = 32
	const n = 100000
	for i := range n {
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		in.Learned = append(in.Learned, model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1"), ASPath: []uint32{65001}, Origin: "igp"})
	}
	for _, others := range []int{0, 5000} {
		// others are the VIPs NB has besides: the protected set Protected
		// makes anew each time.
		without := in.Snapshot
		without.Protected = slices.Clone(without.Protected)
		for i := range others {
			a := netip.AddrFrom4([4]byte{172, 30, byte(i >> 8), byte(i)})
			without.Protected = append(without.Protected, model.ProtectedPrefix{Prefix: netip.PrefixFrom(a, 32), Why: fmt.Sprintf("Service VIP of ns/s%d", i)})
		}
		sortProt := func(s *model.Snapshot) {
			slices.SortStableFunc(s.Protected, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
		}
		sortProt(&without)
		with := without
		with.Protected = append(slices.Clone(without.Protected), model.ProtectedPrefix{Prefix: in.Learned[n/2].Prefix, Why: "Service VIP of ns/web"})
		sortProt(&with)
		snaps := []model.Snapshot{with, without}
		start := in
		start.Snapshot = without
		b.Run(fmt.Sprintf("SetSnapshotProtected/paths=%d/vips=%d", n, others+1), func(b *testing.B) {
			table := NewImportTable(start)
			i := 0
			for b.Loop() {
				if touched, ok := table.SetSnapshotProtected(snaps[i%2]); !ok || len(touched) != 1 {
					b.Fatalf("touched %v, ok %v", touched, ok)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("NewImportTable/paths=%d/vips=%d", n, others+1), func(b *testing.B) {
			i := 0
			for b.Loop() {
				fresh := start
				fresh.Snapshot = snaps[i%2]
				if NewImportTable(fresh).Len() != n {
					b.Fatal("lost paths")
				}
				i++
			}
		})
	}
}

// TestProtIndexEqualsScan: the index finds, for any prefix, the entry a
// scan of the set finds first (protectedCovering): random sets with equal
// prefixes of other whys, host prefixes, both families, unmasked and
// invalid entries.
func TestProtIndexEqualsScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	randPrefix := func() netip.Prefix {
		if rng.IntN(3) == 0 {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(rng.IntN(4)), 15: byte(rng.IntN(4))})
			return netip.PrefixFrom(a, []int{32, 40, 48, 64, 120, 127, 128}[rng.IntN(7)])
		}
		a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), byte(rng.IntN(8))})
		return netip.PrefixFrom(a, []int{0, 8, 14, 16, 24, 30, 31, 32}[rng.IntN(8)])
	}
	for range 200 {
		var list []model.ProtectedPrefix
		for range rng.IntN(60) {
			p := randPrefix()
			switch rng.IntN(10) {
			case 0:
				p = netip.Prefix{}
			case 1, 2, 3:
			default:
				p = p.Masked()
			}
			list = append(list, model.ProtectedPrefix{Prefix: p, Why: fmt.Sprint("why ", rng.IntN(3))})
		}
		x := newProtIndex(list)
		for range 100 {
			p := randPrefix()
			if rng.IntN(2) == 0 {
				p = p.Masked()
			}
			if rng.IntN(10) == 0 {
				p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}).Unmap(), 32)
			}
			got, gok := x.covering(p)
			want, wok := protectedCovering(list, p)
			if got != want || gok != wok {
				t.Fatalf("covering(%s) in %v = %v %v, a scan finds %v %v", p, list, got, gok, want, wok)
			}
		}
	}
}

// TestTableSetProtectedCaps: with caps that hold prefixes back (maxRoutes
// 3), protected entries coming and going between random path changes
// keep every group within its cap, full whenever it holds something back,
// and every accepted path inside its groups' kept prefixes: a kept prefix
// a VIP rejects frees its slot, one it lets go joins again.
func TestTableSetProtectedCaps(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 13))
		in := tableFixture(3)
		base := in.Snapshot
		chosen := make([]bool, len(protPool))
		for range 30 {
			in.Learned = append(in.Learned, randomProtPath(rng))
		}
		table := NewImportTable(in)
		for step := range 60 {
			if rng.IntN(3) == 0 {
				var c TableChange
				for range 1 + rng.IntN(4) {
					p := randomProtPath(rng)
					if rng.IntN(3) == 0 {
						c.Gone = append(c.Gone, model.Key{Peer: p.Peer, Prefix: p.Prefix})
					} else {
						c.Paths = append(c.Paths, p)
					}
				}
				table.Update(c)
			}
			for range 1 + rng.IntN(3) {
				i := rng.IntN(len(protPool))
				chosen[i] = !chosen[i]
			}
			if _, ok := table.SetSnapshotProtected(protSnapshot(base, chosen)); !ok {
				t.Fatalf("seed %d step %d: refused", seed, step)
			}
			checkCaps(t, fmt.Sprintf("seed %d step %d", seed, step), table)
		}
	}
}
