package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
	"github.com/ovnbgp/ovnbgp/plan"
)

// envOVNRoutes is the number of static routes of the OVN import job
// (default 10000).
const envOVNRoutes = "OVNBGP_BENCH_OVN_ROUTES"

// ovnImportRounds: each contender runs this many times, each on a fresh
// database; the median is reported.
const ovnImportRounds = 3

func ovnRoutes(b *testing.B) int {
	b.Helper()
	v := os.Getenv(envOVNRoutes)
	if v == "" {
		return 10000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65536 {
		b.Fatalf("%s=%q: want 1 to 65536", envOVNRoutes, v)
	}
	return n
}

// importNB is a fresh real ovsdb-server with node1's gateway router
// GR_node1 and its external port.
func importNB(b testing.TB) *ovsdbtest.Server {
	b.Helper()
	s := ovsdbtest.Start(b, "")
	s.MustNBCtl("lr-add", "GR_node1")
	s.MustNBCtl("lrp-add", "GR_node1", "rtoe-GR_node1", "02:42:ac:12:00:02", "172.18.0.2/16")
	return s
}

// BenchmarkOVNImport: N static routes (10k) into a gateway router of a
// real NB ovsdb-server, by ovnbgp's writer (ovn.Client.ApplyRoutes: the
// plan's adds, in batches of 500, each row inserted and referenced in one
// transaction, returning once its own cache shows them all) against one
// raw libovsdb transaction holding every insert and the router's mutation
// (the least any writer can do). Goal: <= 2 s and <= 2x the raw insert.
func BenchmarkOVNImport(b *testing.B) {
	gate(b)
	n := ovnRoutes(b)
	rawTimes, monTimes, ovnTimes := ovnImportRun(b, n, b.N*ovnImportRounds)
	med := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	r, m, o := med(rawTimes), med(monTimes), med(ovnTimes)
	ratio := o.Seconds() / r.Seconds()
	b.ReportMetric(o.Seconds(), "ovnbgp-s")
	b.ReportMetric(r.Seconds(), "raw-s")
	b.ReportMetric(m.Seconds(), "raw-monitored-s")
	b.ReportMetric(ratio, "ovnbgp/raw")
	fmt.Printf("\n=== OVN import: %d static routes into GR_node1 (real ovsdb-server), median of %d\n"+
		"ovnbgp ApplyRoutes (batches of 500, until its cache shows them): %8.3f s   goal <= 2 s\n"+
		"raw libovsdb, one transaction:                                   %8.3f s\n"+
		"raw libovsdb, one transaction, client monitoring the two tables: %8.3f s\n"+
		"ratio ovnbgp / raw:                                              %8.2f x   goal <= 2x\n"+
		"ratio ovnbgp / raw monitored:                                    %8.2f x\n",
		n, len(ovnTimes), o.Seconds(), r.Seconds(), m.Seconds(), ratio, o.Seconds()/m.Seconds())
}

// ovnImportRun is the OVN import job: rounds times, n static routes into
// GR_node1 of a fresh NB each by the raw insert, the raw insert of a
// monitoring client, and ApplyRoutes; it returns each one's times.
func ovnImportRun(b testing.TB, n, rounds int) (rawTimes, monTimes, ovnTimes []time.Duration) {
	routes := make([]model.OVNRoute, n)
	raw := make([]labnb.StaticRoute, n)
	for i := range n {
		// 10.0.0.0/10 holds 16384 /24s; beyond, 11.0.0.0/8 and so on.
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(10 + i>>16), byte(i >> 8), byte(i), 0}), 24)
		nh := netip.AddrFrom4([4]byte{172, 18, byte(1 + i%2), byte(1 + i%200)})
		routes[i] = model.OVNRoute{Router: "GR_node1", Prefix: p, NextHop: nh, OutputPort: "rtoe-GR_node1", Rule: "bench", Network: "default"}
		raw[i] = labnb.StaticRoute{Prefix: p, NextHop: nh, OutputPort: "rtoe-GR_node1"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := zap.NewNop()

	for range rounds {
		s := importNB(b)
		took, err := labnb.RawInsertStaticRoutes(ctx, s.Endpoint(), "GR_node1", "node1", raw, false, log)
		if err != nil {
			b.Fatal(err)
		}
		rawTimes = append(rawTimes, took)
		s.Stop()

		s = importNB(b)
		took, err = labnb.RawInsertStaticRoutes(ctx, s.Endpoint(), "GR_node1", "node1", raw, true, log)
		if err != nil {
			b.Fatal(err)
		}
		monTimes = append(monTimes, took)
		s.Stop()

		s = importNB(b)
		c, err := ovn.Dial(ctx, config.OVN{Northbound: s.Endpoint()}, log, nil)
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if snap, ok := c.Snapshot("node1"); ok && len(snap.Routers) == 1 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("ovnbgp's NB client did not sync within 30 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		ops := plan.DiffOVN(routes, nil)
		start := time.Now()
		applied, err := c.ApplyRoutes(ctx, "node1", ops, nil)
		took = time.Since(start)
		if err != nil || len(applied) != n {
			b.Fatalf("ApplyRoutes: %d of %d applied: %v", len(applied), n, err)
		}
		if snap, _ := c.Snapshot("node1"); len(snap.OwnedRoutes) != n {
			b.Fatalf("after ApplyRoutes the snapshot holds %d owned routes, want %d", len(snap.OwnedRoutes), n)
		}
		ovnTimes = append(ovnTimes, took)
		c.Close()
		s.Stop()
	}
	return rawTimes, monTimes, ovnTimes
}
