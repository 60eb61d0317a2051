package ovn_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// diff is cmp.Diff that compares netip values by ==.
func diff(want, got any) string {
	return cmp.Diff(want, got,
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
}

func sub(prefix, source string) model.Subnet {
	return model.Subnet{Prefix: netip.MustParsePrefix(prefix), Source: source}
}

// labSnapshot is what LabTopology(node1) gives node1.
func labSnapshot() model.Snapshot {
	return model.Snapshot{Node: "node1", Networks: []model.Network{
		{Name: "default", Topology: "layer3", Subnets: []model.Subnet{
			sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet"),
			sub("fd00:10:128:1::/64", "Logical_Switch node1 other_config:ipv6_prefix, length from Logical_Router_Port rtos-node1 networks"),
		}},
		{Name: "blue", Topology: "layer3", Role: "primary", Subnets: []model.Subnet{
			sub("10.200.0.0/24", "Logical_Switch blue_node1 other_config:subnet"),
		}},
	}}
}

// shortDir is a temporary directory with a short path, for unix sockets.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ovntest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// poker is the daemon's side of notify: a size-1 channel.
type poker chan struct{}

func (p poker) notify() {
	select {
	case p <- struct{}{}:
	default:
	}
}

// drain empties the channel.
func (p poker) drain() {
	for {
		select {
		case <-p:
		default:
			return
		}
	}
}

// wait waits for a poke.
func (p poker) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-p:
	case <-time.After(10 * time.Second):
		t.Fatalf("no notify after %s", what)
	}
}

// eventually polls cond until it is true, or fails with its last message.
func eventually(t *testing.T, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// networksOf is a snapshot with only its node and networks: the tests of
// advertising compare those; the import fields (routers, protected
// prefixes, owned routes) have tests of their own.
func networksOf(s model.Snapshot) model.Snapshot {
	return model.Snapshot{Node: s.Node, Networks: s.Networks}
}

// snapshotIs returns a condition: the client's snapshot for node1 has
// want's node and networks.
func snapshotIs(c *ovn.Client, want model.Snapshot) func() (bool, string) {
	return func() (bool, string) {
		got, ok := c.Snapshot("node1")
		if !ok {
			return false, "snapshot not ok"
		}
		if d := diff(want, networksOf(got)); d != "" {
			return false, "snapshot (-want +got):\n" + d
		}
		return true, ""
	}
}

func dial(t *testing.T, endpoint string, log *zap.Logger) (*ovn.Client, poker) {
	t.Helper()
	return dialConfig(t, config.OVN{Northbound: endpoint}, log)
}

// dialConfig is dial with cfg.
func dialConfig(t *testing.T, cfg config.OVN, log *zap.Logger) (*ovn.Client, poker) {
	t.Helper()
	p := make(poker, 1)
	c, err := ovn.Dial(context.Background(), cfg, log, p.notify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, p
}

func TestMemoryServer(t *testing.T) {
	log := zaptest.NewLogger(t)
	ctx := context.Background()
	dir := shortDir(t)
	sock := filepath.Join(dir, "nb.sock")
	srv, err := labnb.NewMemoryServer(log, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Close() }()
	if got, want := srv.Endpoint(), "unix:"+sock; got != want {
		t.Fatalf("Endpoint() = %q, want %q", got, want)
	}

	c, p := dial(t, srv.Endpoint(), log)

	// An empty NB syncs: ok, no networks, and a hint about the node name.
	eventually(t, 10*time.Second, func() (bool, string) {
		snap, ok := c.Snapshot("node1")
		return ok && c.Connected() && len(snap.Networks) == 0, "not synced"
	})
	if st := c.Status(); !st.Connected || !st.Synced || st.Current != srv.Endpoint() || len(st.Problems) != 1 ||
		!strings.Contains(st.Problems[0], `no switch for node "node1"`) {
		t.Fatalf("status of an empty NB = %+v", st)
	}

	p.drain()
	if err := labnb.Topology(ctx, srv.Endpoint(), "node1", log); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "LabTopology")
	eventually(t, 10*time.Second, snapshotIs(c, labSnapshot()))
	if st := c.Status(); len(st.Problems) != 0 {
		t.Errorf("problems after LabTopology: %q", st.Problems)
	}
	if err := labnb.Topology(ctx, srv.Endpoint(), "node1", log); err == nil {
		t.Error("LabTopology twice: no error")
	}

	// Every node's subnets, for the never-import list.
	cluster, ok := c.ClusterSubnets()
	if !ok {
		t.Fatal("ClusterSubnets not ok")
	}
	var prefixes []string
	for _, s := range cluster {
		prefixes = append(prefixes, s.Prefix.String())
	}
	wantCluster := []string{"10.128.0.0/23", "10.128.2.0/23", "10.200.0.0/24", "10.200.1.0/24", "fd00:10:128:1::/64", "fd00:10:128:2::/64"}
	if !slices.Equal(prefixes, wantCluster) {
		t.Errorf("ClusterSubnets = %v, want %v", prefixes, wantCluster)
	}

	// A new layer3 UDN switch for this node: notify, then it appears.
	red := labnb.Switch{Network: "ns1_red-net", Topology: "layer3", Role: "primary", Node: "node1",
		Subnets: []netip.Prefix{netip.MustParsePrefix("10.201.0.0/24"), netip.MustParsePrefix("fd01:0:0:7::/64")}}
	p.drain()
	name, err := labnb.AddSwitch(ctx, srv.Endpoint(), red, log)
	if err != nil {
		t.Fatal(err)
	}
	if name != "ns1_red.net_node1" {
		t.Errorf("AddLabSwitch name = %q", name)
	}
	p.wait(t, "AddLabSwitch")
	withRed := labSnapshot()
	withRed.Networks = append(withRed.Networks, model.Network{Name: "ns1_red-net", Topology: "layer3", Role: "primary",
		Subnets: []model.Subnet{
			sub("10.201.0.0/24", "Logical_Switch ns1_red.net_node1 other_config:subnet"),
			sub("fd01:0:0:7::/64", "Logical_Switch ns1_red.net_node1 other_config:ipv6_prefix"),
		}})
	eventually(t, 5*time.Second, snapshotIs(c, withRed))
	if _, err := labnb.AddSwitch(ctx, srv.Endpoint(), red, log); err == nil {
		t.Error("AddLabSwitch of an existing switch: no error")
	}

	// Deleting it removes it.
	p.drain()
	if err := labnb.DeleteSwitch(ctx, srv.Endpoint(), name, log); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "DeleteLabSwitch")
	eventually(t, 5*time.Second, snapshotIs(c, labSnapshot()))
	if err := labnb.DeleteSwitch(ctx, srv.Endpoint(), name, log); err == nil {
		t.Error("DeleteLabSwitch of a missing switch: no error")
	}

	// The server goes away: disconnected, but the last good snapshot stays.
	p.drain()
	srv.Close()
	p.wait(t, "server close")
	eventually(t, 10*time.Second, func() (bool, string) { return !c.Connected(), "still connected" })
	if snap, ok := c.Snapshot("node1"); !ok || diff(labSnapshot(), networksOf(snap)) != "" {
		t.Fatalf("snapshot while disconnected: ok=%v\n%s", ok, diff(labSnapshot(), networksOf(snap)))
	}
	if st := c.Status(); st.Connected || !st.Synced || st.Current != "" || st.LastError == "" || st.LastErrorAt.IsZero() {
		t.Errorf("status while disconnected = %+v", st)
	}

	// A new server with other content on the same socket: reconnect and
	// converge to it.
	srv, err = labnb.NewMemoryServer(log, sock)
	if err != nil {
		t.Fatal(err)
	}
	green := labnb.Switch{Network: "green", Topology: "layer2", Subnets: []netip.Prefix{netip.MustParsePrefix("10.30.0.0/16")}}
	if _, err := labnb.AddSwitch(ctx, srv.Endpoint(), labnb.Switch{Node: "node1",
		Subnets: []netip.Prefix{netip.MustParsePrefix("10.128.8.0/23")}}, log); err != nil {
		t.Fatal(err)
	}
	if _, err := labnb.AddSwitch(ctx, srv.Endpoint(), green, log); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, snapshotIs(c, model.Snapshot{Node: "node1", Networks: []model.Network{
		{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.8.0/23", "Logical_Switch node1 other_config:subnet")}},
		{Name: "green", Topology: "layer2", Subnets: []model.Subnet{sub("10.30.0.0/16", "Logical_Switch green_ovn_layer2_switch other_config:subnet")}},
	}}))
	// Issue 5 item 14: once connected again the error is history: it is
	// cleared, with its time and the attempt count.
	if st := c.Status(); !st.Connected || st.LastError != "" || !st.LastErrorAt.IsZero() || st.Attempts != 0 {
		t.Errorf("status after reconnecting = %+v, want connected with no error, no error time, 0 attempts", st)
	}
}

func TestDialNeverConnects(t *testing.T) {
	dir := shortDir(t)
	c, _ := dial(t, "unix:"+filepath.Join(dir, "nothing.sock"), zaptest.NewLogger(t))
	before := time.Now()
	eventually(t, 5*time.Second, func() (bool, string) {
		st := c.Status()
		return st.Attempts >= 2 && st.LastError != "", "no failed attempts recorded"
	})
	// When the error happened is shown (issue 5 item 14).
	if st := c.Status(); st.LastErrorAt.IsZero() || st.LastErrorAt.After(time.Now()) || st.LastErrorAt.Before(before.Add(-time.Second)) {
		t.Errorf("LastErrorAt = %v, want the time of the last failed attempt (test started %v)", st.LastErrorAt, before)
	}
	if snap, ok := c.Snapshot("node1"); ok || len(snap.Networks) != 0 {
		t.Errorf("Snapshot before any sync = %+v, %v; want empty, false", snap, ok)
	}
	if _, ok := c.ClusterSubnets(); ok {
		t.Error("ClusterSubnets before any sync: ok")
	}
	if c.Connected() {
		t.Error("Connected to nothing")
	}
	done := make(chan struct{})
	go func() { c.Close(); c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs")
	}
}

func TestDialConfigErrors(t *testing.T) {
	dir := shortDir(t)
	for _, cfg := range []config.OVN{
		{Northbound: "/var/run/ovn/ovnnb_db.sock"},
		{Northbound: "unix:/a.sock", NorthboundSockets: []string{"/b.sock"}},
		{NorthboundSockets: []string{"relative.sock"}},
		{Northbound: "tcp:localhost"},
		{Northbound: "ssl:127.0.0.1:9641"},
		{Northbound: "ssl:127.0.0.1:9641", TLS: config.TLS{CAFile: filepath.Join(dir, "missing.pem")}},
	} {
		if c, err := ovn.Dial(context.Background(), cfg, nil, nil); err == nil {
			c.Close()
			t.Errorf("Dial(%+v): no error", cfg)
		}
	}
}

func TestMemoryServerSocketInUse(t *testing.T) {
	sock := filepath.Join(shortDir(t), "nb.sock")
	srv, err := labnb.NewMemoryServer(nil, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if s2, err := labnb.NewMemoryServer(nil, sock); err == nil {
		s2.Close()
		t.Fatal("second server on a live socket: no error")
	}
}

// TestLogsOncePerStateChange: a row problem is logged once however often
// Snapshot runs, and a disconnect once however many retries fail.
func TestLogsOncePerStateChange(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	ctx := context.Background()
	sock := filepath.Join(shortDir(t), "nb.sock")
	srv, err := labnb.NewMemoryServer(log, sock)
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range []labnb.Switch{
		{Node: "node1", Subnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/23")}},
		{Network: "bad", Node: "node1", Subnets: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.9.0.1"), 24)}},
	} {
		if _, err := labnb.AddSwitch(ctx, srv.Endpoint(), sw, log); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := dial(t, srv.Endpoint(), log)
	eventually(t, 10*time.Second, func() (bool, string) {
		snap, ok := c.Snapshot("node1")
		return ok && len(snap.Networks) == 1, "not synced"
	})
	count := func(msg string) int { return logs.FilterMessage(msg).Len() }
	// Logged once it has stood for a second (problemSettle).
	eventually(t, 10*time.Second, func() (bool, string) {
		return count("nb row skipped") >= 1, "the problem was never logged"
	})
	for range 5 {
		c.Snapshot("node1")
	}
	if n := count("nb row skipped"); n != 1 {
		t.Errorf("%d 'nb row skipped' logs, want 1", n)
	}
	if st := c.Status(); len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "bad_node1") {
		t.Errorf("problems = %q", st.Problems)
	}

	srv.Close()
	eventually(t, 10*time.Second, func() (bool, string) {
		return c.Status().Attempts >= 3, "fewer than 3 failed attempts"
	})
	if n := count("nb disconnected"); n != 1 {
		t.Errorf("%d 'nb disconnected' logs after several failed retries, want 1", n)
	}
	srv, err = labnb.NewMemoryServer(log, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eventually(t, 15*time.Second, func() (bool, string) { return c.Connected(), "not reconnected" })
	if n := count("nb connected"); n != 2 {
		t.Errorf("%d 'nb connected' logs, want 2", n)
	}
	// The new server is empty: the problem goes away (logged once), and
	// the node switch is missing (a new problem).
	c.Snapshot("node1")
	if n := count("nb row problem resolved"); n != 1 {
		t.Errorf("%d 'nb row problem resolved' logs, want 1", n)
	}
}

// TestLabSwitchLayer2: the lab writer puts a layer2 network's IPv6 subnet
// where OVN-Kubernetes does (other_config:ipv6_prefix, address only; never
// in other_config:subnet) with its transit router port, and the client
// reads it back with its real length, both families (issue 5 item 11).
func TestLabSwitchLayer2(t *testing.T) {
	log := zaptest.NewLogger(t)
	ctx := context.Background()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(shortDir(t), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	v4, v6 := netip.MustParsePrefix("10.60.0.0/16"), netip.MustParsePrefix("fd60::/60")
	for _, sw := range []labnb.Switch{
		{Node: "node1", Subnets: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/23")}},
		{Network: "ns1_l2", Topology: labnb.TopologyLayer2, Role: "primary", Subnets: []netip.Prefix{v4, v6}},
		{Network: "ns1_sec", Topology: labnb.TopologyLayer2, Role: "secondary", Subnets: []netip.Prefix{netip.MustParsePrefix("fd61::/60")}},
	} {
		if _, err := labnb.AddSwitch(ctx, srv.Endpoint(), sw, log); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := dial(t, srv.Endpoint(), log)
	eventually(t, 10*time.Second, snapshotIs(c, model.Snapshot{Node: "node1", Networks: []model.Network{
		{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
		{Name: "ns1_l2", Topology: "layer2", Role: "primary", Subnets: []model.Subnet{
			sub("10.60.0.0/16", "Logical_Switch ns1_l2_ovn_layer2_switch other_config:subnet"),
			sub("fd60::/60", "Logical_Switch ns1_l2_ovn_layer2_switch other_config:ipv6_prefix, length from Logical_Router_Port trtos-ns1_l2_ovn_layer2_switch networks"),
		}},
	}}))
	// The secondary network has no router: its IPv6 length is nowhere, so
	// it is said, not guessed.
	if st := c.Status(); len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "ns1_sec_ovn_layer2_switch") ||
		!strings.Contains(st.Problems[0], "not advertised") {
		t.Errorf("problems = %q, want one about ns1_sec's IPv6 length", st.Problems)
	}
}
