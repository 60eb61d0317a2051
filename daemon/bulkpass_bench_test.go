package daemon

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// BenchmarkBulkPass10000 (issue 18, the bulk of 10,000 VIPs): the
// planner's share of the pass that follows one NB transaction adding
// 10,000 Service VIPs of one rule to one peer: the advertisement side
// (adverts), the diff (decide) and the apply order (plan.AdvertSteps),
// each reported in ms. The speaker's share is bgp's
// BenchmarkApplyBulkAdd10000. No timing is asserted.
func BenchmarkBulkPass10000(b *testing.B) {
	const n = 10000
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{{Name: "tor", Address: netip.MustParseAddr("192.0.2.1"),
		ASN: 65001, Families: []config.Family{config.IPv4}}}},
		Advertise: []config.AdvertiseRule{{Name: "vips", Kind: config.KindLoadBalancerIP}}}
	empty := model.Snapshot{Node: "node1", Networks: []model.Network{network("default", "10.128.0.0/23")}}
	snap := empty
	backends := []netip.Addr{netip.MustParseAddr("10.128.0.10")}
	vips := make([]netip.Addr, 0, n)
	for i := range n {
		svc := fmt.Sprintf("ns/svc%d", i)
		v := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		vips = append(vips, v)
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: svc, Network: "default",
			VIP: v, Backends: backends, Source: "Load_Balancer Service_" + svc})
	}
	var mu sync.Mutex
	var adverts, decide, steps time.Duration
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		pl := &planner{log: zap.NewNop(), mu: &mu, drain: func() model.Drain { return model.Drain{} }, running: func() *config.Config { return cfg }}
		sp := &fakeSpeaker{peers: cfg.BGP.Peers}
		pl.adverts(cfg, sp, empty, &nbRead{delta: model.SnapshotDelta{All: true}, gen: 1})
		b.StartTimer()
		t0 := time.Now()
		part := pl.adverts(cfg, sp, snap, &nbRead{delta: model.SnapshotDelta{ServiceVIPs: vips}, gen: 2})
		t1 := time.Now()
		p := pl.decide(passInput{cfg: cfg, whole: true, snap: snap, adv: part})
		t2 := time.Now()
		st := plan.AdvertSteps(cfg, p.Advertise)
		adverts, decide, steps = adverts+t1.Sub(t0), decide+t2.Sub(t1), steps+time.Since(t2)
		if len(p.Advertise.Announce) != n || len(st) == 0 {
			b.Fatalf("%d announced in %d steps, want %d", len(p.Advertise.Announce), len(st), n)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(per(adverts), "adverts-ms")
	b.ReportMetric(per(decide), "decide-ms")
	b.ReportMetric(per(steps), "steps-ms")
}
