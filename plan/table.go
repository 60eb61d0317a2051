package plan

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"

	"github.com/google/btree"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// ImportTable is the import decision kept between passes: every learned
// path with its verdict and the import caps' state, by prefix; the desired
// OVN static routes and kernel routes of a prefix are made from them when
// asked (Desired, Result). NewImportTable decides everything
// (Import is NewImportTable(in).Result()); Update decides again only the
// prefixes a change touches, so a pass costs what changed, not the size of
// the table. The environment (config, gateway routers, links, VRFs) is
// fixed for a table: when it changes, build a new one; NB's protected
// prefixes alone change with SetSnapshotProtected, which decides again
// only what they can affect.
//
// After any sequence of Updates the table equals a new table built from
// the same paths (TestTableUpdateEqualsRebuild), with one difference that
// is the point of a cap: where a rule's maxRoutes holds prefixes back, the
// prefixes kept earlier stay kept (a new table keeps the installed ones
// first, which after an apply are the same), and a freed slot goes to the
// held-back prefix that comes first in prefix order.
//
// An ImportTable is not safe for concurrent use.
type ImportTable struct {
	cfg  *config.Config
	env  *importEnv
	prot []model.ProtectedPrefix
	// stale is ImportInput.Stale.
	stale map[string]map[config.Family]StaleWindow
	// prefixes holds, per prefix, one path per peer and its cap groups;
	// n counts the paths.
	prefixes map[netip.Prefix]*prefixEntry
	n        int
	// attrs are the paths' shared attributes.
	attrs *attrTable
	seq   uint32
	// caps are the (rule, peer) groups of rules with maxRoutes; hasCaps
	// says a rule has one.
	caps    map[capGroup]*capState
	hasCaps bool
	// reasons: one accepted-reason string per (rule, entry), shared.
	reasons map[[2]int]string
	// stats are Sizes and the routes not ovnbgp's in the way (Problems):
	// made by a walk when first asked, then kept by deciding again only
	// the prefixes Update returned since (dirty), so that status, asked
	// every few ms, costs what changed, not the size of the table.
	stats *tableStats
	// counts are Count(nil), kept as paths are decided (tally), so that
	// status reads them without a walk.
	counts TableCounts
}

type tableStats struct {
	ovn, kernel int
	// foreignOVN and foreignKernel are, by prefix, the keys not
	// ovnbgp's that hold an accepted route of it.
	foreignOVN    map[netip.Prefix][]model.OVNRouteKey
	foreignKernel map[netip.Prefix][]model.KernelRouteKey
	// dirty are the prefixes decided since the stats were last made.
	dirty []netip.Prefix
}

// prefixEntry is one prefix: its paths (one per peer, in the order first
// given) and its cap groups. One map lookup finds it all. The first path
// and the first cap group are inline and the rest behind a pointer, since
// most prefixes have one path and at most one cap group.
type prefixEntry struct {
	one tablePath
	ext *entryExt
	// cap0 is the first cap group the prefix is in (nil: none), kept or
	// held back as it says.
	cap0 *capRef
	// nOVN and nKernel are its desired routes as counted in the table's
	// stats.
	nOVN, nKernel int32
}

// entryExt is what a prefix with more than one path or cap group has.
type entryExt struct {
	// more are the paths after the first.
	more []tablePath
	// caps are the cap groups after cap0.
	caps []capMember
}

// more are the paths after the first.
func (pe *prefixEntry) more() []tablePath {
	if pe.ext == nil {
		return nil
	}
	return pe.ext.more
}

// nCaps is the number of cap groups the prefix is in.
func (pe *prefixEntry) nCaps() int {
	if pe.cap0 == nil {
		return 0
	}
	if pe.ext == nil {
		return 1
	}
	return 1 + len(pe.ext.caps)
}

// capAt is the prefix's membership i (< nCaps).
func (pe *prefixEntry) capAt(i int) capMember {
	if i == 0 {
		return capMember{cs: pe.cap0.cs, held: pe.cap0.held}
	}
	return pe.ext.caps[i-1]
}

// capList are the cap groups the prefix is in (a copy).
func (pe *prefixEntry) capList() []capMember {
	var out []capMember
	for i := range pe.nCaps() {
		out = append(out, pe.capAt(i))
	}
	return out
}

// setCaps makes caps the prefix's cap groups.
func (pe *prefixEntry) setCaps(caps []capMember) {
	pe.cap0 = nil
	if len(caps) > 0 {
		pe.cap0 = caps[0].cs.ref(caps[0].held)
		caps = caps[1:]
	}
	if len(caps) > 0 && pe.ext == nil {
		pe.ext = &entryExt{}
	}
	if pe.ext != nil {
		pe.ext.caps = append(pe.ext.caps[:0], caps...)
		if len(caps) == 0 {
			pe.ext.caps = nil
		}
	}
	pe.trim()
}

// setHeld says whether the prefix's membership of cs (if any) is held back.
func (pe *prefixEntry) setHeld(cs *capState, held bool) {
	if pe.cap0 != nil && pe.cap0.cs == cs {
		pe.cap0 = cs.ref(held)
		return
	}
	if pe.ext != nil {
		for i := range pe.ext.caps {
			if pe.ext.caps[i].cs == cs {
				pe.ext.caps[i].held = held
			}
		}
	}
}

// trim drops an empty ext.
func (pe *prefixEntry) trim() {
	if pe.ext != nil && pe.ext.more == nil && pe.ext.caps == nil {
		pe.ext = nil
	}
}

// len is the number of paths.
func (pe *prefixEntry) len() int {
	if pe.one.attrs == 0 {
		return 0
	}
	return 1 + len(pe.more())
}

// at is path i (< len).
func (pe *prefixEntry) at(i int) *tablePath {
	if i == 0 {
		return &pe.one
	}
	return &pe.ext.more[i-1]
}

// add appends a path and returns it.
func (pe *prefixEntry) add(tp tablePath) *tablePath {
	if pe.one.attrs == 0 {
		pe.one = tp
		return &pe.one
	}
	if pe.ext == nil {
		pe.ext = &entryExt{}
	}
	pe.ext.more = append(pe.ext.more, tp)
	return &pe.ext.more[len(pe.ext.more)-1]
}

// del removes path i (< len), keeping the others' order.
func (pe *prefixEntry) del(i int) {
	more := pe.more()
	if len(more) == 0 {
		pe.one = tablePath{}
		return
	}
	if i == 0 {
		pe.one = more[0]
		i = 1
	}
	more = slices.Delete(more, i-1, i)
	if len(more) == 0 {
		more = nil
	}
	pe.ext.more = more
	pe.trim()
}

// pathOf is pe's path of peer, or nil.
func (t *ImportTable) pathOf(pe *prefixEntry, peer string) *tablePath {
	for i := range pe.len() {
		if tp := pe.at(i); t.peerOf(tp) == peer {
			return tp
		}
	}
	return nil
}

// peerOf is tp's peer.
func (t *ImportTable) peerOf(tp *tablePath) string { return t.attrs.slots[tp.attrs].peer }

type ruleEntry struct {
	rule, entry int32
}

type capGroup struct {
	rule int
	peer string
}

// capState is one (rule, peer) group: how many prefixes it keeps (at
// most max, its rule's maxRoutes) and the prefixes its cap holds back
// (which prefixes are kept is on their entries: capMember). held is
// ordered by prefix, so that a freed slot finds the first held-back prefix
// in O(log n): a peer that drops with n held back frees n slots.
type capState struct {
	// refs are a membership of the group kept ([0]) and held back ([1]),
	// for prefixEntry.cap0.
	refs [2]capRef
	g    capGroup
	kept int
	max  int
	held *btree.BTreeG[netip.Prefix]
	// work counts the operations on held and the prefix comparisons they
	// made: a test's measure of the cost (TestTableCapDropWork).
	work int
}

// heldDegree is the degree of a cap's tree of held-back prefixes.
const heldDegree = 32

func newCapState(g capGroup, max int) *capState {
	cs := &capState{g: g, max: max}
	cs.refs = [2]capRef{{cs: cs}, {cs: cs, held: true}}
	cs.held = btree.NewG(heldDegree, func(a, b netip.Prefix) bool {
		cs.work++
		return model.ComparePrefix(a, b) < 0
	})
	return cs
}

// hold adds pfx to the prefixes the cap holds back.
func (cs *capState) hold(pfx netip.Prefix) {
	cs.work++
	cs.held.ReplaceOrInsert(pfx)
}

// unhold removes pfx from the prefixes the cap holds back.
func (cs *capState) unhold(pfx netip.Prefix) {
	cs.work++
	cs.held.Delete(pfx)
}

// takeFirst removes and returns the held-back prefix that comes first in
// prefix order.
func (cs *capState) takeFirst() (netip.Prefix, bool) {
	cs.work++
	return cs.held.DeleteMin()
}

// nHeld is the number of prefixes the cap holds back.
func (cs *capState) nHeld() int { return cs.held.Len() }

// capMember is a prefix's membership of a cap group.
type capMember struct {
	cs   *capState
	held bool
}

// capRef is a membership of cs as prefixEntry.cap0 points to it: one of
// cs.refs.
type capRef capMember

// ref is cs's membership, held back or kept.
func (cs *capState) ref(held bool) *capRef {
	if held {
		return &cs.refs[1]
	}
	return &cs.refs[0]
}

// member is (a copy of) pe's membership of cs, or nil.
func (pe *prefixEntry) member(cs *capState) *capMember {
	for i := range pe.nCaps() {
		if m := pe.capAt(i); m.cs == cs {
			return &m
		}
	}
	return nil
}

// isMember reports whether pe is in cs.
func (pe *prefixEntry) isMember(cs *capState) bool {
	for i := range pe.nCaps() {
		if pe.capAt(i).cs == cs {
			return true
		}
	}
	return false
}

// NewImportTable decides every path of in: it is an empty table's Update
// with every path and the routes installed now (in.Snapshot's owned rows,
// in.Host's routes), so that a full pass is the incremental pass from an
// empty table. Paths are keyed by (peer, prefix): of two paths with the
// same key the later one is kept. Where a cap holds prefixes back, the
// prefixes installed now (owned OVN rows of the rule, routes in its kernel
// table, through the group's peer) are kept first, then the others in
// prefix order.
func NewImportTable(in ImportInput) *ImportTable {
	cfg := in.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	prot := Protected(cfg, in.Snapshot, in.Host)
	t := &ImportTable{
		cfg: cfg, env: newImportEnv(cfg, in.Snapshot, in.Host, prot), prot: prot, stale: in.Stale,
		prefixes: make(map[netip.Prefix]*prefixEntry, len(in.Learned)),
		attrs:    newAttrTable(), caps: map[capGroup]*capState{}, reasons: map[[2]int]string{},
		counts: TableCounts{ByPeer: map[string]PeerCounts{}, RejectedBy: map[Rejection]int{}},
	}
	t.hasCaps = slices.ContainsFunc(cfg.Import, func(r config.ImportRule) bool { return r.MaxRoutes > 0 })
	if len(in.Learned) > 0 {
		t.Fill(in.Learned, in.Snapshot.OwnedRoutes, in.Host.Routes)
	}
	return t
}

// Fill gives the table, empty, every learned path as one change (Update,
// as a pass gives it what changed) with the routes installed now (owned
// OVN rows and kernel routes: each cap keeps those first), and returns
// the prefixes it touched, every prefix of paths. A full pass is this
// change from an empty table.
func (t *ImportTable) Fill(paths []model.LearnedPath, owned []model.OVNRoute, kernel []model.KernelRoute) []netip.Prefix {
	var inst *Installed
	if t.hasCaps {
		inst = NewInstalled(owned, kernel)
	}
	return t.Update(TableChange{Paths: paths, Installed: inst})
}

// put stores path p (replacing the path of its key) and decides it
// against every rule, caps aside.
func (t *ImportTable) put(p model.LearnedPath) {
	pe := t.prefixes[p.Prefix]
	if pe == nil {
		pe = &prefixEntry{}
		t.prefixes[p.Prefix] = pe
	}
	tp := t.pathOf(pe, p.Peer)
	if tp != nil {
		// out of the counts as tallied, before its fields change
		t.untally(p.Prefix, tp)
	}
	switch {
	case tp == nil:
		tp = pe.add(tablePath{seq: t.nextSeq(), attrs: t.attrs.ref(&p)})
		t.n++
	case !t.attrs.same(tp.attrs, &p):
		old := tp.attrs
		tp.attrs = t.attrs.ref(&p)
		t.attrs.unref(old)
	}
	tp.rare, tp.med, tp.localPref = nil, p.MED, p.LocalPref
	tp.set(flagStale, p.Stale)
	tp.setAge(p.Age)
	if p.Malformed != "" {
		tp.rareOf().malformed = p.Malformed
	}
	t.decide(tp, p)
}

// nextSeq is the seq of a path given now. Past the last uint32 the paths
// are numbered again from 0, in their order.
func (t *ImportTable) nextSeq() uint32 {
	if t.seq == math.MaxUint32 {
		for i, kp := range t.sorted() {
			kp.tp.seq = uint32(i)
		}
		t.seq = uint32(t.n)
	}
	t.seq++
	return t.seq - 1
}

// remove forgets the path of key k.
func (t *ImportTable) remove(k model.Key) bool {
	pe := t.prefixes[k.Prefix]
	if pe == nil {
		return false
	}
	for i := range pe.len() {
		if tp := pe.at(i); t.peerOf(tp) == k.Peer {
			t.untally(k.Prefix, tp)
			t.attrs.unref(tp.attrs)
			// settle forgets the entry once its routes are recomputed
			pe.del(i)
			t.n--
			return true
		}
	}
	return false
}

// raw is path tp of prefix pfx as the peer sent it (no decision).
func (t *ImportTable) raw(pfx netip.Prefix, tp *tablePath) model.LearnedPath {
	a := &t.attrs.slots[tp.attrs]
	p := model.LearnedPath{Peer: a.peer, Prefix: pfx, NextHop: a.nextHop, ASPath: a.asPath, Origin: a.origin,
		MED: tp.med, LocalPref: tp.localPref, Communities: a.communities, LinkBandwidth: a.linkBW, Age: tp.getAge(), Stale: tp.has(flagStale)}
	if tp.rare != nil {
		p.Malformed = tp.rare.malformed
	}
	return p
}

// learned is path tp of prefix pfx with its decision (a cap's reason
// aside: path).
func (t *ImportTable) learned(pfx netip.Prefix, tp *tablePath) model.LearnedPath {
	p := t.raw(pfx, tp)
	p.Accepted = tp.accepted()
	if tp.rule >= 0 {
		p.Rule = t.cfg.Import[tp.rule].Name
	}
	switch {
	case !p.Accepted || tp.has(flagAccReason):
		p.Reason = tp.reason
	case tp.rare != nil && tp.rare.accepted != "":
		p.Reason = tp.rare.accepted
	default:
		p.Reason = t.reasons[[2]int{int(tp.rule), int(tp.entryOf(tp.rule))}]
	}
	return p
}

// decide runs every check of every rule listing the path's peer (the
// order is in docs/config.md, "Import decision"); the caps come later.
func (t *ImportTable) decide(tp *tablePath, p model.LearnedPath) {
	e := t.env
	tp.resetCands()
	tp.first, tp.reason, tp.cause = -1, "", 0
	tp.set(flagAccReason, false)
	cause := RejectCause("")
	defer func() { tp.setCause(cause) }()
	switch {
	case p.Malformed != "":
		tp.reason, cause = malformedReason(p.Malformed)
		return
	case !p.Prefix.IsValid() || p.Prefix != p.Prefix.Masked():
		tp.reason, cause = fmt.Sprintf("malformed: prefix %s is invalid or has host bits set; such a path is never imported", p.Prefix), RejectMalformed
		return
	case p.Prefix.Addr().Is4In6():
		// masked, so Bits() >= 96: ::ffff:0:0/96 or inside it
		tp.reason, cause = fmt.Sprintf("malformed: prefix %s is IPv4-mapped IPv6 (inside ::ffff:0:0/96); such a path is never imported", p.Prefix), RejectMalformed
		return
	case p.Stale:
		if w, ok := t.staleWindow(p); ok && !w.Keep {
			tp.reason, cause = w.Why, RejectStale
			return
		}
	}
	if why := e.firstASWrong(p); why != "" {
		tp.reason, cause = why, RejectMalformed
		return
	}
	listed, attrWhy := false, ""
	for ri := range t.cfg.Import {
		r := &t.cfg.Import[ri]
		if !slices.Contains(r.Peers, p.Peer) {
			continue
		}
		listed = true
		if why := e.rejected(ri, p); why != "" {
			if tp.first < 0 {
				tp.first, tp.reason, cause = int32(ri), why, RejectCommunity
			}
			continue
		}
		entry, ok, lacks := e.acceptEntry(ri, p)
		if !ok {
			if attrWhy == "" {
				attrWhy = lacks
			}
			continue
		}
		reason, why := e.check(ri, p)
		if reason == "" {
			tp.addCand(ruleEntry{rule: int32(ri), entry: int32(entry)})
		}
		if tp.first < 0 {
			tp.first, tp.reason, cause = int32(ri), reason, why
		}
	}
	switch {
	case !listed:
		tp.reason, cause = fmt.Sprintf("no import rule lists peer %s: rejected by default (RFC 8212)", p.Peer), RejectNoRule
	case tp.first < 0 && attrWhy != "":
		tp.reason, cause = attrWhy, RejectAttributes
	case tp.first < 0:
		tp.reason, cause = e.noMatch(p), RejectNoMatch
	}
}

// staleWindow is the StaleWindow of p's peer and family, if known.
func (t *ImportTable) staleWindow(p model.LearnedPath) (StaleWindow, bool) {
	f := config.IPv6
	if p.Prefix.Addr().Is4() {
		f = config.IPv4
	}
	w, ok := t.stale[p.Peer][f]
	return w, ok
}

// StaleWhy says why p, a stale path, is kept ("" if it is not stale or
// nothing is known of its peer's graceful restart).
func (t *ImportTable) StaleWhy(p model.LearnedPath) string {
	if !p.Stale {
		return ""
	}
	if w, ok := t.staleWindow(p); ok {
		return w.Why
	}
	return "kept stale through its peer's graceful restart (RFC 4724)"
}

// groupsOf calls fn with each cap group the path is a candidate of.
func (t *ImportTable) groupsOf(tp *tablePath, fn func(capGroup)) {
	if !t.hasCaps {
		return
	}
	var buf [4]ruleEntry
	for _, c := range tp.allCands(buf[:0]) {
		if t.cfg.Import[c.rule].MaxRoutes > 0 {
			fn(capGroup{int(c.rule), t.peerOf(tp)})
		}
	}
}

func (t *ImportTable) capState(g capGroup) *capState {
	cs := t.caps[g]
	if cs == nil {
		cs = newCapState(g, t.cfg.Import[g.rule].MaxRoutes)
		t.caps[g] = cs
	}
	return cs
}

// join makes pfx a member of group g: kept while the group has room, held
// back otherwise.
func (t *ImportTable) join(pe *prefixEntry, pfx netip.Prefix, cs *capState) {
	m := capMember{cs: cs}
	if cs.kept < cs.max {
		cs.kept++
	} else {
		m.held = true
		cs.hold(pfx)
	}
	if pe.cap0 == nil {
		pe.cap0 = cs.ref(m.held)
		return
	}
	if pe.ext == nil {
		pe.ext = &entryExt{}
	}
	pe.ext.caps = append(pe.ext.caps, m)
}

// kept reports whether candidate c of a path of peer for the prefix of pe
// passes its rule's cap.
func (t *ImportTable) kept(pe *prefixEntry, c ruleEntry, peer string) bool {
	if t.cfg.Import[c.rule].MaxRoutes <= 0 {
		return true
	}
	for i := range pe.nCaps() {
		if m := pe.capAt(i); m.cs.g.rule == int(c.rule) && m.cs.g.peer == peer {
			return !m.held
		}
	}
	return false
}

// settle recomputes prefix pfx's verdicts (caps applied) from its paths'
// decisions; an entry left without paths is forgotten.
func (t *ImportTable) settle(pfx netip.Prefix, pe *prefixEntry) {
	n := pe.len()
	if n == 0 {
		t.unstat(pfx, pe)
		delete(t.prefixes, pfx)
		return
	}
	e := t.env
	var accBuf [4]candidate
	var candBuf [4]ruleEntry
	accepted := accBuf[:0]
	for i := range n {
		t.untally(pfx, pe.at(i))
	}
	defer func() {
		for i := range n {
			t.tally(pfx, pe.at(i))
		}
	}()
	for i := range n {
		tp := pe.at(i)
		peer := t.peerOf(tp)
		tp.set(flagAccepted, false)
		tp.rule = -1
		if tp.has(flagAccReason) {
			tp.reason = ""
			tp.set(flagAccReason, false)
		}
		if tp.rare != nil {
			tp.rare.accepted = ""
		}
		acc := accepted[len(accepted):]
		for _, c := range tp.allCands(candBuf[:0]) {
			if t.kept(pe, c, peer) {
				acc = append(acc, candidate{path: i, rule: int(c.rule), entry: int(c.entry)})
			}
		}
		if len(acc) > 0 {
			tp.set(flagAccepted, true)
			tp.rule = int32(acc[0].rule)
			shared := len(acc) == 1
			reason := acceptedReason(t.cfg, acc, t.reasons, func(ri int) string {
				a := &t.attrs.slots[tp.attrs]
				w := e.where(ri, model.LearnedPath{Peer: a.peer, Prefix: pfx, NextHop: a.nextHop})
				shared = shared && w == ""
				return w
			})
			switch {
			case shared:
				// the reason is t.reasons' of (rule, entry)
			case tp.reason == "":
				tp.reason = reason
				tp.set(flagAccReason, true)
			default:
				tp.rareOf().accepted = reason
			}
			accepted = append(accepted, acc...)
			continue
		}
		// held back by a cap (capped) unless the first rule's own
		// reason wins
		tp.rule = tp.first
	}
}

// routes appends the desired routes of pe's prefix to ovn and kernel and
// returns them with the keys not ovnbgp's in their way, from its paths'
// verdicts. They are made when asked, not kept: kept, they cost ~150 B per
// prefix, and a pass reads only those of the prefixes it touched.
func (t *ImportTable) routes(pfx netip.Prefix, pe *prefixEntry, ovn []model.OVNRoute, kernel []model.KernelRoute) ([]model.OVNRoute, []model.KernelRoute, []model.OVNRouteKey, []model.KernelRouteKey) {
	var accBuf [4]candidate
	var candBuf [4]ruleEntry
	var pathBuf [2]model.LearnedPath
	accepted, paths := accBuf[:0], pathBuf[:0]
	for i := range pe.len() {
		tp := pe.at(i)
		paths = append(paths, t.raw(pfx, tp))
		if !tp.accepted() {
			continue
		}
		for _, c := range tp.allCands(candBuf[:0]) {
			if t.kept(pe, c, t.peerOf(tp)) {
				accepted = append(accepted, candidate{path: i, rule: int(c.rule), entry: int(c.entry)})
			}
		}
	}
	if len(accepted) == 0 {
		return ovn, kernel, nil, nil
	}
	return t.env.targets(paths, accepted, ovn, kernel)
}

// TableChange is what changed since the table last decided: paths
// announced or replaced, paths gone, and kernel keys whose foreign state
// is stated anew (Foreign lists those of KernelKeys held by routes not
// ovnbgp's now; the others are not).
type TableChange struct {
	Paths      []model.LearnedPath
	Gone       []model.Key
	KernelKeys []model.KernelRouteKey
	Foreign    []model.KernelRouteKey
	// Installed, if set, are the routes installed now, for a change that
	// fills a table (NewImportTable's): the cap memberships the change
	// ends go first, then of the prefixes that join a cap group, those
	// installed through the group's peer (a full pass keeps what is
	// installed), then the others in prefix order. Without it, caps are
	// decided a prefix at a time in prefix order, as a ChangeQueue's parts
	// are (which never carry it).
	Installed *Installed
}

// Update decides again the prefixes that c touches, and those a cap's
// freed slot lets in, and returns them in prefix order: only their
// desired routes can have changed.
func (t *ImportTable) Update(c TableChange) (touched []netip.Prefix) {
	defer func() { t.dirtied(touched) }()
	queue := make([]netip.Prefix, 0, len(c.Paths)+len(c.Gone))
	for _, k := range c.Gone {
		if t.remove(k) {
			queue = append(queue, k.Prefix)
		}
	}
	for _, p := range c.Paths {
		t.put(p)
		queue = append(queue, p.Prefix)
	}
	if len(c.KernelKeys) > 0 {
		foreign := make(map[model.KernelRouteKey]bool, len(c.Foreign))
		for _, k := range c.Foreign {
			foreign[k] = true
		}
		for _, k := range c.KernelKeys {
			if t.env.foreign[k] != foreign[k] {
				if foreign[k] {
					t.env.foreign[k] = true
				} else {
					delete(t.env.foreign, k)
				}
				queue = append(queue, k.Prefix)
			}
		}
	}
	slices.SortFunc(queue, model.ComparePrefix)
	queue = slices.Compact(queue)
	var freed []netip.Prefix
	if c.Installed == nil {
		// Caps in prefix order, a prefix at a time: what a change decided
		// in parts (ChangeQueue) decides the same.
		for _, pfx := range queue {
			pe := t.prefixes[pfx]
			f, joins := t.recap(pfx, pe, nil)
			t.joinAll(joins, nil)
			freed = append(freed, f...)
			if pe != nil {
				t.settle(pfx, pe)
			}
		}
	} else {
		// Caps: every membership that ends first (a freed slot goes to
		// the prefix its cap held back first), then the new ones,
		// installed first.
		var joins []capJoin
		for _, pfx := range queue {
			var f []netip.Prefix
			f, joins = t.recap(pfx, t.prefixes[pfx], joins)
			freed = append(freed, f...)
		}
		t.joinAll(joins, c.Installed)
		for _, pfx := range queue {
			if pe := t.prefixes[pfx]; pe != nil {
				t.settle(pfx, pe)
			}
		}
	}
	if len(freed) == 0 {
		return queue
	}
	// A freed slot's prefix is decided again, even if it was a moment
	// ago (held back then); deciding a prefix twice changes nothing.
	for i := 0; i < len(freed); i++ {
		pfx := freed[i]
		pe := t.prefixes[pfx]
		f, joins := t.recap(pfx, pe, nil)
		t.joinAll(joins, nil)
		freed = append(freed, f...)
		if pe != nil {
			t.settle(pfx, pe)
		}
	}
	out := append(queue, freed...)
	slices.SortFunc(out, model.ComparePrefix)
	return slices.Compact(out)
}

// recap updates pfx's cap group memberships from its paths' decisions: a
// kept prefix that leaves frees its slot for the first held-back prefix
// in prefix order, which is returned (its verdict changes); the groups it
// joins are appended to joins (joinAll).
func (t *ImportTable) recap(pfx netip.Prefix, pe *prefixEntry, joins []capJoin) ([]netip.Prefix, []capJoin) {
	if !t.hasCaps || pe == nil {
		return nil, joins
	}
	var wantBuf [4]capGroup
	want := wantBuf[:0]
	for i := range pe.len() {
		tp := pe.at(i)
		t.groupsOf(tp, func(g capGroup) {
			if !slices.Contains(want, g) {
				want = append(want, g)
				if cs := t.caps[g]; cs == nil || !pe.isMember(cs) {
					joins = append(joins, capJoin{pe: pe, prefix: pfx, g: g, nextHop: t.attrs.slots[tp.attrs].nextHop})
				}
			}
		})
	}
	var freed []netip.Prefix
	var stayBuf [4]capMember
	stay := stayBuf[:0]
	for i := range pe.nCaps() {
		m := pe.capAt(i)
		switch {
		case slices.Contains(want, m.cs.g):
			stay = append(stay, m)
		case m.held:
			m.cs.unhold(pfx)
		default:
			m.cs.kept--
			if first, ok := m.cs.takeFirst(); ok {
				m.cs.kept++
				t.prefixes[first].setHeld(m.cs, false)
				freed = append(freed, first)
			}
		}
	}
	if len(stay) != pe.nCaps() {
		pe.setCaps(stay)
	}
	return freed, joins
}

// capJoin is a prefix that joins a cap group (through its path of the
// group's peer, whose next hop says whether it is installed).
type capJoin struct {
	pe        *prefixEntry
	prefix    netip.Prefix
	g         capGroup
	nextHop   netip.Addr
	installed bool
}

// joinAll makes each prefix of joins a member of its group, those
// installed now (in; nil: none) first, then in prefix order: kept while
// the group has room, held back after.
func (t *ImportTable) joinAll(joins []capJoin, in *Installed) {
	if in != nil {
		for i := range joins {
			j := &joins[i]
			j.installed = t.env.installed(in, j.g.rule, j.prefix, j.nextHop)
		}
		slices.SortStableFunc(joins, func(a, b capJoin) int {
			if a.installed != b.installed {
				if a.installed {
					return -1
				}
				return 1
			}
			return model.ComparePrefix(a.prefix, b.prefix)
		})
	}
	for _, j := range joins {
		t.join(j.pe, j.prefix, t.capState(j.g))
	}
}

// Desired returns the desired OVN rows and kernel routes of the given
// prefixes, sorted as in ImportResult.
func (t *ImportTable) Desired(prefixes []netip.Prefix) ([]model.OVNRoute, []model.KernelRoute) {
	var ovn []model.OVNRoute
	kernel := make([]model.KernelRoute, 0, len(prefixes))
	for _, p := range prefixes {
		if pe := t.prefixes[p]; pe != nil {
			ovn, kernel, _, _ = t.routes(p, pe, ovn, kernel)
		}
	}
	slices.SortFunc(ovn, compareOVN)
	slices.SortFunc(kernel, compareKernel)
	return ovn, kernel
}

// KernelTables are the kernel tables the rules import into: the keys of a
// prefix that can hold ovnbgp's routes for it.
func (t *ImportTable) KernelTables() []uint32 {
	var out []uint32
	for _, tb := range t.env.tables {
		if tb != 0 && !slices.Contains(out, tb) {
			out = append(out, tb)
		}
	}
	return out
}

// Len is the number of paths.
func (t *ImportTable) Len() int { return t.n }

// each calls fn for every path, until fn returns false.
func (t *ImportTable) each(fn func(netip.Prefix, *tablePath) bool) {
	for pfx, pe := range t.prefixes {
		for i := range pe.len() {
			if !fn(pfx, pe.at(i)) {
				return
			}
		}
	}
}

// TableCounts are the table's figures: per peer, the accepted paths per family
// ("ipv4", "ipv6") and the accepted paths whose next hop is in installed
// for their prefix (model.PeerStatus.Imported); and the accepted and
// rejected paths in all.
type TableCounts struct {
	Accepted, Rejected int
	ByPeer             map[string]PeerCounts
	// RejectedBy counts the rejected paths by peer and cause.
	RejectedBy map[Rejection]int
}

// Rejection is a peer and a cause, a key of TableCounts.RejectedBy.
type Rejection struct {
	Peer  string
	Cause RejectCause
}

// PeerCounts are one peer's figures in TableCounts.
type PeerCounts struct {
	IPv4, IPv6, Installed int
}

// tally adds tp's verdict to the table's counts.
func (t *ImportTable) tally(pfx netip.Prefix, tp *tablePath) {
	c := &t.counts
	peer := t.peerOf(tp)
	tp.set(flagTallied, true)
	tp.set(flagTalliedAcc, tp.accepted())
	tp.talliedCause = 0
	if !tp.accepted() {
		tp.talliedCause = tp.cause
		if tp.capped() >= 0 {
			tp.talliedCause = causeCode(RejectImportCap)
		}
		c.Rejected++
		c.RejectedBy[Rejection{peer, tp.causeOf(tp.talliedCause)}]++
		return
	}
	c.Accepted++
	pc := c.ByPeer[peer]
	if pfx.Addr().Is4() {
		pc.IPv4++
	} else {
		pc.IPv6++
	}
	c.ByPeer[peer] = pc
}

// untally takes tp's verdict, as tallied, out of the table's counts.
func (t *ImportTable) untally(pfx netip.Prefix, tp *tablePath) {
	if tp == nil || !tp.has(flagTallied) {
		return
	}
	tp.set(flagTallied, false)
	c := &t.counts
	peer := t.peerOf(tp)
	if !tp.has(flagTalliedAcc) {
		c.Rejected--
		k := Rejection{peer, tp.causeOf(tp.talliedCause)}
		if c.RejectedBy[k]--; c.RejectedBy[k] == 0 {
			delete(c.RejectedBy, k)
		}
		return
	}
	c.Accepted--
	pc := c.ByPeer[peer]
	if pfx.Addr().Is4() {
		pc.IPv4--
	} else {
		pc.IPv6--
	}
	if pc == (PeerCounts{}) {
		delete(c.ByPeer, peer)
	} else {
		c.ByPeer[peer] = pc
	}
}

// Count counts the table's paths; installed says whether a next hop of a
// prefix is really installed (nil: none is); it is asked with the next hop
// without zone, as installed routes carry it (a link-local one's zone is
// the kernel route's device, issue 20). Without installed it is
// O(peers): the counts are kept as paths are decided; with it, a walk
// that asks installed of the accepted paths only (100k paths: ~9 ms, not
// the 24 ms of counting every one again).
func (t *ImportTable) Count(installed func(netip.Prefix, netip.Addr) bool) TableCounts {
	c := TableCounts{Accepted: t.counts.Accepted, Rejected: t.counts.Rejected,
		ByPeer: maps.Clone(t.counts.ByPeer), RejectedBy: maps.Clone(t.counts.RejectedBy)}
	if installed == nil {
		return c
	}
	t.each(func(pfx netip.Prefix, tp *tablePath) bool {
		if a := &t.attrs.slots[tp.attrs]; tp.accepted() && installed(pfx, a.nextHop.WithZone("")) {
			pc := c.ByPeer[a.peer]
			pc.Installed++
			c.ByPeer[a.peer] = pc
		}
		return true
	})
	return c
}

// countWalk is Count by a walk of every path (the tests' check of the
// counts kept).
func (t *ImportTable) countWalk(installed func(netip.Prefix, netip.Addr) bool) TableCounts {
	c := TableCounts{ByPeer: map[string]PeerCounts{}, RejectedBy: map[Rejection]int{}}
	t.each(func(pfx netip.Prefix, tp *tablePath) bool {
		p := t.learned(pfx, tp)
		if !p.Accepted {
			c.Rejected++
			cause := tp.getCause()
			if tp.capped() >= 0 {
				cause = RejectImportCap
			}
			c.RejectedBy[Rejection{p.Peer, cause}]++
			return true
		}
		c.Accepted++
		pc := c.ByPeer[p.Peer]
		if p.Prefix.Addr().Is4() {
			pc.IPv4++
		} else {
			pc.IPv6++
		}
		if installed != nil && installed(p.Prefix, p.NextHop.WithZone("")) {
			pc.Installed++
		}
		c.ByPeer[p.Peer] = pc
		return true
	})
	return c
}

// Alarms are the caps reached, sorted by rule and peer.
func (t *ImportTable) Alarms() []ImportAlarm {
	var out []ImportAlarm
	for g, cs := range t.caps {
		r := &t.cfg.Import[g.rule]
		if n := cs.kept + cs.nHeld(); cs.nHeld() > 0 {
			out = append(out, ImportAlarm{Rule: r.Name, Peer: g.peer, Max: r.MaxRoutes, Wanted: n})
		}
	}
	slices.SortFunc(out, func(a, b ImportAlarm) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Peer, b.Peer))
	})
	return out
}

// path is tp's path of prefix pfx with its reason filled in.
func (t *ImportTable) path(pfx netip.Prefix, tp *tablePath) model.LearnedPath {
	p := t.learned(pfx, tp)
	if tp.capped() >= 0 && p.Reason == "" {
		r := &t.cfg.Import[tp.capped()]
		n := 0
		if cs := t.caps[capGroup{int(tp.capped()), p.Peer}]; cs != nil {
			n = cs.kept + cs.nHeld()
		}
		p.Reason = ImportAlarm{Rule: r.Name, Peer: p.Peer, Max: r.MaxRoutes, Wanted: n}.String()
	}
	return p
}

// Result is the whole decision: every path (in the order first given),
// the desired routes and VRFs, the alarms and problems.
func (t *ImportTable) Result() ImportResult {
	res := ImportResult{Protected: t.prot, Problems: slices.Clone(t.env.problems), VRFs: t.env.createVRFs, Alarms: t.Alarms()}
	tps := t.sorted()
	res.Paths = make([]model.LearnedPath, len(tps))
	for i, tp := range tps {
		res.Paths[i] = t.path(tp.pfx, tp.tp)
		if p := res.Paths[i]; p.Stale && p.Accepted {
			if res.StaleWhy == nil {
				res.StaleWhy = map[string]string{}
			}
			res.StaleWhy[StaleKey(p.Peer, p.Prefix)] = t.StaleWhy(p)
		}
	}
	var fovn []model.OVNRouteKey
	var fk []model.KernelRouteKey
	res.Kernel = make([]model.KernelRoute, 0, len(t.prefixes))
	for pfx, pe := range t.prefixes {
		var fo []model.OVNRouteKey
		var f []model.KernelRouteKey
		res.OVN, res.Kernel, fo, f = t.routes(pfx, pe, res.OVN, res.Kernel)
		fovn, fk = append(fovn, fo...), append(fk, f...)
	}
	slices.SortFunc(res.OVN, compareOVN)
	slices.SortFunc(res.Kernel, compareKernel)
	res.Problems = append(res.Problems, foreignProblems(fovn, fk)...)
	return res
}

// foreignProblems name the accepted routes that a route not ovnbgp's
// holds, at most ten of each target by name.
func foreignProblems(fovn []model.OVNRouteKey, fk []model.KernelRouteKey) []string {
	slices.SortFunc(fovn, func(a, b model.OVNRouteKey) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), model.ComparePrefix(a.Prefix, b.Prefix), a.NextHop.Compare(b.NextHop))
	})
	slices.SortFunc(fk, func(a, b model.KernelRouteKey) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), model.ComparePrefix(a.Prefix, b.Prefix))
	})
	const named = 10
	var out []string
	for i, k := range fovn {
		if i == named {
			out = append(out, fmt.Sprintf("%d more accepted routes are on their gateway router already, as static routes not ovnbgp's", len(fovn)-named))
			break
		}
		out = append(out, fmt.Sprintf("%s: %s via %s is there already as a static route not ovnbgp's: no duplicate added (it is left alone)", k.Router, k.Prefix, k.NextHop))
	}
	for i, k := range fk {
		if i == named {
			out = append(out, fmt.Sprintf("%d more accepted prefixes are held in their kernel table by routes not ovnbgp's", len(fk)-named))
			break
		}
		out = append(out, fmt.Sprintf("table %d: %s is held by a route not ovnbgp's: not imported there (it is left alone; remove it to let ovnbgp install its own)", k.Table, k.Prefix))
	}
	return out
}

// Each calls fn for every path with its decision, in no particular order,
// until fn returns false.
func (t *ImportTable) Each(fn func(model.LearnedPath) bool) {
	t.each(func(pfx netip.Prefix, tp *tablePath) bool { return fn(t.path(pfx, tp)) })
}

// DecidedPaths are a table's paths with their decisions, copied by
// Decided; Paths makes the reasons that are made when asked (a cap's), so
// that a caller holding a lock around the table copies under it and
// formats after.
type DecidedPaths struct {
	cfg    *config.Config
	paths  []model.LearnedPath
	capped []cappedPath
}

// cappedPath is paths[i], held back by rule's cap of a group that wanted
// more than it keeps.
type cappedPath struct {
	i      int
	rule   int32
	wanted int
}

// Decided copies every path with its decision (as Each gives them, in no
// particular order), without making any reason: 100k paths, ~30 ms (a
// copy of ~20 MB), where Each took ~75 ms.
func (t *ImportTable) Decided() DecidedPaths {
	d := DecidedPaths{cfg: t.cfg, paths: make([]model.LearnedPath, 0, t.n)}
	t.each(func(pfx netip.Prefix, tp *tablePath) bool {
		p := t.learned(pfx, tp)
		if tp.capped() >= 0 && p.Reason == "" {
			n := 0
			if cs := t.caps[capGroup{int(tp.capped()), p.Peer}]; cs != nil {
				n = cs.kept + cs.nHeld()
			}
			d.capped = append(d.capped, cappedPath{i: len(d.paths), rule: tp.capped(), wanted: n})
		}
		d.paths = append(d.paths, p)
		return true
	})
	return d
}

// Paths are the paths with every reason, as Each gives them.
func (d DecidedPaths) Paths() []model.LearnedPath {
	for _, c := range d.capped {
		p := &d.paths[c.i]
		r := &d.cfg.Import[c.rule]
		p.Reason = ImportAlarm{Rule: r.Name, Peer: p.Peer, Max: r.MaxRoutes, Wanted: c.wanted}.String()
	}
	return d.paths
}

// EachAccepted calls fn with the prefix of every accepted path (once per
// path), in no particular order: Each without making any reason, for
// callers that count (a table of 100k held-back paths made 100k cap
// reasons, each a Sprintf, under the daemon's lock).
func (t *ImportTable) EachAccepted(fn func(netip.Prefix)) {
	t.each(func(pfx netip.Prefix, tp *tablePath) bool {
		if tp.accepted() {
			fn(pfx)
		}
		return true
	})
}

// keyedPath is a path and its prefix.
type keyedPath struct {
	pfx netip.Prefix
	tp  *tablePath
}

// sorted are the paths in the order first given.
func (t *ImportTable) sorted() []keyedPath {
	tps := make([]keyedPath, 0, t.n)
	t.each(func(pfx netip.Prefix, tp *tablePath) bool {
		tps = append(tps, keyedPath{pfx, tp})
		return true
	})
	slices.SortFunc(tps, func(a, b keyedPath) int { return cmp.Compare(a.tp.seq, b.tp.seq) })
	return tps
}

// Learned returns the path of key k as the peer sent it (no decision).
func (t *ImportTable) Learned(k model.Key) (model.LearnedPath, bool) {
	pe := t.prefixes[k.Prefix]
	if pe == nil {
		return model.LearnedPath{}, false
	}
	tp := t.pathOf(pe, k.Peer)
	if tp == nil {
		return model.LearnedPath{}, false
	}
	return t.raw(k.Prefix, tp), true
}

// LearnedPaths are every path as the peers sent it (no decision), in the
// order first given: the input of another decision (a plan of a new
// config).
func (t *ImportTable) LearnedPaths() []model.LearnedPath {
	tps := t.sorted()
	out := make([]model.LearnedPath, len(tps))
	for i, tp := range tps {
		out[i] = t.raw(tp.pfx, tp.tp)
	}
	return out
}

// PeerKeys are the keys of every path of peer.
func (t *ImportTable) PeerKeys(peer string) []model.Key {
	var out []model.Key
	t.each(func(pfx netip.Prefix, tp *tablePath) bool {
		if t.peerOf(tp) == peer {
			out = append(out, model.Key{Peer: peer, Prefix: pfx})
		}
		return true
	})
	return out
}

// VRFs are the VRF devices the rules ask to be created.
func (t *ImportTable) VRFs() []model.VRFDevice { return t.env.createVRFs }

// Sizes are the numbers of desired OVN rows and kernel routes (for
// status: a walk of the table the first time, then the cost of what
// changed since).
func (t *ImportTable) Sizes() (ovn, kernel int) {
	st := t.statsNow()
	return st.ovn, st.kernel
}

// dirtied marks prefixes whose desired routes may have changed: the
// stats count them again when next asked. Past the table's size a walk is
// cheaper: the stats are dropped and made anew.
func (t *ImportTable) dirtied(prefixes []netip.Prefix) {
	st := t.stats
	if st == nil {
		return
	}
	st.dirty = append(st.dirty, prefixes...)
	if len(st.dirty) > len(t.prefixes)+1024 {
		t.stats = nil
	}
}

// unstat takes pe's routes out of the stats.
func (t *ImportTable) unstat(pfx netip.Prefix, pe *prefixEntry) {
	st := t.stats
	if st == nil {
		return
	}
	st.ovn -= int(pe.nOVN)
	st.kernel -= int(pe.nKernel)
	pe.nOVN, pe.nKernel = 0, 0
	delete(st.foreignOVN, pfx)
	delete(st.foreignKernel, pfx)
}

// stat counts pe's routes into the stats (after unstat).
func (t *ImportTable) stat(pfx netip.Prefix, pe *prefixEntry, ovn []model.OVNRoute, kernel []model.KernelRoute) ([]model.OVNRoute, []model.KernelRoute) {
	st := t.stats
	var fo []model.OVNRouteKey
	var fk []model.KernelRouteKey
	ovn, kernel, fo, fk = t.routes(pfx, pe, ovn[:0], kernel[:0])
	pe.nOVN, pe.nKernel = int32(len(ovn)), int32(len(kernel))
	st.ovn += len(ovn)
	st.kernel += len(kernel)
	if len(fo) > 0 {
		st.foreignOVN[pfx] = fo
	}
	if len(fk) > 0 {
		st.foreignKernel[pfx] = fk
	}
	return ovn, kernel
}

// statsNow makes the stats for Sizes and Problems: a walk of the table the
// first time, then only the prefixes decided since.
func (t *ImportTable) statsNow() *tableStats {
	var ovn []model.OVNRoute
	var kernel []model.KernelRoute
	if st := t.stats; st != nil {
		slices.SortFunc(st.dirty, model.ComparePrefix)
		for _, pfx := range slices.Compact(st.dirty) {
			if pe := t.prefixes[pfx]; pe != nil {
				t.unstat(pfx, pe)
				ovn, kernel = t.stat(pfx, pe, ovn, kernel)
			}
		}
		st.dirty = nil
		return st
	}
	t.stats = &tableStats{foreignOVN: map[netip.Prefix][]model.OVNRouteKey{}, foreignKernel: map[netip.Prefix][]model.KernelRouteKey{}}
	for pfx, pe := range t.prefixes {
		ovn, kernel = t.stat(pfx, pe, ovn, kernel)
	}
	return t.stats
}

// Problems are the rule-level problems and the foreign routes in the way,
// as in ImportResult.
func (t *ImportTable) Problems() []string {
	st := t.statsNow()
	var fovn []model.OVNRouteKey
	var fk []model.KernelRouteKey
	for _, fo := range st.foreignOVN {
		fovn = append(fovn, fo...)
	}
	for _, f := range st.foreignKernel {
		fk = append(fk, f...)
	}
	return append(slices.Clone(t.env.problems), foreignProblems(fovn, fk)...)
}
