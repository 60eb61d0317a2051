package ovn_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// populate writes an OVN-Kubernetes-like topology with ovn-nbctl, as
// OVN-Kubernetes would (see test/e2e for the full lab): the default network
// and a layer3 UDN "blue" on node1 and node2, plus one malformed row.
func populate(t *testing.T, s *ovsdbtest.Server) {
	t.Helper()
	blue := []string{"external_ids:k8s.ovn.org/network=blue", "external_ids:k8s.ovn.org/topology=layer3", "external_ids:k8s.ovn.org/role=primary"}
	for _, args := range [][]string{
		{"lr-add", "ovn_cluster_router", "--", "set", "logical_router", "ovn_cluster_router", "external_ids:k8s-cluster-router=yes"},
		{"ls-add", "node1", "--", "set", "logical_switch", "node1", "other_config:subnet=10.128.0.0/23",
			`other_config:ipv6_prefix="fd00:10:128:1::"`, "other_config:mcast_snoop=true"},
		{"ls-add", "node2", "--", "set", "logical_switch", "node2", "other_config:subnet=10.128.2.0/23"},
		{"ls-add", "join"},
		{"lrp-add", "ovn_cluster_router", "rtos-node1", "0a:58:0a:80:00:01", "10.128.0.1/23", "fd00:10:128:1::1/64"},
		{"lr-add", "GR_node1", "--", "set", "logical_router", "GR_node1", "options:chassis=chassis-node1"},
		{"lr-route-add", "GR_node1", "10.128.0.0/14", "100.64.0.1"},
		append([]string{"ls-add", "blue_node1", "--", "set", "logical_switch", "blue_node1", "other_config:subnet=10.200.0.0/24"}, blue...),
		append([]string{"ls-add", "blue_node2", "--", "set", "logical_switch", "blue_node2", "other_config:subnet=10.200.1.0/24"}, blue...),
		append([]string{"ls-add", "blue_join", "--", "set", "logical_switch", "blue_join"}, blue...),
		{"ls-add", "bad_node1", "--", "set", "logical_switch", "bad_node1", "other_config:subnet=10.9.0.1/24",
			"external_ids:k8s.ovn.org/network=bad", "external_ids:k8s.ovn.org/topology=layer3"},
		// Issue 5 item 9: a default route, and an IPv6 prefix in the IPv4
		// column, are refused.
		{"ls-add", "any_node1", "--", "set", "logical_switch", "any_node1", "other_config:subnet=0.0.0.0/0",
			"external_ids:k8s.ovn.org/network=any", "external_ids:k8s.ovn.org/topology=layer3"},
		{"ls-add", "any6_node1", "--", "set", "logical_switch", "any6_node1", `other_config:ipv6_prefix="::/0"`,
			"external_ids:k8s.ovn.org/network=any6", "external_ids:k8s.ovn.org/topology=layer3"},
		{"ls-add", "v6in4_node1", "--", "set", "logical_switch", "v6in4_node1", `other_config:subnet="fd00:1::/64"`,
			"external_ids:k8s.ovn.org/network=v6in4", "external_ids:k8s.ovn.org/topology=layer3"},
	} {
		s.MustNBCtl(args...)
	}
}

func TestRealServer(t *testing.T) {
	s := ovsdbtest.Start(t, "")
	populate(t, s)
	log := zaptest.NewLogger(t)
	c, p := dial(t, s.Endpoint(), log)

	want := labSnapshot()
	eventually(t, 10*time.Second, snapshotIs(c, want))
	wantProblems := []string{
		`Logical_Switch any6_node1: other_config:ipv6_prefix "::/0": a default route, not a pod subnet; row skipped`,
		`Logical_Switch any_node1: other_config:subnet "0.0.0.0/0": a default route, not a pod subnet; row skipped`,
		`Logical_Switch bad_node1: other_config:subnet "10.9.0.1/24": host bits set (network is 10.9.0.0/24); row skipped`,
		`Logical_Switch v6in4_node1: other_config:subnet "fd00:1::/64": an IPv6 prefix in the IPv4 column (OVN-Kubernetes writes IPv6 to other_config:ipv6_prefix); row skipped`,
	}
	if d := diff(wantProblems, c.Status().Problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}

	// A layer2 UDN appears: notify, then it is in the snapshot.
	p.drain()
	s.MustNBCtl("ls-add", "ns1_green_ovn_layer2_switch", "--", "set", "logical_switch", "ns1_green_ovn_layer2_switch",
		`other_config:subnet="10.30.0.0/16"`,
		"external_ids:k8s.ovn.org/network=ns1_green", "external_ids:k8s.ovn.org/topology=layer2")
	p.wait(t, "ls-add")
	withGreen := labSnapshot()
	withGreen.Networks = append(withGreen.Networks, model.Network{Name: "ns1_green", Topology: "layer2", Subnets: []model.Subnet{
		sub("10.30.0.0/16", "Logical_Switch ns1_green_ovn_layer2_switch other_config:subnet"),
	}})
	eventually(t, 5*time.Second, snapshotIs(c, withGreen))

	// ovsdb-server dies: Connected goes false, the last good snapshot stays.
	pid := s.PID()
	p.drain()
	s.Stop()
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
		if st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(st), ") Z") {
			t.Errorf("ovsdb-server pid %d still alive after Stop: %s", pid, st)
		}
	}
	p.wait(t, "server stop")
	eventually(t, 10*time.Second, func() (bool, string) { return !c.Connected(), "still connected" })

	// Change the database while the server is down.
	tx := `["OVN_Northbound",
	  {"op":"delete","table":"Logical_Switch","where":[["name","==","blue_node1"]]},
	  {"op":"insert","table":"Logical_Switch","row":{"name":"red_node1",
	    "external_ids":["map",[["k8s.ovn.org/network","red"],["k8s.ovn.org/topology","layer3"]]],
	    "other_config":["map",[["subnet","10.77.0.0/24"]]]}}]`
	if out, err := exec.Command("ovsdb-tool", "transact", s.DBPath(), tx).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool transact: %v: %s", err, out)
	}
	time.Sleep(300 * time.Millisecond) // a retry or two against the dead socket
	snap, ok := c.Snapshot("node1")
	if !ok {
		t.Fatal("snapshot not ok while disconnected after a sync")
	}
	if d := diff(withGreen, networksOf(snap)); d != "" {
		t.Fatalf("snapshot while disconnected is not the last good one (-want +got):\n%s", d)
	}

	// Restart on the same socket: reconnect and converge to the new content.
	s.Restart()
	converged := model.Snapshot{Node: "node1", Networks: []model.Network{
		withGreen.Networks[0],
		withGreen.Networks[2],
		{Name: "red", Topology: "layer3", Subnets: []model.Subnet{sub("10.77.0.0/24", "Logical_Switch red_node1 other_config:subnet")}},
	}}
	eventually(t, 15*time.Second, snapshotIs(c, converged))
	if st := c.Status(); !st.Connected || st.Current != s.Endpoint() {
		t.Errorf("status after restart = %+v", st)
	}
}

// TestRealServerLabTopology checks that the lab writer's rows are accepted by
// a real ovsdb-server (referential integrity, schema constraints) and read
// back as LabTopology documents.
func TestRealServerLabTopology(t *testing.T) {
	s := ovsdbtest.Start(t, "")
	log := zaptest.NewLogger(t)
	if err := labnb.Topology(context.Background(), s.Endpoint(), "node1", log); err != nil {
		t.Fatal(err)
	}
	out := s.MustNBCtl("--bare", "--columns=name", "list", "logical_router_port")
	for _, port := range []string{"rtos-node1", "rtoe-GR_node1", "rtoj-GR_blue_node1"} {
		if !strings.Contains(out, port) {
			t.Errorf("router port %s missing; ports: %s", port, out)
		}
	}
	if out := s.MustNBCtl("--bare", "--columns=external_ids", "find", "nat", "external_ip=172.18.0.100"); !strings.Contains(out, "EgressIP") {
		t.Errorf("egress IP NAT: %q", out)
	}
	c, _ := dial(t, s.Endpoint(), log)
	eventually(t, 10*time.Second, snapshotIs(c, labSnapshot()))
}
