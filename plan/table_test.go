package plan

import (
	"cmp"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// tableFixture is importFixture with a second, kernel-only rule, a foreign
// kernel route and a foreign OVN row, so that every kind of decision can
// happen.
func tableFixture(maxRoutes int) ImportInput {
	in := importFixture()
	in.Config.Import[0].MaxRoutes = maxRoutes
	in.Config.Import = append(in.Config.Import, config.ImportRule{Name: "kern", Peers: []string{"tor-a", "tor-c"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 32}}, MaxRoutes: maxRoutes, Mode: "auto",
		Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 200}}})
	in.Host.Foreign = []model.KernelRouteKey{{Table: 100, Prefix: pfx("10.2.3.0/24")}}
	in.Snapshot.Routers[0].ForeignRoutes = []model.OVNRouteKey{{Router: "GR_n1", Prefix: pfx("10.9.0.0/28"), NextHop: addr("192.0.2.2")}}
	return in
}

// randomPath is a path of a random peer for a random prefix, with a next
// hop that is good for the peer or hostile.
func randomPath(rng *rand.Rand) model.LearnedPath {
	prefixes := []string{"10.1.0.0/16", "10.2.3.0/24", "10.128.0.0/24", "10.129.0.0/16", "172.30.1.0/24", "100.64.0.0/24",
		"0.0.0.0/0", "10.66.1.0/24", "192.0.2.1/32", "10.0.0.0/8", "10.9.0.0/28", "10.3.0.0/24", "10.4.0.0/24", "10.5.0.0/24",
		"2001:db8:100::/48", "2001:db8:100::/40", "fd98::/64", "::/0", "172.16.0.0/12", "172.17.0.0/16", "10.6.0.0/24"}
	hostile := []string{"192.0.2.10", "127.0.0.1", "0.0.0.0", "10.128.0.1", "fe80::1", ""}
	own := map[string][]string{"tor-a": {"192.0.2.1", "192.0.2.99"}, "tor-b": {"192.0.2.2"}, "tor-c": {"198.51.100.1"},
		"tor-6": {"2001:db8::1", "2001:db8::2"}, "ghost": {"192.0.2.1"}}
	peers := []string{"tor-a", "tor-a", "tor-b", "tor-c", "tor-6", "ghost"}
	peer := peers[rng.IntN(len(peers))]
	nexthops := slices.Concat(hostile, own[peer], own[peer], own[peer], own[peer])
	p := path(peer, prefixes[rng.IntN(len(prefixes))], nexthops[rng.IntN(len(nexthops))])
	switch rng.IntN(15) {
	case 0:
		p.Malformed = "AS 0 in the AS path (RFC 7607)"
	case 1:
		p.Malformed = model.RoutingLoop + ": the AS path holds our own ASN 64512 (RFC 4271 9.1.2)"
	}
	p.MED = uint32(rng.IntN(3))
	return p
}

// TestTableUpdateEqualsRebuild walks random changes (announcements,
// replacements, withdrawals, foreign kernel routes appearing and going)
// through one ImportTable with Update, and after each compares it with a
// table built anew from the same paths and host: the verdicts, reasons and
// desired routes must be the same, and Update must have returned every
// prefix whose desired routes changed. Without caps the two are equal by
// definition; caps are TestTableCaps'.
func TestTableUpdateEqualsRebuild(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		in := tableFixture(0)
		table := NewImportTable(in)
		live := map[model.Key]model.LearnedPath{}
		foreign := map[model.KernelRouteKey]bool{in.Host.Foreign[0]: true}
		for step := range 60 {
			var c TableChange
			for range 1 + rng.IntN(6) {
				switch rng.IntN(5) {
				case 0, 1, 2:
					p := randomPath(rng)
					c.Paths = append(c.Paths, p)
				case 3:
					for k := range live {
						c.Gone = append(c.Gone, k)
						break
					}
				case 4:
					k := model.KernelRouteKey{Table: []uint32{100, 200}[rng.IntN(2)], Prefix: randomPath(rng).Prefix}
					c.KernelKeys = append(c.KernelKeys, k)
					if rng.IntN(2) == 0 {
						c.Foreign = append(c.Foreign, k)
					}
				}
			}
			before := table.Result()
			touched := table.Update(c)
			for _, k := range c.Gone {
				delete(live, k)
			}
			for _, p := range c.Paths {
				live[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = p
			}
			for _, k := range c.KernelKeys {
				foreign[k] = slices.Contains(c.Foreign, k)
			}
			fresh := in
			fresh.Host.Foreign = nil
			for k, f := range foreign {
				if f {
					fresh.Host.Foreign = append(fresh.Host.Foreign, k)
				}
			}
			fresh.Learned = nil
			for _, p := range live {
				fresh.Learned = append(fresh.Learned, p)
			}
			got, want := table.Result(), NewImportTable(fresh).Result()
			for _, r := range []*ImportResult{&got, &want} {
				slices.SortFunc(r.Paths, func(a, b model.LearnedPath) int {
					return cmp.Or(strings.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
				})
				slices.Sort(r.Problems)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: the updated table differs from a new one (-new +updated):\n%s", seed, step,
					gocmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()))
			}
			checkCounts(t, table)
			// Every prefix whose desired routes changed was returned.
			changed := map[netip.Prefix]bool{}
			for _, op := range DiffOVN(got.OVN, before.OVN) {
				changed[op.Route.Prefix] = true
			}
			for _, op := range DiffKernel(got.Kernel, before.Kernel) {
				changed[op.Route.Prefix] = true
			}
			for p := range changed {
				if !slices.Contains(touched, p) {
					t.Fatalf("seed %d step %d: %s's desired routes changed, but Update did not return it (%v)", seed, step, p, touched)
				}
			}
		}
	}
}

// checkCounts fails the test if the counts, sizes and problems the table
// keeps differ from those of a walk of its paths (which it then keeps).
func checkCounts(t *testing.T, table *ImportTable) {
	t.Helper()
	if d := gocmp.Diff(table.countWalk(nil), table.Count(nil), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("the counts kept differ from a walk (-walk +kept):\n%s", d)
	}
	// Every other prefix installed, by its next hop's last byte.
	odd := func(_ netip.Prefix, nh netip.Addr) bool {
		return nh.IsValid() && nh.AsSlice()[len(nh.AsSlice())-1]%2 == 1
	}
	if d := gocmp.Diff(table.countWalk(odd), table.Count(odd), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("the counts kept with installed next hops differ from a walk (-walk +kept):\n%s", d)
	}
	ovn, kernel := table.Sizes()
	problems := table.Problems()
	table.stats = nil
	wovn, wkernel := table.Sizes()
	if wproblems := table.Problems(); ovn != wovn || kernel != wkernel || !slices.Equal(problems, wproblems) {
		t.Fatalf("the sizes kept are %d OVN, %d kernel, problems %q; a walk says %d, %d, %q", ovn, kernel, problems, wovn, wkernel, wproblems)
	}
}

// TestTableCaps: with maxRoutes, Update never lets a (rule, peer) group
// hold more than the cap, keeps what it kept, holds back the rest with an
// alarm, and gives a freed slot to the first held-back prefix.
func TestTableCaps(t *testing.T) {
	in := tableFixture(2)
	a := func(prefix string) model.LearnedPath { return path("tor-a", prefix, "192.0.2.1") }
	table := NewImportTable(in)
	table.Update(TableChange{Paths: []model.LearnedPath{a("10.5.0.0/24"), a("10.4.0.0/24")}})
	table.Update(TableChange{Paths: []model.LearnedPath{a("10.3.0.0/24")}}) // first in prefix order, but late
	accepted := func() []string {
		var out []string
		for _, p := range table.Result().Paths {
			if p.Accepted && p.Rule == "up" {
				out = append(out, p.Prefix.String())
			}
		}
		slices.Sort(out)
		return out
	}
	if got := accepted(); !slices.Equal(got, []string{"10.4.0.0/24", "10.5.0.0/24"}) {
		t.Fatalf("accepted %v: the two kept first must stay", got)
	}
	if d := gocmp.Diff([]ImportAlarm{{Rule: "kern", Peer: "tor-a", Max: 2, Wanted: 3}, {Rule: "up", Peer: "tor-a", Max: 2, Wanted: 3}}, table.Alarms()); d != "" {
		t.Errorf("alarms (-want +got):\n%s", d)
	}
	for _, p := range table.Result().Paths {
		if p.Prefix == pfx("10.3.0.0/24") && (p.Accepted || p.Reason != "import cap: rule up accepts at most 2 routes from peer tor-a (3 offered)") {
			t.Errorf("held-back path: %+v", p)
		}
	}
	table.Update(TableChange{Paths: []model.LearnedPath{a("10.6.0.0/24")}})
	touched := table.Update(TableChange{Gone: []model.Key{{Peer: "tor-a", Prefix: pfx("10.5.0.0/24")}}})
	if !slices.Contains(touched, pfx("10.3.0.0/24")) {
		t.Errorf("touched %v: the freed slot's new holder is missing", touched)
	}
	if got := accepted(); !slices.Equal(got, []string{"10.3.0.0/24", "10.4.0.0/24"}) {
		t.Fatalf("accepted %v: the freed slot goes to the first held-back prefix, 10.3.0.0/24", got)
	}
	if _, kernel := table.Desired([]netip.Prefix{pfx("10.3.0.0/24")}); len(kernel) != 2 {
		t.Errorf("desired kernel routes of 10.3.0.0/24: %v, want tables 100 and 200", kernel)
	}
	table.Update(TableChange{Gone: []model.Key{{Peer: "tor-a", Prefix: pfx("10.6.0.0/24")}}})
	if al := table.Alarms(); len(al) != 0 {
		t.Errorf("alarms %v after the group fits its cap again", al)
	}
}

// TestTableCapFreedInOneUpdate: one Update brings a prefix that the full
// cap holds back and takes away a kept one that comes later in prefix
// order: the freed slot goes to the new prefix, which must be decided
// again although it was decided (held back) earlier in the same Update.
func TestTableCapFreedInOneUpdate(t *testing.T) {
	a := func(prefix string) model.LearnedPath { return path("tor-a", prefix, "192.0.2.1") }
	table := NewImportTable(tableFixtureWith(1))
	table.Update(TableChange{Paths: []model.LearnedPath{a("10.5.0.0/24")}})
	touched := table.Update(TableChange{Paths: []model.LearnedPath{a("10.3.0.0/24")}, Gone: []model.Key{{Peer: "tor-a", Prefix: pfx("10.5.0.0/24")}}})
	if !slices.Equal(touched, []netip.Prefix{pfx("10.3.0.0/24"), pfx("10.5.0.0/24")}) {
		t.Errorf("touched %v, want 10.3.0.0/24 and 10.5.0.0/24", touched)
	}
	res := table.Result()
	if i := slices.IndexFunc(res.Paths, func(p model.LearnedPath) bool { return p.Prefix == pfx("10.3.0.0/24") }); i < 0 || !res.Paths[i].Accepted {
		t.Fatalf("10.3.0.0/24 after the only kept prefix left: %+v, want accepted", res.Paths)
	}
	if _, kernel := table.Desired([]netip.Prefix{pfx("10.3.0.0/24")}); len(kernel) != 2 {
		t.Errorf("desired kernel routes of 10.3.0.0/24: %v, want tables 100 and 200", kernel)
	}
	if d := gocmp.Diff(NewImportTable(tableFixtureWith(1, a("10.3.0.0/24"))).Result().Paths, table.Result().Paths, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("updated table differs from a new one (-new +updated):\n%s", d)
	}
}

// TestTableSizesFollowUpdates: Sizes and Problems, kept between calls,
// are made again after every Update.
func TestTableSizesFollowUpdates(t *testing.T) {
	a := func(prefix string) model.LearnedPath { return path("tor-a", prefix, "192.0.2.1") }
	table := NewImportTable(tableFixtureWith(10))
	sizes := func() int { _, k := table.Sizes(); return k }
	if n := sizes(); n != 0 {
		t.Fatalf("empty table: %d kernel routes", n)
	}
	table.Update(TableChange{Paths: []model.LearnedPath{a("10.5.0.0/24"), a("10.2.3.0/24")}})
	if n := sizes(); n != 3 {
		t.Errorf("two prefixes into tables 100 and 200, one of them held by a foreign route in 100: %d kernel routes, want 3", n)
	}
	if p := table.Problems(); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, "10.2.3.0/24 is held by a route not ovnbgp's") }) {
		t.Errorf("problems %q: the foreign route in the way is not named", p)
	}
	table.Update(TableChange{Gone: []model.Key{{Peer: "tor-a", Prefix: pfx("10.5.0.0/24")}, {Peer: "tor-a", Prefix: pfx("10.2.3.0/24")}}})
	if n := sizes(); n != 0 {
		t.Errorf("after both are gone: %d kernel routes", n)
	}
	if p := table.Problems(); slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, "10.2.3.0/24") }) {
		t.Errorf("problems %q after the path is gone", p)
	}
}

// tableFixtureWith is tableFixture learning only paths.
func tableFixtureWith(maxRoutes int, paths ...model.LearnedPath) ImportInput {
	in := tableFixture(maxRoutes)
	in.Learned = paths
	return in
}

// TestTableRandomCaps: random changes with caps keep every group within
// its cap, full whenever it holds something back, and every accepted path
// inside its groups' kept prefixes.
func TestTableRandomCaps(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 9))
		table := NewImportTable(tableFixture(3))
		for step := range 80 {
			var c TableChange
			for range 1 + rng.IntN(4) {
				if rng.IntN(3) == 0 {
					p := randomPath(rng)
					c.Gone = append(c.Gone, model.Key{Peer: p.Peer, Prefix: p.Prefix})
				} else {
					c.Paths = append(c.Paths, randomPath(rng))
				}
			}
			table.Update(c)
			checkCaps(t, fmt.Sprintf("seed %d step %d", seed, step), table)
		}
	}
}

// checkCaps fails the test unless every cap group is within its cap, full
// whenever it holds something back, and every accepted path inside its
// groups' kept prefixes (and the counts are right).
func checkCaps(t *testing.T, where string, table *ImportTable) {
	t.Helper()
	checkCounts(t, table)
	members := map[capGroup]map[netip.Prefix]bool{}
	table.each(func(pfx netip.Prefix, tp *tablePath) bool {
		table.groupsOf(tp, func(g capGroup) {
			if members[g] == nil {
				members[g] = map[netip.Prefix]bool{}
			}
			members[g][pfx] = true
		})
		return true
	})
	// What the entries say: per group, kept and held prefixes.
	kept, held := map[*capState]int{}, map[*capState]map[netip.Prefix]bool{}
	for pfx, pe := range table.prefixes {
		for _, m := range pe.capList() {
			g := m.cs.g
			if table.caps[g] != m.cs {
				t.Fatalf("%s: %s is in a group %v that is not the table's", where, pfx, g)
			}
			if !members[g][pfx] {
				t.Fatalf("%s: %s is in group %v, but no path of it is a candidate", where, pfx, g)
			}
			if m.held {
				if held[m.cs] == nil {
					held[m.cs] = map[netip.Prefix]bool{}
				}
				held[m.cs][pfx] = true
			} else {
				kept[m.cs]++
			}
		}
	}
	for g, ps := range members {
		for pfx := range ps {
			if table.prefixes[pfx].member(table.caps[g]) == nil {
				t.Fatalf("%s: %s is a candidate of group %v but not in it", where, pfx, g)
			}
		}
	}
	for g, cs := range table.caps {
		max := table.cfg.Import[g.rule].MaxRoutes
		if cs.kept != kept[cs] || cs.nHeld() != len(held[cs]) {
			t.Fatalf("%s: group %v counts %d kept, %d held; its members say %d, %d", where, g, cs.kept, cs.nHeld(), kept[cs], len(held[cs]))
		}
		cs.held.Ascend(func(pfx netip.Prefix) bool {
			if !held[cs][pfx] {
				t.Fatalf("%s: group %v holds %s back, its entry does not say so", where, g, pfx)
			}
			return true
		})
		if cs.kept > max || cs.nHeld() > 0 && cs.kept != max {
			t.Fatalf("%s: group %v keeps %d, holds %d, cap %d", where, g, cs.kept, cs.nHeld(), max)
		}
		if cs.kept+cs.nHeld() != len(members[g]) {
			t.Fatalf("%s: group %v has %d+%d prefixes, its candidates are %d", where, g, cs.kept, cs.nHeld(), len(members[g]))
		}
	}
	for _, p := range table.Result().Paths {
		if !p.Accepted {
			continue
		}
		ri := slices.IndexFunc(table.cfg.Import, func(r config.ImportRule) bool { return r.Name == p.Rule })
		if m := table.prefixes[p.Prefix].member(table.caps[capGroup{ri, p.Peer}]); m == nil || m.held {
			t.Fatalf("%s: accepted %s from %s by rule %s, not kept by its cap", where, p.Prefix, p.Peer, p.Rule)
		}
	}
}

// BenchmarkTableUpdate: one path changes in a table of 100,000 (what a
// pass costs in steady state), against BenchmarkImport's whole decision.
func BenchmarkTableUpdate(b *testing.B) {
	in := importFixture()
	in.Config.Import[0].MaxRoutes = 60000
	in.Config.Import[0].Accept[0].MaxLength = 30
	for i := range 100000 {
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 14), byte(i >> 6), byte(i << 2)}), 30).Masked()
		in.Learned = append(in.Learned, model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1")})
	}
	table := NewImportTable(in)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		p := in.Learned[i%len(in.Learned)]
		p.MED = uint32(i)
		if touched := table.Update(TableChange{Paths: []model.LearnedPath{p}}); len(touched) != 1 {
			b.Fatalf("touched %v", touched)
		}
		i++
	}
}

// BenchmarkTableMemory reports the heap a table keeps per path (B/path):
// 100,000 paths of one peer, each accepted into OVN and a kernel table, as
// the loop holds them.
func BenchmarkTableMemory(b *testing.B) {
	in := importFixture()
	in.Config.Import[0].Accept[0].MaxLength = 30
	const n = 100000
	paths := make([]model.LearnedPath, n)
	for i := range paths {
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 14), byte(i >> 6), byte(i << 2)}), 30).Masked()
		paths[i] = model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1"), ASPath: []uint32{65001}, Origin: "igp"}
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		table := NewImportTable(in)
		for i := 0; i < n; i += 1000 {
			table.Update(TableChange{Paths: paths[i : i+1000]})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/path")
		runtime.KeepAlive(table)
	}
}

// causeOfReason classifies a rejection's reason text the way a reader
// would; TestTableRejectedBy checks RejectCause against it.
func causeOfReason(reason string) RejectCause {
	switch {
	case strings.HasPrefix(reason, "next hop") || strings.HasPrefix(reason, "the next hop"):
		return RejectNextHop
	case strings.HasPrefix(reason, "a routing loop"):
		return RejectLoop
	case strings.HasPrefix(reason, "malformed"):
		return RejectMalformed
	case strings.HasPrefix(reason, "no import rule lists peer"):
		return RejectNoRule
	case strings.HasPrefix(reason, "no accept entry matches"):
		return RejectNoMatch
	case strings.Contains(reason, "is the default route"):
		return RejectDefaultRoute
	case strings.Contains(reason, "is protected") || strings.Contains(reason, "is inside protected"):
		return RejectProtected
	case strings.HasPrefix(reason, "import cap"):
		return RejectImportCap
	}
	return "unclassified: " + RejectCause(reason)
}

// TestTableRejectedBy: Count's rejections by peer and cause agree with the
// reasons of the rejected paths, over random tables with caps, and add up
// to Rejected; every cause occurs.
func TestTableRejectedBy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	seen := map[RejectCause]bool{}
	for round := range 40 {
		table := NewImportTable(tableFixture(3))
		var paths []model.LearnedPath
		for range 60 {
			paths = append(paths, randomPath(rng))
		}
		table.Update(TableChange{Paths: paths})
		want := map[Rejection]int{}
		for _, p := range table.Result().Paths {
			if !p.Accepted {
				want[Rejection{p.Peer, causeOfReason(p.Reason)}]++
			}
		}
		c := table.Count(nil)
		if d := gocmp.Diff(want, c.RejectedBy); d != "" {
			t.Fatalf("round %d: RejectedBy (-from the reasons +Count):\n%s", round, d)
		}
		n := 0
		for k, v := range c.RejectedBy {
			n += v
			seen[k.Cause] = true
		}
		if n != c.Rejected {
			t.Fatalf("round %d: RejectedBy adds up to %d, Rejected is %d", round, n, c.Rejected)
		}
	}
	for _, cause := range []RejectCause{RejectMalformed, RejectLoop, RejectNoRule, RejectNoMatch, RejectDefaultRoute, RejectProtected, RejectNextHop, RejectImportCap} {
		if !seen[cause] {
			t.Errorf("no random table rejected a path for %s", cause)
		}
	}
}

// capDropTable is a table of n accepted prefixes from tor-a (/30s of
// 10.0.0.0/13), with maxRoutes 1000 in both of its cap rules ("up" and
// "kern"): 1000 kept by each, n-1000 held back.
func capDropTable(n int) (*ImportTable, []model.Key) {
	in, keys := capDropInput(n)
	return NewImportTable(in), keys
}

// capDropInput is capDropTable's input.
func capDropInput(n int) (ImportInput, []model.Key) {
	in := tableFixture(1000)
	in.Config.Import[0].Accept[0].MaxLength = 30
	in.Config.Import[1].Accept[0].MaxLength = 30
	keys := make([]model.Key, n)
	for i := range n {
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 14), byte(i >> 6), byte(i << 2)}), 30)
		in.Learned = append(in.Learned, model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1"), ASPath: []uint32{65001}, Origin: "igp"})
		keys[i] = model.Key{Peer: "tor-a", Prefix: pf}
	}
	return in, keys
}

// capWork is the work the table's caps did on their held-back prefixes
// so far (operations and prefix comparisons), and sets it back to 0.
func capWork(t *ImportTable) int {
	n := 0
	for _, cs := range t.caps {
		n += cs.work
		cs.work = 0
	}
	return n
}

// TestTableCapDropWork (issue 17, item 7): a peer with far more accepted
// prefixes than maxRoutes drops (every path gone in one Update), or
// withdraws its kept prefixes one Update at a time: the caps' work must be
// O(changed × log n). No clock: it counts the caps' work on their
// held-back prefixes (capState.work: each operation on the ordered set,
// itself O(log n), and each prefix comparison). A scan of the held set for
// every kept prefix that left visited ~n²/2 prefixes (576,024,000 at
// n=25000; minutes of a frozen loop at 100k). It also checks that the
// freed slots went to the held-back prefixes in prefix order.
func TestTableCapDropWork(t *testing.T) {
	for _, n := range []int{25000, 100000} {
		// 8 steps per changed prefix and level of a binary tree of n
		bound := func(changed int) int { return 8 * changed * bits.Len(uint(n)) }

		table, keys := capDropTable(n)
		capWork(table)
		touched := table.Update(TableChange{Gone: keys})
		got := capWork(table)
		t.Logf("n=%d, the peer drops: the caps' work %d (%.1f per changed prefix)", n, got, float64(got)/float64(n))
		if got > bound(len(keys)) {
			t.Fatalf("n=%d, the peer drops: the caps' work is %d, want at most %d (8 per changed prefix and level of a tree of %d)",
				n, got, bound(len(keys)), n)
		}
		checkCounts(t, table)
		if len(touched) != n || table.Len() != 0 || len(table.Alarms()) != 0 {
			t.Fatalf("n=%d, after the drop: %d touched, %d paths left, alarms %v; want %d, 0, none", n, len(touched), table.Len(), table.Alarms(), n)
		}

		// The kept ones withdrawn one at a time: each frees a slot for
		// the next held-back prefix.
		table, keys = capDropTable(n)
		capWork(table)
		const withdrawn = 1000
		for _, k := range keys[:withdrawn] {
			table.Update(TableChange{Gone: []model.Key{k}})
		}
		got = capWork(table)
		t.Logf("n=%d, %d kept withdrawn one by one: the caps' work %d", n, withdrawn, got)
		if got > bound(withdrawn) {
			t.Fatalf("n=%d, %d kept prefixes withdrawn one by one: the caps' work is %d, want at most %d", n, withdrawn, got, bound(withdrawn))
		}
		var kept []netip.Prefix
		for _, p := range table.Result().Paths {
			if p.Accepted {
				kept = append(kept, p.Prefix)
			}
		}
		slices.SortFunc(kept, model.ComparePrefix)
		want := make([]netip.Prefix, 0, 1000)
		for _, k := range keys[withdrawn : withdrawn+1000] {
			want = append(want, k.Prefix)
		}
		if !slices.Equal(kept, want) {
			t.Fatalf("n=%d: after the first %d were withdrawn, %d accepted (%v...), want the next 1000 in prefix order (%v...)", n, withdrawn, len(kept), kept[:min(3, len(kept))], want[:3])
		}
	}
}

// TestNewTableIsUpdateFromEmpty: a new table is an empty table's Update
// with every path and the routes installed now, one code path for a full
// pass and an incremental one. With caps that hold prefixes back, the
// installed ones must be kept first in both, so installed routes are
// drawn from a table of a random part of the paths (some late in prefix
// order, where prefix order alone would hold them back).
func TestNewTableIsUpdateFromEmpty(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 11))
		in := tableFixture(1 + rng.IntN(4))
		var all, some []model.LearnedPath
		for range 10 + rng.IntN(30) {
			p := randomPath(rng)
			all = append(all, p)
			if rng.IntN(3) == 0 {
				some = append(some, p)
			}
		}
		part := in
		part.Learned = some
		inst := NewImportTable(part).Result()
		in.Snapshot.OwnedRoutes, in.Host.Routes = inst.OVN, inst.Kernel
		in.Learned = all
		want := NewImportTable(in).Result()
		empty := in
		empty.Learned = nil
		table := NewImportTable(empty)
		table.Update(TableChange{Paths: all, Installed: NewInstalled(in.Snapshot.OwnedRoutes, in.Host.Routes)})
		got := table.Result()
		if d := gocmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("seed %d: an empty table updated with every path differs from a new table (-new +updated):\n%s", seed, d)
		}
		checkCounts(t, table)
	}
}
