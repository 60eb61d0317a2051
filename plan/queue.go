package plan

import (
	"encoding/binary"
	"net/netip"

	"github.com/ovnbgp/ovnbgp/model"
)

// ChangeQueue is a TableChange too large to decide in one pass (a peer of
// 100k prefixes dropping its session), taken apart in prefix order: Next
// gives the changes of the next prefixes, every change of a prefix
// together, so that a loop can decide a few thousand prefixes at a time and
// serve its other work between. Updating a table with every Next in turn
// leaves it as one Update of the whole change would: the same verdicts,
// kept prefixes and desired routes (TestChangeQueueEqualsOneUpdate); only
// the order Result lists paths of different prefixes in may differ.
//
// Why it is the same: Update decides the prefixes it touches in prefix
// order, and a prefix's cap groups (recap) depend only on its own paths
// and on what the groups kept and held back before it. Taken in prefix
// order, each prefix is decided with its own paths already changed and
// after the same prefixes as in one Update; a slot freed early goes to the
// first prefix held back then, as in one Update, and if that prefix goes
// in a later part its slot is freed again when it is decided, as in one
// Update.
//
// Building it costs O(n) (a heap), each Next O(k log n) for k changes: no
// step sorts the whole change.
type ChangeQueue struct {
	c TableChange
	h changeHeap
	// paths and gone back the parts Next returns, reused by the next
	// one: a 100k table transfer's parts copied 23 MB of paths, one
	// fresh slice a part (issue 18).
	paths []model.LearnedPath
	gone  []model.Key
}

// queued is one change of c: Gone[i] for i < len(Gone), else
// Paths[i-len(Gone)]; i keeps the order of a prefix's changes as given
// (Gone before Paths, as Update applies them). order is the prefix as
// integers, compared as model.ComparePrefix orders prefixes (an IPv4
// address before any IPv6 one, then the address, then the length) but
// several times faster: the heap compares ~2 log n times per change. 32
// bytes a change.
type queued struct {
	order prefixOrder
	i     int32
}

type prefixOrder struct {
	hi, lo uint64
	// fam is 0 for IPv4, 1 for IPv6; bits the prefix length.
	fam, bits uint8
}

func orderOf(p netip.Prefix) prefixOrder {
	a := p.Addr().As16()
	o := prefixOrder{hi: binary.BigEndian.Uint64(a[:8]), lo: binary.BigEndian.Uint64(a[8:]), bits: uint8(p.Bits())}
	if !p.Addr().Is4() {
		o.fam = 1
	}
	return o
}

func (a prefixOrder) less(b prefixOrder) bool {
	switch {
	case a.fam != b.fam:
		return a.fam < b.fam
	case a.hi != b.hi:
		return a.hi < b.hi
	case a.lo != b.lo:
		return a.lo < b.lo
	}
	return a.bits < b.bits
}

// changeHeap is a binary min-heap of queued changes, by prefix order and
// then position. Typed, not container/heap: its Pop boxed every change in
// an interface, one allocation per change (100k for a table transfer,
// issue 18; TestChangeQueueNextAllocs).
type changeHeap []queued

func (h changeHeap) less(i, j int) bool {
	if h[i].order != h[j].order {
		return h[i].order.less(h[j].order)
	}
	return h[i].i < h[j].i
}

// init orders h as a heap: O(n).
func (h changeHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// pop removes and returns the least change.
func (h *changeHeap) pop() queued {
	old := *h
	n := len(old) - 1
	x := old[0]
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
	return x
}

func (h changeHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// NewChangeQueue queues c; c's slices are not copied and must not
// change.
func NewChangeQueue(c TableChange) *ChangeQueue {
	q := &ChangeQueue{c: c, h: make(changeHeap, 0, len(c.Gone)+len(c.Paths))}
	for _, k := range c.Gone {
		q.h = append(q.h, queued{order: orderOf(k.Prefix), i: int32(len(q.h))})
	}
	for i := range c.Paths {
		q.h = append(q.h, queued{order: orderOf(c.Paths[i].Prefix), i: int32(len(q.h))})
	}
	q.h.init()
	return q
}

// Len is the number of changes not taken yet: paths, keys gone and the
// kernel keys (which go with the first Next).
func (q *ChangeQueue) Len() int {
	if q == nil {
		return 0
	}
	return len(q.h) + len(q.c.KernelKeys)
}

// Next takes the changes of the prefixes first in prefix order: at least
// n changes (all, if fewer are left), then those of the last prefix that
// are left, so a prefix is never split. The part's Paths and Gone are the
// queue's, overwritten by the next Next: decide a part (ImportTable.Update
// keeps neither slice) before taking the next.
func (q *ChangeQueue) Next(n int) TableChange {
	c := TableChange{KernelKeys: q.c.KernelKeys, Foreign: q.c.Foreign}
	q.c.KernelKeys, q.c.Foreign = nil, nil
	// The part's slices at their size (a prefix's last changes can add a
	// few more), kept for the next part.
	if k := min(n, len(q.h), len(q.c.Gone)); k > 0 {
		if cap(q.gone) < k {
			q.gone = make([]model.Key, 0, k)
		}
		c.Gone = q.gone[:0]
	}
	if k := min(n, len(q.h), len(q.c.Paths)); k > 0 {
		if cap(q.paths) < k {
			q.paths = make([]model.LearnedPath, 0, k)
		}
		c.Paths = q.paths[:0]
	}
	taken := 0
	var last prefixOrder
	for len(q.h) > 0 && (taken < n || taken > 0 && q.h[0].order == last) {
		x := q.h.pop()
		if i := int(x.i); i < len(q.c.Gone) {
			c.Gone = append(c.Gone, q.c.Gone[i])
		} else {
			c.Paths = append(c.Paths, q.c.Paths[i-len(q.c.Gone)])
		}
		last = x.order
		taken++
	}
	q.paths, q.gone = c.Paths[:0], c.Gone[:0]
	if len(q.h) == 0 {
		q.c = TableChange{} // let the change go
	}
	return c
}
