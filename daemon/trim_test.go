package daemon

import (
	"runtime"
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

// TestMemTrim: an idle loop returns memory once a burst allocated enough,
// not before, and not again within its interval.
func TestMemTrim(t *testing.T) {
	tr := newMemTrim()
	defer tr.timer.Stop()
	tr.minAllocs = 1 << 40 // nothing allocates a TiB: never due
	if tr.idle(time.Now(), zap.NewNop()) {
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
	if !tr.idle(now, zap.NewNop()) {
		t.Fatal("did not return memory after a 64 MiB burst")
	}
	if after := heapReleased(); after <= before {
		t.Errorf("heap released %d -> %d bytes: nothing given back", before, after)
	}

	for range 8 {
		trimSink = make([]byte, 8<<20)
	}
	trimSink = nil
	if tr.idle(now.Add(tr.every/2), zap.NewNop()) {
		t.Fatal("returned memory again within its interval")
	}
	if !tr.idle(now.Add(tr.every), zap.NewNop()) {
		t.Fatal("did not return memory once the interval passed")
	}
}

// TestMemTrimFollowUp: a trim that came while the burst's memory was still
// live (a peer's flood being dropped) is followed by one more when the
// loop stays idle: the idle loop's timer fires again after the interval,
// and that trim returns the memory freed since, though little was
// allocated meanwhile. Found by the e2e TestHostileMaxPrefixes: 308 MiB
// kept for over a minute after a flood's session was gone.
func TestMemTrimFollowUp(t *testing.T) {
	tr := newMemTrim()
	defer tr.timer.Stop()
	tr.minAllocs = 32 << 20
	tr.every = 50 * time.Millisecond
	var live [][]byte
	for range 8 {
		live = append(live, make([]byte, 8<<20)) // 64 MiB, live at the trim
	}
	now := time.Now()
	if !tr.idle(now, zap.NewNop()) {
		t.Fatal("did not trim after a 64 MiB burst")
	}
	runtime.KeepAlive(live) // now garbage, nothing new allocated
	select {
	case <-tr.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the idle loop's timer did not fire again after a trim")
	}
	before := heapReleased()
	if !tr.idle(now.Add(tr.every), zap.NewNop()) {
		t.Fatal("no follow-up trim: the memory freed after the first trim stays with the process")
	}
	if after := heapReleased(); after <= before {
		t.Errorf("heap released %d -> %d bytes: nothing given back", before, after)
	}
	// one follow-up, not a chain
	if tr.idle(now.Add(2*tr.every), zap.NewNop()) {
		t.Fatal("trimmed again with nothing allocated")
	}
}
