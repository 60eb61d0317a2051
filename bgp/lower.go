package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// installed is what gobgp holds of the advertisements, as lower reads it:
// the RIB's local paths, the export statements with their prefix sets, the
// group each advertisement was put in, each peer's neighbor set and the
// peers whose soft reset is owed. lower never changes it.
type installed struct {
	rib    map[netip.Prefix]struct{}
	groups map[groupID]*group
	member map[model.Key]*record
	nbr    map[string]netip.Addr
	resets map[string]bool
	// refs counts the members of each prefix. exact says that the RIB
	// holds exactly the prefixes with a member, and that each group's
	// prefixes are those of its members: lower then looks only at the
	// keys the change names and at the groups and peers (a cost of the
	// change, not of the table), otherwise at every path and every
	// group's prefixes (after a failure left them apart).
	refs  map[netip.Prefix]int
	exact bool
}

// groupOf is the group k is a member of.
func (st installed) groupOf(k model.Key) (groupID, bool) {
	if r := st.member[k]; r != nil {
		return r.gid, true
	}
	return groupID{}, false
}

// change is what one Apply (or SetPeers) asks: select want, deselect
// remove, with the configured peers. The executor fills the skip fields
// when an operation failed during the pass, and lowers again: a skipped
// key keeps what it has, a skipped path or group is not touched again, a
// skipped reset stays owed for the next Apply.
type change struct {
	want   []model.Advertisement
	remove []model.Key
	peers  map[string]config.Peer

	skipKeys   map[model.Key]bool
	skipPeers  map[string]bool
	skipPaths  map[netip.Prefix]bool
	skipGroups map[groupID]bool
	skipResets map[string]bool
}

// opKind is one kind of gobgp operation.
type opKind int

const (
	opAddNeighbor        opKind = iota // create the peer's neighbor set, or add addr to it
	opRemoveNeighborAddr               // remove the peer's old address from its set
	opCreateGroup                      // a prefix set with prefixes, then its export statement
	opAddToGroup                       // add prefixes to a group's set, in place
	opAddPaths                         // originate local paths
	opDeletePaths                      // withdraw local paths
	opRemoveFromGroup                  // remove prefixes from a group's set, in place
	opDeleteGroup                      // remove the statement from the policy, then it and its set
	opDeleteNeighbor                   // delete the peer's neighbor set
	opSoftReset                        // soft reset OUT: the peer re-runs its export policy
	opForgetReset                      // no call: the peer is gone, its owed reset with it
)

var opNames = [...]string{"add-neighbor", "remove-neighbor-addr", "create-group", "add-to-group", "add-paths",
	"delete-paths", "remove-from-group", "delete-group", "delete-neighbor", "soft-reset", "forget-reset"}

// lowOp is one operation of a lowering. resync says the peer's selection
// changed for a path that stays in the RIB, so that it owes a soft reset.
// advs are the advertisements a grow selects, in the order of prefixes.
type lowOp struct {
	kind     opKind
	peer     string
	addr     netip.Addr
	gid      groupID
	norm     normAttrs
	prefixes []netip.Prefix
	advs     []model.Advertisement
	resync   bool
}

// String renders the operation for tests and logs.
func (o lowOp) String() string {
	var b strings.Builder
	b.WriteString(opNames[o.kind])
	switch o.kind {
	case opAddNeighbor, opRemoveNeighborAddr, opDeleteNeighbor, opSoftReset:
		fmt.Fprintf(&b, " %s %v", o.peer, o.addr)
	case opForgetReset:
		fmt.Fprintf(&b, " %s", o.peer)
	case opCreateGroup, opAddToGroup, opRemoveFromGroup, opDeleteGroup:
		fmt.Fprintf(&b, " %s/%s/%s", o.gid.peer, o.gid.family, o.gid.attrs)
	}
	if len(o.prefixes) > 0 {
		fmt.Fprintf(&b, " %v", o.prefixes)
	}
	if o.resync {
		b.WriteString(" resync")
	}
	return b.String()
}

// lowering is what lower returns: the operations in order; update are
// advertisements already in their group (only the record changes);
// forget are the keys no longer asked for; failed are those that failed
// validation, and errs the conflicts that are not failures (a duplicate
// key: the first is applied).
type lowering struct {
	ops    []lowOp
	update []update
	forget []model.Key
	failed map[model.Key]failure
	errs   []error
}

// update is an advertisement already in its group gid: only its record
// changes.
type update struct {
	adv model.Advertisement
	gid groupID
}

// lower turns a change into gobgp operations, starting from st. It does
// no I/O and changes nothing. The order keeps every peer correct at every
// step: neighbor sets first (every statement of a peer matches it), then
// statements grow before the paths they select are added; paths are
// withdrawn before statements shrink; a statement or neighbor set left
// empty is deleted, never kept (gobgp treats an empty neighbor set as
// matching every peer); sets are changed in place, never replaced (gobgp
// binds a statement to the set object when the statement is added); last,
// each peer whose selection changed for a path that stays in the RIB gets
// a soft reset OUT, and no other peer. A key that fails validation is
// deselected: none has a last good state to keep (its peer is not
// configured, its family is not enabled on the peer, or its prefix can
// never be a key that applied).
func lower(st installed, ch change) lowering {
	out := lowering{failed: map[model.Key]failure{}}
	// desired holds positions in ws: a wanted is too big a map value to
	// be stored in place (each would be allocated apart).
	desired := make(map[model.Key]int, len(ch.want))
	ws := make([]wanted, 0, len(ch.want))
	forget := map[model.Key]bool{}
	for _, k := range ch.remove {
		if !ch.skipKeys[k] {
			forget[k] = true
		}
	}
	// The keys in the order asked: a bulk comes sorted (plan's diffs
	// are), and is then not sorted again.
	keys := make([]model.Key, 0, len(ch.want))
	var memo attrsMemo
	for _, adv := range ch.want {
		k := adv.Key()
		if ch.skipKeys[k] {
			continue
		}
		w, err := memo.validate(ch.peers, adv)
		if err != nil {
			// A failure names the first advertisement asked for k: the
			// one failed already, or else the one desired.
			first := adv
			if f, ok := out.failed[k]; ok {
				first = f.adv
			} else if i, ok := desired[k]; ok {
				first = ws[i].adv
			}
			out.failed[k] = failure{adv: first, err: err.Error()}
			if _, ok := desired[k]; !ok {
				forget[k] = true
			}
			continue
		}
		if i, dup := desired[k]; dup {
			if prev := ws[i]; prev.gid != w.gid {
				out.errs = append(out.errs, fmt.Errorf("advertise %v to peer %q: conflicting attributes %+v and %+v; keeping the first",
					k.Prefix, k.Peer, prev.adv.Attrs, adv.Attrs))
			}
			continue
		}
		desired[k] = len(ws)
		ws = append(ws, w)
		delete(forget, k)
		if !ch.skipPeers[k.Peer] {
			keys = append(keys, k)
		}
	}
	// Each key once (its first valid advertisement is desired), in key
	// order.
	if !slices.IsSortedFunc(keys, compareKey) {
		slices.SortFunc(keys, compareKey)
	}
	keys = slices.Compact(keys)
	for k := range forget {
		out.forget = append(out.forget, k)
	}
	slices.SortFunc(out.forget, compareKey)

	reset := map[string]bool{}
	for p := range st.resets {
		reset[p] = true
	}

	// 1. Neighbor sets.
	seenPeer := map[string]bool{}
	for _, k := range keys {
		if seenPeer[k.Peer] {
			continue
		}
		seenPeer[k.Peer] = true
		addr := ch.peers[k.Peer].Address
		cur, had := st.nbr[k.Peer]
		if had && cur == addr {
			continue
		}
		out.ops = append(out.ops, lowOp{kind: opAddNeighbor, peer: k.Peer, addr: addr, resync: had})
		if had {
			out.ops = append(out.ops, lowOp{kind: opRemoveNeighborAddr, peer: k.Peer, addr: cur, resync: true})
			reset[k.Peer] = true
		}
	}

	// 2. Grow, one operation per group. The keys that move are counted
	// per group first, so that each group's lists are made once at their
	// size (a bulk of 10,000 grew them by doubling, copying each
	// advertisement about twice more).
	grown := make(map[model.Key]groupID, len(keys))
	grow := map[groupID]*lowOp{}
	var growOrder []groupID
	moving := make([]int, 0, len(keys))
	count := map[groupID]int{}
	for i, k := range keys {
		w := ws[desired[k]]
		if cur, had := st.groupOf(k); had && cur == w.gid {
			out.update = append(out.update, update{adv: w.adv, gid: cur})
			continue
		}
		moving = append(moving, i)
		count[w.gid]++
	}
	for _, i := range moving {
		k := keys[i]
		w := ws[desired[k]]
		op := grow[w.gid]
		if op == nil {
			kind := opAddToGroup
			if st.groups[w.gid] == nil {
				kind = opCreateGroup
			}
			n := count[w.gid]
			op = &lowOp{kind: kind, peer: k.Peer, gid: w.gid, norm: w.attrs,
				prefixes: make([]netip.Prefix, 0, n), advs: make([]model.Advertisement, 0, n)}
			grow[w.gid] = op
			growOrder = append(growOrder, w.gid)
		}
		op.prefixes = append(op.prefixes, k.Prefix)
		op.advs = append(op.advs, w.adv)
		grown[k] = w.gid
		if _, in := st.rib[k.Prefix]; in {
			// Only a soft reset makes gobgp send a path already in the
			// RIB to this peer, or with the new attributes.
			op.resync = true
			reset[k.Peer] = true
		}
	}
	for _, gid := range growOrder {
		out.ops = append(out.ops, *grow[gid])
	}
	// after is the group of k once the change is made.
	after := func(k model.Key) (groupID, bool) {
		if gid, ok := grown[k]; ok {
			return gid, true
		}
		if forget[k] {
			return groupID{}, false
		}
		return st.groupOf(k)
	}

	// touched are the keys whose group may change: what the change asks
	// for and what it forgets. Exact, nothing else changes.
	touched := slices.Concat(keys, out.forget)

	// 3. Add the paths some advertisement wants and the RIB lacks.
	wantRIB := wantedPaths(st, touched, after)
	ribAfter := func(p netip.Prefix) bool {
		_, in := st.rib[p]
		if ch.skipPaths[p] {
			return in
		}
		return wantRIB[p]
	}
	var toAdd, toDelete []netip.Prefix
	for p, want := range wantRIB {
		if _, in := st.rib[p]; want && !in && !ch.skipPaths[p] {
			toAdd = append(toAdd, p)
		}
	}
	// 4. Withdraw the paths no advertisement wants.
	if st.exact {
		for p, want := range wantRIB {
			if _, in := st.rib[p]; !want && in && !ch.skipPaths[p] {
				toDelete = append(toDelete, p)
			}
		}
	} else {
		for p := range st.rib {
			if !wantRIB[p] && !ch.skipPaths[p] {
				toDelete = append(toDelete, p)
			}
		}
	}
	if len(toAdd) > 0 {
		slices.SortFunc(toAdd, model.ComparePrefix)
		out.ops = append(out.ops, lowOp{kind: opAddPaths, prefixes: toAdd})
	}
	if len(toDelete) > 0 {
		slices.SortFunc(toDelete, model.ComparePrefix)
		out.ops = append(out.ops, lowOp{kind: opDeletePaths, prefixes: toDelete})
	}

	// 5. Shrink, then delete what is left empty.
	gids := sortedGroups(st.groups)
	left := map[groupID]int{}
	// leaving are the prefixes each group loses: exact, those of the
	// touched keys that were its members and are no longer.
	var leaving map[groupID][]netip.Prefix
	if st.exact {
		leaving = map[groupID][]netip.Prefix{}
		for _, k := range touched {
			gid, was := st.groupOf(k)
			if !was {
				continue
			}
			if cur, ok := after(k); !ok || cur != gid {
				leaving[gid] = append(leaving[gid], k.Prefix)
			}
		}
	}
	for _, gid := range gids {
		g := st.groups[gid]
		left[gid] = len(g.prefixes)
		if ch.skipGroups[gid] {
			continue
		}
		op := lowOp{kind: opRemoveFromGroup, peer: gid.peer, gid: gid}
		if st.exact {
			op.prefixes = leaving[gid]
		} else {
			for p := range g.prefixes {
				if cur, ok := after(model.Key{Peer: gid.peer, Prefix: p}); !ok || cur != gid {
					op.prefixes = append(op.prefixes, p)
				}
			}
		}
		for _, p := range op.prefixes {
			if ribAfter(p) {
				op.resync = true
				reset[gid.peer] = true
			}
		}
		if len(op.prefixes) > 0 {
			slices.SortFunc(op.prefixes, model.ComparePrefix)
			out.ops = append(out.ops, op)
			left[gid] -= len(op.prefixes)
		}
	}
	for _, gid := range growOrder {
		left[gid] += len(grow[gid].prefixes)
	}
	inUse := map[string]bool{}
	for gid, n := range left {
		if n > 0 || ch.skipGroups[gid] {
			inUse[gid.peer] = true
		}
	}
	for _, gid := range gids {
		if left[gid] == 0 && !ch.skipGroups[gid] {
			out.ops = append(out.ops, lowOp{kind: opDeleteGroup, peer: gid.peer, gid: gid})
		}
	}
	for _, peer := range sortedKeys(st.nbr) {
		if !inUse[peer] && !ch.skipPeers[peer] {
			out.ops = append(out.ops, lowOp{kind: opDeleteNeighbor, peer: peer, addr: st.nbr[peer]})
		}
	}

	// 6. Soft resets. A peer that is gone is owed none, but the peer now
	// at its address is: its old statements matched that address.
	for _, peer := range sortedKeys(reset) {
		if _, ok := ch.peers[peer]; ok {
			continue
		}
		if addr, ok := st.nbr[peer]; ok {
			for name, p := range ch.peers {
				if p.Address == addr {
					reset[name] = true
				}
			}
		}
	}
	for _, peer := range sortedKeys(reset) {
		if ch.skipResets[peer] {
			continue
		}
		p, ok := ch.peers[peer]
		if !ok {
			out.ops = append(out.ops, lowOp{kind: opForgetReset, peer: peer})
			continue
		}
		out.ops = append(out.ops, lowOp{kind: opSoftReset, peer: peer, addr: p.Address})
	}
	return out
}

// wantedPaths says, for each prefix lower must look at, whether some
// advertisement wants its path once the change is made (after). Exact,
// those are the prefixes of the touched keys, and a prefix is wanted when
// its count of members stays above zero; otherwise every prefix with a
// member, or with a path, is looked at (absent: not wanted).
func wantedPaths(st installed, touched []model.Key, after func(model.Key) (groupID, bool)) map[netip.Prefix]bool {
	if !st.exact {
		want := make(map[netip.Prefix]bool, len(st.member)+len(touched))
		for k := range st.member {
			if _, ok := after(k); ok {
				want[k.Prefix] = true
			}
		}
		for _, k := range touched {
			if _, ok := after(k); ok {
				want[k.Prefix] = true
			}
		}
		return want
	}
	refs := make(map[netip.Prefix]int, len(touched))
	for _, k := range touched {
		if _, seen := refs[k.Prefix]; !seen {
			refs[k.Prefix] = st.refs[k.Prefix]
		}
		_, was := st.member[k]
		_, is := after(k)
		switch {
		case was && !is:
			refs[k.Prefix]--
		case !was && is:
			refs[k.Prefix]++
		}
	}
	want := make(map[netip.Prefix]bool, len(refs))
	for p, n := range refs {
		want[p] = n > 0
	}
	return want
}

// attrsMemo keeps the last attributes validate normalized, and their
// normal form: the advertisements of one rule share their attributes, and
// a bulk of them is then normalized (and its group key rendered) once,
// not once per advertisement.
type attrsMemo struct {
	set   bool
	attrs model.PathAttrs
	norm  normAttrs
	key   string
}

// validate is validate with the normal form of the last attributes kept:
// attributes equal field by field normalize to the same form.
func (m *attrsMemo) validate(peers map[string]config.Peer, adv model.Advertisement) (wanted, error) {
	if m.set && sameInput(m.attrs, adv.Attrs) {
		return validateWith(peers, adv, func(model.PathAttrs) (normAttrs, string) { return m.norm, m.key })
	}
	w, err := validate(peers, adv)
	if err == nil {
		m.set, m.attrs, m.norm, m.key = true, adv.Attrs, w.attrs, w.gid.attrs
	}
	return w, err
}

// sameInput says whether a and b are equal field by field (the same
// values in the same order): normalize makes the same of both.
func sameInput(a, b model.PathAttrs) bool {
	return a.MED == b.MED && a.ASPathPrepend == b.ASPathPrepend &&
		(a.LocalPreference == nil) == (b.LocalPreference == nil) && (a.LocalPreference == nil || *a.LocalPreference == *b.LocalPreference) &&
		(a.LinkBandwidth == nil) == (b.LinkBandwidth == nil) && (a.LinkBandwidth == nil || *a.LinkBandwidth == *b.LinkBandwidth) &&
		(a.Communities == nil) == (b.Communities == nil) && slices.Equal(a.Communities, b.Communities) &&
		(a.LargeCommunities == nil) == (b.LargeCommunities == nil) && slices.Equal(a.LargeCommunities, b.LargeCommunities)
}

// validate checks adv against the configured peers and parses its
// attributes.
func validate(peers map[string]config.Peer, adv model.Advertisement) (wanted, error) {
	return validateWith(peers, adv, func(a model.PathAttrs) (normAttrs, string) {
		n := normalize(a)
		return n, n.key()
	})
}

// validateWith is validate with norm giving the normal form of the
// attributes and its key.
func validateWith(peers map[string]config.Peer, adv model.Advertisement, norm func(model.PathAttrs) (normAttrs, string)) (wanted, error) {
	p, ok := peers[adv.Peer]
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
	n, key := norm(adv.Attrs)
	return wanted{adv: adv, gid: groupID{peer: adv.Peer, family: fam, attrs: key}, attrs: n}, nil
}

func groupName(gid groupID) string {
	return fmt.Sprintf("ovnbgp:%s:%s:%s", gid.peer, gid.family, shortHash(gid.attrs))
}
