package ovn

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// eipNATOp is the EgressIP SNAT of address a on GR_node1 (as
// OVN-Kubernetes writes it), named ref in its transaction.
func eipNATOp(a netip.Addr, ref string) map[string]any {
	name := fmt.Sprintf("eip-%s_bench/pod-%s", a, a)
	return map[string]any{"op": "insert", "table": "NAT", "uuid-name": ref, "row": map[string]any{
		"type": "snat", "external_ip": a.String(), "logical_ip": "10.128.0.10",
		"external_ids": []any{"map", [][]string{
			{"k8s.ovn.org/owner-type", "EgressIP"},
			{"k8s.ovn.org/owner-controller", "default-network-controller"},
			{"k8s.ovn.org/name", name},
		}},
	}}
}

// eipAddr is the i-th egress IP of BenchmarkEgressIPChange.
func eipAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)}) }

// BenchmarkEgressIPChange measures what one egress IP added or removed
// costs the client when node1 holds eips egress IPs (EgressIP SNATs on
// GR_node1) next to as many Service VIPs: the NB transaction (insert the
// NAT and reference it from GR_node1's nat, or drop the reference, the
// row going with it) is not timed; readRows of the changed rows, the rows
// installed and SnapshotDelta (the snapshot and what changed) are. No
// timing is asserted.
func BenchmarkEgressIPChange(b *testing.B) {
	for _, eips := range []int{5000} {
		b.Run(fmt.Sprintf("eips=%d", eips), func(b *testing.B) { benchEgressIPChange(b, eips) })
	}
}

func benchEgressIPChange(b *testing.B, eips int) {
	ctx := context.Background()
	log := zap.NewNop()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(b.TempDir(), "nb.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	if err := labnb.Topology(ctx, srv.Endpoint(), "node1", log); err != nil {
		b.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), scaleLBOps(eips, 2), log); err != nil {
		b.Fatal(err)
	}
	ops := []any{}
	var refs []any
	for i := range eips {
		ref := fmt.Sprintf("nat%d", i)
		ops = append(ops, eipNATOp(eipAddr(i), ref))
		refs = append(refs, []any{"named-uuid", ref})
	}
	ops = append(ops, map[string]any{"op": "mutate", "table": "Logical_Router", "where": []any{[]any{"name", "==", "GR_node1"}},
		"mutations": []any{[]any{"nat", "insert", []any{"set", refs}}}})
	raw, err := json.Marshal(ops)
	if err != nil {
		b.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), raw, log); err != nil {
		b.Fatal(err)
	}
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, log, func() {})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// The topology's own egress IP and Service VIPs come on top.
	deadline := time.Now().Add(time.Minute)
	for {
		s, ok := c.Snapshot("node1")
		if ok && len(s.EgressIPs) == eips+1 && len(s.ServiceVIPs) >= eips {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not synced: %d egress IPs, %d VIPs", len(s.EgressIPs), len(s.ServiceVIPs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cli := waitSession(b, c)
	c.mu.Lock()
	c.writing++ // the session's refresh held off: the loop below reads
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.writing--
		c.mu.Unlock()
	}()
	_, _, gen, _ := c.SnapshotDelta("node1", 0)
	added := eipAddr(eips)
	var uuid string // of the added row, "" when not there
	for b.Loop() {
		b.StopTimer()
		c.memo.mu.Lock()
		v := c.memo.version[nbdb.LogicalRouterTable] + c.memo.version[nbdb.NATTable]
		c.memo.mu.Unlock()
		var ops []ovsdb.Operation
		gr := []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: "GR_node1"}}
		if uuid == "" {
			ops = []ovsdb.Operation{
				{Op: ovsdb.OperationInsert, Table: nbdb.NATTable, UUIDName: "newnat", Row: ovsdb.Row{
					"type": "snat", "external_ip": added.String(), "logical_ip": "10.128.0.11",
					"external_ids": ovsdb.OvsMap{GoMap: map[any]any{"k8s.ovn.org/owner-type": "EgressIP",
						"k8s.ovn.org/owner-controller": "default-network-controller", "k8s.ovn.org/name": "eip-new_bench/pod-new"}}}},
				{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable, Where: gr, Mutations: []ovsdb.Mutation{
					{Column: "nat", Mutator: ovsdb.MutateOperationInsert, Value: ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: "newnat"}}}}}},
			}
		} else {
			ops = []ovsdb.Operation{
				{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable, Where: gr, Mutations: []ovsdb.Mutation{
					{Column: "nat", Mutator: ovsdb.MutateOperationDelete, Value: ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: uuid}}}}}},
			}
		}
		res, err := cli.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			b.Fatal(err)
		}
		want := eips + 1
		if uuid == "" {
			uuid, want = res[0].UUID.GoUUID, eips+2
		} else {
			uuid = ""
		}
		// Both events (the NAT row's, the router's) recorded.
		for deadline := time.Now().Add(10 * time.Second); ; {
			c.memo.mu.Lock()
			moved := c.memo.version[nbdb.LogicalRouterTable]+c.memo.version[nbdb.NATTable] >= v+2
			c.memo.mu.Unlock()
			if moved {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the change never reached the cache")
			}
			time.Sleep(20 * time.Microsecond)
		}
		b.StartTimer()
		rows, err := readRows(ctx, cli, c.memo)
		if err != nil {
			b.Fatal(err)
		}
		c.install(cli, rows)
		s, d, g, _ := c.SnapshotDelta("node1", gen)
		b.StopTimer()
		if len(s.EgressIPs) != want || len(d.EgressIPs) != 1 || d.EgressIPs[0] != added || d.All || d.Context || d.OwnedRoutes {
			b.Fatalf("%d egress IPs (want %d), delta %+v", len(s.EgressIPs), want, d)
		}
		gen = g
		b.StartTimer()
	}
}
