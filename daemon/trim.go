package daemon

import (
	"runtime/debug"
	"runtime/metrics"
	"time"

	"go.uber.org/zap"
)

// Returning memory after a burst.
//
// A burst (a peer sending its whole table, a full pass over a large one)
// allocates far more than it keeps: the Go runtime then holds the heap at
// about twice the live data and gives the rest back to the kernel only
// slowly. A node daemon should not sit on hundreds of MiB after a session
// came up, so once the loop has been idle for trimIdle after at least
// trimAllocs bytes were allocated, with as much held beyond the live heap
// (retained), or the live heap grew as much (allocations that came slowly
// were collected and returned by the runtime itself, and a trim then costs
// a whole GC for nothing), it
// collects and returns the free memory at once (debug.FreeOSMemory: one GC of the live heap). At most once per
// trimEvery; a steady flow of changes never leaves the
// loop idle and is left to the runtime's own scavenger. A trim may come
// while the burst's memory is still live (gobgp still dropping a flooded
// session's paths); freed later, the runtime keeps it (no collection runs
// while idle, and the heap goal stays where the burst left it), so each
// trim for a burst is followed by one more after trimEvery if the loop
// stays idle, and by further ones (at most trimFollowUps) while the live
// heap after a trim is still trimAllocs above the least seen after any.
const (
	trimIdle   = time.Second
	trimAllocs = 64 << 20
	trimEvery  = 10 * time.Second
	// trimFollowUps bounds the follow-up trims after a burst.
	trimFollowUps = 6
)

// memTrim decides when to return memory; it lives on the loop. The
// collection itself (debug.FreeOSMemory: a whole GC, then the scavenge;
// tens of ms with a large heap) runs on its own goroutine, so that the
// loop keeps serving the watchdog and the API meanwhile: idle starts it,
// Done fires when it is over, and finished reads what it left.
type memTrim struct {
	timer *time.Timer
	// done is sent to when a trim started by idle is over; started is
	// when it started (zero: none running), burst whether it was for a
	// burst, allocs the allocation count when it started.
	done    chan struct{}
	started time.Time
	burst   bool
	allocs0 uint64
	sample  []metrics.Sample
	// allocs is the runtime's count of bytes allocated at the last trim.
	allocs uint64
	last   time.Time
	// followUp: a follow-up trim is due at the next idle call, whatever
	// was allocated; followUps is how many more may follow; baseline is
	// the least live heap seen after a trim (or at start).
	followUp  bool
	followUps int
	baseline  uint64
	// minAllocs and every are trimAllocs and trimEvery (tests change them).
	minAllocs uint64
	every     time.Duration
}

func newMemTrim() *memTrim {
	t := &memTrim{timer: time.NewTimer(time.Hour), done: make(chan struct{}, 1),
		sample: []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
			{Name: "/memory/classes/heap/free:bytes"}},
		minAllocs: trimAllocs, every: trimEvery}
	t.timer.Stop()
	t.allocs = t.allocated()
	t.baseline = t.live()
	return t
}

func (t *memTrim) allocated() uint64 { return t.read(0) }

// live is the heap the last collection found live.
func (t *memTrim) live() uint64 { return t.read(1) }

func (t *memTrim) read(i int) uint64 {
	metrics.Read(t.sample)
	return t.value(i)
}

func (t *memTrim) value(i int) uint64 {
	if t.sample[i].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return t.sample[i].Value.Uint64()
}

// retained is the heap memory the process holds beyond what the last
// collection found live: objects not collected yet, unused span space and
// free pages not returned to the kernel. It is at most what a trim could
// give back.
func (t *memTrim) retained() uint64 {
	metrics.Read(t.sample)
	held := t.value(2) + t.value(3) + t.value(4)
	return held - min(held, t.value(1))
}

// busy restarts the idle wait: the loop just did work.
func (t *memTrim) busy() { t.timer.Reset(trimIdle) }

// C fires when the loop has been idle for trimIdle since it was last busy.
func (t *memTrim) C() <-chan time.Time { return t.timer.C }

// Done fires when a trim started by idle is over: call finished.
func (t *memTrim) Done() <-chan struct{} { return t.done }

// idle is called when C fires: it starts returning memory if enough was
// allocated since the last time, and says whether it did (finished
// follows, once Done fires). While a trim runs it starts none.
func (t *memTrim) idle(now time.Time, log *zap.Logger) bool {
	if !t.started.IsZero() {
		return false
	}
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.timer.Reset(t.every - now.Sub(t.last))
		return false
	}
	a := t.allocated()
	// A burst is trimAllocs allocated since the last trim while as much
	// is held beyond the live heap, or the live heap grew as much (the
	// burst's memory may still be live: the follow-ups return it once
	// freed). Allocations alone are no burst when they came slowly (an
	// idle node's periodic work reaches trimAllocs in the end), collected
	// and returned by the runtime meanwhile.
	burst := a-t.allocs >= t.minAllocs && (t.retained() >= t.minAllocs || t.live() >= t.baseline+t.minAllocs)
	if !burst && !t.followUp {
		return false
	}
	t.started, t.burst, t.allocs0 = now, burst, a
	go func() {
		debug.FreeOSMemory()
		t.done <- struct{}{}
	}()
	return true
}

// finished records a trim that Done said is over.
func (t *memTrim) finished(log *zap.Logger) {
	now, burst := t.started, t.burst
	t.started = time.Time{}
	live := t.live()
	log.Debug("returned free memory after a burst", zap.Uint64("allocatedMiB", (t.allocs0-t.allocs)>>20), zap.Bool("followUp", !burst),
		zap.Uint64("liveMiB", live>>20), zap.Duration("took", time.Since(now)))
	t.allocs, t.last = t.allocated(), now
	if burst {
		t.followUps = trimFollowUps
	}
	t.followUps--
	t.baseline = min(t.baseline, live)
	t.followUp = t.followUps >= 0 && (burst || live >= t.baseline+t.minAllocs)
	if t.followUp {
		t.timer.Reset(t.every)
	} else {
		// The chain ends: what is live now is the node's normal heap
		// (it may have grown since start), so that the next burst does
		// not run every follow-up against a baseline long outgrown.
		t.baseline = live
	}
}
