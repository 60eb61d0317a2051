package ovn_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// loadFixture starts labnb's in-memory server with an NB fixture.
func loadFixture(t *testing.T, name string) string {
	t.Helper()
	ops, err := os.ReadFile(filepath.Join("testdata", "nb", name))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := labnb.NewMemoryServer(zaptest.NewLogger(t), filepath.Join(shortDir(t), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := labnb.Transact(context.Background(), srv.Endpoint(), ops, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	return srv.Endpoint()
}

// TestWorkloadsNotMonitored: without a workloadIP rule (config.OVN.Workloads
// false) the client does not monitor the switch ports nor the DHCP
// options: its cache holds none, and the snapshot lists no workload
// address; with it, both.
func TestWorkloadsNotMonitored(t *testing.T) {
	ep := loadFixture(t, "kubevirt-layer2-ic.json")
	for _, on := range []bool{false, true} {
		c, _ := dialConfig(t, config.OVN{Northbound: ep, Workloads: on}, zaptest.NewLogger(t))
		var snap model.Snapshot
		eventually(t, 10*time.Second, func() (bool, string) {
			var ok bool
			snap, ok = c.Snapshot("node1")
			return ok && ovn.CachedRows(c, nbdb.LogicalSwitchTable) > 0, "not synced"
		})
		lsp, dhcp := ovn.CachedRows(c, nbdb.LogicalSwitchPortTable), ovn.CachedRows(c, nbdb.DHCPOptionsTable)
		if on != (lsp > 0) || on != (dhcp > 0) || on != (len(snap.WorkloadIPs) > 0) {
			t.Errorf("Workloads %v: %d switch ports, %d DHCP options cached, %d workload addresses", on, lsp, dhcp, len(snap.WorkloadIPs))
		}
	}
}

// TestWorkloadDeltaMemoryServer and TestWorkloadDeltaRealServer: from
// kubevirt-layer2-ic.json, SnapshotDelta lists exactly the workload
// addresses that changed (workloadDeltaScenario).
func TestWorkloadDeltaMemoryServer(t *testing.T) {
	workloadDeltaScenario(t, loadFixture(t, "kubevirt-layer2-ic.json"))
}

func TestWorkloadDeltaRealServer(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "nb", "kubevirt-layer2-ic.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := ovsdbtest.Start(t, "")
	if err := labnb.Transact(context.Background(), s.Endpoint(), raw, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	workloadDeltaScenario(t, s.Endpoint())
}

// workloadDeltaScenario: a pod's port added, vm-a's handover (its target
// enabled and its source disabled in one transaction, as OVN-Kubernetes
// does), a DHCP option's VM renamed, a port that stops being a pod's, a
// change of a port outside the workloads: each time the delta names
// exactly the addresses whose entries changed, and agrees with the
// snapshots' difference.
func workloadDeltaScenario(t *testing.T, endpoint string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := zaptest.NewLogger(t)
	c, _ := dialConfig(t, config.OVN{Northbound: endpoint, Workloads: true}, log)
	eventually(t, 10*time.Second, func() (bool, string) {
		s, ok := c.Snapshot("node1")
		return ok && len(s.WorkloadIPs) > 0, "not synced"
	})
	snap, _, gen, _ := c.SnapshotDelta("node1", 0)
	entry := func(s model.Snapshot, ip string) *model.WorkloadIP {
		for _, e := range s.WorkloadIPs {
			if e.IP.String() == ip {
				return e
			}
		}
		return nil
	}
	step := func(what, ops string, done func(model.Snapshot) bool, want ...string) {
		t.Helper()
		if err := labnb.Transact(ctx, endpoint, []byte(ops), log); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		eventually(t, 10*time.Second, func() (bool, string) {
			s, _ := c.Snapshot("node1")
			return done(s), what + ": not in the snapshot"
		})
		s, d, g, ok := c.SnapshotDelta("node1", gen)
		if !ok {
			t.Fatalf("%s: not ok", what)
		}
		var w []netip.Addr
		for _, a := range want {
			w = append(w, netip.MustParseAddr(a))
		}
		if brute := differ(snap, s); !reflect.DeepEqual(d.WorkloadIPs, brute.WorkloadIPs) || d.All || d.Context {
			t.Errorf("%s: delta %+v, the snapshots differ by %+v", what, d, brute)
		}
		if !reflect.DeepEqual(d.WorkloadIPs, w) {
			t.Errorf("%s: delta %v, want %v", what, d.WorkloadIPs, w)
		}
		snap, gen = s, g
	}
	udn := `["map",[["namespace","ns2"],["pod","true"],["k8s.ovn.org/network","ns2_green"],["k8s.ovn.org/topology","layer2"]]]`
	step("a pod added", `[{"op":"insert","table":"Logical_Switch_Port","uuid-name":"n","row":{"name":"ns2.green_ns2_db-0",
	  "addresses":["set",["0a:58:0a:64:00:1e 10.100.0.30"]],"port_security":["set",["0a:58:0a:64:00:1e 10.100.0.30"]],
	  "external_ids":`+udn+`,"options":["map",[["requested-chassis","chassis-node1"]]]}},
	  {"op":"mutate","table":"Logical_Switch","where":[["name","==","ns2_green_ovn_layer2_switch"]],"mutations":[["ports","insert",["set",[["named-uuid","n"]]]]]}]`,
		func(s model.Snapshot) bool { return entry(s, "10.100.0.30") != nil }, "10.100.0.30")
	step("vm-a handed over", `[{"op":"update","table":"Logical_Switch_Port","where":[["name","==","ns2.green_ns2_virt-launcher-vm-a-9qz4m"]],
	  "row":{"enabled":true,"addresses":["set",["0a:58:0a:64:00:0a 10.100.0.10"]]}},
	  {"op":"update","table":"Logical_Switch_Port","where":[["name","==","ns2.green_ns2_virt-launcher-vm-a-x7k2p"]],
	  "row":{"enabled":false,"addresses":["set",[]]}}]`,
		func(s model.Snapshot) bool {
			e := entry(s, "10.100.0.10")
			return e != nil && e.Handover == model.HandoverLeft && !e.Since.IsZero()
		}, "10.100.0.10")
	step("vm-b's DHCP options renamed", `[{"op":"update","table":"DHCP_Options","where":[["external_ids","includes",["map",[["k8s.ovn.org/name","ns2/vm-b"]]]]],
	  "row":{"external_ids":["map",[["k8s.ovn.org/owner-type","VirtualMachine"],["k8s.ovn.org/name","ns2/vm-b2"]]]}}]`,
		func(s model.Snapshot) bool { e := entry(s, "10.100.0.11"); return e != nil && e.VM == "ns2/vm-b2" }, "10.100.0.11")
	step("a port no longer a pod's", `[{"op":"update","table":"Logical_Switch_Port","where":[["name","==","ns2.green_ns2_db-0"]],
	  "row":{"external_ids":["map",[["namespace","ns2"]]]}}]`,
		func(s model.Snapshot) bool { return entry(s, "10.100.0.30") == nil }, "10.100.0.30")
	step("another node's pod moved", `[{"op":"update","table":"Logical_Switch_Port","where":[["name","==","ns2.green_ns2_web-7f4b2"]],
	  "row":{"options":["map",[["requested-chassis","chassis-node2"],["requested-tnl-key","18"]]]}}]`,
		func(model.Snapshot) bool { return true })
}
