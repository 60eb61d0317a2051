package plan

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// The ImportTable's storage of a path, compact: at 100k paths the table
// is most of the daemon's own heap. A path's attributes that many paths
// share (peer, next hop, AS path, origin, communities, link bandwidth) are interned once
// per distinct set (attrTable); MED and LOCAL_PREF, which may differ per
// prefix, stay in the path; the prefix is its entry's key; its decision
// is indices and codes; what is rare (a malformed path, an age not in
// whole seconds of local time, an accepted reason not shared, a third
// candidate rule) is behind one pointer (pathRare).

// tablePath is a learned path with its decision, stored compactly: the
// path is made again when asked (ImportTable.learned).
type tablePath struct {
	// seq orders paths as they were first given (ImportTable.nextSeq).
	seq uint32
	// age is Age in Unix seconds when flagAgeUnix is set.
	age  uint32
	rare *pathRare
	// reason is the verdict of first ("" when it passed), or the reason
	// when no rule's accept matched; with flagAccReason set it is "" and
	// this holds the reason of the accepted path instead.
	reason string
	// cands are the rules (and their accept entry) whose every check but
	// the cap the path passes, in config order: the first two here, the
	// others in rare.
	cands [2]ruleEntry
	// attrs is the path's interned attributes (0: no path).
	attrs          uint32
	med, localPref uint32
	// first is the first rule whose accept matched (-1: none).
	first int32
	// rule is the rule of the verdict (Rule; -1: none). The reason of an
	// accepted path is reason (flagAccReason), rare.accepted, or else the
	// shared one of rule and its candidate's entry (ImportTable.reasons).
	rule int32
	// nCands counts cands.
	nCands uint8
	// cause is reason's class; talliedCause the cause the path is in the
	// table's counts with, if rejected (causeCode).
	cause, talliedCause uint8
	flags               pathFlags
}

// pathFlags are a tablePath's booleans.
type pathFlags uint8

const (
	flagStale      pathFlags = 1 << iota // model.LearnedPath.Stale
	flagAccepted                         // model.LearnedPath.Accepted
	flagTallied                          // the path is in the table's counts
	flagTalliedAcc                       // as accepted
	flagAgeUnix                          // Age is time.Unix(age, 0); if not, rare.age (or zero)
	flagAccReason                        // reason is the accepted reason (the decision's is "")
)

func (tp *tablePath) has(f pathFlags) bool { return tp.flags&f != 0 }

func (tp *tablePath) set(f pathFlags, on bool) {
	if on {
		tp.flags |= f
	} else {
		tp.flags &^= f
	}
}

func (tp *tablePath) accepted() bool { return tp.has(flagAccepted) }

// pathRare is what few paths have.
type pathRare struct {
	malformed string
	// age is Age when it is not time.Unix of whole seconds in uint32
	// (another location, a monotonic reading, a fraction), or the zero
	// time.
	age time.Time
	// accepted is the reason of an accepted path when it is not the
	// shared one of its rule and entry.
	accepted string
	// more are the candidates after the first two.
	more []ruleEntry
	// cause is the cause when it has no code.
	cause RejectCause
}

// rareOf is tp.rare, made if need be.
func (tp *tablePath) rareOf() *pathRare {
	if tp.rare == nil {
		tp.rare = &pathRare{}
	}
	return tp.rare
}

// capped is the rule whose cap held the path back from every rule that
// accepted it (-1: none): the first candidate of a path not accepted
// whose first rule passed (settle). Its reason is made when asked for,
// since it counts what the peer offers now.
func (tp *tablePath) capped() int32 {
	if tp.accepted() || tp.reason != "" || tp.nCands == 0 {
		return -1
	}
	return tp.cands[0].rule
}

// entryOf is the accept entry by which candidate rule ri accepts the path.
func (tp *tablePath) entryOf(ri int32) int32 {
	for _, c := range tp.cands[:tp.nCands] {
		if c.rule == ri {
			return c.entry
		}
	}
	for _, c := range tp.rare.more {
		if c.rule == ri {
			return c.entry
		}
	}
	return -1
}

// resetCands forgets the candidates.
func (tp *tablePath) resetCands() {
	tp.nCands = 0
	if tp.rare != nil {
		tp.rare.more = tp.rare.more[:0]
	}
}

// addCand adds candidate r.
func (tp *tablePath) addCand(r ruleEntry) {
	if int(tp.nCands) < len(tp.cands) {
		tp.cands[tp.nCands] = r
		tp.nCands++
		return
	}
	rare := tp.rareOf()
	rare.more = append(rare.more, r)
}

// allCands appends the candidates to buf.
func (tp *tablePath) allCands(buf []ruleEntry) []ruleEntry {
	buf = append(buf, tp.cands[:tp.nCands]...)
	if tp.rare != nil {
		buf = append(buf, tp.rare.more...)
	}
	return buf
}

// setAge stores a (on a path without rare fields yet: put).
func (tp *tablePath) setAge(a time.Time) {
	tp.set(flagAgeUnix, false)
	tp.age = 0
	switch {
	case a == (time.Time{}):
	case a.Unix() >= 0 && a.Unix() <= math.MaxUint32 && time.Unix(a.Unix(), 0) == a:
		tp.age = uint32(a.Unix())
		tp.set(flagAgeUnix, true)
	default:
		tp.rareOf().age = a
	}
}

// getAge is the age stored.
func (tp *tablePath) getAge() time.Time {
	switch {
	case tp.has(flagAgeUnix):
		return time.Unix(int64(tp.age), 0)
	case tp.rare != nil:
		return tp.rare.age
	}
	return time.Time{}
}

// setCause stores the cause c.
func (tp *tablePath) setCause(c RejectCause) {
	tp.cause = causeCode(c)
	if tp.cause == causeOther {
		tp.rareOf().cause = c
	}
}

// getCause is the cause stored.
func (tp *tablePath) getCause() RejectCause { return tp.causeOf(tp.cause) }

// causeOf is the cause of code.
func (tp *tablePath) causeOf(code uint8) RejectCause {
	if code == causeOther {
		return tp.rare.cause
	}
	return causeName(code)
}

// causeOther is the code of a cause that has none (kept in rare).
const causeOther = 255

// causeCode is c's code.
func causeCode(c RejectCause) uint8 {
	switch c {
	case "":
		return 0
	case RejectMalformed:
		return 1
	case RejectLoop:
		return 2
	case RejectNoRule:
		return 3
	case RejectNoMatch:
		return 4
	case RejectDefaultRoute:
		return 5
	case RejectProtected:
		return 6
	case RejectNextHop:
		return 7
	case RejectImportCap:
		return 8
	case RejectStale:
		return 9
	case RejectCommunity:
		return 10
	case RejectAttributes:
		return 11
	}
	return causeOther
}

// causeName is the cause of code (causeCode's inverse).
func causeName(code uint8) RejectCause {
	switch code {
	case 1:
		return RejectMalformed
	case 2:
		return RejectLoop
	case 3:
		return RejectNoRule
	case 4:
		return RejectNoMatch
	case 5:
		return RejectDefaultRoute
	case 6:
		return RejectProtected
	case 7:
		return RejectNextHop
	case 8:
		return RejectImportCap
	case 9:
		return RejectStale
	case 10:
		return RejectCommunity
	case 11:
		return RejectAttributes
	}
	return ""
}

// pathAttrs are the attributes of a path that many share, as the first
// path with them gave them.
type pathAttrs struct {
	peer        string
	nextHop     netip.Addr
	asPath      []uint32
	origin      string
	communities []string
	linkBW      *model.LinkBandwidth
	// refs counts the paths with them.
	refs int
}

// attrTable interns pathAttrs by value: a slot per distinct set, freed
// when its last path goes. Slot 0 is never used (tablePath.attrs 0 is no
// path).
type attrTable struct {
	slots []pathAttrs
	free  []uint32
	index map[string]uint32
	buf   []byte
	// nextHops counts the slots in use by next hop: the few next hops the
	// paths have, for a protected prefix that comes or goes
	// (ImportTable.SetSnapshotProtected).
	nextHops map[netip.Addr]int
}

func newAttrTable() *attrTable {
	return &attrTable{slots: make([]pathAttrs, 1), index: map[string]uint32{}, nextHops: map[netip.Addr]int{}}
}

// key is p's attributes encoded, one to one, in a.buf.
func (a *attrTable) key(peer string, nextHop netip.Addr, asPath []uint32, origin string, communities []string, linkBW *model.LinkBandwidth) []byte {
	b := a.buf[:0]
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(peer)
	switch {
	case nextHop.Is4():
		a4 := nextHop.As4()
		b = append(append(b, 4), a4[:]...)
	case nextHop.Is6():
		a16 := nextHop.As16()
		b = append(append(b, 6), a16[:]...)
		str(nextHop.Zone())
	default:
		b = append(b, 0)
	}
	str(origin)
	// nil and empty differ
	if asPath == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(asPath)))
		for _, as := range asPath {
			b = binary.BigEndian.AppendUint32(b, as)
		}
	}
	if communities == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(communities)))
		for _, c := range communities {
			str(c)
		}
	}
	if linkBW == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint16(b, linkBW.ASN)
		b = binary.BigEndian.AppendUint32(b, math.Float32bits(linkBW.BytesPerSecond))
	}
	a.buf = b
	return b
}

// same reports whether slot i holds p's attributes.
func (a *attrTable) same(i uint32, p *model.LearnedPath) bool {
	s := &a.slots[i]
	return s.peer == p.Peer && s.nextHop == p.NextHop && s.origin == p.Origin &&
		(s.asPath == nil) == (p.ASPath == nil) && slices.Equal(s.asPath, p.ASPath) &&
		(s.communities == nil) == (p.Communities == nil) && slices.Equal(s.communities, p.Communities) &&
		sameLinkBW(s.linkBW, p.LinkBandwidth)
}

// sameLinkBW reports whether a and b are both absent or equal.
func sameLinkBW(a, b *model.LinkBandwidth) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// ref returns the slot of p's attributes, counting p in.
func (a *attrTable) ref(p *model.LearnedPath) uint32 {
	k := a.key(p.Peer, p.NextHop, p.ASPath, p.Origin, p.Communities, p.LinkBandwidth)
	if i, ok := a.index[string(k)]; ok {
		a.slots[i].refs++
		return i
	}
	v := pathAttrs{peer: p.Peer, nextHop: p.NextHop, asPath: p.ASPath, origin: p.Origin, communities: p.Communities, linkBW: p.LinkBandwidth, refs: 1}
	var i uint32
	if n := len(a.free); n > 0 {
		i, a.free = a.free[n-1], a.free[:n-1]
		a.slots[i] = v
	} else {
		i = uint32(len(a.slots))
		a.slots = append(a.slots, v)
	}
	a.index[string(k)] = i
	a.nextHops[p.NextHop]++
	return i
}

// unref counts a path with slot i out; the last one frees it.
func (a *attrTable) unref(i uint32) {
	s := &a.slots[i]
	if s.refs--; s.refs > 0 {
		return
	}
	delete(a.index, string(a.key(s.peer, s.nextHop, s.asPath, s.origin, s.communities, s.linkBW)))
	if a.nextHops[s.nextHop]--; a.nextHops[s.nextHop] <= 0 {
		delete(a.nextHops, s.nextHop)
	}
	*s = pathAttrs{}
	a.free = append(a.free, i)
}

// len is the number of slots in use.
func (a *attrTable) len() int { return len(a.index) }
