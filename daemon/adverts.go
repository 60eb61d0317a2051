package daemon

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// advResync is how often a pass diffs every advertisement against the
// speaker, whatever NB said changed: a missed change costs at most this
// long.
const advResync = 10 * time.Minute

// nbRead is what the loop read of NB for a pass it applies: the
// snapshot's generation and what changed since the one before (the NB
// client's SnapshotDelta).
type nbRead struct {
	delta model.SnapshotDelta
	gen   uint64
}

// advSide is the advertisement state the planner keeps between passes
// (only the loop touches it): what the rules select (plan.AdvertState),
// updated per changed egress IP and VIP, and every desired advertisement,
// by key.
type advSide struct {
	state *plan.AdvertState
	cfg   *config.Config
	sp    Speaker
	// gen is the NB generation state is at (0: none).
	gen uint64
	// due makes the next pass whole: the last apply failed, or a pass
	// computed was dropped unapplied (its diff is in no other pass).
	due bool
	// at is when the last whole pass was; drain what the drain did then
	// (drainSig): while it stands, a pass applies the drain to the keys
	// NB changed only, and drainHeld are the advertisements it withdraws
	// (held, State AdvDrained), by key, drainN how many per peer. A pass
	// hands out a clone of drainHeld (heldView): it changes the tree in
	// place.
	at        time.Time
	drain     string
	drainHeld *advertTree
	drainN    map[string]int
	// all are the desired advertisements (drain applied); a pass that
	// changes it changes a clone (readers keep theirs).
	all *advertTree
}

// advPart is the advertisement side of one pass: the lists its diff
// compares (every advertisement, or those of the keys NB changed), and
// every advertisement to make and held back.
type advPart struct {
	desired, advertised []model.Advertisement
	all                 *advertTree
	held                heldView
}

// heldView is what a pass holds back: by the export caps (the state's
// HeldBack) and by a drain (a clone of advSide's drainHeld, and how many
// per peer). Taking one costs O(peers), never O(held); nobody changes it
// after, so that views read it off the loop and list it when asked.
type heldView struct {
	caps   plan.HeldBack
	drain  *advertTree // nil: none
	drainN map[string]int
}

// list is what is held back for peer ("": every peer), sorted by peer,
// then prefix.
func (h heldView) list(peer string) []model.Advertisement {
	out := h.caps.List(peer)
	if h.drain == nil || h.drain.Len() == 0 {
		return out
	}
	each := func(a *model.Advertisement) bool {
		if peer != "" && a.Peer != peer {
			return false
		}
		out = append(out, *a)
		return true
	}
	if peer == "" {
		h.drain.Ascend(each)
	} else {
		h.drain.AscendGreaterOrEqual(&model.Advertisement{Peer: peer}, each)
	}
	plan.SortAdvertisements(out)
	return out
}

// drainedOf is the drain's tree of what it withdrew among held, by key,
// and how many per peer.
func drainedOf(held []model.Advertisement) (*advertTree, map[string]int) {
	t, n := btree.NewG(32, advLess), map[string]int{}
	for i := range held {
		if held[i].State == model.AdvDrained {
			t.ReplaceOrInsert(&held[i])
			n[held[i].Peer]++
		}
	}
	return t, n
}

// advertTree is a tree of advertisements by key. It holds pointers, never
// changed once in it: while no drain is in effect they are the advertisement
// state's own (plan.AdvertState.SentRef), so that each advertisement is
// one copy in the planner, not one there and one here (issue 18, item 5).
type advertTree = btree.BTreeG[*model.Advertisement]

func advLess(a, b *model.Advertisement) bool {
	return compareKey(model.Key{Peer: a.Peer, Prefix: a.Prefix}, model.Key{Peer: b.Peer, Prefix: b.Prefix}) < 0
}

func compareKey(a, b model.Key) int {
	if a.Peer != b.Peer {
		if a.Peer < b.Peer {
			return -1
		}
		return 1
	}
	return model.ComparePrefix(a.Prefix, b.Prefix)
}

// advTree is a tree of copies of advs (in one array).
func advTree(advs []model.Advertisement) *advertTree {
	advs = slices.Clone(advs)
	t := btree.NewG(32, advLess)
	for i := range advs {
		t.ReplaceOrInsert(&advs[i])
	}
	return t
}

// advRefTree is a tree of advs, which nobody changes.
func advRefTree(advs []*model.Advertisement) *advertTree {
	t := btree.NewG(32, advLess)
	for _, a := range advs {
		t.ReplaceOrInsert(a)
	}
	return t
}

// advGet is t's advertisement of k.
func advGet(t *advertTree, k model.Key) (model.Advertisement, bool) {
	a, ok := t.Get(&model.Advertisement{Peer: k.Peer, Prefix: k.Prefix})
	if !ok {
		return model.Advertisement{}, false
	}
	return *a, true
}

// advList is t's advertisements in key order (nil t: none).
func advList(t *advertTree) []model.Advertisement {
	if t == nil {
		return nil
	}
	out := make([]model.Advertisement, 0, t.Len())
	t.Ascend(func(a *model.Advertisement) bool {
		out = append(out, *a)
		return true
	})
	return out
}

// adverts is the advertisement side of a pass. For a view (nr nil: a
// preview, explain) it is computed whole and nothing is kept. For a pass
// the loop applies, only the keys NB changed are diffed (at a cost of
// what changed), unless the pass must be whole (advWhy).
func (pl *planner) adverts(cfg *config.Config, sp Speaker, snap model.Snapshot, nr *nbRead) advPart {
	now := time.Now()
	if nr == nil {
		var w withheldIPv4 // a view keeps nothing
		cfg = w.advConfig(cfg, previewSync(pl.running(), cfg, sp.Sync()), pl.unresolvedOf(cfg))
	} else {
		cfg = pl.withheld.advConfig(cfg, sp.Sync(), pl.unresolvedOf(cfg))
	}
	drained := pl.drain()
	drain := plan.NewDrain(cfg, drained, now)
	sig := drainSig(cfg, drained, now)
	whole := func() (*plan.AdvertState, advPart) {
		st := plan.NewAdvertState(cfg, snap, now)
		refs := st.SentRefs()
		// What the caps hold back stays as it is (DrainPolicy.Apply):
		// the drain is applied to what is sent.
		sent, held := drain.Apply(derefs(refs), nil)
		// The tree shares the state's advertisements unless a drain
		// changed them.
		all := advRefTree(refs)
		if sig != "" {
			all = advTree(sent)
		}
		t, n := drainedOf(held)
		return st, advPart{desired: sent, advertised: sp.Advertised(), all: all, held: heldView{caps: st.HeldBack(), drain: t, drainN: n}}
	}
	if nr == nil {
		_, part := whole()
		return part
	}
	a := &pl.adv
	if why := pl.advWhy(cfg, sp, nr, sig, now); why != "" {
		pl.log.Debug("advertise: whole pass", zap.String("why", why))
		st, part := whole()
		*a = advSide{state: st, cfg: cfg, sp: sp, gen: nr.gen, at: now, drain: sig, drainHeld: part.held.drain.Clone(),
			drainN: maps.Clone(part.held.drainN), all: part.all}
		return part
	}
	keys := a.state.Update(snap, nr.delta, now)
	part := advPart{all: a.all}
	a.gen = nr.gen
	if len(keys) > 0 {
		all := a.all.Clone()
		part.desired = make([]model.Advertisement, 0, len(keys))
		for _, k := range keys {
			key := &model.Advertisement{Peer: k.Peer, Prefix: k.Prefix}
			if _, ok := a.drainHeld.Delete(key); ok {
				a.drainN[k.Peer]--
			}
			adv := a.state.SentRef(k)
			switch {
			case adv == nil:
				all.Delete(key)
			case a.drain == "":
				// What is sent is the state's own advertisement,
				// shared.
				part.desired = append(part.desired, *adv)
				all.ReplaceOrInsert(adv)
			default:
				// The drain of a key's peer is the same for every key
				// while sig stands: applied to this one alone.
				s, h := drain.Apply([]model.Advertisement{*adv}, nil)
				if len(s) == 1 {
					part.desired = append(part.desired, s[0])
					all.ReplaceOrInsert(&s[0])
				} else {
					all.Delete(key)
					a.drainHeld.ReplaceOrInsert(&h[0])
					a.drainN[k.Peer]++
				}
			}
		}
		part.advertised = sp.AdvertisedOf(keys)
		part.all, a.all = all, all
	}
	// What is held back, for the views: O(peers) to take.
	part.held = heldView{caps: a.state.HeldBack(), drain: a.drainHeld.Clone(), drainN: maps.Clone(a.drainN)}
	return part
}

// drainSig is what the drain does at now, per configured peer it drains:
// its phase and the instants its texts name ("": no drain). A pass whose
// drainSig differs from the last whole pass's is whole: every advertisement
// of a peer changes with it (its drain began, changed phase or ended).
func drainSig(cfg *config.Config, st model.Drain, now time.Time) string {
	if st.Empty() {
		return ""
	}
	var b strings.Builder
	for _, p := range cfg.BGP.Peers {
		if dp, ok := st.For(p.Name); ok {
			fmt.Fprintf(&b, "%s %s %d %d;", p.Name, st.Phase(p.Name, now), dp.Since.UnixNano(), dp.WithdrawAt.UnixNano())
		}
	}
	return b.String()
}

// derefs copies the advertisements refs point to.
func derefs(refs []*model.Advertisement) []model.Advertisement {
	out := make([]model.Advertisement, len(refs))
	for i, a := range refs {
		out[i] = *a
	}
	return out
}

// unresolvedOf are cfg's unnumbered peers the speaker does not run yet.
func (pl *planner) unresolvedOf(cfg *config.Config) map[string]bool {
	if pl.unresolved == nil {
		return nil
	}
	return pl.unresolved(cfg)
}

// advWhy says why this pass must diff every advertisement, or "".
func (pl *planner) advWhy(cfg *config.Config, sp Speaker, nr *nbRead, drainSig string, now time.Time) string {
	a := &pl.adv
	switch {
	case a.state == nil || a.cfg != cfg || a.sp != sp:
		return "no advertisement state of this config and speaker yet"
	case a.due:
		return "the last apply failed, or a pass was dropped unapplied"
	case drainSig != a.drain:
		return "a drain began, changed phase or ended"
	case nr.delta.All || nr.gen == 0 || a.gen == 0:
		return "NB may have changed anywhere"
	case now.Sub(a.at) >= advResync:
		return "periodic resync"
	}
	return ""
}

// handoverWake is when the next handover hold of a workload address ends
// (zero: none): the loop plans again then, and the pass withdraws it.
func (pl *planner) handoverWake() time.Time {
	if pl.adv.state == nil {
		return time.Time{}
	}
	return pl.adv.state.NextHandoverEnd()
}

// advDue makes the next pass diff every advertisement.
func (pl *planner) advDue() { pl.adv.due = true }
