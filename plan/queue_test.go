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

// inOrder is r with its paths in (peer, prefix) order and its problems
// sorted: the order Result lists the paths of different prefixes in is
// the order they were first given, which a queue changes.
func inOrder(r ImportResult) ImportResult {
	slices.SortStableFunc(r.Paths, func(a, b model.LearnedPath) int {
		return cmp.Or(strings.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
	})
	slices.Sort(r.Problems)
	return r
}

// updateQueued updates table with c through a ChangeQueue, n changes at a
// time, and returns every prefix the Updates touched, sorted, and how many
// Updates it took.
func updateQueued(table *ImportTable, c TableChange, n int) ([]netip.Prefix, int) {
	q := NewChangeQueue(c)
	var touched []netip.Prefix
	parts := 0
	for q.Len() > 0 {
		part := q.Next(n)
		touched = append(touched, table.Update(part)...)
		parts++
	}
	slices.SortFunc(touched, model.ComparePrefix)
	return slices.Compact(touched), parts
}

// TestChangeQueueEqualsOneUpdate (issue 17, item 7: no loop stall when a
// large peer drops): a change decided part by part through a ChangeQueue
// leaves the table exactly as one Update of the whole change does (the
// verdicts, reasons, kept prefixes of the caps, desired routes, counts),
// and the parts touch the same prefixes. Random tables and changes with
// caps of 3 (most groups hold prefixes back), parts of 1 to 7 changes.
func TestChangeQueueEqualsOneUpdate(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 17))
		in := tableFixture(3)
		in.Config.Import[0].Accept[0].MaxLength = 30
		in.Config.Import[1].Accept[0].MaxLength = 30
		// Half the paths from a pool of 12 prefixes of one peer, so that
		// its groups are full and hold some back.
		some := func() model.LearnedPath {
			if rng.IntN(2) == 0 {
				return randomPath(rng)
			}
			pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 7, 0, byte(4 * rng.IntN(12))}), 30)
			return model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1"), ASPath: []uint32{65001}, Origin: "igp"}
		}
		for range 20 + rng.IntN(20) {
			in.Learned = append(in.Learned, some())
		}
		var c TableChange
		for range 1 + rng.IntN(30) {
			switch rng.IntN(6) {
			case 0, 1, 2:
				p := some()
				c.Gone = append(c.Gone, model.Key{Peer: p.Peer, Prefix: p.Prefix})
			case 3, 4:
				c.Paths = append(c.Paths, some())
			case 5:
				k := model.KernelRouteKey{Table: []uint32{100, 200}[rng.IntN(2)], Prefix: randomPath(rng).Prefix}
				c.KernelKeys = append(c.KernelKeys, k)
				if rng.IntN(2) == 0 {
					c.Foreign = append(c.Foreign, k)
				}
			}
		}
		one := NewImportTable(in)
		wantTouched := one.Update(c)
		want := inOrder(one.Result())
		for _, n := range []int{1, 2, 3, 7} {
			parts := NewImportTable(in)
			gotTouched, k := updateQueued(parts, c, n)
			if got := inOrder(parts.Result()); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, parts of %d: the table differs from one Update's (-one +parts):\n%s", seed, n,
					gocmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()))
			}
			if !slices.Equal(gotTouched, wantTouched) {
				t.Fatalf("seed %d, parts of %d: touched %v, one Update touched %v", seed, n, gotTouched, wantTouched)
			}
			if !reflect.DeepEqual(parts.Count(nil), one.Count(nil)) || !reflect.DeepEqual(parts.Alarms(), one.Alarms()) {
				t.Fatalf("seed %d, parts of %d: counts %+v alarms %v, one Update's %+v %v", seed, n,
					parts.Count(nil), parts.Alarms(), one.Count(nil), one.Alarms())
			}
			checkCounts(t, parts)
			if len(c.Paths)+len(c.Gone) > n && k < 2 {
				t.Fatalf("seed %d, parts of %d: %d changes in %d part", seed, n, len(c.Paths)+len(c.Gone), k)
			}
		}
	}
}

// TestChangeQueueDrop: the drop of the bench (a peer far above its cap
// leaves: every path gone), decided in parts of 1000, ends as one Update
// (an empty table, every prefix touched); after a partial withdrawal of
// kept and held-back prefixes the slots go to the same held-back prefixes,
// the first in prefix order.
func TestChangeQueueDrop(t *testing.T) {
	const n = 20000
	one, keys := capDropTable(n)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	wantTouched := one.Update(TableChange{Gone: keys})
	parts, _ := capDropTable(n)
	gotTouched, k := updateQueued(parts, TableChange{Gone: keys}, 1000)
	if parts.Len() != 0 || !slices.Equal(gotTouched, wantTouched) || k != n/1000 {
		t.Fatalf("after the drop in %d parts: %d paths left, %d touched; want 0, %d in %d parts", k, parts.Len(), len(gotTouched), len(wantTouched), n/1000)
	}

	one, keys = capDropTable(n)
	parts, _ = capDropTable(n)
	var some []model.Key
	for i, k := range keys {
		if i%3 == 0 {
			some = append(some, k)
		}
	}
	rng.Shuffle(len(some), func(i, j int) { some[i], some[j] = some[j], some[i] })
	one.Update(TableChange{Gone: some})
	updateQueued(parts, TableChange{Gone: some}, 500)
	if got, want := inOrder(parts.Result()), inOrder(one.Result()); !reflect.DeepEqual(got.Kernel, want.Kernel) || !reflect.DeepEqual(got.Paths, want.Paths) {
		t.Fatalf("a third withdrawn in parts of 500: %d kernel routes, want %d; the kept prefixes differ: %v",
			len(got.Kernel), len(want.Kernel), gocmp.Diff(want.Kernel, got.Kernel, cmpAddrs))
	}
}

// BenchmarkChangeQueueDrop: a 100k-prefix peer (maxRoutes 1000) drops,
// queued and decided in parts of 1024 (the daemon's passChunk): ms/part
// is the cost of one part. With one rule, as in bench/'s drop job, or two
// accepting every path (each accepted path then has its reason made at
// once).
func BenchmarkChangeQueueDrop(b *testing.B) {
	const n, part = 100000, 1024
	for _, rules := range []int{1, 2} {
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				in, keys := capDropInput(n)
				if rules == 1 {
					in.Config.Import = in.Config.Import[:1]
				}
				table := NewImportTable(in)
				rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
				b.StartTimer()
				q := NewChangeQueue(TableChange{Gone: keys})
				for q.Len() > 0 {
					table.Update(q.Next(part))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64((n+part-1)/part)/1e6, "ms/part")
		})
	}
}

// TestPrefixOrder: the queue's integer order is model.ComparePrefix's.
func TestPrefixOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ps []netip.Prefix
	for _, s := range []string{"0.0.0.0/0", "10.0.0.0/8", "10.0.0.0/16", "10.0.1.0/24", "255.255.255.255/32", "::/0", "::/8",
		"::ffff:10.0.0.0/104", "2001:db8::/32", "2001:db8::/48", "ffff::/16"} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	for range 200 {
		var a [16]byte
		for i := range a {
			a[i] = byte(rng.IntN(3)) // few values: many equal parts
		}
		if rng.IntN(2) == 0 {
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte(a[:4])), rng.IntN(33)).Masked())
		} else {
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom16(a), rng.IntN(129)).Masked())
		}
	}
	for _, a := range ps {
		for _, b := range ps {
			if got, want := orderOf(a).less(orderOf(b)), model.ComparePrefix(a, b) < 0; got != want {
				t.Fatalf("%s < %s: the queue's order says %v, ComparePrefix %v", a, b, got, want)
			}
		}
	}
}

// TestEachAccepted: EachAccepted names the prefix of every accepted path,
// as Each does.
func TestEachAccepted(t *testing.T) {
	table, _ := capDropTable(3000)
	var want, got []netip.Prefix
	table.Each(func(p model.LearnedPath) bool {
		if p.Accepted {
			want = append(want, p.Prefix)
		}
		return true
	})
	table.EachAccepted(func(p netip.Prefix) { got = append(got, p) })
	slices.SortFunc(want, model.ComparePrefix)
	slices.SortFunc(got, model.ComparePrefix)
	if len(want) != 1000 || !slices.Equal(got, want) {
		t.Fatalf("EachAccepted: %d prefixes, Each: %d accepted (want 1000, the same)", len(got), len(want))
	}
}

// TestDecidedPaths: Decided, then Paths, gives what Each gives, the cap's
// reasons included.
func TestDecidedPaths(t *testing.T) {
	for _, n := range []int{0, 10, 3000} {
		table, _ := capDropTable(n)
		var want []model.LearnedPath
		table.Each(func(p model.LearnedPath) bool {
			want = append(want, p)
			return true
		})
		got := table.Decided().Paths()
		for _, r := range [][]model.LearnedPath{want, got} {
			slices.SortFunc(r, func(a, b model.LearnedPath) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
		}
		if d := gocmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("n=%d: Decided().Paths() differs from Each (-Each +Decided):\n%s", n, d)
		}
	}
}

// TestChangeQueueNextAllocs (issue 18, import from a fast injector): taking
// a part of a queued table transfer allocates nothing once the first part
// made the part's slices (reused by every part), at two sizes of the
// queue. container/heap's Pop boxed each change in an interface (100k
// allocations for 100k paths), and each part was a fresh copy.
func TestChangeQueueNextAllocs(t *testing.T) {
	const part = 1024
	for _, n := range []int{8 * part, 64 * part} {
		in, keys := capDropInput(n)
		// Half the changes paths, half withdrawals, shuffled.
		rand.New(rand.NewPCG(5, 6)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		c := TableChange{Paths: in.Learned[:n/2], Gone: keys[:n/2]}
		q := NewChangeQueue(c)
		allocs := testing.AllocsPerRun(n/part/2, func() {
			q.Next(part)
		})
		if allocs > 0 {
			t.Errorf("queue of %d changes: %.0f allocations per part of %d, want none", n, allocs, part)
		}
	}
}
