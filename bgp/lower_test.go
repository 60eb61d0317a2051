package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// lowerFixture builds an installed state by hand.
type lowerFixture struct{ st installed }

func newLowerFixture() *lowerFixture {
	return &lowerFixture{st: installed{
		rib: map[netip.Prefix]struct{}{}, groups: map[groupID]*group{}, member: map[model.Key]*record{},
		nbr: map[string]netip.Addr{}, resets: map[string]bool{}, refs: map[netip.Prefix]int{},
	}}
}

// has installs adv as Apply would have: its peer's neighbor set, its
// group, its path.
func (f *lowerFixture) has(a model.Advertisement, addr string) *lowerFixture {
	w, err := validate(lowerPeers, a)
	if err != nil {
		panic(err)
	}
	g := f.st.groups[w.gid]
	if g == nil {
		g = &group{name: groupName(w.gid), attrs: w.attrs.attrs(), norm: w.attrs, prefixes: map[netip.Prefix]struct{}{}}
		f.st.groups[w.gid] = g
	}
	g.prefixes[a.Prefix] = struct{}{}
	if _, had := f.st.member[a.Key()]; !had {
		f.st.refs[a.Prefix]++
	}
	f.st.member[a.Key()] = &record{key: a.Key(), gid: w.gid}
	f.st.rib[a.Prefix] = struct{}{}
	f.st.nbr[a.Peer] = netip.MustParseAddr(addr)
	return f
}

var lowerPeers = map[string]config.Peer{
	"tor":  {Name: "tor", Address: netip.MustParseAddr("192.0.2.1"), Families: []config.Family{config.IPv4, config.IPv6}},
	"tor2": {Name: "tor2", Address: netip.MustParseAddr("192.0.2.2"), Families: []config.Family{config.IPv4}},
}

// gk names a group as lowOp.String prints it.
func gk(peer, fam string, a model.PathAttrs) string {
	return peer + "/" + fam + "/" + normalize(a).key()
}

func lpfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func key(peer, prefix string) model.Key { return model.Key{Peer: peer, Prefix: lpfx(prefix)} }

// TestLower compares the exact operations lower returns for one change.
func TestLower(t *testing.T) {
	none := model.PathAttrs{}
	med := model.PathAttrs{MED: 5}
	p1, p2 := "10.0.0.0/24", "10.0.1.0/24"
	a1, a1med, a2 := adv("tor", p1, none), adv("tor", p1, med), adv("tor", p2, none)
	b1 := adv("tor2", p1, none)
	g0, gmed, g20 := gk("tor", "ipv4", none), gk("tor", "ipv4", med), gk("tor2", "ipv4", none)
	otherPeers := map[string]config.Peer{"tor2": lowerPeers["tor2"]}

	for _, tc := range []struct {
		name   string
		st     *lowerFixture
		ch     change
		ops    []string
		failed []model.Key
		forget []model.Key
		errs   int
	}{{
		name: "new prefix: neighbor set, statement, then path",
		st:   newLowerFixture(),
		ch:   change{want: []model.Advertisement{a1}},
		ops: []string{"add-neighbor tor 192.0.2.1", "create-group " + g0 + " [" + p1 + "]",
			"add-paths [" + p1 + "]"},
	}, {
		name: "second prefix of a group: set grows in place",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{want: []model.Advertisement{a2}},
		ops:  []string{"add-to-group " + g0 + " [" + p2 + "]", "add-paths [" + p2 + "]"},
	}, {
		name: "changed attributes move the prefix to another group; the path stays: soft reset",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{want: []model.Advertisement{a1med}},
		ops: []string{"create-group " + gmed + " [" + p1 + "] resync", "remove-from-group " + g0 + " [" + p1 + "] resync",
			"delete-group " + g0, "soft-reset tor 192.0.2.1"},
	}, {
		name: "withdraw the last of a group: path, set, statement, neighbor set; no reset",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{remove: []model.Key{a1.Key()}},
		ops: []string{"delete-paths [" + p1 + "]", "remove-from-group " + g0 + " [" + p1 + "]",
			"delete-group " + g0, "delete-neighbor tor 192.0.2.1"},
		forget: []model.Key{a1.Key()},
	}, {
		name: "withdraw from one peer of two: the path stays, that peer alone is reset",
		st:   newLowerFixture().has(a1, "192.0.2.1").has(b1, "192.0.2.2"),
		ch:   change{remove: []model.Key{b1.Key()}},
		ops: []string{"remove-from-group " + g20 + " [" + p1 + "] resync", "delete-group " + g20,
			"delete-neighbor tor2 192.0.2.2", "soft-reset tor2 192.0.2.2"},
		forget: []model.Key{b1.Key()},
	}, {
		name: "path in the RIB selected by a new peer: soft reset of that peer only",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{want: []model.Advertisement{b1}},
		ops: []string{"add-neighbor tor2 192.0.2.2", "create-group " + g20 + " [" + p1 + "] resync",
			"soft-reset tor2 192.0.2.2"},
	}, {
		name: "peer address change (was 192.0.2.9): new address in, old out, then the peer is reset",
		st:   newLowerFixture().has(a1, "192.0.2.9"),
		ch:   change{want: []model.Advertisement{a1}},
		ops: []string{"add-neighbor tor 192.0.2.1 resync", "remove-neighbor-addr tor 192.0.2.9 resync",
			"soft-reset tor 192.0.2.1"},
	}, {
		name:   "family not enabled: a failure, nothing sent",
		st:     newLowerFixture(),
		ch:     change{want: []model.Advertisement{adv("tor2", "fd00::/64", none)}},
		failed: []model.Key{key("tor2", "fd00::/64")},
		forget: []model.Key{key("tor2", "fd00::/64")},
	}, {
		name: "peer not configured any more: what it had is withdrawn, its owed reset forgotten",
		st:   newLowerFixture().has(a1, "192.0.2.1").has(b1, "192.0.2.2"),
		ch:   change{want: []model.Advertisement{a1}, peers: otherPeers},
		ops: []string{"remove-from-group " + g0 + " [" + p1 + "] resync", "delete-group " + g0,
			"delete-neighbor tor 192.0.2.1", "forget-reset tor"},
		failed: []model.Key{a1.Key()},
		forget: []model.Key{a1.Key()},
	}, {
		name: "a removed peer's address taken by a new peer: the new one is reset when the old statements shrink",
		st:   newLowerFixture().has(a1, "192.0.2.1").has(b1, "192.0.2.2"),
		ch: change{remove: []model.Key{a1.Key()}, peers: map[string]config.Peer{"tor2": lowerPeers["tor2"],
			"tor-new": {Name: "tor-new", Address: netip.MustParseAddr("192.0.2.1"), Families: []config.Family{config.IPv4}}}},
		ops: []string{"remove-from-group " + g0 + " [" + p1 + "] resync", "delete-group " + g0,
			"delete-neighbor tor 192.0.2.1", "forget-reset tor", "soft-reset tor-new 192.0.2.1"},
		forget: []model.Key{a1.Key()},
	}, {
		name: "duplicate key with conflicting attributes: the first is applied",
		st:   newLowerFixture(),
		ch:   change{want: []model.Advertisement{a1, a1med}},
		ops: []string{"add-neighbor tor 192.0.2.1", "create-group " + g0 + " [" + p1 + "]",
			"add-paths [" + p1 + "]"},
		errs: 1,
	}, {
		name: "announce and withdraw at once: the new path is added before the old one is withdrawn",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{want: []model.Advertisement{a2}, remove: []model.Key{a1.Key()}},
		ops: []string{"add-to-group " + g0 + " [" + p2 + "]", "add-paths [" + p2 + "]", "delete-paths [" + p1 + "]",
			"remove-from-group " + g0 + " [" + p1 + "]"},
		forget: []model.Key{a1.Key()},
	}, {
		name: "same group, nothing to do in gobgp",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{want: []model.Advertisement{a1}},
	}, {
		name: "a reset owed by the last Apply is made",
		st:   func() *lowerFixture { f := newLowerFixture().has(a1, "192.0.2.1"); f.st.resets["tor"] = true; return f }(),
		ch:   change{},
		ops:  []string{"soft-reset tor 192.0.2.1"},
	}, {
		name: "a reset that failed in this pass waits for the next Apply",
		st:   func() *lowerFixture { f := newLowerFixture().has(a1, "192.0.2.1"); f.st.resets["tor"] = true; return f }(),
		ch:   change{skipResets: map[string]bool{"tor": true}},
	}, {
		name: "a grow that failed: that key keeps what it had, the others go on",
		st:   newLowerFixture(),
		ch:   change{want: []model.Advertisement{a1, a2}, skipKeys: map[model.Key]bool{a1.Key(): true}},
		ops: []string{"add-neighbor tor 192.0.2.1", "create-group " + g0 + " [" + p2 + "]",
			"add-paths [" + p2 + "]"},
	}, {
		name: "a withdrawal that failed: the path stays in the RIB, so the shrink resets the peer",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{remove: []model.Key{a1.Key()}, skipPaths: map[netip.Prefix]bool{lpfx(p1): true}},
		ops: []string{"remove-from-group " + g0 + " [" + p1 + "] resync", "delete-group " + g0,
			"delete-neighbor tor 192.0.2.1", "soft-reset tor 192.0.2.1"},
		forget: []model.Key{a1.Key()},
	}, {
		name: "a removal from a set that failed: the group and its neighbor set stay",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch: change{remove: []model.Key{a1.Key()}, skipPaths: map[netip.Prefix]bool{lpfx(p1): true},
			skipGroups: map[groupID]bool{{peer: "tor", family: config.IPv4, attrs: normalize(none).key()}: true}},
		forget: []model.Key{a1.Key()},
	}, {
		name: "an IPv6 prefix goes in its own family's group",
		st:   newLowerFixture().has(a1, "192.0.2.1"),
		ch:   change{want: []model.Advertisement{adv("tor", "fd00::/64", none)}},
		ops:  []string{"create-group " + gk("tor", "ipv6", none) + " [fd00::/64]", "add-paths [fd00::/64]"},
	}} {
		// Each case twice: looking at everything, and (exact) at what the
		// change names only; the fixtures keep exact's invariants.
		for _, exact := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/exact=%v", tc.name, exact), func(t *testing.T) {
				if tc.ch.peers == nil {
					tc.ch.peers = lowerPeers
				}
				st := tc.st.st
				st.exact = exact
				l := lower(st, tc.ch)
				got := make([]string, 0, len(l.ops))
				for _, op := range l.ops {
					got = append(got, op.String())
				}
				if d := cmp.Diff(tc.ops, got, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); d != "" {
					t.Errorf("ops (-want +got):\n%s", d)
				}
				failed := make([]model.Key, 0, len(l.failed))
				for k := range l.failed {
					failed = append(failed, k)
				}
				slices.SortFunc(failed, compareKey)
				if fmt.Sprint(failed) != fmt.Sprint(tc.failed) {
					t.Errorf("failed = %v, want %v", failed, tc.failed)
				}
				if fmt.Sprint(l.forget) != fmt.Sprint(tc.forget) {
					t.Errorf("forget = %v, want %v", l.forget, tc.forget)
				}
				if len(l.errs) != tc.errs {
					t.Errorf("errs = %v, want %d", l.errs, tc.errs)
				}
			})
		}
	}
}

// TestLowerChangesNothing: lower only reads the state it is given.
func TestLowerChangesNothing(t *testing.T) {
	f := newLowerFixture().has(adv("tor", "10.0.0.0/24", model.PathAttrs{}), "192.0.2.9")
	// The records by value: their pointers would not show a change.
	state := func() string {
		members := map[model.Key]record{}
		for k, r := range f.st.member {
			members[k] = *r
		}
		return fmt.Sprint(f.st.rib, members, f.st.nbr, f.st.resets, len(f.st.groups))
	}
	before := state()
	lower(f.st, change{want: []model.Advertisement{adv("tor", "10.0.1.0/24", model.PathAttrs{MED: 1})},
		remove: []model.Key{key("tor", "10.0.0.0/24")}, peers: lowerPeers})
	if after := state(); after != before {
		t.Errorf("state changed:\n%s\n%s", before, after)
	}
}

// TestLowerBulkAllocations (issue 18, the bulk of 10,000 VIPs): lowering a
// bulk of new advertisements of one rule (the same attributes) allocates
// per group and per map, not per advertisement: their attributes are
// normalized once, each group's lists are made at their size, and no map
// holds an advertisement by value. It allocated 12 times per
// advertisement before (7 without a community). Counted at two sizes, so that
// a cost per advertisement shows as the difference; no timing.
func TestLowerBulkAllocations(t *testing.T) {
	allocs := func(n int) float64 {
		f := newLowerFixture()
		f.st.exact = true
		want := make([]model.Advertisement, n)
		for i := range want {
			want[i] = model.Advertisement{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32),
				Attrs: model.PathAttrs{Communities: []model.Community{65000<<16 | 1}}}
		}
		ch := change{want: want, peers: lowerPeers}
		if l := lower(f.st, ch); len(l.ops) != 3 || len(l.ops[1].prefixes) != n {
			t.Fatalf("lowering %d: %v", n, l.ops)
		}
		return testing.AllocsPerRun(5, func() { lower(f.st, ch) })
	}
	small, big := allocs(1000), allocs(2000)
	if per := (big - small) / 1000; per > 0.1 {
		t.Errorf("lowering 1,000 more advertisements allocates %.0f more times (%.0f at 1,000, %.0f at 2,000): %.2f an advertisement, want none",
			big-small, small, big, per)
	}
}

// BenchmarkLower10000 measures lower for one changed advertisement (new
// attributes) among 10,000 installed to one peer, looking at everything
// and (exact) at the change only. No timing is asserted.
func BenchmarkLower10000(b *testing.B) {
	f := newLowerFixture()
	for i := range 10000 {
		f.has(model.Advertisement{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}, "192.0.2.1")
	}
	ch := change{want: []model.Advertisement{{Peer: "tor", Prefix: lpfx("10.0.7.0/24"), Attrs: model.PathAttrs{MED: 1}}}, peers: lowerPeers}
	// whole: after a failure, every path and group looked at; exact:
	// the steady state, the change's keys only.
	for _, exact := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole", true: "exact"}[exact], func(b *testing.B) {
			st := f.st
			st.exact = exact
			b.ReportAllocs()
			for b.Loop() {
				if l := lower(st, ch); len(l.ops) != 3 {
					b.Fatalf("%d ops: %v", len(l.ops), l.ops)
				}
			}
		})
	}
}
