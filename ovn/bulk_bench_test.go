package ovn_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// BenchmarkBulkSync measures the client's share of a bulk NB change: 5000
// UDN node switches inserted in one transaction (timed from the writer's
// connect), until Snapshot shows them.
func BenchmarkBulkSync(b *testing.B) {
	ctx := context.Background()
	srv, err := labnb.NewMemoryServer(zap.NewNop(), filepath.Join(b.TempDir(), "nb.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	changed := make(chan struct{}, 1)
	c, err := ovn.Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, zap.NewNop(), func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for {
		if _, ok := c.Snapshot("node1"); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	const n = 5000
	b.StopTimer()
	for i := range b.N {
		sws := make([]labnb.Switch, n)
		for j := range n {
			sws[j] = labnb.Switch{Network: fmt.Sprintf("bulk%d_%d", i, j), Topology: labnb.TopologyLayer3, Node: "node1",
				Subnets: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(j >> 8), byte(j), 0}), 24)}}
		}
		b.StartTimer()
		if err := labnb.AddSwitches(ctx, srv.Endpoint(), sws, zap.NewNop()); err != nil {
			b.Fatal(err)
		}
		for {
			<-changed
			if s, _ := c.Snapshot("node1"); len(s.Networks) >= n*(i+1) {
				break
			}
		}
		b.StopTimer()
	}
}
