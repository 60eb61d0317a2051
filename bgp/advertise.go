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
	// member is the group each wanted advertisement was put in; advs is
	// that advertisement as given (Rule, Network and Source included).
	member map[model.Key]groupID
	// (Pointers: an advertisement is too big a map value to be stored in
	// place, and Advertised sorts and copies them on every pass.)
	advs map[model.Key]*model.Advertisement
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
	// Whatever changes rib, groups, member, advs or unsynced calls
	// changed(); nil when it must be built again.
	inEffect []*model.Advertisement
}

// changed drops what Advertised keeps; the caller holds mu and is changing
// the state.
func (a *advState) changed() { a.inEffect = nil }

// failure is an advertisement that could not be applied.
type failure struct {
	adv model.Advertisement
	err string
}

func newAdvState() advState {
	return advState{
		rib:      map[netip.Prefix]struct{}{},
		groups:   map[groupID]*group{},
		member:   map[model.Key]groupID{},
		advs:     map[model.Key]*model.Advertisement{},
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
	return s.reconcile(ctx, slices.Concat(d.Announce, d.Change), remove)
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
	for _, p := range all {
		adv := *p
		k := adv.Key()
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

// sortedInEffect lists the advertisements in effect, sorted by peer and
// prefix (Advertised adds the send state); the caller holds mu.
func (a *advState) sortedInEffect() []*model.Advertisement {
	// Built again after each change, over every advertisement: the map
	// holds positions in all (an advertisement is too big a map value to
	// be stored in place), and positions are sorted, not advertisements.
	pos := make(map[model.Key]int, len(a.member))
	all := make([]*model.Advertisement, 0, len(a.member))
	for gid, g := range a.groups {
		for p := range g.prefixes {
			k := model.Key{Peer: gid.peer, Prefix: p}
			if _, in := a.rib[p]; !in || a.unsynced[k] {
				continue
			}
			i, seen := pos[k]
			switch {
			case a.member[k] == gid && seen:
				all[i] = a.advs[k]
			case a.member[k] == gid:
				pos[k] = len(all)
				all = append(all, a.advs[k])
			case !seen:
				// Left over from a failed removal: gobgp still sends it.
				pos[k] = len(all)
				all = append(all, &model.Advertisement{Peer: gid.peer, Prefix: p, Attrs: g.attrs})
			}
		}
	}
	order := make([]int32, len(all))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := strings.Compare(all[x].Peer, all[y].Peer); c != 0 {
			return c
		}
		return model.ComparePrefix(all[x].Prefix, all[y].Prefix)
	})
	sorted := make([]*model.Advertisement, len(order))
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
	s.st.Lock()
	defer s.st.Unlock()
	ss := s.sessions[p.Address]
	switch {
	case ss == nil || ss.state != model.StateEstablished:
		state := model.StateIdle
		if ss != nil && ss.state != "" {
			state = ss.state
		}
		return model.AdvPending, "session " + string(state)
	case !ss.families[fam]:
		return model.AdvNotSent, fmt.Sprintf("family %s not negotiated with the peer", fam)
	}
	return model.AdvSent, ""
}

// wanted is a validated advertisement.
type wanted struct {
	adv   model.Advertisement
	gid   groupID
	attrs normAttrs
}

// reconcile selects want and deselects remove in gobgp, starting from s.adv.
// An advertisement in want that fails validation is deselected too: none
// has a last good state to keep (see below). The order keeps every peer
// correct at every step: export statements grow before the paths they
// select are added; paths are withdrawn before statements shrink; a peer
// whose selection changed for a path that stays in the RIB gets a soft
// reset OUT (gobgp re-runs its export policy and sends the differences,
// withdrawals included) and no other peer is touched.
func (s *Speaker) reconcile(ctx context.Context, want []model.Advertisement, remove []model.Key) error {
	a := &s.adv
	a.changed()
	defer a.changed()
	var errs []error
	asked := make(map[model.Key]model.Advertisement, len(want))
	for _, adv := range want {
		if _, ok := asked[adv.Key()]; !ok {
			asked[adv.Key()] = adv
		}
	}
	a.failed = map[model.Key]failure{}
	fail := func(k model.Key, err error) {
		errs = append(errs, fmt.Errorf("advertise %v to peer %q: %w", k.Prefix, k.Peer, err))
		a.failed[k] = failure{adv: asked[k], err: err.Error()}
	}

	desired := make(map[model.Key]wanted, len(want))
	for _, adv := range want {
		k := adv.Key()
		w, err := s.validate(adv)
		if err != nil {
			// No item that fails validation has a last good state to
			// keep: its peer is not configured, its family is not
			// enabled on the peer (both withdraw what they had, as
			// configured), or its prefix cannot be a key that ever
			// applied. A change gobgp refuses keeps its last good
			// attributes (TestUnapplicableChangeKeepsLastGood).
			fail(k, err)
			remove = append(remove, k)
			continue
		}
		if prev, dup := desired[k]; dup {
			if prev.gid != w.gid {
				// The first is applied: an error, but no failed item.
				errs = append(errs, fmt.Errorf("advertise %v to peer %q: conflicting attributes %+v and %+v; keeping the first",
					k.Prefix, k.Peer, prev.adv.Attrs, adv.Attrs))
			}
			continue
		}
		desired[k] = w
	}
	keys := make([]model.Key, 0, len(desired))
	for k := range desired {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })

	ribBefore := make(map[netip.Prefix]struct{}, len(a.rib))
	for p := range a.rib {
		ribBefore[p] = struct{}{}
	}
	reset := map[string]bool{}
	for p := range a.resets {
		reset[p] = true
	}

	// 1. Each peer's neighbor set: the condition every statement of the
	// peer uses to match it.
	badPeer := map[string]bool{}
	for _, k := range keys {
		if _, done := badPeer[k.Peer]; done {
			continue
		}
		err := s.ensureNeighborSet(ctx, k.Peer, s.peers[k.Peer].Address, reset)
		badPeer[k.Peer] = err != nil
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range keys {
		if badPeer[k.Peer] {
			if _, ok := a.failed[k]; !ok {
				a.failed[k] = failure{adv: asked[k], err: "the peer's neighbor set could not be set up in gobgp"}
			}
		}
	}

	// 2. Grow: put every wanted (peer, prefix) in its statement's set,
	// one gobgp call per set (a thousand new UDNs are one call, not a
	// thousand).
	added := 0
	grow := map[groupID][]model.Key{}
	var growOrder []groupID
	for _, k := range keys {
		w := desired[k]
		if badPeer[k.Peer] {
			continue
		}
		if cur, had := a.member[k]; had && cur == w.gid {
			a.setAdv(k, w.adv)
			continue
		}
		if _, ok := grow[w.gid]; !ok {
			growOrder = append(growOrder, w.gid)
		}
		grow[w.gid] = append(grow[w.gid], k)
	}
	for _, gid := range growOrder {
		ks := grow[gid]
		for _, k := range s.growGroup(ctx, gid, desired[ks[0]].attrs, ks, fail) {
			w := desired[k]
			a.member[k] = w.gid
			a.setAdv(k, w.adv)
			added++
			s.log.Debug("prefix selected for peer", zap.String("op", "select"), zap.String("peer", k.Peer),
				zap.Stringer("prefix", k.Prefix), zap.Any("attrs", w.adv.Attrs))
			if _, in := ribBefore[k.Prefix]; in {
				// The path is already in the RIB: only a soft reset makes
				// gobgp send it to this peer (or with the new attributes).
				reset[k.Peer] = true
				a.unsynced[k] = true
			}
		}
	}
	// Intents that are gone: the shrink step removes them from gobgp.
	for _, k := range remove {
		if _, ok := desired[k]; !ok {
			delete(a.member, k)
			delete(a.advs, k)
		}
	}

	// 3. Add the paths that are wanted by at least one peer and not yet in
	// the RIB. gobgp runs each peer's export policy on them: only the
	// selected peers get an UPDATE.
	inRIB := map[netip.Prefix]bool{}
	for k := range a.member {
		inRIB[k.Prefix] = true
	}
	var toAdd []netip.Prefix
	for p := range inRIB {
		if _, ok := a.rib[p]; !ok {
			toAdd = append(toAdd, p)
		}
	}
	slices.SortFunc(toAdd, model.ComparePrefix)
	if err := s.addPaths(toAdd); err != nil {
		errs = append(errs, err)
	}

	// 4. Withdraw the paths no peer wants any more. (gobgp sends the
	// WITHDRAW to every established peer, also to those that never had
	// it; RFC 4271 allows that.)
	var toDelete []netip.Prefix
	for p := range a.rib {
		if !inRIB[p] {
			toDelete = append(toDelete, p)
		}
	}
	slices.SortFunc(toDelete, model.ComparePrefix)
	if err := s.deletePaths(toDelete); err != nil {
		errs = append(errs, err)
	}

	// 5. Shrink: remove from the sets what no intent holds, then the
	// statements, sets and neighbor sets left empty.
	removed := 0
	for _, gid := range sortedGroups(a.groups) {
		g := a.groups[gid]
		var drop []netip.Prefix
		for p := range g.prefixes {
			if a.member[model.Key{Peer: gid.peer, Prefix: p}] != gid {
				drop = append(drop, p)
			}
		}
		if len(drop) == 0 {
			continue
		}
		slices.SortFunc(drop, model.ComparePrefix)
		if err := s.removeFromGroup(ctx, g, drop); err != nil {
			errs = append(errs, fmt.Errorf("withdraw %v from peer %q: %w", drop, gid.peer, err))
			continue
		}
		removed += len(drop)
		for _, p := range drop {
			s.log.Debug("prefix deselected for peer", zap.String("op", "deselect"), zap.String("peer", gid.peer),
				zap.Stringer("prefix", p))
			if _, in := a.rib[p]; in {
				reset[gid.peer] = true
			}
		}
	}
	for _, gid := range sortedGroups(a.groups) {
		g := a.groups[gid]
		if len(g.prefixes) > 0 {
			continue
		}
		if err := s.deleteGroup(ctx, g); err != nil {
			errs = append(errs, fmt.Errorf("peer %q: delete export statement %s: %w", gid.peer, g.name, err))
			continue
		}
		delete(a.groups, gid)
	}
	for _, peer := range sortedKeys(a.nbr) {
		inUse := false
		for gid := range a.groups {
			inUse = inUse || gid.peer == peer
		}
		if inUse {
			continue
		}
		if err := s.deleteDefinedSet(ctx, neighborSet(peer, a.nbr[peer]), true); err != nil {
			errs = append(errs, fmt.Errorf("peer %q: delete neighbor set: %w", peer, err))
			continue
		}
		delete(a.nbr, peer)
	}

	// 6. Let each peer whose selection changed for a path that stayed in
	// the RIB re-run its export policy.
	for _, peer := range sortedKeys(reset) {
		p, ok := s.peers[peer]
		if !ok {
			// Gone: nothing to re-evaluate.
			delete(a.resets, peer)
			s.clearUnsynced(peer)
			continue
		}
		start := time.Now()
		err := s.bgp.ResetPeer(ctx, &api.ResetPeerRequest{
			Address:   p.Address.String(),
			Soft:      true,
			Direction: api.ResetPeerRequest_DIRECTION_OUT,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %q: soft reset out: %w", peer, err))
			a.resets[peer] = true
			continue
		}
		s.exportChanged(start, nil)
		delete(a.resets, peer)
		s.clearUnsynced(peer)
	}
	for k := range a.unsynced {
		if _, ok := a.member[k]; !ok {
			delete(a.unsynced, k)
		}
	}

	if added > 0 || removed > 0 || len(toAdd) > 0 || len(toDelete) > 0 {
		s.log.Debug("advertisements reconciled",
			zap.Int("selected", added), zap.Int("deselected", removed),
			zap.Int("pathsAdded", len(toAdd)), zap.Int("pathsWithdrawn", len(toDelete)),
			zap.Strings("softResetOut", sortedKeys(reset)), zap.Int("errors", len(errs)))
	}
	return errors.Join(errs...)
}

// setAdv records adv as what k was asked for, in place when k had one.
func (a *advState) setAdv(k model.Key, adv model.Advertisement) {
	if p := a.advs[k]; p != nil {
		*p = adv
		return
	}
	a.advs[k] = &adv
}

func (s *Speaker) clearUnsynced(peer string) {
	s.adv.changed()
	for k := range s.adv.unsynced {
		if k.Peer == peer {
			delete(s.adv.unsynced, k)
		}
	}
}

// validate checks adv against the configured peers and parses its
// attributes.
func (s *Speaker) validate(adv model.Advertisement) (wanted, error) {
	p, ok := s.peers[adv.Peer]
	if !ok {
		return wanted{}, errors.New("peer is not configured")
	}
	pfx := adv.Prefix
	if !pfx.IsValid() {
		return wanted{}, errors.New("prefix is not valid")
	}
	if pfx.Addr().Is4In6() {
		return wanted{}, errors.New("prefix is an IPv4-mapped IPv6 prefix")
	}
	if pfx.Addr().Zone() != "" {
		return wanted{}, errors.New("prefix has a zone")
	}
	if pfx != pfx.Masked() {
		return wanted{}, fmt.Errorf("prefix has host bits set (want %v)", pfx.Masked())
	}
	fam := config.IPv4
	if pfx.Addr().Is6() {
		fam = config.IPv6
	}
	if !slices.Contains(p.Families, fam) {
		return wanted{}, fmt.Errorf("family %s is not enabled on the peer", fam)
	}
	n := normalize(adv.Attrs)
	return wanted{adv: adv, gid: groupID{peer: adv.Peer, family: fam, attrs: n.key()}, attrs: n}, nil
}

// ensureNeighborSet makes the peer's neighbor set hold addr. A set is
// never left empty: gobgp treats an empty neighbor set as matching every
// peer.
func (s *Speaker) ensureNeighborSet(ctx context.Context, peer string, addr netip.Addr, reset map[string]bool) error {
	cur, ok := s.adv.nbr[peer]
	if ok && cur == addr {
		return nil
	}
	if err := s.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: neighborSet(peer, addr)}); err != nil {
		return fmt.Errorf("peer %q: add neighbor set: %w", peer, err)
	}
	s.adv.nbr[peer] = addr
	if ok {
		reset[peer] = true
		if err := s.deleteDefinedSet(ctx, neighborSet(peer, cur), false); err != nil {
			return fmt.Errorf("peer %q: remove old address %v from its neighbor set: %w", peer, cur, err)
		}
	}
	return nil
}

// growGroup adds the keys' prefixes to one group in one call; when that
// fails, it adds them one by one so that each error names its prefix. It
// returns the keys that went in.
func (s *Speaker) growGroup(ctx context.Context, gid groupID, n normAttrs, ks []model.Key, fail func(model.Key, error)) []model.Key {
	prefixes := make([]netip.Prefix, len(ks))
	for i, k := range ks {
		prefixes[i] = k.Prefix
	}
	err := s.addToGroup(ctx, gid, n, prefixes...)
	if err == nil {
		return ks
	}
	if len(ks) == 1 {
		fail(ks[0], err)
		return nil
	}
	var ok []model.Key
	for _, k := range ks {
		if err := s.addToGroup(ctx, gid, n, k.Prefix); err != nil {
			fail(k, err)
			continue
		}
		ok = append(ok, k)
	}
	return ok
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
	name := fmt.Sprintf("ovnbgp:%s:%s:%s", gid.peer, gid.family, shortHash(gid.attrs))
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
		return errors.Join(append(errs, fmt.Errorf("add paths: %w", err))...)
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
