package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// variedPath is randomPath with every attribute the table stores
// compactly varied: ages of every kind (zero, whole seconds in local time,
// UTC, a monotonic reading, the zero instant in local time), nil and
// empty AS paths and communities, origins, LOCAL_PREF, stale, a zoned next
// hop, and a decision the caller must not see kept.
func variedPath(rng *rand.Rand) model.LearnedPath {
	p := randomPath(rng)
	switch rng.IntN(6) {
	case 0:
		p.Age = time.Time{}
	case 1:
		p.Age = time.Unix(int64(1_700_000_000+rng.IntN(5)), 0)
	case 2:
		p.Age = time.Unix(int64(1_700_000_000+rng.IntN(5)), 0).UTC()
	case 3:
		p.Age = time.Now()
	case 4:
		p.Age = time.Date(1, 1, 1, 0, 0, 0, 0, time.Local)
	case 5:
		p.Age = time.Unix(0, int64(rng.IntN(1000)))
	}
	switch rng.IntN(4) {
	case 0:
		p.ASPath = nil
	case 1:
		p.ASPath = []uint32{}
	case 2:
		p.ASPath = []uint32{65001, uint32(rng.IntN(3))}
	}
	switch rng.IntN(4) {
	case 0:
		p.Communities = []string{}
	case 1:
		p.Communities = []string{"65001:1", fmt.Sprint(rng.IntN(3))}
	}
	p.Origin = []string{"igp", "egp", "incomplete", "", "?"}[rng.IntN(5)]
	p.LocalPref = uint32(rng.IntN(2) * 100)
	p.Stale = rng.IntN(4) == 0
	if rng.IntN(8) == 0 {
		p.NextHop = netip.MustParseAddr("fe80::1%eth0")
	}
	p.Reason, p.Rule, p.Accepted = "from the caller", "caller", rng.IntN(2) == 0
	return p
}

// TestTablePathsKeptAsGiven walks random announcements and withdrawals
// of varied paths through a table and checks after each step that every
// path reads back exactly as given (reflect.DeepEqual: an age's location
// and monotonic reading, nil against empty slices, a next hop's zone), in
// the order first given, and that the compact storage holds nothing more:
// one interned attribute set per distinct set in use, a prefix's
// extension only where it has a second path or a cap group, and nothing
// once every path is gone.
func TestTablePathsKeptAsGiven(t *testing.T) {
	for _, max := range []int{0, 3} {
		for seed := range uint64(40) {
			rng := rand.New(rand.NewPCG(seed, 17))
			table := NewImportTable(tableFixture(max))
			if seed%4 == 0 {
				// the order first given holds past the last seq
				table.seq = math.MaxUint32 - 20
			}
			type kept struct {
				p   model.LearnedPath
				seq int
			}
			want := map[model.Key]kept{}
			seq := 0
			for step := range 60 {
				var c TableChange
				for range 1 + rng.IntN(8) {
					p := variedPath(rng)
					k := model.Key{Peer: p.Peer, Prefix: p.Prefix}
					if rng.IntN(3) == 0 {
						c.Gone = append(c.Gone, k)
						continue
					}
					c.Paths = append(c.Paths, p)
				}
				for _, k := range c.Gone {
					delete(want, k)
				}
				for _, p := range c.Paths {
					k := model.Key{Peer: p.Peer, Prefix: p.Prefix}
					raw := p
					raw.Accepted, raw.Rule, raw.Reason = false, "", ""
					if w, ok := want[k]; ok {
						want[k] = kept{raw, w.seq}
					} else {
						want[k] = kept{raw, seq}
						seq++
					}
				}
				table.Update(c)
				var order []kept
				for _, w := range want {
					order = append(order, w)
				}
				slices.SortFunc(order, func(a, b kept) int { return a.seq - b.seq })
				wantPaths := []model.LearnedPath{}
				for _, w := range order {
					wantPaths = append(wantPaths, w.p)
				}
				got := table.LearnedPaths()
				if !reflect.DeepEqual(got, wantPaths) {
					for i := range min(len(got), len(wantPaths)) {
						if !reflect.DeepEqual(got[i], wantPaths[i]) {
							t.Fatalf("max %d seed %d step %d: path %d reads\n%#v\nwas given\n%#v", max, seed, step, i, got[i], wantPaths[i])
						}
					}
					t.Fatalf("max %d seed %d step %d: %d paths, want %d", max, seed, step, len(got), len(wantPaths))
				}
				for _, w := range wantPaths {
					if p, ok := table.Learned(model.Key{Peer: w.Peer, Prefix: w.Prefix}); !ok || !reflect.DeepEqual(p, w) {
						t.Fatalf("max %d seed %d step %d: Learned %v %s: %#v, %v", max, seed, step, w.Peer, w.Prefix, p, ok)
					}
				}
				checkCompact(t, table)
			}
			var gone TableChange
			for k := range want {
				gone.Gone = append(gone.Gone, k)
			}
			table.Update(gone)
			if table.Len() != 0 || len(table.prefixes) != 0 || table.attrs.len() != 0 || len(table.attrs.slots)-1 != len(table.attrs.free) {
				t.Fatalf("max %d seed %d: all gone, but %d paths, %d prefixes, %d attribute sets (%d slots, %d free)", max, seed,
					table.Len(), len(table.prefixes), table.attrs.len(), len(table.attrs.slots), len(table.attrs.free))
			}
		}
	}
}

// checkCompact checks the table's compact storage against its paths.
func checkCompact(t *testing.T, table *ImportTable) {
	t.Helper()
	refs := map[uint32]int{}
	for pfx, pe := range table.prefixes {
		if pe.len() == 0 {
			t.Fatalf("%s: an entry without paths", pfx)
		}
		if pe.ext != nil && len(pe.ext.more) == 0 && len(pe.ext.caps) == 0 {
			t.Fatalf("%s: an empty extension kept", pfx)
		}
		if pe.cap0 == nil && pe.ext != nil && len(pe.ext.caps) > 0 || pe.cap0 != nil && pe.cap0 != pe.cap0.cs.ref(pe.cap0.held) {
			t.Fatalf("%s: cap groups %v, %+v", pfx, pe.cap0, pe.ext)
		}
		for i := range pe.len() {
			refs[pe.at(i).attrs]++
			// in the order first given, as settle and routes read them
			if i > 0 && pe.at(i-1).seq >= pe.at(i).seq {
				t.Fatalf("%s: path %d given after path %d", pfx, i-1, i)
			}
		}
	}
	if len(refs) != table.attrs.len() {
		t.Fatalf("%d attribute sets in use, the table interns %d", len(refs), table.attrs.len())
	}
	for i, n := range refs {
		if table.attrs.slots[i].refs != n {
			t.Fatalf("attribute set %d: %d paths, counted %d", i, n, table.attrs.slots[i].refs)
		}
	}
}

// TestCauseCodes: every cause survives its code; one without a code is
// kept too.
func TestCauseCodes(t *testing.T) {
	for _, c := range []RejectCause{"", RejectMalformed, RejectLoop, RejectNoRule, RejectNoMatch, RejectDefaultRoute,
		RejectProtected, RejectNextHop, RejectImportCap, RejectStale, "something else"} {
		var tp tablePath
		tp.setCause(c)
		if got := tp.getCause(); got != c {
			t.Errorf("cause %q reads %q", c, got)
		}
		if (tp.cause == causeOther) != (c == "something else") {
			t.Errorf("cause %q: code %d", c, tp.cause)
		}
	}
}

// TestTableAcceptedAfterARejection: a path the first rule rejects and two
// later rules accept keeps both reasons (the accepted one and, for when a
// cap holds it back, the first rule's): held back, then accepted when the
// cap frees a slot, as a new table decides it; a path the first matching
// rule accepts with two rules keeps one reason.
func TestTableAcceptedAfterARejection(t *testing.T) {
	in := importFixture()
	for _, name := range []string{"second", "third"} {
		in.Config.Import = append(in.Config.Import, config.ImportRule{Name: name, Peers: []string{"tor-a"}, Network: "default",
			Accept: []config.PrefixMatch{{Prefix: pfx("0.0.0.0/0")}, {Prefix: pfx("::/0")}}, AllowDefaultRoute: true, MaxRoutes: 1, Mode: "auto",
			Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 200}}})
	}
	v4, v6 := path("tor-a", "0.0.0.0/0", "192.0.2.1"), path("tor-a", "::/0", "2001:db8::1")
	in.Learned = []model.LearnedPath{v6}
	table := NewImportTable(in)
	table.Update(TableChange{Paths: []model.LearnedPath{v4}})
	got := map[netip.Prefix]model.LearnedPath{}
	table.Each(func(p model.LearnedPath) bool { got[p.Prefix] = p; return true })
	if p := got[v4.Prefix]; p.Accepted || p.Rule != "up" || !strings.Contains(p.Reason, "is the default route and rule up") {
		t.Errorf("0/0 held back by the caps: %+v", p)
	}
	if p := got[v6.Prefix]; !p.Accepted || p.Rule != "second" || p.Reason != "accepted by rule second (::/0 length 0) and rule third (::/0 length 0)" {
		t.Errorf("::/0: %+v", p)
	}
	table.Update(TableChange{Gone: []model.Key{{Peer: "tor-a", Prefix: v6.Prefix}}})
	in.Learned = []model.LearnedPath{v4}
	want := Import(in).Paths
	if p := want[0]; !p.Accepted || p.Rule != "second" || p.Reason != "accepted by rule second (0.0.0.0/0 length 0) and rule third (0.0.0.0/0 length 0)" {
		t.Fatalf("0/0 alone: %+v", p)
	}
	if d := gocmp.Diff(want, table.Result().Paths, cmpAddrs); d != "" {
		t.Errorf("0/0 let in by the freed slots (-new table +updated):\n%s", d)
	}
}
