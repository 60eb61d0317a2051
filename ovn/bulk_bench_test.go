package ovn

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
)

// BenchmarkBulkSync measures the client's share of a bulk NB change: 5000
// UDN node switches inserted in one transaction, until Snapshot shows them.
func BenchmarkBulkSync(b *testing.B) {
	ctx := context.Background()
	srv, err := NewMemoryServer(zap.NewNop(), filepath.Join(b.TempDir(), "nb.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	changed := make(chan struct{}, 1)
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, zap.NewNop(), func() {
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
	for i := range b.N {
		var ops []ovsdb.Operation
		err := withWriter(ctx, srv.Endpoint(), zap.NewNop(), func(ctx context.Context, cli client.Client) error {
			for j := range n {
				sw := LabSwitch{Network: fmt.Sprintf("bulk%d_%d", i, j), Topology: TopologyLayer3, Node: "node1",
					Subnets: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(j >> 8), byte(j), 0}), 24)}}
				o, err := cli.Create(sw.row(fmt.Sprintf("s%d", j)))
				if err != nil {
					return err
				}
				ops = append(ops, o...)
			}
			b.StartTimer()
			return transact(ctx, cli, ops)
		})
		if err != nil {
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
