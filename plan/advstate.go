package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/btree"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// AdvertState is what CappedAdvertisements returns for one config, kept up
// to date item by item: Update, given what changed (model.SnapshotDelta),
// recomputes only the egress IPs, Service VIPs and workload addresses of
// the changed addresses, the aggregates holding them, and the export caps
// per peer (docs/architecture.md, "Per-item updates").
//
// For each (peer, prefix) it keeps the candidate of every rule that
// selects it, in rule order: the first is the one selected (the first
// rule wins, as in CappedAdvertisements), so when the first rule stops
// selecting it the next one's candidate is there. A changed address is
// selected again by every egressIP, loadBalancerIP and workloadIP rule,
// from its entries found by binary search: O(log n). An aggregate holding it
// (aggregateLength, aggregateLengthV6) is recomputed whole, from the
// entries inside it and what it would cover inside it (NB's protected
// prefixes read from the snapshot, Protected's own, node addresses; an
// address is the node's own while an egress IP or VIP has it): O(entries
// inside the aggregate × log n). A peer with an export cap keeps what it
// is sent and what is held back in two B-trees in cap order (subnets and
// aggregates, then single addresses, each in prefix order): a prefix in
// or out moves at most one across the cap, O(log n).
//
// An address whose protected entry alone changed (SnapshotDelta.Protected:
// another node's egress IP) decides again the aggregates that would cover
// it, and nothing else.
//
// Update recomputes everything (the same code, from an empty state) when
// the delta says All or Context (networks, routers and node addresses feed
// every VIP's selection and every aggregate; so does any change of NB's
// protected prefixes other than those of a changed egress IP or VIP
// address, which must come as Context), and, on every call, when the last
// full pass found the snapshot out of the order model.Snapshot documents
// and Update's binary searches need: egress IPs, Service VIPs and
// workload addresses by network (the default first), then address; with
// aggregates, protected prefixes by prefix and node addresses.
//
// Time moves the selection too: a workload address that left this node is
// sent until its handover hold is over (workloadIPSkip). The state keeps
// the next hold end of each such address; Update at now selects again
// every address whose hold ended by now, named in the delta or not, and
// NextHandoverEnd says when the next one ends. now should not go back:
// if it does, Update recomputes everything (a hold over may run again).
//
// An AdvertState is for one config: a new config needs a new one. It is
// not safe for concurrent use. The advertisements it returns share their
// slices (attributes, members) with it and with cfg's rules: read-only.
// SentRef and SentRefs return its own, which it never changes: an update
// replaces an advertisement that changed and keeps one that did not, so
// that a holder of the pointer (the daemon's tree of desired
// advertisements) and the state share one copy.
type AdvertState struct {
	cfg   *config.Config
	rules []advRule
	// aggregating: some egressIP or loadBalancerIP rule aggregates.
	aggregating bool
	// unsorted says why Update recomputes everything ("" if it does not).
	unsorted string

	// cands holds, for each (peer, prefix) some rule selects, the
	// candidates in rule order; cands[k][0] is what is selected.
	cands map[model.Key][]advCandidate
	// order is every key of cands, by peer, then prefix.
	order *btree.BTreeG[model.Key]
	// caps are the peers with maxAdvertised, by name.
	caps  map[string]*exportCap
	local *localAddrs

	// aggOut is what each aggregate of a rule sends: its prefix, or its
	// members when it would cover a conflict.
	aggOut map[aggID][]netip.Prefix
	// podSubnets are this node's pod subnets (masked), never a conflict.
	podSubnets map[netip.Prefix]bool
	// extra are the conflicts (aggregateConflicts) that are not in
	// snap.Protected nor node addresses: Protected's own (serviceCIDRs,
	// default internal subnets, protectedPrefixes), in Protected's order.
	extra []model.ProtectedPrefix
	// foreign is aggregateConflicts of the whole snapshot when it is out
	// of order (unsorted): then every Update is a full pass.
	foreign *aggregateConflicts

	// now is the time of the last update; holds are the workload
	// addresses with a handover hold that ends after it, by end, and
	// holdEnd the end of each.
	now     time.Time
	holds   *btree.BTreeG[heldAddr]
	holdEnd map[netip.Addr]time.Time

	buf []model.ServiceVIP  // scratch: one address's VIP entries
	eb  []model.EgressIP    // scratch: one address's egress IP entries
	wb  []*model.WorkloadIP // scratch: one address's workload entries
}

// heldAddr is a workload address whose handover hold ends at end.
type heldAddr struct {
	end  time.Time
	addr netip.Addr
}

func heldLess(a, b heldAddr) bool {
	return a.end.Before(b.end) || a.end.Equal(b.end) && a.addr.Less(b.addr)
}

// advRule is one advertise rule with its peers, by family.
type advRule struct {
	index int
	rule  *config.AdvertiseRule
	peers [2][]config.Peer // speaking IPv4, IPv6
}

// advCandidate is one rule's candidate for a key. adv is never changed
// once set (set replaces it): the daemon's tree of desired advertisements
// holds the same pointer (SentRef, SentRefs), one copy of each (issue 18,
// item 5).
type advCandidate struct {
	rule int
	adv  *model.Advertisement
}

// NewAdvertState is the advertisements of cfg for snap at now.
func NewAdvertState(cfg *config.Config, snap model.Snapshot, now time.Time) *AdvertState {
	s := &AdvertState{cfg: cfg, now: now}
	for i := range cfg.Advertise {
		r := advRule{index: i, rule: &cfg.Advertise[i]}
		for _, p := range selectPeers(cfg.BGP.Peers, r.rule.Peers) {
			for f, fam := range []config.Family{config.IPv4, config.IPv6} {
				if slices.Contains(p.Families, fam) {
					r.peers[f] = append(r.peers[f], p)
				}
			}
		}
		s.rules = append(s.rules, r)
		s.aggregating = s.aggregating || ruleAggregates(r.rule, 0) || ruleAggregates(r.rule, 1)
	}
	s.rebuild(snap)
	return s
}

// family is 0 for IPv4, 1 for IPv6.
func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// ruleAggregates says whether an egressIP, loadBalancerIP or workloadIP
// rule sends addresses of family f as covering prefixes (aggregator.add).
func ruleAggregates(r *config.AdvertiseRule, f int) bool {
	if r.Kind != config.KindEgressIP && r.Kind != config.KindLoadBalancerIP && r.Kind != config.KindWorkloadIP {
		return false
	}
	if f == 0 {
		return r.AggregateLength > 0 && r.AggregateLength < 32
	}
	return r.AggregateLengthV6 > 0 && r.AggregateLengthV6 < 128
}

// Update brings the state to snap at now, snap differing from the last
// snapshot as d says, and returns the keys whose sent or held
// advertisement changed (added, removed, changed, moved across an export
// cap), sorted by peer, then prefix. The workload addresses whose
// handover hold ended since the last update are selected again whether d
// names them or not. A held Reason does not name how many the peer has
// selected (HeldBack.Selected has the count): a change of the count
// changes no key that did not change itself, O(changed × log n).
func (s *AdvertState) Update(snap model.Snapshot, d model.SnapshotDelta, now time.Time) []model.Key {
	if now.Before(s.now) {
		// A hold over may run again.
		s.now = now
		return s.full(snap)
	}
	s.now = now
	due := s.dueHolds()
	if len(d.EgressIPs) == 0 && len(d.ServiceVIPs) == 0 && len(d.WorkloadIPs) == 0 && len(due) == 0 && !d.All && !d.Context &&
		(len(d.Protected) == 0 || !s.aggregating) {
		return nil // the owned routes are not advertised
	}
	if d.All || d.Context || s.unsorted != "" {
		return s.full(snap)
	}
	t := &touched{keys: map[model.Key]keyWas{}}
	unique := func(as []netip.Addr) []netip.Addr {
		as = slices.Clone(as)
		slices.SortFunc(as, netip.Addr.Compare)
		return slices.Compact(as)
	}
	eips, vips, wips := unique(d.EgressIPs), unique(d.ServiceVIPs), unique(slices.Concat(d.WorkloadIPs, due))
	for _, a := range eips {
		s.setEgressIP(a, rangeEntries(snap.EgressIPs, egressIPKey, hostPrefix(a), &s.eb), t)
	}
	for _, a := range vips {
		s.setServiceVIP(snap, a, rangeEntries(snap.ServiceVIPs, serviceVIPKey, hostPrefix(a), &s.buf), t)
	}
	for _, a := range wips {
		s.setWorkloadIP(a, rangeEntries(snap.WorkloadIPs, workloadIPKey, hostPrefix(a), &s.wb), t)
	}
	// The aggregates holding a changed address: their members, and what
	// they would cover (the address may be a protected one, and is the
	// node's own while an egress IP or VIP has it); and those that would
	// cover an address whose protected entry alone changed (another
	// node's egress IP).
	done := map[aggID]bool{}
	var prot []netip.Addr
	if s.aggregating {
		prot = d.Protected
	}
	for _, a := range slices.Concat(eips, vips, wips, prot) {
		for _, r := range s.rules {
			if !ruleAggregates(r.rule, family(a)) {
				continue
			}
			id := aggID{rule: r.index, prefix: aggPrefix(r.rule, a)}
			if !done[id] {
				done[id] = true
				s.setAggregate(snap, r, id.prefix, s.aggMembers(snap, r, id.prefix), t)
			}
		}
	}
	return t.sorted(s)
}

// mergeKeys merges two lists of keys sorted by peer, then prefix, each
// key once.
func mergeKeys(a, b []model.Key) []model.Key {
	out := make([]model.Key, 0, len(a)+len(b))
	for len(a)+len(b) > 0 {
		var k model.Key
		switch {
		case len(b) == 0 || len(a) > 0 && compareKeys(a[0], b[0]) < 0:
			k, a = a[0], a[1:]
		case len(a) > 0 && a[0] == b[0]:
			k, a, b = a[0], a[1:], b[1:]
		default:
			k, b = b[0], b[1:]
		}
		out = append(out, k)
	}
	return out
}

func compareKeys(a, b model.Key) int {
	return cmp.Or(cmp.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
}

// full recomputes everything and returns the keys that differ.
func (s *AdvertState) full(snap model.Snapshot) []model.Key {
	old := &AdvertState{cands: s.cands, order: s.order, caps: s.caps}
	s.rebuild(snap)
	keys := func(t *btree.BTreeG[model.Key]) []model.Key {
		out := make([]model.Key, 0, t.Len())
		t.Ascend(func(k model.Key) bool {
			out = append(out, k)
			return true
		})
		return out
	}
	var out []model.Key
	for _, k := range mergeKeys(keys(old.order), keys(s.order)) {
		a, aSent, aHeld := old.Lookup(k)
		b, bSent, bHeld := s.Lookup(k)
		if aSent != bSent || aHeld != bHeld || !advEqual(a, b) {
			out = append(out, k)
			continue
		}
		if aSent || aHeld {
			// Unchanged: the old advertisement stays, which the
			// daemon's tree (SentRef) or a HeldBack taken before may
			// hold (one copy).
			adv := old.cands[k][0].adv
			s.cands[k][0].adv = adv
			if bHeld {
				s.caps[k.Peer].held.ReplaceOrInsert(capItem{prefix: k.Prefix, adv: adv})
			}
		}
	}
	return out
}

// rebuild computes everything from an empty state, with the code Update
// uses per address.
func (s *AdvertState) rebuild(snap model.Snapshot) {
	size := len(s.cands) // the last pass's, or an estimate
	if s.cands == nil {
		size = len(snap.EgressIPs) + len(snap.ServiceVIPs) + len(snap.WorkloadIPs)
		for _, nw := range snap.Networks {
			size += len(nw.Subnets)
		}
		size *= max(1, len(s.cfg.BGP.Peers))
	}
	s.cands = make(map[model.Key][]advCandidate, size)
	s.order = btree.NewG(32, keyLess)
	s.caps = map[string]*exportCap{}
	for _, p := range s.cfg.BGP.Peers {
		if p.MaxAdvertised > 0 {
			s.caps[p.Name] = newExportCap(p.MaxAdvertised)
		}
	}
	s.local = newLocalAddrs(snap)
	s.unsorted = ""
	if !sortedByNetworkAddr(snap.EgressIPs, egressIPKey) {
		s.unsorted = "the egress IPs are not sorted by network and address"
	}
	if !sortedByNetworkAddr(snap.ServiceVIPs, serviceVIPKey) {
		s.unsorted = "the Service VIPs are not sorted by network and address"
	}
	if !sortedByNetworkAddr(snap.WorkloadIPs, workloadIPKey) {
		s.unsorted = "the workload addresses are not sorted by network and address"
	}
	s.holds, s.holdEnd = btree.NewG(8, heldLess), map[netip.Addr]time.Time{}
	s.aggOut = map[aggID][]netip.Prefix{}
	s.podSubnets, s.extra, s.foreign = nil, nil, nil
	if s.aggregating {
		s.podSubnets = map[netip.Prefix]bool{}
		for _, nw := range snap.Networks {
			for _, sn := range nw.Subnets {
				s.podSubnets[sn.Prefix.Masked()] = true
			}
		}
		if !slices.IsSortedFunc(snap.Protected, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix.Masked(), b.Prefix.Masked()) }) {
			s.unsorted = "the protected prefixes are not sorted"
		}
		if !slices.IsSortedFunc(snap.NodeAddresses, netip.Addr.Compare) {
			s.unsorted = "the node addresses are not sorted"
		}
		if s.unsorted != "" {
			s.foreign = newAggregateConflicts(s.cfg, snap)
		} else {
			// NB's entries are read from the snapshot at each update
			// (firstConflict): those of a VIP or egress IP come and go
			// with it. Their reasons are never Protected's own, so an
			// entry is one or the other.
			nb := make(map[model.ProtectedPrefix]bool, len(snap.Protected))
			for _, pp := range snap.Protected {
				nb[model.ProtectedPrefix{Prefix: pp.Prefix.Masked(), Why: pp.Why}] = true
			}
			for _, pp := range Protected(s.cfg, snap, model.Host{}) {
				if !nb[pp] && !strings.HasPrefix(pp.Why, whyPeer) && !s.podSubnets[pp.Prefix] {
					s.extra = append(s.extra, pp)
				}
			}
		}
	}

	// Pod subnets, rule by rule, as selectAdvertisements does: within a
	// rule, the first subnet of a prefix wins.
	for _, r := range s.rules {
		if r.rule.Kind != config.KindPodNetwork {
			continue
		}
		for _, nw := range snap.Networks {
			if MatchAny(r.rule.Networks, nw.Name) {
				for _, sn := range nw.Subnets {
					prefix := sn.Prefix.Masked()
					for _, p := range r.peers[family(prefix.Addr())] {
						s.addFirst(model.Key{Peer: p.Name, Prefix: prefix}, r.index, model.Advertisement{Peer: p.Name, Prefix: prefix,
							Attrs: attrs(r.rule), Rule: r.rule.Name, Network: nw.Name, Source: sn.Source})
					}
				}
			}
		}
	}

	// Every aggregate, as Update does it: the selected addresses behind
	// each, in snapshot order.
	for _, r := range s.rules {
		if !ruleAggregates(r.rule, 0) && !ruleAggregates(r.rule, 1) {
			continue
		}
		groups := map[netip.Prefix][]member{}
		var prefixes []netip.Prefix
		add := func(a netip.Addr, network, source string, handover bool) {
			p := aggPrefix(r.rule, a)
			if groups[p] == nil {
				prefixes = append(prefixes, p)
			}
			groups[p] = append(groups[p], member{prefix: hostPrefix(a), network: network, source: source, handover: handover})
		}
		switch r.rule.Kind {
		case config.KindEgressIP:
			for _, e := range snap.EgressIPs {
				if ruleAggregates(r.rule, family(e.IP)) && egressIPSkip(r.rule, e) == "" {
					add(e.IP, e.Network, e.Source, false)
				}
			}
		case config.KindLoadBalancerIP:
			for _, v := range snap.ServiceVIPs {
				if ruleAggregates(r.rule, family(v.VIP)) && !serviceVIPSkip(s.cfg, snap, r.rule, v, s.local).skipped() {
					add(v.VIP, v.Network, v.Source, false)
				}
			}
		case config.KindWorkloadIP:
			for _, w := range snap.WorkloadIPs {
				if sk := workloadIPSkip(r.rule, w, s.now); ruleAggregates(r.rule, family(w.IP)) && !sk.skipped() {
					add(w.IP, w.Network, workloadSource(r.rule, w), sk.handover)
				}
			}
		}
		for _, p := range prefixes {
			s.setAggregate(snap, r, p, groups[p], nil)
		}
	}

	// Every address not aggregated, as Update does it.
	byAddr := func(n int, addr func(i int) netip.Addr, each func(a netip.Addr, idx []int)) {
		first := make(map[netip.Addr]int, n)
		next := make([]int, n) // the next entry of the same address, or -1
		last := make(map[netip.Addr]int, n)
		for i := range n {
			a := addr(i)
			next[i] = -1
			if j, ok := last[a]; ok {
				next[j] = i
			} else {
				first[a] = i
			}
			last[a] = i
		}
		var idx []int
		for i := range n {
			a := addr(i)
			if first[a] != i {
				continue
			}
			idx = idx[:0]
			for j := i; j >= 0; j = next[j] {
				idx = append(idx, j)
			}
			each(a, idx)
		}
	}
	byAddr(len(snap.EgressIPs), func(i int) netip.Addr { return snap.EgressIPs[i].IP }, func(a netip.Addr, idx []int) {
		es := s.eb[:0]
		for _, i := range idx {
			es = append(es, snap.EgressIPs[i])
		}
		s.eb = es
		s.setEgressIP(a, es, nil)
	})
	byAddr(len(snap.ServiceVIPs), func(i int) netip.Addr { return snap.ServiceVIPs[i].VIP }, func(a netip.Addr, idx []int) {
		vs := s.buf[:0]
		for _, i := range idx {
			vs = append(vs, snap.ServiceVIPs[i])
		}
		s.buf = vs
		s.setServiceVIP(snap, a, vs, nil)
	})
	byAddr(len(snap.WorkloadIPs), func(i int) netip.Addr { return snap.WorkloadIPs[i].IP }, func(a netip.Addr, idx []int) {
		ws := s.wb[:0]
		for _, i := range idx {
			ws = append(ws, snap.WorkloadIPs[i])
		}
		s.wb = ws
		s.setWorkloadIP(a, ws, nil)
	})
}

// setEgressIP sets what every egressIP rule that does not aggregate a's
// family selects for a, whose entries (every network's, in snapshot
// order) are es: the first entry the rule selects, or nothing.
func (s *AdvertState) setEgressIP(a netip.Addr, es []model.EgressIP, t *touched) {
	f := family(a)
	host := hostPrefix(a)
	for _, r := range s.rules {
		if r.rule.Kind != config.KindEgressIP || ruleAggregates(r.rule, f) || len(r.peers[f]) == 0 {
			continue
		}
		i := slices.IndexFunc(es, func(e model.EgressIP) bool { return egressIPSkip(r.rule, e) == "" })
		for _, p := range r.peers[f] {
			k := model.Key{Peer: p.Name, Prefix: host}
			if i < 0 {
				s.set(k, r.index, nil, t)
				continue
			}
			s.set(k, r.index, &model.Advertisement{Peer: p.Name, Prefix: host, Attrs: attrs(r.rule), Rule: r.rule.Name,
				Network: es[i].Network, Source: es[i].Source}, t)
		}
	}
}

// setServiceVIP is setEgressIP for the loadBalancerIP rules and the
// entries vs of VIP address a (every network's and Service's, in snapshot
// order).
func (s *AdvertState) setServiceVIP(snap model.Snapshot, a netip.Addr, vs []model.ServiceVIP, t *touched) {
	f := family(a)
	host := hostPrefix(a)
	for _, r := range s.rules {
		if r.rule.Kind != config.KindLoadBalancerIP || ruleAggregates(r.rule, f) || len(r.peers[f]) == 0 {
			continue
		}
		i := slices.IndexFunc(vs, func(v model.ServiceVIP) bool { return !serviceVIPSkip(s.cfg, snap, r.rule, v, s.local).skipped() })
		var at model.PathAttrs
		if i >= 0 {
			at = vipAttrs(s.cfg, r.rule, &vs[i], s.local)
		}
		for _, p := range r.peers[f] {
			k := model.Key{Peer: p.Name, Prefix: host}
			if i < 0 {
				s.set(k, r.index, nil, t)
				continue
			}
			s.set(k, r.index, &model.Advertisement{Peer: p.Name, Prefix: host, Attrs: at, Rule: r.rule.Name,
				Network: vs[i].Network, Source: vs[i].Source}, t)
		}
	}
}

// setWorkloadIP is setEgressIP for the workloadIP rules and the entries
// ws of workload address a (every network's and port's, in snapshot
// order) at s.now: the first entry a rule selects, with the rule's
// attributes or, handed over, its handover attributes. It keeps the next
// end of a's handover holds (of every workloadIP rule, aggregating or
// not), for Update to select a again then.
func (s *AdvertState) setWorkloadIP(a netip.Addr, ws []*model.WorkloadIP, t *touched) {
	f := family(a)
	host := hostPrefix(a)
	var next time.Time
	for _, r := range s.rules {
		if r.rule.Kind != config.KindWorkloadIP {
			continue
		}
		for _, w := range ws {
			if end, ok := holdEnd(r.rule, w); ok && end.After(s.now) && (next.IsZero() || end.Before(next)) {
				next = end
			}
		}
		if ruleAggregates(r.rule, f) || len(r.peers[f]) == 0 {
			continue
		}
		i, sk := -1, workloadSkip{}
		for j, w := range ws {
			if sk = workloadIPSkip(r.rule, w, s.now); !sk.skipped() {
				i = j
				break
			}
		}
		for _, p := range r.peers[f] {
			k := model.Key{Peer: p.Name, Prefix: host}
			if i < 0 {
				s.set(k, r.index, nil, t)
				continue
			}
			at := attrs(r.rule)
			if sk.handover {
				at = handoverAttrs(s.cfg, r.rule, p)
			}
			s.set(k, r.index, &model.Advertisement{Peer: p.Name, Prefix: host, Attrs: at, Rule: r.rule.Name,
				Network: ws[i].Network, Source: workloadSource(r.rule, ws[i])}, t)
		}
	}
	if old, ok := s.holdEnd[a]; ok {
		s.holds.Delete(heldAddr{end: old, addr: a})
		delete(s.holdEnd, a)
	}
	if !next.IsZero() {
		s.holds.ReplaceOrInsert(heldAddr{end: next, addr: a})
		s.holdEnd[a] = next
	}
}

// dueHolds takes out the workload addresses whose next hold end is not
// after s.now.
func (s *AdvertState) dueHolds() []netip.Addr {
	var due []netip.Addr
	for {
		h, ok := s.holds.Min()
		if !ok || h.end.After(s.now) {
			return due
		}
		s.holds.DeleteMin()
		delete(s.holdEnd, h.addr)
		due = append(due, h.addr)
	}
}

// NextHandoverEnd is when the next handover hold of a workload address
// ends after the last update (zero: none is running): an Update at or
// after it withdraws that address (or sends it with the rule's own
// attributes, if another entry is selected then), whatever its delta.
// It is HandoverEnds' next for the last snapshot and time.
func (s *AdvertState) NextHandoverEnd() time.Time {
	h, _ := s.holds.Min()
	return h.end
}

// aggID is one aggregate of one rule.
type aggID struct {
	rule   int
	prefix netip.Prefix
}

// aggPrefix is the aggregate of rule holding a (ruleAggregates).
func aggPrefix(rule *config.AdvertiseRule, a netip.Addr) netip.Prefix {
	length := rule.AggregateLength
	if a.Is6() {
		length = rule.AggregateLengthV6
	}
	return netip.PrefixFrom(a, length).Masked()
}

// aggMembers are the addresses behind the aggregate prefix of rule r:
// the entries inside it that r selects (at s.now), in snapshot order.
func (s *AdvertState) aggMembers(snap model.Snapshot, r advRule, prefix netip.Prefix) []member {
	var out []member
	switch r.rule.Kind {
	case config.KindEgressIP:
		for _, e := range rangeEntries(snap.EgressIPs, egressIPKey, prefix, &s.eb) {
			if egressIPSkip(r.rule, e) == "" {
				out = append(out, member{prefix: hostPrefix(e.IP), network: e.Network, source: e.Source})
			}
		}
	case config.KindLoadBalancerIP:
		for _, v := range rangeEntries(snap.ServiceVIPs, serviceVIPKey, prefix, &s.buf) {
			if !serviceVIPSkip(s.cfg, snap, r.rule, v, s.local).skipped() {
				out = append(out, member{prefix: hostPrefix(v.VIP), network: v.Network, source: v.Source})
			}
		}
	case config.KindWorkloadIP:
		for _, w := range rangeEntries(snap.WorkloadIPs, workloadIPKey, prefix, &s.wb) {
			if sk := workloadIPSkip(r.rule, w, s.now); !sk.skipped() {
				out = append(out, member{prefix: hostPrefix(w.IP), network: w.Network, source: workloadSource(r.rule, w), handover: sk.handover})
			}
		}
	}
	return out
}

// setAggregate sets what the aggregate prefix of rule r sends, its
// members being ms (in snapshot order; none: nothing), with the
// aggregator selectAdvertisements uses: the prefix, or each member as
// itself when the prefix would cover a conflict.
func (s *AdvertState) setAggregate(snap model.Snapshot, r advRule, prefix netip.Prefix, ms []member, t *touched) {
	var outs []model.Advertisement // without peer and attributes
	var handover []bool            // of each out: sent with the handover attributes
	if len(ms) > 0 {
		foreign := s.foreign
		if foreign == nil {
			foreign = &aggregateConflicts{}
			if pp, ok := s.firstConflict(snap, prefix); ok {
				foreign.prot = []model.ProtectedPrefix{pp}
			}
		}
		g := newAggregator(r.rule, 1, foreign)
		for _, m := range ms {
			g.add(m.prefix.Addr(), m.network, m.source, m.handover)
		}
		g.each(func(p netip.Prefix, network, source string, members []netip.Prefix, h bool) {
			outs = append(outs, model.Advertisement{Prefix: p, Rule: r.rule.Name, Network: network, Source: source, Members: members})
			handover = append(handover, h)
		})
	}
	id := aggID{rule: r.index, prefix: prefix}
	old := s.aggOut[id]
	// Both in prefix order: the aggregate, or its members sorted.
	for _, p := range r.peers[family(prefix.Addr())] {
		j := 0
		for _, o := range old {
			for j < len(outs) && model.ComparePrefix(outs[j].Prefix, o) < 0 {
				j++
			}
			if j == len(outs) || outs[j].Prefix != o {
				s.set(model.Key{Peer: p.Name, Prefix: o}, r.index, nil, t)
			}
		}
		for i, o := range outs {
			o.Peer, o.Attrs = p.Name, attrs(r.rule)
			if handover[i] {
				o.Attrs = handoverAttrs(s.cfg, r.rule, p)
			}
			s.set(model.Key{Peer: p.Name, Prefix: o.Prefix}, r.index, &o, t)
		}
	}
	if len(outs) == 0 {
		delete(s.aggOut, id)
		return
	}
	ps := make([]netip.Prefix, len(outs))
	for i, o := range outs {
		ps[i] = o.Prefix
	}
	s.aggOut[id] = ps
}

// firstConflict is what aggregateConflicts.covered finds first inside
// prefix, besides special-purpose space: NB's protected prefixes (in
// their order, by prefix), then Protected's own (extra), then node
// addresses; an entry that is one of this node's pod subnets, or the
// address of an egress IP or VIP of snap, is the node's own. Binary
// searches in snap (sorted, as rebuild checked): O(entries inside prefix
// × log n).
func (s *AdvertState) firstConflict(snap model.Snapshot, prefix netip.Prefix) (model.ProtectedPrefix, bool) {
	mine := func(p netip.Prefix) bool {
		if s.podSubnets[p] {
			return true
		}
		return p.IsSingleIP() && (hasAddr(snap.EgressIPs, egressIPKey, p.Addr()) || hasAddr(snap.ServiceVIPs, serviceVIPKey, p.Addr()))
	}
	prot := snap.Protected
	for i := sort.Search(len(prot), func(i int) bool { return prot[i].Prefix.Masked().Addr().Compare(prefix.Addr()) >= 0 }); i < len(prot); i++ {
		p := prot[i].Prefix.Masked()
		if !prefix.Contains(p.Addr()) {
			break
		}
		if p.Bits() >= prefix.Bits() && !strings.HasPrefix(prot[i].Why, whyPeer) && !mine(p) {
			return model.ProtectedPrefix{Prefix: p, Why: prot[i].Why}, true
		}
	}
	for _, pp := range s.extra {
		if covers(prefix, pp.Prefix) && !mine(pp.Prefix) {
			return pp, true
		}
	}
	na := snap.NodeAddresses
	if i := sort.Search(len(na), func(i int) bool { return na[i].Compare(prefix.Addr()) >= 0 }); i < len(na) && prefix.Contains(na[i]) {
		return model.ProtectedPrefix{Prefix: hostPrefix(na[i]), Why: "a node address"}, true
	}
	return model.ProtectedPrefix{}, false
}

func egressIPKey(e *model.EgressIP) (string, netip.Addr)      { return e.Network, e.IP }
func serviceVIPKey(v *model.ServiceVIP) (string, netip.Addr)  { return v.Network, v.VIP }
func workloadIPKey(w **model.WorkloadIP) (string, netip.Addr) { return (*w).Network, (*w).IP }

// addFirst adds rule's candidate for k unless the rule has one already
// (the first item of a prefix wins within a rule).
func (s *AdvertState) addFirst(k model.Key, rule int, adv model.Advertisement) {
	if !slices.ContainsFunc(s.cands[k], func(c advCandidate) bool { return c.rule == rule }) {
		s.set(k, rule, &adv, nil)
	}
}

// set makes adv rule's candidate for k (nil: the rule does not select
// k), then what is selected for k follow, recording in t (if not nil)
// the keys whose sent or held advertisement changed.
func (s *AdvertState) set(k model.Key, rule int, adv *model.Advertisement, t *touched) {
	list := s.cands[k]
	var was *model.Advertisement // never changed: set replaces it
	if len(list) > 0 {
		was = list[0].adv
	}
	i, found := slices.BinarySearchFunc(list, rule, func(c advCandidate, r int) int { return cmp.Compare(c.rule, r) })
	if adv == nil && !found {
		return
	}
	c := s.caps[k.Peer]
	before := keyWas{}
	if t != nil && was != nil {
		before = keyWas{adv: *was, selected: true, sent: c == nil || !c.isHeld(k.Prefix)}
	}
	switch {
	case adv == nil:
		list = slices.Delete(list, i, i+1)
	case found && advEqual(*list[i].adv, *adv):
		// The one in place stays: the daemon's tree may hold it.
	case found:
		list[i].adv = adv
	default:
		list = slices.Insert(list, i, advCandidate{rule: rule, adv: adv})
	}
	if len(list) == 0 {
		delete(s.cands, k)
	} else {
		s.cands[k] = list
	}
	// A prefix moved across the cap was selected before and is still,
	// with the same advertisement.
	movedWas := func(p netip.Prefix, sent bool) (model.Key, keyWas) {
		m := model.Key{Peer: k.Peer, Prefix: p}
		return m, keyWas{adv: *s.cands[m][0].adv, selected: true, sent: sent}
	}
	switch {
	case was == nil && len(list) > 0: // selected now
		s.order.ReplaceOrInsert(k)
		if c != nil {
			advOf := func(p netip.Prefix) *model.Advertisement { return s.cands[model.Key{Peer: k.Peer, Prefix: p}][0].adv }
			if moved, ok := c.insert(k.Prefix, list[0].adv, advOf); ok && t != nil {
				t.add(movedWas(moved, true))
			}
		}
	case was != nil && len(list) == 0: // no longer selected
		s.order.Delete(k)
		if c != nil {
			if moved, ok := c.remove(k.Prefix); ok && t != nil {
				t.add(movedWas(moved, false))
			}
		}
	default: // selected still
		if c != nil && list[0].adv != was && c.isHeld(k.Prefix) {
			c.held.ReplaceOrInsert(capItem{prefix: k.Prefix, adv: list[0].adv})
		}
		if advEqual(*was, *list[0].adv) {
			return
		}
	}
	t.add(k, before)
}

// Lookup is what is selected for k: sent (to make) or held back by the
// peer's export cap, as Sent and Held have it; neither when nothing is.
func (s *AdvertState) Lookup(k model.Key) (adv model.Advertisement, sent bool, held bool) {
	list := s.cands[k]
	if len(list) == 0 {
		return model.Advertisement{}, false, false
	}
	adv = *list[0].adv
	if c := s.caps[k.Peer]; c != nil && c.isHeld(k.Prefix) {
		c.hold(&adv, k.Peer)
		return adv, false, true
	}
	return adv, true, false
}

// SentRef is Lookup's advertisement of k when it is sent (nil when it is
// not): the state's own, shared, never changed (an update replaces it), to
// be read only.
func (s *AdvertState) SentRef(k model.Key) *model.Advertisement {
	list := s.cands[k]
	if len(list) == 0 {
		return nil
	}
	if c := s.caps[k.Peer]; c != nil && c.isHeld(k.Prefix) {
		return nil
	}
	return list[0].adv
}

// Sent is CappedAdvertisements' sent: sorted by peer, then prefix.
func (s *AdvertState) Sent() []model.Advertisement {
	refs := s.SentRefs()
	out := make([]model.Advertisement, len(refs))
	for i, a := range refs {
		out[i] = *a
	}
	return out
}

// SentRefs is Sent as the state's own advertisements (SentRef).
func (s *AdvertState) SentRefs() []*model.Advertisement {
	out := make([]*model.Advertisement, 0, s.order.Len())
	s.order.Ascend(func(k model.Key) bool {
		if c := s.caps[k.Peer]; c == nil || !c.isHeld(k.Prefix) {
			out = append(out, s.cands[k][0].adv)
		}
		return true
	})
	return out
}

// Held is CappedAdvertisements' held: what the export caps hold back
// (State AdvHeldBack, Reason why), sorted by peer, then prefix.
func (s *AdvertState) Held() []model.Advertisement {
	return s.heldBack(false).List("")
}

// HeldBack is what the export caps hold back now, to read later or on
// another goroutine: the state's updates do not change it. It costs
// O(capped peers): each cap's tree is cloned copy-on-write.
func (s *AdvertState) HeldBack() HeldBack {
	return s.heldBack(true)
}

func (s *AdvertState) heldBack(clone bool) HeldBack {
	h := HeldBack{caps: make(map[string]heldCap, len(s.caps))}
	for p, c := range s.caps {
		held := c.held
		if clone {
			held = held.Clone()
		}
		h.caps[p] = heldCap{max: c.max, selected: c.len(), held: held}
	}
	return h
}

func keyLess(a, b model.Key) bool { return compareKeys(a, b) < 0 }

// HeldBack is what the export caps of an AdvertState held back when it was
// taken (AdvertState.HeldBack), by peer: the counts per peer in O(1), the
// advertisements looked up or listed when asked. It is read-only and safe
// for concurrent reads.
type HeldBack struct {
	caps map[string]heldCap
}

// heldCap is one peer's cap in a HeldBack.
type heldCap struct {
	max, selected int
	held          *btree.BTreeG[capItem]
}

// Count is how many prefixes peer's export cap holds back.
func (h HeldBack) Count(peer string) int {
	if c, ok := h.caps[peer]; ok {
		return c.held.Len()
	}
	return 0
}

// Selected is how many prefixes the rules select for peer, sent and held
// back, when peer has an export cap (else 0).
func (h HeldBack) Selected(peer string) int {
	return h.caps[peer].selected
}

// Reason is why peer's cap holds a prefix back, as each one held says it
// ("": peer has no cap).
func (h HeldBack) Reason(peer string) string {
	c, ok := h.caps[peer]
	if !ok {
		return ""
	}
	return capReason(peer, c.max)
}

// Counts is Count of each peer whose cap holds something back: O(capped
// peers).
func (h HeldBack) Counts() map[string]int {
	out := map[string]int{}
	for p, c := range h.caps {
		if n := c.held.Len(); n > 0 {
			out[p] = n
		}
	}
	return out
}

// Lookup is k's advertisement if its peer's cap holds it back (State
// AdvHeldBack, Reason why): O(log n).
func (h HeldBack) Lookup(k model.Key) (model.Advertisement, bool) {
	c, ok := h.caps[k.Peer]
	if !ok {
		return model.Advertisement{}, false
	}
	it, ok := c.held.Get(capItem{prefix: k.Prefix})
	if !ok {
		return model.Advertisement{}, false
	}
	a := *it.adv
	a.State, a.Reason = model.AdvHeldBack, capReason(k.Peer, c.max)
	return a, true
}

// List is what peer's cap holds back ("": every peer's), State
// AdvHeldBack, Reason why, sorted by peer, then prefix.
func (h HeldBack) List(peer string) []model.Advertisement {
	peers := make([]string, 0, len(h.caps))
	n := 0
	for p, c := range h.caps {
		if c.held.Len() > 0 && (peer == "" || p == peer) {
			peers = append(peers, p)
			n += c.held.Len()
		}
	}
	slices.Sort(peers)
	out := make([]model.Advertisement, 0, n)
	for _, p := range peers {
		c := h.caps[p]
		from := len(out)
		reason := capReason(p, c.max) // the same for each one held
		c.held.Ascend(func(it capItem) bool {
			a := *it.adv
			a.State, a.Reason = model.AdvHeldBack, reason
			out = append(out, a)
			return true
		})
		slices.SortFunc(out[from:], func(a, b model.Advertisement) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
	}
	return out
}

// capItem is a prefix an export cap holds back, with its advertisement
// (the state's own, never changed: set replaces it).
type capItem struct {
	prefix netip.Prefix
	adv    *model.Advertisement
}

// exportCap is one peer's maxAdvertised: the first max of its selected
// prefixes in cap order (capLess) are sent, the rest held. While fewer
// than max are sent, none is held.
type exportCap struct {
	max  int
	sent *btree.BTreeG[netip.Prefix]
	held *btree.BTreeG[capItem]
}

func newExportCap(max int) *exportCap {
	return &exportCap{max: max, sent: btree.NewG(32, capLess),
		held: btree.NewG(32, func(a, b capItem) bool { return capLess(a.prefix, b.prefix) })}
}

// capLess is the order a cap sends in: subnets and aggregates, then single
// addresses, each in prefix order (CappedAdvertisements).
func capLess(a, b netip.Prefix) bool {
	return cmp.Or(cmp.Compare(boolInt(a.IsSingleIP()), boolInt(b.IsSingleIP())), model.ComparePrefix(a, b)) < 0
}

// isHeld says whether the cap holds p back.
func (c *exportCap) isHeld(p netip.Prefix) bool { return c.held.Has(capItem{prefix: p}) }

// insert adds p, whose advertisement is adv; it returns the prefix that
// moved from sent to held (its advertisement advOf's), if one did.
func (c *exportCap) insert(p netip.Prefix, adv *model.Advertisement, advOf func(netip.Prefix) *model.Advertisement) (netip.Prefix, bool) {
	if c.sent.Len() < c.max {
		c.sent.ReplaceOrInsert(p)
		return netip.Prefix{}, false
	}
	if last, _ := c.sent.Max(); capLess(p, last) {
		c.sent.DeleteMax()
		c.sent.ReplaceOrInsert(p)
		c.held.ReplaceOrInsert(capItem{prefix: last, adv: advOf(last)})
		return last, true
	}
	c.held.ReplaceOrInsert(capItem{prefix: p, adv: adv})
	return netip.Prefix{}, false
}

// remove takes p out; it returns the prefix that moved from held to sent,
// if one did.
func (c *exportCap) remove(p netip.Prefix) (netip.Prefix, bool) {
	if _, ok := c.sent.Delete(p); !ok {
		c.held.Delete(capItem{prefix: p})
		return netip.Prefix{}, false
	}
	next, ok := c.held.DeleteMin()
	if ok {
		c.sent.ReplaceOrInsert(next.prefix)
	}
	return next.prefix, ok
}

// len is how many prefixes the peer has selected.
func (c *exportCap) len() int { return c.sent.Len() + c.held.Len() }

// hold marks a as held back by the cap of peer, as CappedAdvertisements
// says it.
func (c *exportCap) hold(a *model.Advertisement, peer string) {
	a.State, a.Reason = model.AdvHeldBack, capReason(peer, c.max)
}

// capReason is why the export cap of peer, max prefixes, holds a prefix
// back. How many the peer has selected is the peer's, not each prefix's
// (HeldBack.Selected): a view adds it when it shows the list
// (ShowSelected).
func capReason(peer string, max int) string {
	return fmt.Sprintf("held back: export cap: peer %s takes at most %d prefixes (maxAdvertised)", peer, max)
}

// ShowSelected adds to the Reason of each advertisement of advs held back
// by an export cap how many its peer has selected (", N selected"), read
// when the list is shown: `routes advertised` and explain say it.
func ShowSelected(advs []model.Advertisement, selected func(peer string) int) {
	for i := range advs {
		if advs[i].State == model.AdvHeldBack {
			advs[i].Reason += fmt.Sprintf(", %d selected", selected(advs[i].Peer))
		}
	}
}

// touched collects the keys an Update changed; nil collects nothing (a
// full pass compares instead). A key is kept with what it was before its
// first change: changes that undo each other (a prefix pushed across a
// cap and back by two prefixes of one update) change nothing.
type touched struct {
	keys map[model.Key]keyWas
}

// keyWas is what a key was: its selected advertisement, and whether it
// was sent (else held back by the cap).
type keyWas struct {
	adv            model.Advertisement
	selected, sent bool
}

// add records that k, which was as before says, changes (the first
// record of a key is kept).
func (t *touched) add(k model.Key, before keyWas) {
	if t == nil {
		return
	}
	if _, ok := t.keys[k]; !ok {
		t.keys[k] = before
	}
}

// sorted are the keys whose advertisement in s differs from what it was.
func (t *touched) sorted(s *AdvertState) []model.Key {
	out := make([]model.Key, 0, len(t.keys))
	for k, was := range t.keys {
		list := s.cands[k]
		c := s.caps[k.Peer]
		if was.selected == (len(list) > 0) && (!was.selected ||
			was.sent == (c == nil || !c.isHeld(k.Prefix)) && advEqual(was.adv, *list[0].adv)) {
			continue
		}
		out = append(out, k)
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// advEqual says whether a and b are the same advertisement, explanations
// included.
func advEqual(a, b model.Advertisement) bool {
	lp := func(p *uint32) (uint32, bool) {
		if p == nil {
			return 0, false
		}
		return *p, true
	}
	la, sa := lp(a.Attrs.LocalPreference)
	lb, sb := lp(b.Attrs.LocalPreference)
	return a.Peer == b.Peer && a.Prefix == b.Prefix && a.Rule == b.Rule && a.Network == b.Network && a.Source == b.Source &&
		a.Drain == b.Drain && a.State == b.State && a.Reason == b.Reason && a.Problem == b.Problem &&
		slices.Equal(a.Attrs.Communities, b.Attrs.Communities) && slices.Equal(a.Attrs.LargeCommunities, b.Attrs.LargeCommunities) &&
		la == lb && sa == sb && a.Attrs.MED == b.Attrs.MED && a.Attrs.ASPathPrepend == b.Attrs.ASPathPrepend &&
		sameLinkBandwidth(a.Attrs.LinkBandwidth, b.Attrs.LinkBandwidth) && slices.Equal(a.Members, b.Members)
}

// compareNetworkNames orders networks as model.Snapshot sorts its egress
// IPs and Service VIPs: the default network first, then by name.
func compareNetworkNames(a, b string) int {
	da, db := a == model.DefaultNetwork, b == model.DefaultNetwork
	switch {
	case da && !db:
		return -1
	case db && !da:
		return 1
	}
	return cmp.Compare(a, b)
}

// sortedByNetworkAddr says whether list is in model.Snapshot's order:
// network (compareNetworkNames), then address.
func sortedByNetworkAddr[T any](list []T, key func(*T) (string, netip.Addr)) bool {
	for i := 1; i < len(list); i++ {
		n0, a0 := key(&list[i-1])
		n1, a1 := key(&list[i])
		if cmp.Or(compareNetworkNames(n0, n1), a0.Compare(a1)) > 0 {
			return false
		}
	}
	return true
}

// rangeEntries returns the entries of list with an address inside
// prefix, in list order, list being in model.Snapshot's order
// (sortedByNetworkAddr): a binary search per network. The result is a
// part of list when the entries are adjacent (never to be appended to),
// else *buf refilled.
func rangeEntries[T any](list []T, key func(*T) (string, netip.Addr), prefix netip.Prefix, buf *[]T) []T {
	var one []T
	runs := 0
	eachRun(list, key, func(lo, hi int) {
		i := lo + sort.Search(hi-lo, func(i int) bool {
			_, x := key(&list[lo+i])
			return x.Compare(prefix.Addr()) >= 0
		})
		j := i
		for j < hi {
			if _, x := key(&list[j]); !prefix.Contains(x) {
				break
			}
			j++
		}
		if j > i {
			runs++
			switch runs {
			case 1:
				one = list[i:j:j]
			case 2:
				*buf = append(append((*buf)[:0], one...), list[i:j]...)
			default:
				*buf = append(*buf, list[i:j]...)
			}
		}
	})
	if runs <= 1 {
		return one
	}
	return *buf
}

// hasAddr says whether an entry of list (sorted as for rangeEntries) has
// address a.
func hasAddr[T any](list []T, key func(*T) (string, netip.Addr), a netip.Addr) bool {
	found := false
	eachRun(list, key, func(lo, hi int) {
		i := lo + sort.Search(hi-lo, func(i int) bool {
			_, x := key(&list[lo+i])
			return x.Compare(a) >= 0
		})
		if i < hi {
			_, x := key(&list[i])
			found = found || x == a
		}
	})
	return found
}

// eachRun calls fn with the bounds of each network's entries in list,
// sorted as for rangeEntries.
func eachRun[T any](list []T, key func(*T) (string, netip.Addr), fn func(lo, hi int)) {
	for lo := 0; lo < len(list); {
		nw, _ := key(&list[lo])
		hi := lo + sort.Search(len(list)-lo, func(i int) bool {
			n, _ := key(&list[lo+i])
			return compareNetworkNames(n, nw) > 0
		})
		fn(lo, hi)
		lo = hi
	}
}
