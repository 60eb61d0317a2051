package ovn

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// TestReadRowsOnlyChangedTables: after an NB change, the session reads
// again only the tables the change touched (libovsdb's cache events name
// them); the rows of the others are the last read's, shared, not copied
// again (one VIP changed re-read every switch, router, NAT and route on
// every change). What is read is still exactly what NB holds, and the
// re-read after dropped events (touchAll) reads every table whatever the events said.
func TestReadRowsOnlyChangedTables(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := zap.NewNop()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(t.TempDir(), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sw := func(i int) labnb.Switch {
		return labnb.Switch{Node: fmt.Sprintf("node%d", i),
			Subnets: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128, byte(2 * i), 0}), 23)}}
	}
	if err := labnb.AddSwitches(ctx, srv.Endpoint(), []labnb.Switch{sw(1), sw(2)}, log); err != nil {
		t.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), scaleLBOps(2, 2), log); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, log, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows := func() nbRows {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.rows
	}
	// settled waits until the event of the latest change to table has
	// been handled (its version moved past v) and the last read is at the
	// versions of every event so far: the events come in order, so every
	// earlier one (the first sync's too) has been handled.
	settled := func(what, table string, v uint64) nbRows {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			c.memo.mu.Lock()
			ok := c.memo.version[table] > v && reflect.DeepEqual(c.memo.version, c.memo.lastVer)
			c.memo.mu.Unlock()
			if ok {
				return rows()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the change was never read", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	version := func(table string) uint64 {
		c.memo.mu.Lock()
		defer c.memo.mu.Unlock()
		return c.memo.version[table]
	}
	shared := func(a, b any) bool {
		va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
		return va.Len() > 0 && va.Len() == vb.Len() && va.UnsafePointer() == vb.UnsafePointer()
	}
	var lbs []json.RawMessage
	if err := json.Unmarshal(scaleLBOps(4, 2), &lbs); err != nil {
		t.Fatal(err)
	}
	addLB := func(i int) nbRows {
		t.Helper()
		v := version(nbdb.LoadBalancerTable)
		if err := labnb.Transact(ctx, srv.Endpoint(), []byte("["+string(lbs[i])+"]"), log); err != nil {
			t.Fatal(err)
		}
		return settled(fmt.Sprintf("load balancer %d", i), nbdb.LoadBalancerTable, v)
	}
	r1 := addLB(2)
	if len(r1.Switches) != 2 || len(r1.LoadBalancers) != 3 {
		t.Fatalf("%d switches, %d load balancers; want 2 and 3", len(r1.Switches), len(r1.LoadBalancers))
	}

	// One more Service: only Load_Balancer is read again.
	r2 := addLB(3)
	if len(r2.LoadBalancers) != 4 {
		t.Fatalf("%d load balancers, want 4", len(r2.LoadBalancers))
	}
	if !shared(r1.Switches, r2.Switches) {
		t.Errorf("a Load_Balancer change copied the switches again")
	}

	// One more switch: Load_Balancer is not read again.
	v := version(nbdb.LogicalSwitchTable)
	if err := labnb.AddSwitches(ctx, srv.Endpoint(), []labnb.Switch{sw(3)}, log); err != nil {
		t.Fatal(err)
	}
	r3 := settled("the third switch", nbdb.LogicalSwitchTable, v)
	if len(r3.Switches) != 3 || r3.Switches[2].Name != "node3" {
		t.Fatalf("switches %+v, want node1 to node3", r3.Switches)
	}
	if !shared(r2.LoadBalancers, r3.LoadBalancers) {
		t.Errorf("a Logical_Switch change copied the load balancers again")
	}

	// The resync reads every table whatever the events said: the same
	// rows, the same generation (a table read whole and found equal keeps
	// the last read's slice).
	c.memo.touchAll()
	c.mu.Lock()
	cli := c.cli
	c.mu.Unlock()
	r4, err := readRows(ctx, cli, c.memo)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r3, r4) {
		t.Errorf("a full read differs from the rows kept by events:\n%+v\n%+v", r3, r4)
	}
	if !shared(r3.Switches, r4.Switches) || !shared(r3.LoadBalancers, r4.LoadBalancers) {
		t.Errorf("touchAll: a table read whole and found equal is not the last read's slice")
	}

	// As if an event had been dropped: the last read lacks a switch.
	// Without an event the table is not read again; the resync reads it.
	c.memo.read.Lock()
	c.memo.mu.Lock()
	stale := *c.memo.last
	stale.Switches = stale.Switches[:2]
	c.memo.last = &stale
	c.memo.mu.Unlock()
	c.memo.read.Unlock()
	if r5, err := readRows(ctx, cli, c.memo); err != nil || len(r5.Switches) != 2 || r5.gen != r4.gen {
		t.Fatalf("no event: %d switches at generation %d (%v), want the last read's 2 at %d", len(r5.Switches), r5.gen, err, r4.gen)
	}
	c.memo.touchAll()
	r6, err := readRows(ctx, cli, c.memo)
	if err != nil {
		t.Fatal(err)
	}
	if len(r6.Switches) != 3 || r6.gen == r4.gen {
		t.Errorf("touchAll: %d switches at generation %d, want 3 at a new generation", len(r6.Switches), r6.gen)
	}
}

// TestBuildNBMemo: a snapshot built with the memo equals one built
// without; the egress IPs are built again only when the NAT rows (or the
// node) are other rows, the Service VIPs only when the load balancers are
// (one VIP changed rebuilt every egress IP, and the other way round).
func TestBuildNBMemo(t *testing.T) {
	lbs := lbRows([]lbIn{
		{UUID: "l1", Name: "Service_ns1/web_TCP_cluster", Owner: "ns1/web",
			VIPs: []string{"192.0.2.50:80"}, Backends: []string{"10.128.0.5:8080"}},
	})
	nats := []natRow{
		{UUID: "n1", Router: "GR_node1", Type: "snat", ExternalIP: "172.18.0.100", LogicalIP: "10.128.0.5",
			Name: "eip1_ns1/pod1", Controller: "default-network-controller"},
	}
	in := nbRows{Switches: []switchRow{{UUID: "s1", Name: "node1", Subnet: "10.128.0.0/23"}}, LoadBalancers: lbs, NATs: nats}
	memo := &buildMemo{}
	check := func(what string, in nbRows, node string) buildResult {
		t.Helper()
		got, want := buildNBMemo(in, node, memo), buildNB(in, node)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: with the memo\n%+v\nwithout\n%+v", what, got.Snapshot, want.Snapshot)
		}
		return got
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	r1 := check("first build", in, "node1")
	if len(r1.Snapshot.EgressIPs) != 1 || len(r1.Snapshot.ServiceVIPs) != 1 {
		t.Fatalf("egress IPs %+v, VIPs %+v: want one each", r1.Snapshot.EgressIPs, r1.Snapshot.ServiceVIPs)
	}

	// Other NAT rows, the same load balancers.
	in2 := in
	in2.NATs = slices.Clone(nats)
	in2.NATs[0].ExternalIP = "172.18.0.101"
	r2 := check("other NATs", in2, "node1")
	if !same(r1.Snapshot.ServiceVIPs, r2.Snapshot.ServiceVIPs) {
		t.Errorf("the Service VIPs were built again for a NAT change")
	}
	if same(r1.Snapshot.EgressIPs, r2.Snapshot.EgressIPs) {
		t.Errorf("the egress IPs were not built again for a NAT change")
	}

	// Other load balancers, the same NAT rows.
	in3 := in2
	in3.LoadBalancers = slices.Clone(lbs)
	r3 := check("other load balancers", in3, "node1")
	if !same(r2.Snapshot.EgressIPs, r3.Snapshot.EgressIPs) {
		t.Errorf("the egress IPs were built again for a load balancer change")
	}
	if same(r2.Snapshot.ServiceVIPs, r3.Snapshot.ServiceVIPs) {
		t.Errorf("the Service VIPs were not built again for a load balancer change")
	}

	// Another node: its own egress IPs (none on GR_node2).
	if r4 := check("another node", in3, "node2"); len(r4.Snapshot.EgressIPs) != 0 {
		t.Errorf("node2's egress IPs %+v, want none", r4.Snapshot.EgressIPs)
	}
}

// TestReadRowsByRowRandom: through a random sequence of load balancers
// inserted, changed (VIPs, backends, owner, network, kind) and deleted in
// NB, one to three per transaction, the rows the client reads row by row
// (only the rows the cache events named) are after every step what a full
// read of the cache gives, Service VIPs included, and the generation moves
// exactly when the rows changed.
func TestReadRowsByRowRandom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := zap.NewNop()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(t.TempDir(), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := labnb.AddSwitches(ctx, srv.Endpoint(), []labnb.Switch{{Node: "node1",
		Subnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/23")}}}, log); err != nil {
		t.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), scaleLBOps(20, 2), log); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, log, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli := waitSession(t, c)
	// settled waits until every event so far has been read and the rows
	// read installed.
	settled := func(v uint64) nbRows {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			c.memo.mu.Lock()
			ok := c.memo.version[nbdb.LoadBalancerTable] > v && reflect.DeepEqual(c.memo.version, c.memo.lastVer)
			gen := c.memo.gen
			c.memo.mu.Unlock()
			c.mu.Lock()
			rows := c.rows
			c.mu.Unlock()
			if ok && rows.gen == gen {
				return rows
			}
			if time.Now().After(deadline) {
				t.Fatal("the change was never read")
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	vips := []string{"172.30.0.1", "172.30.0.2", "172.30.0.3", "[fd00:30::1]"}
	present := map[int]bool{}
	prevRows := settled(0)
	bm := &buildMemo{}
	for i := range 20 {
		present[i] = true
	}
	for step := range 60 {
		var ops []ovsdb.Operation
		used := map[int]bool{}
		for range 1 + r.IntN(3) {
			i := r.IntN(30)
			if used[i] {
				continue
			}
			used[i] = true
			name := fmt.Sprintf("Service_ns%d/svc%d_TCP_cluster", i%100, i)
			where := []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: name}}
			if present[i] && r.IntN(4) == 0 {
				ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.LoadBalancerTable, Where: where})
				present[i] = false
				continue
			}
			vm := map[any]any{}
			for range 1 + r.IntN(2) {
				vm[vips[r.IntN(len(vips))]+fmt.Sprintf(":%d", 80+r.IntN(2))] = fmt.Sprintf("10.128.0.%d:8080", 2+r.IntN(5))
			}
			kind := "Service"
			if r.IntN(6) == 0 {
				kind = "Other"
			}
			ids := map[any]any{"k8s.ovn.org/kind": kind, "k8s.ovn.org/owner": fmt.Sprintf("ns%d/svc%d", i%3, r.IntN(2))}
			if r.IntN(5) == 0 {
				ids["k8s.ovn.org/network"] = "net1"
			}
			row := ovsdb.Row{"vips": ovsdb.OvsMap{GoMap: vm}, "external_ids": ovsdb.OvsMap{GoMap: ids}}
			if present[i] {
				ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: nbdb.LoadBalancerTable, Where: where, Row: row})
				continue
			}
			row["name"] = name
			row["protocol"] = "tcp"
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LoadBalancerTable, Row: row})
			present[i] = true
		}
		c.memo.mu.Lock()
		v := c.memo.version[nbdb.LoadBalancerTable]
		c.memo.mu.Unlock()
		res, err := cli.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		// The events of one transaction's rows come one by one, each
		// after its row is in the cache: a read may come between two.
		// Every event is read in the end: the rows read by row become
		// what a full read of the cache gives (no memo), or the test
		// fails.
		var got, want nbRows
		for deadline := time.Now().Add(10 * time.Second); ; {
			got = settled(v)
			if want, err = readRows(ctx, cli, nil); err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(got.LoadBalancers, want.LoadBalancers) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("step %d: rows read by row\n%+v\nfull read\n%+v", step, got.LoadBalancers, want.LoadBalancers)
			}
			time.Sleep(5 * time.Millisecond)
		}
		vs, ps := buildServiceVIPs(want.LoadBalancers)
		slices.Sort(ps)
		if !reflect.DeepEqual(got.vips.list, vs) || !slices.Equal(slices.Clip(got.vips.problems), ps) {
			t.Fatalf("step %d: VIPs kept by row\n%+v\nbuilt\n%+v", step, got.vips.list, vs)
		}
		// The snapshot built from them with a memo kept across steps
		// (the load balancers' protected addresses reused while no VIP
		// key changed) is the one built from scratch.
		if g, w := buildNBMemo(got, "node1", bm), buildNB(want, "node1"); !reflect.DeepEqual(g, w) {
			t.Fatalf("step %d: snapshot with the memo\n%+v\nfrom scratch\n%+v", step, g, w)
		}
		if moved := got.gen != prevRows.gen; moved != !reflect.DeepEqual(got.LoadBalancers, prevRows.LoadBalancers) {
			t.Fatalf("step %d: generation %d -> %d with the rows changed: %v", step, prevRows.gen, got.gen, moved)
		}
		prevRows = got
	}
}

// waitSession waits for c's first sync and returns its session's client.
func waitSession(t testing.TB, c *Client) client.Client {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		cli, synced := c.cli, c.synced
		c.mu.Unlock()
		if cli != nil && synced {
			return cli
		}
		if time.Now().After(deadline) {
			t.Fatal("never synced")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDroppedEventResync: a Load_Balancer event lost (libovsdb drops
// events when its buffer is full) leaves the rows as they were until the
// resync reads the table whole; that read finds the changed row by
// comparing with the last read, so the generation moves and the change
// log names exactly the VIP that changed.
func TestDroppedEventResync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := zap.NewNop()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(t.TempDir(), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := labnb.Transact(ctx, srv.Endpoint(), scaleLBOps(3, 2), log); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, log, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli := waitSession(t, c)
	// The session reads nothing meanwhile.
	c.mu.Lock()
	c.writing++
	c.mu.Unlock()
	before, err := readRows(ctx, cli, c.memo)
	if err != nil {
		t.Fatal(err)
	}
	c.memo.mu.Lock()
	v := c.memo.version[nbdb.LoadBalancerTable]
	c.memo.mu.Unlock()
	name := "Service_ns1/svc1_TCP_cluster" // VIP 172.30.0.1
	if err := labnb.Transact(ctx, srv.Endpoint(), []byte(`[{"op":"update","table":"Load_Balancer","where":[["name","==","`+name+`"]],
	  "row":{"vips":["map",[["172.30.0.1:80","10.128.0.99:8080"]]]}}]`), log); err != nil {
		t.Fatal(err)
	}
	// Wait for the event, then lose it.
	eventuallyTrue(t, func() bool {
		c.memo.mu.Lock()
		defer c.memo.mu.Unlock()
		return c.memo.version[nbdb.LoadBalancerTable] > v
	})
	c.memo.mu.Lock()
	clear(c.memo.dirty[nbdb.LoadBalancerTable])
	c.memo.lastVer = maps.Clone(c.memo.version)
	c.memo.mu.Unlock()

	stale, err := readRows(ctx, cli, c.memo)
	if err != nil {
		t.Fatal(err)
	}
	if stale.gen != before.gen || !reflect.DeepEqual(stale.LoadBalancers, before.LoadBalancers) {
		t.Fatalf("without the event the rows changed: generation %d -> %d", before.gen, stale.gen)
	}
	c.memo.touchAll()
	after, err := readRows(ctx, cli, c.memo)
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := c.memo.changesSince(before.gen, after.gen)
	if !ok || after.gen == before.gen || !slices.Equal(ch.vips, []netip.Addr{netip.MustParseAddr("172.30.0.1")}) || ch.tables != tLoadBalancers|tLBProtected {
		t.Fatalf("resync: generation %d -> %d, change %+v (%v); want a new generation, VIP 172.30.0.1, the load balancers' VIP keys", before.gen, after.gen, ch, ok)
	}
	want, err := readRows(ctx, cli, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.LoadBalancers, want.LoadBalancers) || !reflect.DeepEqual(after.vips.list, want.vips.list) {
		t.Fatalf("resync rows\n%+v\nfull read\n%+v", after.LoadBalancers, want.LoadBalancers)
	}
	c.mu.Lock()
	c.writing--
	c.mu.Unlock()
}

func eventuallyTrue(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("never")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
