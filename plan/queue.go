package plan

import (
	"container/heap"
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
	h changeHeap
	// kernelKeys and foreign go with the first Next.
	kernelKeys, foreign []model.KernelRouteKey
}

// queued is one change: a path (put) or a key gone; seq keeps the order of
// a prefix's changes as given (Gone before Paths, as Update applies them).
type queued struct {
	prefix netip.Prefix
	seq    int
	path   *model.LearnedPath
	gone   model.Key
}

type changeHeap []queued

func (h changeHeap) Len() int { return len(h) }
func (h changeHeap) Less(i, j int) bool {
	if c := model.ComparePrefix(h[i].prefix, h[j].prefix); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h changeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *changeHeap) Push(x any)   { *h = append(*h, x.(queued)) }
func (h *changeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = queued{}
	*h = old[:len(old)-1]
	return x
}

// NewChangeQueue queues c; c's slices are not copied (the queue points
// into c.Paths) and must not change.
func NewChangeQueue(c TableChange) *ChangeQueue {
	q := &ChangeQueue{h: make(changeHeap, 0, len(c.Gone)+len(c.Paths)), kernelKeys: c.KernelKeys, foreign: c.Foreign}
	for _, k := range c.Gone {
		q.h = append(q.h, queued{prefix: k.Prefix, seq: len(q.h), gone: k})
	}
	for i := range c.Paths {
		q.h = append(q.h, queued{prefix: c.Paths[i].Prefix, seq: len(q.h), path: &c.Paths[i]})
	}
	heap.Init(&q.h)
	return q
}

// Len is the number of changes not taken yet: paths, keys gone and the
// kernel keys (which go with the first Next).
func (q *ChangeQueue) Len() int {
	if q == nil {
		return 0
	}
	return len(q.h) + len(q.kernelKeys)
}

// Next takes the changes of the prefixes first in prefix order: at least
// n changes (all, if fewer are left), then those of the last prefix that
// are left, so a prefix is never split.
func (q *ChangeQueue) Next(n int) TableChange {
	c := TableChange{KernelKeys: q.kernelKeys, Foreign: q.foreign}
	q.kernelKeys, q.foreign = nil, nil
	taken := 0
	var last netip.Prefix
	for len(q.h) > 0 && (taken < n || q.h[0].prefix == last) {
		x := heap.Pop(&q.h).(queued)
		if x.path != nil {
			c.Paths = append(c.Paths, *x.path)
		} else {
			c.Gone = append(c.Gone, x.gone)
		}
		last = x.prefix
		taken++
	}
	return c
}
