package ovn

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

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
// periodic resync (touchAll) reads every table whatever the events said.
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

	// The resync reads every table: new slices, the same rows.
	c.memo.touchAll()
	c.mu.Lock()
	cli := c.cli
	c.mu.Unlock()
	r4, err := readRows(ctx, cli, c.memo)
	if err != nil {
		t.Fatal(err)
	}
	if shared(r3.Switches, r4.Switches) || shared(r3.LoadBalancers, r4.LoadBalancers) {
		t.Errorf("touchAll: a table was not read again")
	}
	if !reflect.DeepEqual(r3, r4) {
		t.Errorf("a full read differs from the rows kept by events:\n%+v\n%+v", r3, r4)
	}
}

// TestBuildNBMemo: a snapshot built with the memo equals one built
// without; the egress IPs are built again only when the NAT rows (or the
// node) are other rows, the Service VIPs only when the load balancers are
// (one VIP changed rebuilt every egress IP, and the other way round).
func TestBuildNBMemo(t *testing.T) {
	lbs := []*lbRow{
		{UUID: "l1", Name: "Service_ns1/web_TCP_cluster", Owner: "ns1/web",
			VIPs: []string{"192.0.2.50:80"}, Backends: []string{"10.128.0.5:8080"}},
	}
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
