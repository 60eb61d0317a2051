package daemon

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/zap"
)

var trimSink []byte

func heapReleased() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// trimNow is tr.idle, waiting for the trim it starts to finish.
func trimNow(tr *memTrim, now time.Time, log *zap.Logger) bool {
	if !tr.idle(now, log) {
		return false
	}
	<-tr.Done()
	tr.finished(log)
	return true
}

// TestMemTrim: an idle loop returns memory once a burst allocated enough,
// not before, and not again within its interval. The bursts allocate with
// the collector off, as a burst outruns it: its garbage is held.
func TestMemTrim(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	tr := newMemTrim()
	defer tr.timer.Stop()
	tr.minAllocs = 1 << 40 // nothing allocates a TiB: never due
	if trimNow(tr, time.Now(), zap.NewNop()) {
		t.Fatal("returned memory before enough was allocated")
	}

	tr.minAllocs = 32 << 20
	for range 8 {
		trimSink = make([]byte, 8<<20) // 64 MiB in all, 56 of it garbage
	}
	trimSink = nil
	runtime.GC() // the runtime keeps the freed spans for a while
	before := heapReleased()
	now := time.Now()
	if !trimNow(tr, now, zap.NewNop()) {
		t.Fatal("did not return memory after a 64 MiB burst")
	}
	if after := heapReleased(); after <= before {
		t.Errorf("heap released %d -> %d bytes: nothing given back", before, after)
	}

	for range 8 {
		trimSink = make([]byte, 8<<20)
	}
	trimSink = nil
	if trimNow(tr, now.Add(tr.every/2), zap.NewNop()) {
		t.Fatal("returned memory again within its interval")
	}
	if !trimNow(tr, now.Add(tr.every), zap.NewNop()) {
		t.Fatal("did not return memory once the interval passed")
	}
}

// TestMemTrimNothingHeld: allocations that the runtime has collected and
// returned already (they came slowly, as an idle node's periodic work) are
// no burst: no trim, which would cost a whole GC and return nothing. Seen
// in the idle benchmark: a trim a minute after an import, at the first
// periodic pass.
func TestMemTrimNothingHeld(t *testing.T) {
	tr := newMemTrim()
	defer tr.timer.Stop()
	tr.minAllocs = 32 << 20
	for range 8 {
		trimSink = make([]byte, 8<<20) // 64 MiB allocated, garbage
	}
	trimSink = nil
	debug.FreeOSMemory() // the runtime's own collection and scavenge
	if trimNow(tr, time.Now(), zap.NewNop()) {
		t.Fatalf("trimmed with %d MiB held beyond the live heap (64 MiB allocated, all returned)", tr.retained()>>20)
	}
}

// TestMemTrimFollowUp: a trim that came while the burst's memory was still
// live (a peer's flood being dropped) is followed by more while the loop
// stays idle and the live heap stays high: the idle loop's timer fires
// again after the interval, and the trim after the memory is freed returns
// it, though little was allocated meanwhile; then they stop. Found by the
// e2e TestHostileMaxPrefixes: 360 MiB kept for over a minute after a
// flood's session was gone.
func TestMemTrimFollowUp(t *testing.T) {
	tr := newMemTrim()
	defer tr.timer.Stop()
	tr.minAllocs = 32 << 20
	tr.every = 50 * time.Millisecond
	var live [][]byte
	for range 8 {
		live = append(live, make([]byte, 8<<20)) // 64 MiB, live at the trims
	}
	now := time.Now()
	fired := func(what string) {
		t.Helper()
		select {
		case <-tr.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("the idle loop's timer did not fire again %s", what)
		}
	}
	if !trimNow(tr, now, zap.NewNop()) {
		t.Fatal("did not trim after a 64 MiB burst")
	}
	fired("after a trim for a burst")
	if !trimNow(tr, now.Add(tr.every), zap.NewNop()) {
		t.Fatal("no follow-up trim after a burst")
	}
	runtime.KeepAlive(live) // garbage from here, nothing new allocated
	fired("after a follow-up that found the heap still live")
	before := heapReleased()
	if !trimNow(tr, now.Add(2*tr.every), zap.NewNop()) {
		t.Fatal("no follow-up trim: the memory freed after the first trims stays with the process")
	}
	if after := heapReleased(); after <= before {
		t.Errorf("heap released %d -> %d bytes: nothing given back", before, after)
	}
	// the heap is back down: no more
	if trimNow(tr, now.Add(3*tr.every), zap.NewNop()) {
		t.Fatal("trimmed again with nothing allocated and the heap down")
	}
}
