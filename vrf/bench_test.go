package vrf_test

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// benchRoutes returns n /24 routes in table 100 via 192.0.2.2 on a0, as
// the import of a ToR's table writes them. OVNBGP_BENCH_ROUTES overrides n.
func benchRoutes(b *testing.B, n int) []model.KernelOp {
	b.Helper()
	if s := os.Getenv("OVNBGP_BENCH_ROUTES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("OVNBGP_BENCH_ROUTES=%q: want a positive count", s)
		}
		n = v
	}
	ops := make([]model.KernelOp, 0, n)
	for i := range n {
		a := netip.AddrFrom4([4]byte{byte(10 + i>>16), byte(i >> 8), byte(i), 0})
		ops = append(ops, add(route(100, netip.PrefixFrom(a, 24).String(), hop("192.0.2.2", "a0"))))
	}
	return ops
}

// BenchmarkApplyAdds adds 100k routes to a table in a fresh netns through
// one Apply (what the daemon does when a ToR sends its table), then deletes
// them outside the timer. It reports routes/s.
func BenchmarkApplyAdds(b *testing.B) {
	n := newNS(b)
	core, logs := observer.New(zap.WarnLevel)
	m, err := vrf.OpenAt(n.h, proto, zap.New(core), func() {})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ops := benchRoutes(b, 100_000)
	dels := make([]model.KernelOp, len(ops))
	for i, op := range ops {
		dels[i] = del(*op.Route)
	}
	b.ResetTimer()
	for range b.N {
		applied, err := m.Apply(context.Background(), ops)
		if err != nil || len(applied) != len(ops) {
			b.Fatalf("Apply: %d of %d applied: %v", len(applied), len(ops), err)
		}
		b.StopTimer()
		if applied, err := m.Apply(context.Background(), dels); err != nil || len(applied) != len(dels) {
			b.Fatalf("delete: %d of %d applied: %v", len(applied), len(dels), err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(len(ops))*float64(b.N)/b.Elapsed().Seconds(), "routes/s")
	// An overflow of the route subscription (its echoes unread) costs a
	// full dump and an All: it should not happen.
	b.ReportMetric(float64(logs.FilterMessage("netlink subscription ended, renewing").Len()), "overflows")
}

// BenchmarkReadBack measures, with 100k routes of ours in a table, a whole
// Snapshot (served from the cache) and the incremental path the daemon
// takes after one change: TakeChanges and Routes of the changed key.
func BenchmarkReadBack(b *testing.B) {
	n := newNS(b)
	m, err := vrf.OpenAt(n.h, proto, zap.NewNop(), func() {})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ops := benchRoutes(b, 100_000)
	if applied, err := m.Apply(context.Background(), ops); err != nil || len(applied) != len(ops) {
		b.Fatalf("Apply: %d of %d applied: %v", len(applied), len(ops), err)
	}
	m.TakeChanges()
	b.Run("Snapshot", func(b *testing.B) {
		for b.Loop() {
			if host, err := m.Snapshot(); err != nil || len(host.Routes) != len(ops) {
				b.Fatalf("Snapshot: %d routes, %v", len(host.Routes), err)
			}
		}
	})
	b.Run("OneChange", func(b *testing.B) {
		r := *ops[0].Route
		for b.Loop() {
			if _, err := m.Apply(context.Background(), []model.KernelOp{rep(r)}); err != nil {
				b.Fatal(err)
			}
			// What the daemon does after its own write: TakeChanges (it
			// reports nothing of ours) and Routes of the key it wrote.
			if hc := m.TakeChanges(); len(hc.Routes) != 0 {
				b.Fatalf("TakeChanges after our own replace: %v", hc.Routes)
			}
			if ours, _, err := m.Routes([]model.KernelRouteKey{r.Key()}); err != nil || len(ours) != 1 {
				b.Fatalf("Routes(%v) = %v, %v", r.Key(), ours, err)
			}
		}
	})
}
