package bgp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// applyLowering runs l on st as the executor does when every operation
// succeeds, for the model of TestLowerExactEqualsWhole.
func applyLowering(st *installed, l lowering) {
	for _, k := range l.forget {
		if _, had := st.member[k]; had {
			delete(st.member, k)
			if st.refs[k.Prefix]--; st.refs[k.Prefix] == 0 {
				delete(st.refs, k.Prefix)
			}
		}
	}
	for _, op := range l.ops {
		switch op.kind {
		case opAddNeighbor:
			st.nbr[op.peer] = op.addr
			if op.resync {
				st.resets[op.peer] = true
			}
		case opRemoveNeighborAddr:
			st.resets[op.peer] = true
		case opCreateGroup, opAddToGroup:
			g := st.groups[op.gid]
			if g == nil {
				g = &group{name: groupName(op.gid), attrs: op.norm.attrs(), norm: op.norm, prefixes: map[netip.Prefix]struct{}{}}
				st.groups[op.gid] = g
			}
			for _, a := range op.advs {
				g.prefixes[a.Prefix] = struct{}{}
				if _, had := st.member[a.Key()]; !had {
					st.refs[a.Prefix]++
				}
				st.member[a.Key()] = &record{key: a.Key(), gid: op.gid}
			}
		case opAddPaths:
			for _, p := range op.prefixes {
				st.rib[p] = struct{}{}
			}
		case opDeletePaths:
			for _, p := range op.prefixes {
				delete(st.rib, p)
			}
		case opRemoveFromGroup:
			for _, p := range op.prefixes {
				delete(st.groups[op.gid].prefixes, p)
			}
			if op.resync {
				st.resets[op.peer] = true
			}
		case opDeleteGroup:
			delete(st.groups, op.gid)
		case opDeleteNeighbor:
			delete(st.nbr, op.peer)
		case opSoftReset, opForgetReset:
			delete(st.resets, op.peer)
		}
	}
}

// exactHolds says why st breaks exact's invariants, or "".
func exactHolds(st installed) string {
	refs := map[netip.Prefix]int{}
	for k, r := range st.member {
		gid := r.gid
		refs[k.Prefix]++
		g := st.groups[gid]
		if g == nil {
			return fmt.Sprintf("%v is a member of %v, which does not exist", k, gid)
		}
		if _, in := g.prefixes[k.Prefix]; !in {
			return fmt.Sprintf("%v is a member of %v, whose set lacks it", k, gid)
		}
	}
	if fmt.Sprint(refs) != fmt.Sprint(st.refs) {
		return fmt.Sprintf("refs %v, members count %v", st.refs, refs)
	}
	for p := range st.rib {
		if refs[p] == 0 {
			return fmt.Sprintf("%v is in the RIB with no member", p)
		}
	}
	for p := range refs {
		if _, in := st.rib[p]; !in {
			return fmt.Sprintf("%v has members and no path", p)
		}
	}
	for gid, g := range st.groups {
		for p := range g.prefixes {
			if cur, ok := st.groupOf(model.Key{Peer: gid.peer, Prefix: p}); !ok || cur != gid {
				return fmt.Sprintf("%v's set holds %v, not its member", gid, p)
			}
		}
	}
	return ""
}

func lowerText(l lowering) string {
	var ops []string
	for _, op := range l.ops {
		ops = append(ops, op.String())
	}
	var failed []string
	for k, f := range l.failed {
		failed = append(failed, fmt.Sprint(k, f.err))
	}
	slices.Sort(failed)
	return fmt.Sprintf("ops %q\nupdate %v\nforget %v\nfailed %q\nerrs %v", ops, l.update, l.forget, failed, l.errs)
}

// TestLowerExactEqualsWhole: from a state that keeps exact's invariants,
// lowering a change by the keys it names (exact) gives the very operations
// a lowering that looks at every path and group gives, over random
// changes: announcements with three attribute sets to two peers in two
// families, withdrawals, a family the peer lacks, a peer moving address,
// leaving and coming back. Each lowering applied keeps the invariants.
func TestLowerExactEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 2))
	st := newLowerFixture().st
	var prefixes []netip.Prefix
	for i := range 12 {
		prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24))
	}
	prefixes = append(prefixes, lpfx("fd00::/64"), lpfx("fd00:1::/64"))
	attrs := []model.PathAttrs{{}, {MED: 5}, {Communities: []model.Community{65000<<16 | 1}}}
	peerSets := []map[string]config.Peer{
		lowerPeers,
		{"tor": lowerPeers["tor"]},
		{"tor": {Name: "tor", Address: netip.MustParseAddr("192.0.2.9"), Families: []config.Family{config.IPv4, config.IPv6}},
			"tor2": lowerPeers["tor2"]},
	}
	peers := lowerPeers
	for step := range 2000 {
		if rng.IntN(20) == 0 {
			peers = peerSets[rng.IntN(len(peerSets))]
		}
		var ch change
		ch.peers = peers
		for range 1 + rng.IntN(4) {
			peer := []string{"tor", "tor2"}[rng.IntN(2)]
			p := prefixes[rng.IntN(len(prefixes))]
			if rng.IntN(3) == 0 {
				ch.remove = append(ch.remove, model.Key{Peer: peer, Prefix: p})
			} else {
				ch.want = append(ch.want, model.Advertisement{Peer: peer, Prefix: p, Attrs: attrs[rng.IntN(len(attrs))]})
			}
		}
		st.exact = false
		whole := lower(st, ch)
		st.exact = true
		exact := lower(st, ch)
		if w, e := lowerText(whole), lowerText(exact); w != e {
			t.Fatalf("step %d, change %+v:\nwhole:\n%s\nexact:\n%s", step, ch, w, e)
		}
		applyLowering(&st, exact)
		if why := exactHolds(st); why != "" {
			t.Fatalf("step %d: after the lowering: %s", step, why)
		}
	}
}

// TestInEffectOfIsSortedInEffect: key by key, inEffectOf finds what
// sortedInEffect lists, left-overs of failed removals and unsynced keys
// included.
func TestInEffectOfIsSortedInEffect(t *testing.T) {
	a := newAdvState()
	g0 := groupID{peer: "tor", family: config.IPv4, attrs: normalize(model.PathAttrs{}).key()}
	g1 := groupID{peer: "tor", family: config.IPv4, attrs: normalize(model.PathAttrs{MED: 5}).key()}
	p1, p2, p3, p4 := lpfx("10.0.1.0/24"), lpfx("10.0.2.0/24"), lpfx("10.0.3.0/24"), lpfx("10.0.4.0/24")
	a.groups[g0] = &group{name: groupName(g0), prefixes: map[netip.Prefix]struct{}{p1: {}, p2: {}, p3: {}}}
	a.groups[g1] = &group{name: groupName(g1), attrs: model.PathAttrs{MED: 5}, prefixes: map[netip.Prefix]struct{}{p1: {}, p4: {}}}
	for _, p := range []netip.Prefix{p1, p2, p3, p4} {
		a.rib[p] = struct{}{}
	}
	for _, p := range []netip.Prefix{p1, p3} {
		k := model.Key{Peer: "tor", Prefix: p}
		a.keep(k, g0, model.Advertisement{Peer: "tor", Prefix: p, Rule: "r"})
	}
	a.unsynced[model.Key{Peer: "tor", Prefix: p3}] = true
	var want []string
	for _, adv := range a.sortedInEffect() {
		want = append(want, fmt.Sprint(adv.advertisement()))
	}
	var got []string
	var gids []groupID
	for _, p := range []netip.Prefix{p1, p2, p3, p4} {
		if adv, ok := a.inEffectOf(model.Key{Peer: "tor", Prefix: p}, &gids); ok {
			got = append(got, fmt.Sprint(adv.advertisement()))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("inEffectOf:\n%q\nsortedInEffect:\n%q", got, want)
	}
	if len(want) != 3 {
		t.Errorf("sortedInEffect lists %d, want 3 (p1 as a member, p2 and p4 left over; p3 unsynced)", len(want))
	}
}
