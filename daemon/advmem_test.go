package daemon

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvertSideMemoryPerVIP (issue 18, item 5): the planner's
// advertisement side at 10,000 VIPs of one rule to one peer, after a whole
// pass, keeps one copy of each advertisement: plan.AdvertState's, which
// the tree of desired advertisements (what `routes advertised`, explain
// and the metrics read) points to. The heap it keeps, after a GC, was
// ~1,050 B a VIP with a copy of each advertisement in the tree (256 bytes
// each, in a B-tree's nodes); ~525 B with the tree sharing the state's
// (the state's candidate lists, key order and the advertisements
// themselves).
func TestAdvertSideMemoryPerVIP(t *testing.T) {
	const n = 10000
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{{Name: "tor", Address: netip.MustParseAddr("192.0.2.1"),
		ASN: 65001, Families: []config.Family{config.IPv4}}}},
		Advertise: []config.AdvertiseRule{{Name: "vips", Kind: config.KindLoadBalancerIP}}}
	snap := model.Snapshot{Node: "node1", Networks: []model.Network{network("default", "10.128.0.0/23")}}
	backends := []netip.Addr{netip.MustParseAddr("10.128.0.10")}
	for i := range n {
		svc := fmt.Sprintf("ns/svc%d", i)
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: svc, Network: "default",
			VIP: netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), Backends: backends, Source: "Load_Balancer Service_" + svc})
	}
	var mu sync.Mutex
	pl := &planner{log: zap.NewNop(), mu: &mu, drain: func() model.Drain { return model.Drain{} }}
	sp := &fakeSpeaker{peers: cfg.BGP.Peers}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	part := pl.adverts(cfg, sp, snap, &nbRead{delta: model.SnapshotDelta{All: true}, gen: 1})
	if len(part.desired) != n || part.all.Len() != n {
		t.Fatalf("%d desired, %d in the tree, want %d", len(part.desired), part.all.Len(), n)
	}
	part = advPart{} // the pass's lists for its diff go with the pass
	after := heap()
	runtime.KeepAlive(snap)
	per := (float64(after) - float64(before)) / n
	t.Logf("the advertisement side keeps %.0f B a VIP at %d", per, n)
	if per > 800 {
		t.Errorf("the advertisement side keeps %.0f B a VIP at %d, want at most 800 (~525 measured): a copy of each in the tree again?", per, n)
	}
	if pl.adv.all.Len() != n {
		t.Errorf("the planner keeps %d advertisements, want %d", pl.adv.all.Len(), n)
	}
}
