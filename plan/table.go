package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// ImportTable is the import decision kept between passes: every learned
// path with its verdict, the import caps' state, and the desired OVN static
// routes and kernel routes, by prefix. NewImportTable decides everything
// (Import is NewImportTable(in).Result()); Update decides again only the
// prefixes a change touches, so a pass costs what changed, not the size of
// the table. The environment (config, gateway routers, protected prefixes,
// links, VRFs) is fixed for a table: when it changes, build a new one.
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
	// prefixes holds, per prefix, one path per peer and what they make
	// the targets want; n counts the paths.
	prefixes map[netip.Prefix]*prefixEntry
	n        int
	seq      uint64
	// caps are the (rule, peer) groups of rules with maxRoutes; hasCaps
	// says a rule has one.
	caps    map[capGroup]*capState
	hasCaps bool
	// reasons: one accepted-reason string per (rule, entry), shared.
	reasons map[[2]int]string
}

// prefixEntry is one prefix: its paths (one per peer, in the order first
// given), the desired routes they make, and the routes not ovnbgp's in
// their way. One map lookup finds it all.
type prefixEntry struct {
	paths      []tablePath
	ovn        []model.OVNRoute
	kernel     []model.KernelRoute
	foreignOVN []model.OVNRouteKey
	foreignK   []model.KernelRouteKey
}

// path is the entry's path of peer, or nil.
func (pe *prefixEntry) path(peer string) *tablePath {
	for i := range pe.paths {
		if pe.paths[i].p.Peer == peer {
			return &pe.paths[i]
		}
	}
	return nil
}

// tablePath is a learned path with its decision.
type tablePath struct {
	p model.LearnedPath
	// seq orders paths as they were first given.
	seq uint64
	// cands are the rules (and their accept entry) whose every check but
	// the cap the path passes, in config order: the first two inline.
	cands candidates
	// first is the first rule whose accept matched (-1: none) and reason
	// its verdict ("" when it passed), or the reason when none did.
	first  int32
	reason string
	// capped is the rule whose cap held the path back from every rule
	// that accepted it (-1: none); the reason is made when asked for,
	// since it counts what the peer offers now.
	capped int32
}

// candidates is a short list of rule entries kept without an allocation
// up to two (a path rarely passes more rules).
type candidates struct {
	n      uint8
	inline [2]ruleEntry
	more   []ruleEntry
}

func (c *candidates) reset() { c.n, c.more = 0, c.more[:0] }

func (c *candidates) add(r ruleEntry) {
	if int(c.n) < len(c.inline) {
		c.inline[c.n] = r
	} else {
		c.more = append(c.more, r)
	}
	c.n++
}

// all appends the candidates to buf.
func (c *candidates) all(buf []ruleEntry) []ruleEntry {
	return append(append(buf, c.inline[:min(int(c.n), len(c.inline))]...), c.more...)
}

type ruleEntry struct {
	rule, entry int32
}

type capGroup struct {
	rule int
	peer string
}

// capState is one (rule, peer) group's prefixes: kept (at most maxRoutes)
// and held back by the cap.
type capState struct {
	kept, held map[netip.Prefix]struct{}
}

// NewImportTable decides every path of in. Paths are keyed by (peer,
// prefix): of two paths with the same key the later one is kept. Where a
// cap holds prefixes back, the prefixes installed now (owned OVN rows of
// the rule, routes in its kernel table) are kept first, then the others in
// prefix order.
func NewImportTable(in ImportInput) *ImportTable {
	cfg := in.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	prot := Protected(cfg, in.Snapshot, in.Host)
	t := &ImportTable{
		cfg: cfg, env: newImportEnv(cfg, in.Snapshot, in.Host, prot), prot: prot,
		prefixes: make(map[netip.Prefix]*prefixEntry, len(in.Learned)),
		caps:     map[capGroup]*capState{}, reasons: map[[2]int]string{},
	}
	t.hasCaps = slices.ContainsFunc(cfg.Import, func(r config.ImportRule) bool { return r.MaxRoutes > 0 })
	for _, p := range in.Learned {
		t.put(p)
	}
	// Caps: per group, the installed prefixes first, then prefix order.
	groups := map[capGroup][]netip.Prefix{}
	for _, pe := range t.prefixes {
		for i := range pe.paths {
			for _, g := range t.groupsOf(&pe.paths[i]) {
				groups[g] = append(groups[g], pe.paths[i].p.Prefix)
			}
		}
	}
	for g, pfxs := range groups {
		max := t.cfg.Import[g.rule].MaxRoutes
		slices.SortFunc(pfxs, func(a, b netip.Prefix) int {
			ia, ib := t.env.installed(g.rule, a), t.env.installed(g.rule, b)
			if ia != ib {
				if ia {
					return -1
				}
				return 1
			}
			return comparePrefix(a, b)
		})
		cs := t.capState(g)
		for i, p := range pfxs {
			if i < max {
				cs.kept[p] = struct{}{}
			} else {
				cs.held[p] = struct{}{}
			}
		}
	}
	for pfx, pe := range t.prefixes {
		t.settle(pfx, pe)
	}
	return t
}

// put stores path p (replacing the path of its key) and decides it
// against every rule, caps aside.
func (t *ImportTable) put(p model.LearnedPath) {
	pe := t.prefixes[p.Prefix]
	if pe == nil {
		pe = &prefixEntry{}
		t.prefixes[p.Prefix] = pe
	}
	tp := pe.path(p.Peer)
	if tp == nil {
		pe.paths = append(pe.paths, tablePath{seq: t.seq})
		t.seq++
		t.n++
		tp = &pe.paths[len(pe.paths)-1]
	}
	tp.p = p
	t.decide(tp)
}

// remove forgets the path of key k.
func (t *ImportTable) remove(k model.Key) bool {
	pe := t.prefixes[k.Prefix]
	if pe == nil || pe.path(k.Peer) == nil {
		return false
	}
	pe.paths = slices.DeleteFunc(pe.paths, func(tp tablePath) bool { return tp.p.Peer == k.Peer })
	t.n--
	if len(pe.paths) == 0 {
		// settle forgets the entry once its routes are recomputed
		pe.paths = nil
	}
	return true
}

// decide runs every check of every rule listing the path's peer (the
// order is in docs/config.md, "Import decision"); the caps come later.
func (t *ImportTable) decide(tp *tablePath) {
	p, e := tp.p, t.env
	tp.cands.reset()
	tp.first, tp.reason, tp.capped = -1, "", -1
	switch {
	case p.Malformed != "":
		tp.reason = malformedReason(p.Malformed)
		return
	case !p.Prefix.IsValid() || p.Prefix != p.Prefix.Masked():
		tp.reason = fmt.Sprintf("malformed: prefix %s is invalid or has host bits set; such a path is never imported", p.Prefix)
		return
	case p.Prefix.Addr().Is4In6():
		// masked, so Bits() >= 96: ::ffff:0:0/96 or inside it
		tp.reason = fmt.Sprintf("malformed: prefix %s is IPv4-mapped IPv6 (inside ::ffff:0:0/96); such a path is never imported", p.Prefix)
		return
	}
	listed := false
	for ri := range t.cfg.Import {
		r := &t.cfg.Import[ri]
		if !slices.Contains(r.Peers, p.Peer) {
			continue
		}
		listed = true
		entry, ok := acceptEntry(r, p.Prefix)
		if !ok {
			continue
		}
		reason := e.check(ri, p)
		if reason == "" {
			tp.cands.add(ruleEntry{rule: int32(ri), entry: int32(entry)})
		}
		if tp.first < 0 {
			tp.first, tp.reason = int32(ri), reason
		}
	}
	switch {
	case !listed:
		tp.reason = fmt.Sprintf("no import rule lists peer %s: rejected by default (RFC 8212)", p.Peer)
	case tp.first < 0:
		tp.reason = e.noMatch(p)
	}
}

// groupsOf are the cap groups the path is a candidate of.
func (t *ImportTable) groupsOf(tp *tablePath) []capGroup {
	if !t.hasCaps {
		return nil
	}
	var buf [4]ruleEntry
	var out []capGroup
	for _, c := range tp.cands.all(buf[:0]) {
		if t.cfg.Import[c.rule].MaxRoutes > 0 {
			out = append(out, capGroup{int(c.rule), tp.p.Peer})
		}
	}
	return out
}

func (t *ImportTable) capState(g capGroup) *capState {
	cs := t.caps[g]
	if cs == nil {
		cs = &capState{kept: map[netip.Prefix]struct{}{}, held: map[netip.Prefix]struct{}{}}
		t.caps[g] = cs
	}
	return cs
}

// kept reports whether candidate c of a path of peer for pfx passes its
// rule's cap.
func (t *ImportTable) kept(c ruleEntry, peer string, pfx netip.Prefix) bool {
	if t.cfg.Import[c.rule].MaxRoutes <= 0 {
		return true
	}
	cs := t.caps[capGroup{int(c.rule), peer}]
	if cs == nil {
		return false
	}
	_, ok := cs.kept[pfx]
	return ok
}

// settle recomputes prefix pfx's verdicts (caps applied) and desired
// routes from its paths' decisions; an entry left without paths is
// forgotten.
func (t *ImportTable) settle(pfx netip.Prefix, pe *prefixEntry) {
	if len(pe.paths) == 0 {
		delete(t.prefixes, pfx)
		return
	}
	e := t.env
	var accBuf [4]candidate
	var candBuf [4]ruleEntry
	accepted := accBuf[:0]
	if len(pe.paths) > 1 {
		slices.SortFunc(pe.paths, func(a, b tablePath) int { return cmp.Compare(a.seq, b.seq) })
	}
	for i := range pe.paths {
		tp := &pe.paths[i]
		p := &tp.p
		p.Accepted, p.Rule, p.Reason, tp.capped = false, "", "", -1
		acc := accepted[len(accepted):]
		for _, c := range tp.cands.all(candBuf[:0]) {
			if t.kept(c, p.Peer, pfx) {
				acc = append(acc, candidate{path: i, rule: int(c.rule), entry: int(c.entry)})
			} else if tp.capped < 0 {
				tp.capped = c.rule
			}
		}
		if len(acc) > 0 {
			tp.capped = -1
			p.Accepted = true
			p.Rule = t.cfg.Import[acc[0].rule].Name
			p.Reason = acceptedReason(t.cfg, acc, t.reasons, func(ri int) string { return e.where(ri, *p) })
			accepted = append(accepted, acc...)
			continue
		}
		if tp.first >= 0 {
			p.Rule = t.cfg.Import[tp.first].Name
		}
		p.Reason = tp.reason
		if p.Reason != "" {
			tp.capped = -1 // the first rule's own reason wins
		}
	}
	var pathBuf [2]model.LearnedPath
	paths := pathBuf[:0]
	for i := range pe.paths {
		paths = append(paths, pe.paths[i].p)
	}
	pe.ovn, pe.kernel, pe.foreignOVN, pe.foreignK = e.targets(paths, accepted)
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
}

// Update decides again the prefixes that c touches, and those a cap's
// freed slot lets in, and returns them in prefix order: only their
// desired routes can have changed.
func (t *ImportTable) Update(c TableChange) []netip.Prefix {
	dirty := map[netip.Prefix]bool{}
	for _, k := range c.Gone {
		if t.remove(k) {
			dirty[k.Prefix] = true
		}
	}
	for _, p := range c.Paths {
		t.put(p)
		dirty[p.Prefix] = true
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
				dirty[k.Prefix] = true
			}
		}
	}
	queue := make([]netip.Prefix, 0, len(dirty))
	for p := range dirty {
		queue = append(queue, p)
	}
	slices.SortFunc(queue, comparePrefix)
	done := make(map[netip.Prefix]bool, len(queue))
	for i := 0; i < len(queue); i++ {
		pfx := queue[i]
		if done[pfx] {
			continue
		}
		done[pfx] = true
		pe := t.prefixes[pfx]
		for _, freed := range t.recap(pfx, pe) {
			if !done[freed] {
				queue = append(queue, freed)
			}
		}
		if pe != nil {
			t.settle(pfx, pe)
		}
	}
	out := make([]netip.Prefix, 0, len(done))
	for p := range done {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePrefix)
	return out
}

// recap updates every cap group's membership of pfx from its paths'
// decisions: a new candidate is kept while the group has room and held
// back otherwise; a kept prefix that leaves frees its slot for the first
// held-back prefix in prefix order, which is returned (its verdict
// changes).
func (t *ImportTable) recap(pfx netip.Prefix, pe *prefixEntry) []netip.Prefix {
	if !t.hasCaps {
		return nil
	}
	var want []capGroup
	if pe != nil {
		for i := range pe.paths {
			want = append(want, t.groupsOf(&pe.paths[i])...)
		}
	}
	var freed []netip.Prefix
	for g, cs := range t.caps {
		_, isKept := cs.kept[pfx]
		_, isHeld := cs.held[pfx]
		switch {
		case slices.Contains(want, g) || !(isKept || isHeld):
		case isHeld:
			delete(cs.held, pfx)
		default:
			delete(cs.kept, pfx)
			if len(cs.held) > 0 {
				first := netip.Prefix{}
				for h := range cs.held {
					if !first.IsValid() || comparePrefix(h, first) < 0 {
						first = h
					}
				}
				delete(cs.held, first)
				cs.kept[first] = struct{}{}
				freed = append(freed, first)
			}
		}
	}
	for _, g := range want {
		cs := t.capState(g)
		_, isKept := cs.kept[pfx]
		_, isHeld := cs.held[pfx]
		switch {
		case isKept || isHeld:
		case len(cs.kept) < t.cfg.Import[g.rule].MaxRoutes:
			cs.kept[pfx] = struct{}{}
		default:
			cs.held[pfx] = struct{}{}
		}
	}
	return freed
}

// Desired returns the desired OVN rows and kernel routes of the given
// prefixes, sorted as in ImportResult.
func (t *ImportTable) Desired(prefixes []netip.Prefix) ([]model.OVNRoute, []model.KernelRoute) {
	var ovn []model.OVNRoute
	var kernel []model.KernelRoute
	for _, p := range prefixes {
		if pe := t.prefixes[p]; pe != nil {
			ovn = append(ovn, pe.ovn...)
			kernel = append(kernel, pe.kernel...)
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
func (t *ImportTable) each(fn func(*tablePath) bool) {
	for _, pe := range t.prefixes {
		for i := range pe.paths {
			if !fn(&pe.paths[i]) {
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
}

// PeerCounts are one peer's figures in TableCounts.
type PeerCounts struct {
	IPv4, IPv6, Installed int
}

// Count counts the table's paths; installed says whether a next hop of a
// prefix is really installed (nil: none is).
func (t *ImportTable) Count(installed func(netip.Prefix, netip.Addr) bool) TableCounts {
	c := TableCounts{ByPeer: map[string]PeerCounts{}}
	t.each(func(tp *tablePath) bool {
		if !tp.p.Accepted {
			c.Rejected++
			return true
		}
		c.Accepted++
		pc := c.ByPeer[tp.p.Peer]
		if tp.p.Prefix.Addr().Is4() {
			pc.IPv4++
		} else {
			pc.IPv6++
		}
		if installed != nil && installed(tp.p.Prefix, tp.p.NextHop) {
			pc.Installed++
		}
		c.ByPeer[tp.p.Peer] = pc
		return true
	})
	return c
}

// Alarms are the caps reached, sorted by rule and peer.
func (t *ImportTable) Alarms() []ImportAlarm {
	var out []ImportAlarm
	for g, cs := range t.caps {
		r := &t.cfg.Import[g.rule]
		if n := len(cs.kept) + len(cs.held); len(cs.held) > 0 {
			out = append(out, ImportAlarm{Rule: r.Name, Peer: g.peer, Max: r.MaxRoutes, Wanted: n})
		}
	}
	slices.SortFunc(out, func(a, b ImportAlarm) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Peer, b.Peer))
	})
	return out
}

// path is tp's path with its reason filled in.
func (t *ImportTable) path(tp *tablePath) model.LearnedPath {
	p := tp.p
	if tp.capped >= 0 && p.Reason == "" {
		r := &t.cfg.Import[tp.capped]
		n := 0
		if cs := t.caps[capGroup{int(tp.capped), p.Peer}]; cs != nil {
			n = len(cs.kept) + len(cs.held)
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
		res.Paths[i] = t.path(tp)
	}
	nOVN, nKernel := t.Sizes()
	res.OVN = make([]model.OVNRoute, 0, nOVN)
	res.Kernel = make([]model.KernelRoute, 0, nKernel)
	for _, pe := range t.prefixes {
		res.OVN = append(res.OVN, pe.ovn...)
		res.Kernel = append(res.Kernel, pe.kernel...)
	}
	slices.SortFunc(res.OVN, compareOVN)
	slices.SortFunc(res.Kernel, compareKernel)
	res.Problems = append(res.Problems, t.foreignProblems()...)
	return res
}

// foreignProblems name the accepted routes that a route not ovnbgp's
// holds, at most ten of each target by name.
func (t *ImportTable) foreignProblems() []string {
	var fovn []model.OVNRouteKey
	var fk []model.KernelRouteKey
	for _, pe := range t.prefixes {
		fovn = append(fovn, pe.foreignOVN...)
		fk = append(fk, pe.foreignK...)
	}
	slices.SortFunc(fovn, func(a, b model.OVNRouteKey) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), comparePrefix(a.Prefix, b.Prefix), a.NextHop.Compare(b.NextHop))
	})
	slices.SortFunc(fk, func(a, b model.KernelRouteKey) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), comparePrefix(a.Prefix, b.Prefix))
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
	t.each(func(tp *tablePath) bool { return fn(t.path(tp)) })
}

// sorted are the paths in the order first given.
func (t *ImportTable) sorted() []*tablePath {
	tps := make([]*tablePath, 0, t.n)
	t.each(func(tp *tablePath) bool {
		tps = append(tps, tp)
		return true
	})
	slices.SortFunc(tps, func(a, b *tablePath) int { return cmp.Compare(a.seq, b.seq) })
	return tps
}

// Learned returns the path of key k as the peer sent it (no decision).
func (t *ImportTable) Learned(k model.Key) (model.LearnedPath, bool) {
	pe := t.prefixes[k.Prefix]
	if pe == nil {
		return model.LearnedPath{}, false
	}
	tp := pe.path(k.Peer)
	if tp == nil {
		return model.LearnedPath{}, false
	}
	return raw(tp.p), true
}

// raw is p without the decision.
func raw(p model.LearnedPath) model.LearnedPath {
	p.Accepted, p.Rule, p.Reason = false, "", ""
	return p
}

// LearnedPaths are every path as the peers sent it (no decision), in the
// order first given: the input of another decision (a plan of a new
// config).
func (t *ImportTable) LearnedPaths() []model.LearnedPath {
	tps := t.sorted()
	out := make([]model.LearnedPath, len(tps))
	for i, tp := range tps {
		out[i] = raw(tp.p)
	}
	return out
}

// PeerKeys are the keys of every path of peer.
func (t *ImportTable) PeerKeys(peer string) []model.Key {
	var out []model.Key
	t.each(func(tp *tablePath) bool {
		if tp.p.Peer == peer {
			out = append(out, model.Key{Peer: peer, Prefix: tp.p.Prefix})
		}
		return true
	})
	return out
}

// VRFs are the VRF devices the rules ask to be created.
func (t *ImportTable) VRFs() []model.VRFDevice { return t.env.createVRFs }

// Sizes are the numbers of desired OVN rows and kernel routes.
func (t *ImportTable) Sizes() (ovn, kernel int) {
	for _, pe := range t.prefixes {
		ovn += len(pe.ovn)
		kernel += len(pe.kernel)
	}
	return ovn, kernel
}

// Problems are the rule-level problems and the foreign routes in the way,
// as in ImportResult.
func (t *ImportTable) Problems() []string {
	return append(slices.Clone(t.env.problems), t.foreignProblems()...)
}
