package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// groupID identifies one export statement: the prefixes sent to one peer,
// in one family, with one attribute set.
type groupID struct {
	peer   string
	family config.Family
	attrs  string // normAttrs.key()
}

// group is an export statement and its prefix defined-set (same name) as
// installed in gobgp.
type group struct {
	name     string
	attrs    model.PathAttrs
	norm     normAttrs
	prefixes map[netip.Prefix]struct{}
}

// advState is what Apply has installed in gobgp.
type advState struct {
	// rib holds the prefixes with a local path in the global RIB.
	rib map[netip.Prefix]struct{}
	// groups mirror the export statements and their prefix sets.
	groups map[groupID]*group
	// member is each wanted advertisement's record: the group it was
	// put in, and the advertisement as given (Rule, Network and Source
	// included), the attributes and explanation shared by every
	// advertisement that has the same (whys). (Pointers: Advertised sorts
	// them on every pass.)
	member map[model.Key]*record
	// whys are the attribute sets and explanations the records share,
	// by whyKey, each counting its records (released at zero).
	whys map[whyKey][]*why
	// refs counts member's keys by prefix (keep, forget).
	// exact says that rib holds exactly the prefixes with a member and
	// each group's prefixes are those of its members, so that lower looks
	// only at what a change names (installed.exact). A failed path or
	// group operation clears it; a whole lowering applied without one
	// sets it again.
	refs  map[netip.Prefix]int
	exact bool
	// broken counts the failed path and group operations (exact).
	broken int
	// nbr is the address in each peer's neighbor set.
	nbr map[string]netip.Addr
	// unsynced are advertisements whose peer has not re-evaluated its
	// export policy since they changed (a failed soft reset); resets
	// lists those peers, retried on the next Apply.
	unsynced map[model.Key]bool
	resets   map[string]bool
	// failed are the advertisements of the last Apply that could not be
	// applied as asked, with why: a new one is not sent, a changed one
	// keeps its last good attributes.
	failed map[model.Key]failure
	// ops are the recent calls that changed the RIB or re-ran an export
	// policy (sessionup.go).
	ops []exportOp
	// inEffect is what Advertised lists, sorted, without the send state,
	// kept while nothing above changes: every pass asks for it, and
	// building it (a map of every key, a sort) was a tenth of a pass.
	// Whatever changes rib, groups, member or unsynced calls
	// changed(); nil when it must be built again.
	inEffect []*record
}

// record is an advertisement as advState keeps it (issue 18, item 5): at
// 10,000 VIPs a whole model.Advertisement per key was 256 bytes next to
// gobgp's path, in a map of its own beside the map of groups, and what it
// says besides the key, source and members is the same for every VIP of a
// rule and network.
type record struct {
	key     model.Key
	gid     groupID
	why     *why
	source  string
	members []netip.Prefix
}

// why is what records share: the attributes as given (not normalized:
// Advertised lists them as asked) and the explanation but the source.
type why struct {
	attrs model.PathAttrs
	// key is its whyKey in advState.whys, the explanation with it.
	key whyKey
	// refs counts the records holding it in advState.member (0 for a
	// left-over's, which is in no table).
	refs int
}

// whyKey finds the whys that may equal an advertisement's: those with
// the same explanation and normalized attributes (the list holds each
// way of giving them: communities in another order, nil or empty).
type whyKey struct {
	rule, network, drain, attrs string
}

// advertisement is r as Advertised lists it, without the send state.
func (r *record) advertisement() model.Advertisement {
	return model.Advertisement{Peer: r.key.Peer, Prefix: r.key.Prefix, Attrs: r.why.attrs, Rule: r.why.key.rule,
		Network: r.why.key.network, Source: r.source, Members: r.members, Drain: r.why.key.drain}
}

// leftOver is the record of a prefix that gobgp still sends to peer in
// group g, left over from a failed removal (no record of it is kept).
func leftOver(peer string, p netip.Prefix, g *group) *record {
	return &record{key: model.Key{Peer: peer, Prefix: p}, why: &why{attrs: g.attrs}}
}

// sameAsGiven says whether a and b are the same attributes given the same
// way: the same lists in the same order, nil or not alike, the same
// optional values set.
func sameAsGiven(a, b model.PathAttrs) bool {
	nilSame := func(x, y bool) bool { return x == y }
	return a.MED == b.MED && a.ASPathPrepend == b.ASPathPrepend &&
		nilSame(a.Communities == nil, b.Communities == nil) && slices.Equal(a.Communities, b.Communities) &&
		nilSame(a.LargeCommunities == nil, b.LargeCommunities == nil) && slices.Equal(a.LargeCommunities, b.LargeCommunities) &&
		nilSame(a.LocalPreference == nil, b.LocalPreference == nil) && (a.LocalPreference == nil || *a.LocalPreference == *b.LocalPreference) &&
		nilSame(a.LinkBandwidth == nil, b.LinkBandwidth == nil) && (a.LinkBandwidth == nil || *a.LinkBandwidth == *b.LinkBandwidth)
}

// keep records adv as what k was asked for, put in group gid (whose key
// says adv's normalized attributes), sharing its why with the records
// that have the same; forget takes k out. Both keep refs.
func (a *advState) keep(k model.Key, gid groupID, adv model.Advertisement) {
	wk := whyKey{rule: adv.Rule, network: adv.Network, drain: adv.Drain, attrs: gid.attrs}
	var w *why
	for _, x := range a.whys[wk] {
		if sameAsGiven(x.attrs, adv.Attrs) {
			w = x
			break
		}
	}
	if w == nil {
		w = &why{attrs: adv.Attrs, key: wk}
		a.whys[wk] = append(a.whys[wk], w)
	}
	w.refs++
	if r := a.member[k]; r != nil {
		a.release(r.why)
		r.gid, r.why, r.source, r.members = gid, w, adv.Source, adv.Members
		return
	}
	a.refs[k.Prefix]++
	a.member[k] = &record{key: k, gid: gid, why: w, source: adv.Source, members: adv.Members}
}

func (a *advState) forget(k model.Key) {
	r := a.member[k]
	if r == nil {
		return
	}
	a.release(r.why)
	delete(a.member, k)
	if a.refs[k.Prefix]--; a.refs[k.Prefix] <= 0 {
		delete(a.refs, k.Prefix)
	}
}

// release drops a record's hold on w; the last one takes it out of
// whys.
func (a *advState) release(w *why) {
	if w.refs--; w.refs > 0 {
		return
	}
	wk := w.key
	list := slices.DeleteFunc(a.whys[wk], func(x *why) bool { return x == w })
	if len(list) == 0 {
		delete(a.whys, wk)
	} else {
		a.whys[wk] = list
	}
}

// changed drops what Advertised keeps; the caller holds mu and is changing
// the state.
func (a *advState) changed() { a.inEffect = nil }

// broke records a failed path or group operation: the RIB or a group may
// now differ from the members, and the next lowering looks at everything.
func (a *advState) broke() {
	a.exact = false
	a.broken++
}

// failure is an advertisement that could not be applied.
type failure struct {
	adv model.Advertisement
	err string
}

func newAdvState() advState {
	return advState{
		rib:      map[netip.Prefix]struct{}{},
		groups:   map[groupID]*group{},
		member:   map[model.Key]*record{},
		refs:     map[netip.Prefix]int{},
		exact:    true,
		whys:     map[whyKey][]*why{},
		nbr:      map[string]netip.Addr{},
		unsynced: map[model.Key]bool{},
		resets:   map[string]bool{},
		failed:   map[model.Key]failure{},
	}
}

// Apply makes exactly the changes of d, a diff plan computed against
// Advertised: Announce and Change select each prefix for its peer with its
// attributes, Withdraw deselects it. Advertisements d does not name are not
// touched. Only the peers concerned see an UPDATE. It keeps going on
// per-item errors (unknown peer, family not enabled on the peer, bad
// community, a gobgp refusal) and returns them joined; Advertised then tells
// what is in effect and NotApplied what failed, so the next diff retries it.
func (s *Speaker) Apply(ctx context.Context, d model.AdvertDiff) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("apply advertisements: speaker is stopped")
	}
	remove := make([]model.Key, 0, len(d.Withdraw))
	for _, a := range d.Withdraw {
		remove = append(remove, a.Key())
	}
	want := d.Announce // lower reads it, never changes it: not copied when alone
	if len(d.Change) > 0 {
		want = slices.Concat(d.Announce, d.Change)
	}
	return s.reconcile(ctx, want, remove)
}

// Advertised returns the advertisements in effect, sorted by peer and
// prefix: those whose prefix is in the RIB, whose peer's export policy
// selects it with the given attributes, and whose peer has re-evaluated its
// export policy since. Each says whether it is really on the wire (State
// and Reason: "sent" only while the session is Established with the
// prefix's family negotiated), and Problem says when the last Apply asked
// for attributes that could not be applied (these are the last good ones).
func (s *Speaker) Advertised() []model.Advertisement {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.adv
	if a.inEffect == nil {
		a.inEffect = a.sortedInEffect()
	}
	all := a.inEffect
	out := make([]model.Advertisement, 0, len(all))
	// The state is per peer and family: asked once each, not per prefix.
	type peerFamily struct {
		peer string
		v6   bool
	}
	type sendStatus struct {
		state  model.AdvState
		reason string
	}
	states := map[peerFamily]sendStatus{}
	for _, r := range all {
		adv := r.advertisement()
		k := r.key
		pf := peerFamily{k.Peer, k.Prefix.Addr().Is6()}
		st, ok := states[pf]
		if !ok {
			st.state, st.reason = s.sendState(k)
			states[pf] = st
		}
		adv.State, adv.Reason = st.state, st.reason
		if f, ok := a.failed[k]; ok {
			adv.Problem = "the last change was not applied (" + f.err + "); these are the last good attributes"
		}
		out = append(out, adv)
	}
	return out
}

// AdvertisedOf returns what Advertised lists of the given keys, in the
// order given (a key not in effect is left out), at a cost of the keys,
// not of the table: the daemon reads the keys a change touched.
func (s *Speaker) AdvertisedOf(keys []model.Key) []model.Advertisement {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.adv
	out := make([]model.Advertisement, 0, len(keys))
	var gids []groupID // sorted once, for left-overs
	for _, k := range keys {
		r, ok := a.inEffectOf(k, &gids)
		if !ok {
			continue
		}
		adv := r.advertisement()
		adv.State, adv.Reason = s.sendState(k)
		if f, ok := a.failed[k]; ok {
			adv.Problem = "the last change was not applied (" + f.err + "); these are the last good attributes"
		}
		out = append(out, adv)
	}
	return out
}

// inEffectOf is k's entry of sortedInEffect, if any; gids caches the
// groups in name order. The caller holds mu.
func (a *advState) inEffectOf(k model.Key, gids *[]groupID) (*record, bool) {
	if _, in := a.rib[k.Prefix]; !in || a.unsynced[k] {
		return nil, false
	}
	if r := a.member[k]; r != nil {
		if g := a.groups[r.gid]; g != nil {
			if _, in := g.prefixes[k.Prefix]; in {
				return r, true
			}
		}
	}
	if *gids == nil {
		*gids = sortedGroups(a.groups)
	}
	for _, gid := range *gids {
		if gid.peer != k.Peer {
			continue
		}
		if g := a.groups[gid]; g != nil {
			if _, in := g.prefixes[k.Prefix]; in {
				// Left over from a failed removal: gobgp still sends it.
				return leftOver(gid.peer, k.Prefix, g), true
			}
		}
	}
	return nil, false
}

// sortedInEffect lists the advertisements in effect, sorted by peer and
// prefix (Advertised adds the send state); the caller holds mu.
func (a *advState) sortedInEffect() []*record {
	// Built again after each change, over every advertisement: the map
	// holds positions in all (an advertisement is too big a map value to
	// be stored in place), and positions are sorted, not advertisements.
	pos := make(map[model.Key]int, len(a.member))
	all := make([]*record, 0, len(a.member))
	for gid, g := range a.groups {
		for p := range g.prefixes {
			k := model.Key{Peer: gid.peer, Prefix: p}
			if _, in := a.rib[p]; !in || a.unsynced[k] {
				continue
			}
			i, seen := pos[k]
			r := a.member[k]
			switch {
			case r != nil && r.gid == gid && seen:
				all[i] = r
			case r != nil && r.gid == gid:
				pos[k] = len(all)
				all = append(all, r)
			case !seen:
				// Left over from a failed removal: gobgp still sends it.
				pos[k] = len(all)
				all = append(all, leftOver(gid.peer, p, g))
			}
		}
	}
	order := make([]int32, len(all))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		return compareKey(all[x].key, all[y].key)
	})
	sorted := make([]*record, len(order))
	for i, j := range order {
		sorted[i] = all[j]
	}
	return sorted
}

// NotApplied returns the advertisements of the last Apply (or SetPeers)
// that could not be applied as asked, sorted, each with Problem saying why
// and State "not applied". One that was in effect before keeps its last
// good attributes (Advertised lists those); a new one is not sent.
func (s *Speaker) NotApplied() []model.Advertisement {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]model.Advertisement, 0, len(s.adv.failed))
	for k, f := range s.adv.failed {
		adv := f.adv
		adv.State = model.AdvNotApplied
		adv.Reason = ""
		adv.Problem = f.err
		if _, kept := s.adv.member[k]; kept {
			adv.Problem += "; the last good attributes stay in effect"
		} else {
			adv.Problem += "; not sent"
		}
		out = append(out, adv)
	}
	sort.Slice(out, func(i, j int) bool { return lessKey(out[i].Key(), out[j].Key()) })
	return out
}

// sendState tells whether an advertisement in effect is on the wire; the
// caller holds mu.
func (s *Speaker) sendState(k model.Key) (model.AdvState, string) {
	p, ok := s.peers[k.Peer]
	if !ok {
		return model.AdvPending, "peer is not configured"
	}
	fam := config.IPv4
	if k.Prefix.Addr().Is6() {
		fam = config.IPv6
	}
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	ss := s.sess.all[p.Address]
	switch {
	case ss == nil || ss.state != model.StateEstablished:
		state := model.StateIdle
		if ss != nil && ss.state != "" {
			state = ss.state
		}
		return model.AdvPending, "session " + string(state)
	case !ss.families[fam]:
		return model.AdvNotSent, fmt.Sprintf("family %s not negotiated with the peer", fam)
	case fam == config.IPv4 && p.TransportIs6() && !ss.enh:
		return model.AdvNotSent, "IPv4 " + noExtendedNextHop
	}
	return model.AdvSent, ""
}

// wanted is a validated advertisement.
type wanted struct {
	adv   model.Advertisement
	gid   groupID
	attrs normAttrs
}

// view is the installed state as lower reads it.
func (a *advState) view() installed {
	return installed{rib: a.rib, groups: a.groups, member: a.member, nbr: a.nbr, resets: a.resets, refs: a.refs, exact: a.exact}
}

// reconcile selects want and deselects remove in gobgp: it runs the
// operations lower returns, in order, and records each outcome. When one
// fails, what it changed is recorded, the items it concerned are skipped
// (they keep their last good state), and the rest is lowered again from
// there.
func (s *Speaker) reconcile(ctx context.Context, want []model.Advertisement, remove []model.Key) error {
	a := &s.adv
	a.changed()
	defer a.changed()
	a.failed = map[model.Key]failure{}
	ch := change{want: want, remove: remove, peers: s.peers,
		skipKeys: map[model.Key]bool{}, skipPeers: map[string]bool{}, skipPaths: map[netip.Prefix]bool{},
		skipGroups: map[groupID]bool{}, skipResets: map[string]bool{}}
	var errs []error
	var done []lowOp
	whole, broken := !a.exact, a.broken
	// Each failure adds to ch what lower skips from then on, so the
	// passes end.
	for pass := 0; ; pass++ {
		l := lower(a.view(), ch)
		if pass == 0 {
			for _, k := range sortedFailed(l.failed) {
				f := l.failed[k]
				a.failed[k] = f
				errs = append(errs, fmt.Errorf("advertise %v to peer %q: %s", k.Prefix, k.Peer, f.err))
			}
			errs = append(errs, l.errs...)
		}
		for _, k := range l.forget {
			a.forget(k)
		}
		for _, u := range l.update {
			a.keep(u.adv.Key(), u.gid, u.adv)
		}
		again := false
		for _, op := range l.ops {
			ok, err := s.execute(ctx, op, &ch)
			if err != nil {
				errs = append(errs, err)
			}
			done = append(done, op)
			if !ok {
				again = true
				break
			}
		}
		if !again {
			break
		}
		// What this pass did changed the members before the operations
		// that follow them (a withdrawn key forgotten, a moved key in
		// its new group before the old one shrinks): the next lowering
		// must look at every group and path, not at the change's keys.
		a.exact = false
	}
	if whole && a.broken == broken {
		a.exact = true // every path and group was looked at, and set right
	}
	for k := range a.unsynced {
		if _, ok := a.member[k]; !ok {
			delete(a.unsynced, k)
		}
	}
	if len(done) > 0 {
		ops := make([]string, 0, min(len(done), 20))
		for _, op := range done[:min(len(done), 20)] {
			ops = append(ops, opNames[op.kind]+" "+op.peer)
		}
		s.log.Debug("advertisements reconciled", zap.Int("operations", len(done)), zap.Strings("first", ops),
			zap.Int("errors", len(errs)))
	}
	return errors.Join(errs...)
}

// execute runs one operation and records its outcome in s.adv. It returns
// false when the rest must be lowered again (the operation failed in a way
// later operations depend on); ch then says what to skip.
func (s *Speaker) execute(ctx context.Context, op lowOp, ch *change) (bool, error) {
	a := &s.adv
	failPeer := func(err error) (bool, error) {
		ch.skipPeers[op.peer] = true
		for _, adv := range ch.want {
			k := adv.Key()
			if _, ok := a.failed[k]; !ok && k.Peer == op.peer {
				a.failed[k] = failure{adv: adv, err: "the peer's neighbor set could not be set up in gobgp"}
			}
		}
		return false, err
	}
	switch op.kind {
	case opAddNeighbor:
		if err := s.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: neighborSet(op.peer, op.addr)}); err != nil {
			return failPeer(fmt.Errorf("peer %q: add neighbor set: %w", op.peer, err))
		}
		a.nbr[op.peer] = op.addr
		if op.resync {
			a.resets[op.peer] = true
		}
	case opRemoveNeighborAddr:
		if err := s.deleteDefinedSet(ctx, neighborSet(op.peer, op.addr), false); err != nil {
			return failPeer(fmt.Errorf("peer %q: remove old address %v from its neighbor set: %w", op.peer, op.addr, err))
		}
		a.resets[op.peer] = true
	case opCreateGroup, opAddToGroup:
		return s.grow(ctx, op, ch)
	case opAddPaths:
		err := s.addPaths(op.prefixes)
		if err == nil {
			return true, nil
		}
		for _, p := range op.prefixes {
			if _, in := a.rib[p]; !in {
				ch.skipPaths[p] = true
			}
		}
		return false, err
	case opDeletePaths:
		err := s.deletePaths(op.prefixes)
		if err == nil {
			return true, nil
		}
		for _, p := range op.prefixes {
			if _, in := a.rib[p]; in {
				ch.skipPaths[p] = true
			}
		}
		return false, err
	case opRemoveFromGroup:
		g := a.groups[op.gid]
		if err := s.removeFromGroup(ctx, g, op.prefixes); err != nil {
			ch.skipGroups[op.gid] = true
			return false, fmt.Errorf("withdraw %v from peer %q: %w", op.prefixes, op.peer, err)
		}
		if s.log.Core().Enabled(zap.DebugLevel) {
			for _, p := range op.prefixes {
				s.log.Debug("prefix deselected for peer", zap.String("op", "deselect"), zap.String("peer", op.peer),
					zap.Stringer("prefix", p))
			}
		}
		if op.resync {
			a.resets[op.peer] = true
		}
	case opDeleteGroup:
		g := a.groups[op.gid]
		if err := s.deleteGroup(ctx, g); err != nil {
			ch.skipGroups[op.gid] = true
			return false, fmt.Errorf("peer %q: delete export statement %s: %w", op.peer, g.name, err)
		}
		delete(a.groups, op.gid)
	case opDeleteNeighbor:
		if err := s.deleteDefinedSet(ctx, neighborSet(op.peer, op.addr), true); err != nil {
			ch.skipPeers[op.peer] = true
			return true, fmt.Errorf("peer %q: delete neighbor set: %w", op.peer, err)
		}
		delete(a.nbr, op.peer)
	case opSoftReset:
		start := time.Now()
		err := s.bgp.ResetPeer(ctx, &api.ResetPeerRequest{
			Address:   op.addr.String(),
			Soft:      true,
			Direction: api.ResetPeerRequest_DIRECTION_OUT,
		})
		if err != nil {
			// Owed: retried on the next Apply.
			a.resets[op.peer] = true
			ch.skipResets[op.peer] = true
			return true, fmt.Errorf("peer %q: soft reset out: %w", op.peer, err)
		}
		s.exportChanged(start, nil)
		delete(a.resets, op.peer)
		s.clearUnsynced(op.peer)
	case opForgetReset:
		delete(a.resets, op.peer)
		s.clearUnsynced(op.peer)
	}
	return true, nil
}

// grow adds a grow operation's prefixes to its group in one call; when
// that fails, one by one, so that each error names its prefix. It records
// the advertisements that went in; those that did not keep their last
// good state, and the rest is lowered again.
func (s *Speaker) grow(ctx context.Context, op lowOp, ch *change) (bool, error) {
	a := &s.adv
	in := func(adv model.Advertisement) {
		k := adv.Key()
		a.keep(k, op.gid, adv)
		// Checked first: the fields cost allocations per prefix even
		// when debug is off (a bulk is 10,000 prefixes).
		if ce := s.log.Check(zap.DebugLevel, "prefix selected for peer"); ce != nil {
			ce.Write(zap.String("op", "select"), zap.String("peer", k.Peer), zap.Stringer("prefix", k.Prefix), zap.Any("attrs", adv.Attrs))
		}
		if _, inRIB := a.rib[k.Prefix]; inRIB {
			// Only a soft reset makes gobgp send it to this peer.
			a.unsynced[k] = true
			a.resets[k.Peer] = true
		}
	}
	var errs []error
	fail := func(adv model.Advertisement, err error) {
		k := adv.Key()
		ch.skipKeys[k] = true
		a.failed[k] = failure{adv: adv, err: err.Error()}
		errs = append(errs, fmt.Errorf("advertise %v to peer %q: %w", k.Prefix, k.Peer, err))
	}
	err := s.addToGroup(ctx, op.gid, op.norm, op.prefixes...)
	if err == nil {
		for _, adv := range op.advs {
			in(adv)
		}
		return true, nil
	}
	if len(op.advs) == 1 {
		fail(op.advs[0], err)
		return false, errors.Join(errs...)
	}
	for _, adv := range op.advs {
		if err := s.addToGroup(ctx, op.gid, op.norm, adv.Prefix); err != nil {
			fail(adv, err)
			continue
		}
		in(adv)
	}
	return len(errs) == 0, errors.Join(errs...)
}

func (s *Speaker) clearUnsynced(peer string) {
	s.adv.changed()
	for k := range s.adv.unsynced {
		if k.Peer == peer {
			delete(s.adv.unsynced, k)
		}
	}
}

// addToGroup adds prefixes to the group's prefix set, creating the set and
// its statement first if needed. Sets are always changed in place (append
// and remove): gobgp binds a statement to the set object when the
// statement is added, so replacing a set (AddDefinedSet with Replace)
// would leave the statement matching the old one.
func (s *Speaker) addToGroup(ctx context.Context, gid groupID, n normAttrs, prefixes ...netip.Prefix) error {
	a := &s.adv
	g := a.groups[gid]
	if g != nil {
		if err := s.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(g.name, prefixes...)}); err != nil {
			return fmt.Errorf("add to prefix set %s: %w", g.name, err)
		}
		for _, p := range prefixes {
			g.prefixes[p] = struct{}{}
		}
		return nil
	}
	name := groupName(gid)
	if err := s.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(name, prefixes...)}); err != nil {
		return fmt.Errorf("add prefix set %s: %w", name, err)
	}
	st := s.statement(name, gid.peer, n)
	if err := s.bgp.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: exportPolicy, Statements: []*api.Statement{st}}}); err != nil {
		if derr := s.deleteDefinedSet(ctx, prefixSet(name), true); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up prefix set %s: %w", name, derr))
		}
		return fmt.Errorf("add export statement %s: %w", name, err)
	}
	g = &group{name: name, attrs: n.attrs(), norm: n, prefixes: make(map[netip.Prefix]struct{}, len(prefixes))}
	for _, p := range prefixes {
		g.prefixes[p] = struct{}{}
	}
	a.groups[gid] = g
	return nil
}

func (s *Speaker) removeFromGroup(ctx context.Context, g *group, prefixes []netip.Prefix) error {
	if err := s.deleteDefinedSet(ctx, prefixSet(g.name, prefixes...), false); err != nil {
		s.adv.broke()
		return fmt.Errorf("remove from prefix set %s: %w", g.name, err)
	}
	for _, p := range prefixes {
		delete(g.prefixes, p)
	}
	return nil
}

// deleteGroup removes an empty group's statement from the export policy,
// then the statement (gobgp's DeletePolicy does not delete the statements
// it removes from a policy, whatever PreserveStatements says), then its
// prefix set.
func (s *Speaker) deleteGroup(ctx context.Context, g *group) error {
	if err := s.bgp.DeletePolicy(ctx, &api.DeletePolicyRequest{
		Policy:             &api.Policy{Name: exportPolicy, Statements: []*api.Statement{{Name: g.name}}},
		PreserveStatements: true,
	}); err != nil {
		return fmt.Errorf("remove from export policy: %w", err)
	}
	if err := s.bgp.DeleteStatement(ctx, &api.DeleteStatementRequest{Statement: &api.Statement{Name: g.name}, All: true}); err != nil {
		return fmt.Errorf("delete statement: %w", err)
	}
	if err := s.deleteDefinedSet(ctx, prefixSet(g.name), true); err != nil {
		return fmt.Errorf("delete prefix set: %w", err)
	}
	return nil
}

func (s *Speaker) deleteDefinedSet(ctx context.Context, ds *api.DefinedSet, all bool) error {
	return s.bgp.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: ds, All: all})
}

// defaultLocalPref is what gobgp sends an iBGP peer when nothing sets the
// local preference.
const defaultLocalPref = 100

// statement accepts the group's prefixes towards its peer and sets its
// attributes.
func (s *Speaker) statement(name, peer string, n normAttrs) *api.Statement {
	act := &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}
	if len(n.communities) > 0 {
		act.Community = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: n.communityStrings()}
	}
	if len(n.large) > 0 {
		act.LargeCommunity = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: n.largeStrings()}
	}
	if n.linkBWSet {
		// gobgp parses "lb:ASN:N", N a 32-bit integer it converts to
		// float32 (model.EndpointsBandwidth keeps N whole and below
		// 2^32).
		act.ExtCommunity = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: []string{n.linkBW.String()}}
	}
	if n.med > 0 {
		act.Med = &api.MedAction{Type: api.MedAction_TYPE_REPLACE, Value: int64(n.med)}
	}
	// gobgp strips LOCAL_PREF towards eBGP peers after export policy.
	// Its LocalPrefAction cannot set 0 (a Value of 0 is taken as "no
	// action"), so every local path carries LOCAL_PREF 0 from its
	// origination (localPath) and each statement sets the value, gobgp's
	// default 100 when none is asked for: a statement asking for 0 (a
	// drained iBGP peer, RFC 8326) sets nothing and 0 goes out.
	switch {
	case !n.localPrefSet:
		act.LocalPref = &api.LocalPrefAction{Value: defaultLocalPref}
	case n.localPref > 0:
		act.LocalPref = &api.LocalPrefAction{Value: n.localPref}
	}
	if n.prepend > 0 {
		// On top of the ASN gobgp prepends itself towards eBGP peers.
		act.AsPrepend = &api.AsPrependAction{Asn: s.global.ASN, Repeat: uint32(n.prepend)}
	}
	return &api.Statement{
		Name: name,
		Conditions: &api.Conditions{
			PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: name},
			NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: neighborSetName(peer)},
		},
		Actions: act,
	}
}

func neighborSetName(peer string) string { return "ovnbgp:peer:" + peer }

func neighborSet(peer string, addr netip.Addr) *api.DefinedSet {
	return &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR,
		Name:        neighborSetName(peer),
		List:        []string{netip.PrefixFrom(addr, addr.BitLen()).String()},
	}
}

// prefixSet matches exactly the given prefixes (no longer ones).
func prefixSet(name string, prefixes ...netip.Prefix) *api.DefinedSet {
	ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name}
	for _, p := range prefixes {
		ds.Prefixes = append(ds.Prefixes, &api.Prefix{
			IpPrefix:      p.String(),
			MaskLengthMin: uint32(p.Bits()),
			MaskLengthMax: uint32(p.Bits()),
		})
	}
	return ds
}

// addPaths originates the prefixes as local paths, next hop self. gobgp
// takes them in one batch and answers per path.
func (s *Speaker) addPaths(prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	defer s.adv.changed()
	var errs []error
	paths := make([]*apiutil.Path, 0, len(prefixes))
	ok := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		lp, err := localPath(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("add path %v: %w", p, err))
			continue
		}
		paths = append(paths, lp)
		ok = append(ok, p)
	}
	defer func() {
		if len(errs) > 0 {
			s.adv.broke()
		}
	}()
	if len(paths) == 0 {
		return errors.Join(errs...)
	}
	start := time.Now()
	resps, err := s.bgp.AddPath(apiutil.AddPathRequest{Paths: paths})
	s.exportChanged(start, nil)
	if len(resps) != len(paths) {
		// gobgp answers per path unless the whole call failed.
		if err == nil {
			err = fmt.Errorf("gobgp answered %d of %d paths", len(resps), len(paths))
		}
		// Per-path answers are lost; find out what went in.
		s.syncRIB(ok)
		errs = append(errs, fmt.Errorf("add paths: %w", err))
		return errors.Join(errs...)
	}
	for i, r := range resps {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("add path %v: %w", ok[i], r.Error))
			continue
		}
		s.adv.rib[ok[i]] = struct{}{}
	}
	return errors.Join(errs...)
}

// deletePaths withdraws the prefixes' local paths, in one batch, or one by
// one when the batch fails, so that each error names its prefix.
func (s *Speaker) deletePaths(prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	defer s.adv.changed()
	build := func(ps []netip.Prefix) ([]*apiutil.Path, []error) {
		var errs []error
		var out []*apiutil.Path
		for _, p := range ps {
			lp, err := localPath(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("withdraw path %v: %w", p, err))
				continue
			}
			out = append(out, lp)
		}
		return out, errs
	}
	paths, errs := build(prefixes)
	defer func() {
		if len(errs) > 0 {
			s.adv.broke()
		}
	}()
	if len(errs) == 0 {
		start := time.Now()
		if err := s.bgp.DeletePath(apiutil.DeletePathRequest{Paths: paths}); err == nil {
			for _, p := range prefixes {
				delete(s.adv.rib, p)
			}
			s.exportChanged(start, prefixes)
			return nil
		}
	}
	errs = nil
	for _, p := range prefixes {
		one, berrs := build([]netip.Prefix{p})
		if len(berrs) > 0 {
			errs = append(errs, berrs...)
			continue
		}
		start := time.Now()
		if err := s.bgp.DeletePath(apiutil.DeletePathRequest{Paths: one}); err != nil {
			errs = append(errs, fmt.Errorf("withdraw path %v: %w", p, err))
			continue
		}
		delete(s.adv.rib, p)
		s.exportChanged(start, []netip.Prefix{p})
	}
	return errors.Join(errs...)
}

// syncRIB reads back which of the prefixes have a path in the global RIB.
func (s *Speaker) syncRIB(prefixes []netip.Prefix) {
	defer s.adv.changed()
	s.adv.broke()
	s.eachRIBPrefix(func(p netip.Prefix) {
		if slices.Contains(prefixes, p) {
			s.adv.rib[p] = struct{}{}
		}
	})
}

// eachRIBPrefix calls fn with each prefix that has a path in gobgp's global
// RIB. With the import policy rejecting everything, only local paths are
// there.
func (s *Speaker) eachRIBPrefix(fn func(netip.Prefix)) {
	for _, fam := range []bgppkt.Family{bgppkt.RF_IPv4_UC, bgppkt.RF_IPv6_UC} {
		_ = s.bgp.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: fam},
			func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
				if p, ok := nlriPrefix(nlri); ok && len(paths) > 0 {
					fn(p)
				}
			})
	}
}

// localPath is prefix as a locally originated path: origin IGP, next hop
// unspecified (gobgp puts its session address, next hop self).
func localPath(prefix netip.Prefix) (*apiutil.Path, error) {
	nlri, err := bgppkt.NewIPAddrPrefix(prefix)
	if err != nil {
		return nil, err
	}
	// LOCAL_PREF 0: the export statement sets each iBGP peer's value
	// (see statement); eBGP peers never get it.
	attrs := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP),
		bgppkt.NewPathAttributeLocalPref(0)}
	family := bgppkt.RF_IPv4_UC
	if prefix.Addr().Is4() {
		nh, err := bgppkt.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, nh)
	} else {
		family = bgppkt.RF_IPv6_UC
		mp, err := bgppkt.NewPathAttributeMpReachNLRI(family, []bgppkt.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, mp)
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs, Age: time.Now().Unix()}, nil
}

func nlriPrefix(n bgppkt.NLRI) (netip.Prefix, bool) {
	if p, ok := n.(*bgppkt.IPAddrPrefix); ok && p.Prefix.IsValid() {
		return p.Prefix, true
	}
	return netip.Prefix{}, false
}

func lessKey(a, b model.Key) bool { return compareKey(a, b) < 0 }

// compareKey orders keys by peer, then prefix.
func compareKey(a, b model.Key) int {
	if c := strings.Compare(a.Peer, b.Peer); c != 0 {
		return c
	}
	return model.ComparePrefix(a.Prefix, b.Prefix)
}

func sortedGroups(m map[groupID]*group) []groupID {
	out := make([]groupID, 0, len(m))
	for gid := range m {
		out = append(out, gid)
	}
	sort.Slice(out, func(i, j int) bool { return m[out[i]].name < m[out[j]].name })
	return out
}

func sortedFailed(m map[model.Key]failure) []model.Key {
	out := make([]model.Key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compareKey)
	return out
}
