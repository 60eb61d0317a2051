package ovn

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// Scale of BenchmarkNBAtScale: OpenShift's tested maximum (issue 7, "NB at
// OpenShift scale").
const (
	scaleServices = 10000
	scaleBackends = 10
	scaleNodes    = 250
)

// scaleLBOps writes n Service load balancers, one per Service, each with a
// ClusterIP VIP on two ports (TCP) and backends backends spread over the
// nodes' pod subnets, as the services controller's cluster-wide rows.
func scaleLBOps(n, backends int) []byte {
	ops := make([]map[string]any, 0, n)
	for i := range n {
		vip := netip.AddrFrom4([4]byte{172, 30, byte(i >> 8), byte(i)}).String()
		var b80, b443 []string
		for j := range backends {
			node := (i + j) % scaleNodes
			a := netip.AddrFrom4([4]byte{10, byte(128 + node>>7), byte(node<<1 | j>>8&1), byte(10 + j)}).String()
			b80 = append(b80, a+":8080")
			b443 = append(b443, a+":8443")
		}
		ops = append(ops, map[string]any{
			"op": "insert", "table": "Load_Balancer",
			"row": map[string]any{
				"name":     fmt.Sprintf("Service_ns%d/svc%d_TCP_cluster", i%100, i),
				"protocol": "tcp",
				"vips": []any{"map", [][]string{
					{vip + ":80", strings.Join(b80, ",")},
					{vip + ":443", strings.Join(b443, ",")},
				}},
				"external_ids": []any{"map", [][]string{
					{"k8s.ovn.org/kind", "Service"},
					{"k8s.ovn.org/owner", fmt.Sprintf("ns%d/svc%d", i%100, i)},
				}},
			},
		})
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		panic(err)
	}
	return raw
}

// BenchmarkNBAtScale measures what one NB change costs the client at
// OpenShift scale (10,000 Services of 10 backends, 250 node switches, a
// central NB): Rebuild is the whole path after a change (readRows copies
// the monitored rows out of libovsdb's cache, the session compares them
// with the last ones, Snapshot builds the node's view, with its egress IPs
// and Service VIPs); ReadRows and Build are its parts. heap-MiB is the live
// heap with the client synced (the NB server's included), client-heap-MiB
// what the client added to it. No timing is asserted.
func BenchmarkNBAtScale(b *testing.B) {
	ctx := context.Background()
	srv, err := labnb.NewMemoryServer(zap.NewNop(), filepath.Join(b.TempDir(), "nb.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	sws := make([]labnb.Switch, scaleNodes)
	for i := range sws {
		sws[i] = labnb.Switch{Node: fmt.Sprintf("node%d", i+1),
			Subnets: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>7), byte(i << 1), 0}), 23)}}
	}
	if err := labnb.AddSwitches(ctx, srv.Endpoint(), sws, zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), scaleLBOps(scaleServices, scaleBackends), zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, zap.NewNop(), func() {})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s, ok := c.Snapshot("node1")
		if ok && len(s.ServiceVIPs) == scaleServices && len(s.Networks) == 1 {
			if n := len(s.ServiceVIPs[0].Backends); n != scaleBackends {
				b.Fatalf("VIP %s has %d backends, want %d", s.ServiceVIPs[0].VIP, n, scaleBackends)
			}
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not synced: %d VIPs, %d networks", len(s.ServiceVIPs), len(s.Networks))
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.mu.Lock()
	cli, last := c.cli, c.rows
	c.mu.Unlock()
	if cli == nil {
		b.Fatal("no live session")
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapInuse) / (1 << 20)
	// What the client adds (its cache, rows and memo) to the NB server's
	// share of this process.
	client := (float64(ms.HeapInuse) - float64(before)) / (1 << 20)

	b.Run("Rebuild", func(b *testing.B) {
		for b.Loop() {
			// As after a Load_Balancer event naming no row: the table is
			// read whole (compared row by row with the last read).
			c.memo.touch(nbdb.LoadBalancerTable)
			rows, err := readRows(ctx, cli, c.memo)
			if err != nil {
				b.Fatal(err)
			}
			if !reflect.DeepEqual(rows, last) {
				b.Fatal("rows changed")
			}
			if res := buildNBMemo(rows, "node1", c.build); len(res.Snapshot.ServiceVIPs) != scaleServices {
				b.Fatalf("%d VIPs", len(res.Snapshot.ServiceVIPs))
			}
		}
		b.ReportMetric(heap, "heap-MiB")
		b.ReportMetric(client, "client-heap-MiB")
	})
	b.Run("RebuildEgressIP", func(b *testing.B) {
		for b.Loop() {
			// As after one egress IP's change: its NAT row and its
			// router's nat column.
			c.memo.touch(nbdb.NATTable)
			c.memo.touch(nbdb.LogicalRouterTable)
			rows, err := readRows(ctx, cli, c.memo)
			if err != nil {
				b.Fatal(err)
			}
			if res := buildNBMemo(rows, "node1", c.build); len(res.Snapshot.ServiceVIPs) != scaleServices {
				b.Fatalf("%d VIPs", len(res.Snapshot.ServiceVIPs))
			}
		}
	})
	b.Run("ReadRows", func(b *testing.B) {
		for b.Loop() {
			c.memo.touchAll() // every table copied, as at a resync
			if _, err := readRows(ctx, cli, c.memo); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Compare", func(b *testing.B) {
		rows, err := readRows(ctx, cli, c.memo)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if !reflect.DeepEqual(rows, last) {
				b.Fatal("rows changed")
			}
		}
	})
	b.Run("Build", func(b *testing.B) {
		for b.Loop() {
			buildNB(last, "node1")
		}
	})
	// One Service's backends change, through a real transaction:
	// OneService times the client's part (read the changed row, build the
	// snapshot), the session's refresh held off meanwhile; Event the
	// whole path from the transaction to the rows installed and the
	// snapshot built.
	change := scaleChange(b, cli, last)
	b.Run("OneService", func(b *testing.B) {
		c.mu.Lock()
		c.writing++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.writing--
			c.mu.Unlock()
			c.poke()
		}()
		for b.Loop() {
			b.StopTimer()
			c.memo.mu.Lock()
			v := c.memo.version[nbdb.LoadBalancerTable]
			c.memo.mu.Unlock()
			want := change.write(b, ctx)
			change.cached(b, want)
			// and its event recorded (libovsdb calls the handler after
			// the cache changed).
			for {
				c.memo.mu.Lock()
				moved := c.memo.version[nbdb.LoadBalancerTable] > v
				c.memo.mu.Unlock()
				if moved {
					break
				}
				time.Sleep(20 * time.Microsecond)
			}
			b.StartTimer()
			rows, err := readRows(ctx, cli, c.memo)
			if err != nil {
				b.Fatal(err)
			}
			res := buildNBMemo(rows, "node1", c.build)
			b.StopTimer()
			change.check(b, res.Snapshot.ServiceVIPs, want)
			b.StartTimer()
		}
	})
	b.Run("Event", func(b *testing.B) {
		for b.Loop() {
			want := change.write(b, ctx)
			for {
				c.mu.Lock()
				rows := c.rows
				c.mu.Unlock()
				if change.rowHas(rows, want) {
					break
				}
				time.Sleep(20 * time.Microsecond)
			}
			s, _ := c.Snapshot("node1")
			b.StopTimer()
			change.check(b, s.ServiceVIPs, want)
			b.StartTimer()
		}
	})
}

// scaleChanger changes the backends of one Service load balancer.
type scaleChanger struct {
	cli  client.Client
	row  *lbRow
	vip  netip.Addr
	keys []string
	base []string // backends of each key as loaded
	n    int      // writes so far
}

func scaleChange(b *testing.B, cli client.Client, rows nbRows) *scaleChanger {
	row := rows.LoadBalancers[len(rows.LoadBalancers)/2]
	l, ok := cli.Cache().Table(nbdb.LoadBalancerTable).Row(row.UUID).(*nbdb.LoadBalancer)
	if !ok {
		b.Fatalf("no %s %s in the cache", nbdb.LoadBalancerTable, row.UUID)
	}
	s := &scaleChanger{cli: cli, row: row, vip: row.VIPs[0].Addr}
	for _, v := range row.VIPs {
		s.keys = append(s.keys, v.Key)
		s.base = append(s.base, l.Vips[v.Key])
	}
	return s
}

// write changes the row's backends (each call the other of: as loaded, the
// last backend moved) and returns the last backend address.
func (s *scaleChanger) write(b *testing.B, ctx context.Context) netip.Addr {
	s.n++
	i := s.n
	vips := map[any]any{}
	var last string
	for k, key := range s.keys {
		bs := strings.Split(s.base[k], ",")
		if i%2 == 1 {
			_, port, _ := strings.Cut(bs[len(bs)-1], ":")
			bs[len(bs)-1] = "10.200.0.1:" + port
		}
		last = bs[len(bs)-1]
		vips[key] = strings.Join(bs, ",")
	}
	op := ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: nbdb.LoadBalancerTable,
		Where: []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: s.row.UUID}}},
		Row:   ovsdb.Row{"vips": ovsdb.OvsMap{GoMap: vips}}}
	res, err := s.cli.Transact(ctx, op)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, []ovsdb.Operation{op})
	}
	if err != nil {
		b.Fatal(err)
	}
	a, _ := parseVIP(last)
	return a
}

// cached waits until the client's cache holds the row with backend want.
func (s *scaleChanger) cached(b *testing.B, want netip.Addr) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m, ok := s.cli.Cache().Table(nbdb.LoadBalancerTable).Row(s.row.UUID).(*nbdb.LoadBalancer); ok &&
			strings.Contains(m.Vips[s.keys[0]], want.String()+":") {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the change never reached the cache")
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// rowHas says whether rows hold the row with backend want.
func (s *scaleChanger) rowHas(rows nbRows, want netip.Addr) bool {
	i, ok := slices.BinarySearchFunc(rows.LoadBalancers, s.row, func(a, b *lbRow) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UUID, b.UUID))
	})
	return ok && slices.Contains(rows.LoadBalancers[i].VIPs[0].Backends, want)
}

// check fails unless vips show the row's VIP with backend want.
func (s *scaleChanger) check(b *testing.B, vips []model.ServiceVIP, want netip.Addr) {
	if len(vips) != scaleServices {
		b.Fatalf("%d VIPs", len(vips))
	}
	for _, v := range vips {
		if v.VIP == s.vip {
			if !slices.Contains(v.Backends, want) {
				b.Fatalf("VIP %s backends %v, want %s in them", v.VIP, v.Backends, want)
			}
			return
		}
	}
	b.Fatalf("no VIP %s", s.vip)
}
