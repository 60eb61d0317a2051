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
