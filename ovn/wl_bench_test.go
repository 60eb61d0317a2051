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

// wlBenchSwitch is the primary layer2 switch of BenchmarkWorkloadAdd.
const wlBenchSwitch = "ns2_green_ovn_layer2_switch"

// wlBenchPort is the i-th pod port of BenchmarkWorkloadAdd (every other
// one another node's, remote), named ref in its transaction.
func wlBenchPort(i int, ref string) map[string]any {
	a := netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)})
	row := map[string]any{"name": fmt.Sprintf("ns2.green_ns2_pod-%d", i),
		"addresses":     []any{"set", []string{"0a:58:0a:64:00:01 " + a.String()}},
		"port_security": []any{"set", []string{"0a:58:0a:64:00:01 " + a.String()}},
		"external_ids": []any{"map", [][]string{{"namespace", "ns2"}, {"pod", "true"},
			{"k8s.ovn.org/network", "ns2_green"}, {"k8s.ovn.org/topology", "layer2"}}},
		"options": []any{"map", [][]string{{"requested-chassis", "node1"}}}}
	if i%2 == 1 {
		row["type"] = "remote"
		row["options"] = []any{"map", [][]string{{"requested-chassis", "node2"}}}
	}
	return map[string]any{"op": "insert", "table": "Logical_Switch_Port", "uuid-name": ref, "row": row}
}

// BenchmarkWorkloadAdd measures what one pod's switch port added or
// removed costs the client when a layer2 network has ports pod ports
// (half of them node1's): the NB transaction is not timed; readRows of
// the changed row, the rows installed and SnapshotDelta (the snapshot and
// what changed) are. No timing is asserted.
func BenchmarkWorkloadAdd(b *testing.B) {
	for _, ports := range []int{10000} {
		b.Run(fmt.Sprintf("ports=%d", ports), func(b *testing.B) { benchWorkloadAdd(b, ports) })
	}
}

func benchWorkloadAdd(b *testing.B, ports int) {
	ctx := context.Background()
	log := zap.NewNop()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(b.TempDir(), "nb.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ops := []any{map[string]any{"op": "insert", "table": "Logical_Switch", "row": map[string]any{"name": "node1",
		"other_config": []any{"map", [][]string{{"subnet", "10.128.0.0/23"}}}}}}
	var refs []any
	for i := range ports {
		ref := fmt.Sprintf("p%d", i)
		ops = append(ops, wlBenchPort(i, ref))
		refs = append(refs, []any{"named-uuid", ref})
	}
	ops = append(ops, map[string]any{"op": "insert", "table": "Logical_Switch", "row": map[string]any{"name": wlBenchSwitch,
		"other_config": []any{"map", [][]string{{"subnet", "10.100.0.0/16"}}},
		"external_ids": []any{"map", [][]string{{"k8s.ovn.org/network", "ns2_green"}, {"k8s.ovn.org/role", "primary"}, {"k8s.ovn.org/topology", "layer2"}}},
		"ports":        []any{"set", refs}}})
	raw, err := json.Marshal(ops)
	if err != nil {
		b.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), raw, log); err != nil {
		b.Fatal(err)
	}
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint(), Workloads: true}, log, func() {})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		s, ok := c.Snapshot("node1")
		if ok && len(s.WorkloadIPs) == ports/2 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not synced: %d workload addresses", len(s.WorkloadIPs))
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
	added := netip.AddrFrom4([4]byte{10, 100, byte(ports >> 8), byte(ports)})
	if ports%2 == 1 {
		b.Fatal("ports must be even: the added port is node1's")
	}
	sw := []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: wlBenchSwitch}}
	var uuid string // of the added row, "" when not there
	for b.Loop() {
		b.StopTimer()
		c.memo.mu.Lock()
		v := c.memo.version[nbdb.LogicalSwitchPortTable]
		c.memo.mu.Unlock()
		var ops []ovsdb.Operation
		if uuid == "" {
			p := wlBenchPort(ports, "newport")["row"].(map[string]any)
			ops = []ovsdb.Operation{
				{Op: ovsdb.OperationInsert, Table: nbdb.LogicalSwitchPortTable, UUIDName: "newport", Row: ovsdb.Row{
					"name":          p["name"],
					"addresses":     ovsdb.OvsSet{GoSet: []any{"0a:58:0a:64:00:01 " + added.String()}},
					"port_security": ovsdb.OvsSet{GoSet: []any{"0a:58:0a:64:00:01 " + added.String()}},
					"external_ids": ovsdb.OvsMap{GoMap: map[any]any{"namespace": "ns2", "pod": "true",
						"k8s.ovn.org/network": "ns2_green", "k8s.ovn.org/topology": "layer2"}},
					"options": ovsdb.OvsMap{GoMap: map[any]any{"requested-chassis": "node1"}}}},
				{Op: ovsdb.OperationMutate, Table: nbdb.LogicalSwitchTable, Where: sw, Mutations: []ovsdb.Mutation{
					{Column: "ports", Mutator: ovsdb.MutateOperationInsert, Value: ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: "newport"}}}}}},
			}
		} else {
			ops = []ovsdb.Operation{
				{Op: ovsdb.OperationMutate, Table: nbdb.LogicalSwitchTable, Where: sw, Mutations: []ovsdb.Mutation{
					{Column: "ports", Mutator: ovsdb.MutateOperationDelete, Value: ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: uuid}}}}}},
				{Op: ovsdb.OperationDelete, Table: nbdb.LogicalSwitchPortTable, Where: []ovsdb.Condition{
					{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: uuid}}}},
			}
		}
		res, err := cli.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			b.Fatal(err)
		}
		want := ports / 2
		if uuid == "" {
			uuid, want = res[0].UUID.GoUUID, ports/2+1
		} else {
			uuid = ""
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			c.memo.mu.Lock()
			moved := c.memo.version[nbdb.LogicalSwitchPortTable] >= v+1
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
		if len(s.WorkloadIPs) != want || len(d.WorkloadIPs) != 1 || d.WorkloadIPs[0] != added || d.All || d.Context {
			b.Fatalf("%d workload addresses (want %d), delta %+v", len(s.WorkloadIPs), want, d)
		}
		gen = g
		b.StartTimer()
	}
}
