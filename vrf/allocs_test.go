package vrf_test

import (
	"context"
	"net/netip"
	"runtime"
	"testing"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// TestApplyAllocsPerRoute (issue 18, import from a fast injector): the
// batched writes of Apply allocate nothing per route for the messages and
// the batch's bookkeeping (one buffer for a batch's messages, kept with its
// slices for the next batch; the attributes appended with no temporary
// slices). What is left per route is the cache's entry and the
// subscription's echo of the write, read on its own goroutine (waited for
// by TakeChanges), so the bound is on the process's bytes, at two sizes.
func TestApplyAllocsPerRoute(t *testing.T) {
	n := newNS(t)
	// Info, as the daemon logs: each route is logged at debug.
	m, err := vrf.OpenAt(n.h, proto, zap.NewNop(), func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The first round grows the cache's maps and the batch's buffers
	// (kept after): not counted. The bytes are the process's, so a round
	// in which something else allocated (under load the subscription's
	// socket can overflow, and the watch renews itself with a dump of
	// every route) is tried again: the least of three rounds counts.
	for i, size := range []int{8192, 1024, 8192} {
		var adds, dels []model.KernelOp
		for i := range size {
			a := netip.AddrFrom4([4]byte{10, byte(100 + i>>8), byte(i), 0})
			r := route(100, netip.PrefixFrom(a, 24).String(), hop("192.0.2.2", "a0"))
			adds, dels = append(adds, add(r)), append(dels, del(r))
		}
		least := map[string]float64{}
		for try := 0; try < 3; try++ {
			for _, s := range []struct {
				name string
				ops  []model.KernelOp
			}{{"adds", adds}, {"deletes", dels}} {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				applied, err := m.Apply(context.Background(), s.ops)
				m.TakeChanges() // every echo of the writes read
				runtime.ReadMemStats(&after)
				if err != nil || len(applied) != len(s.ops) {
					t.Fatalf("%d %s: %d applied: %v", size, s.name, len(applied), err)
				}
				allocs := float64(after.Mallocs-before.Mallocs) / float64(size)
				bytes := float64(after.TotalAlloc-before.TotalAlloc) / float64(size)
				t.Logf("%d %s: %.1f allocations, %.0f bytes per route", size, s.name, allocs, bytes)
				if b, ok := least[s.name]; !ok || bytes < b {
					least[s.name] = bytes
				}
			}
			if i == 0 || least["adds"] <= 900 && least["deletes"] <= 900 {
				break
			}
		}
		if i == 0 {
			continue
		}
		// Measured: 360-570 B a route; 1450-1720 B with a message and
		// its attributes allocated per route and the batch's slices and
		// receive buffer per batch.
		for _, name := range []string{"adds", "deletes"} {
			if least[name] > 900 {
				t.Errorf("%d %s: %.0f bytes allocated per route (the least of three rounds), want at most 900", size, name, least[name])
			}
		}
	}
}
