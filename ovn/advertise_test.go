package ovn_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// egressIP finds ip in the egress IPs of snap's network.
func egressIP(snap model.Snapshot, network, ip string) (model.EgressIP, bool) {
	for _, e := range snap.EgressIPs {
		if e.Network == network && e.IP == netip.MustParseAddr(ip) {
			return e, true
		}
	}
	return model.EgressIP{}, false
}

// serviceVIP finds vip of service in snap.
func serviceVIP(snap model.Snapshot, service, vip string) (model.ServiceVIP, bool) {
	for _, v := range snap.ServiceVIPs {
		if v.Service == service && v.VIP == netip.MustParseAddr(vip) {
			return v, true
		}
	}
	return model.ServiceVIP{}, false
}

// TestAdvertisedFollowNB: on the advertise.json NB, an egress IP that moves
// to another node leaves this node's list (and only it: its IPv6 twin
// stays), and a Service's backends follow its load-balancer rows as they
// change and go (the parsed rows kept between reads are never stale).
func TestAdvertisedFollowNB(t *testing.T) {
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	srv, err := labnb.NewMemoryServer(log, filepath.Join(shortDir(t), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ops, err := os.ReadFile(filepath.Join("testdata", "nb", "advertise.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := labnb.Transact(ctx, srv.Endpoint(), ops, log); err != nil {
		t.Fatal(err)
	}
	c, _ := dial(t, srv.Endpoint(), log)
	var snap model.Snapshot
	eventually(t, 10*time.Second, func() (bool, string) {
		var ok bool
		snap, ok = c.Snapshot(goldenNode)
		return ok, "not synced"
	})
	if _, ok := egressIP(snap, model.DefaultNetwork, "172.18.0.100"); !ok {
		t.Fatalf("egress IP 172.18.0.100 not on node1 at start: %+v", snap.EgressIPs)
	}
	web, ok := serviceVIP(snap, "ns1/web", "10.96.0.20")
	if !ok || !slices.Contains(web.Backends, netip.MustParseAddr("10.128.2.8")) {
		t.Fatalf("ns1/web 10.96.0.20 at start: %+v", web)
	}

	// The egress IP moves to node2 (the status of the EgressIP changes).
	if err := labnb.MoveNATs(ctx, srv.Endpoint(), "172.18.0.100", "GR_node1", "GR_node2", log); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		snap, _ = c.Snapshot(goldenNode)
		_, here := egressIP(snap, model.DefaultNetwork, "172.18.0.100")
		return !here, "172.18.0.100 still listed on node1 after it moved to GR_node2"
	})
	if _, ok := egressIP(snap, model.DefaultNetwork, "fc00:f853:ccd:e793::100"); !ok {
		t.Errorf("the IPv6 egress IP went with the IPv4 one: %+v", snap.EgressIPs)
	}
	if _, ok := egressIP(snap, "ns1_blue", "172.18.0.101"); !ok {
		t.Errorf("the UDN egress IP went with the default network's: %+v", snap.EgressIPs)
	}
	snap2, _ := c.Snapshot("node2")
	if e, ok := egressIP(snap2, model.DefaultNetwork, "172.18.0.100"); !ok || e.Router != "GR_node2" ||
		!slices.Equal(e.Namespaces, []string{"ns1", "ns2"}) {
		t.Errorf("node2 after the move: %+v (found %v)", e, ok)
	}

	// A backend is added to one port of the TCP row: the VIP gains it.
	upd := `[{"op": "update", "table": "Load_Balancer", "where": [["name", "==", "Service_ns1/web_TCP_cluster"]],
	  "row": {"vips": ["map", [["10.96.0.20:80", "10.128.0.5:8080,10.128.2.6:8080,10.128.2.99:8080"], ["10.96.0.20:443", "10.128.0.5:8443,10.128.2.7:8443"]]]}}]`
	if err := labnb.Transact(ctx, srv.Endpoint(), []byte(upd), log); err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.128.0.5"), netip.MustParseAddr("10.128.2.6"), netip.MustParseAddr("10.128.2.7"),
		netip.MustParseAddr("10.128.2.8"), netip.MustParseAddr("10.128.2.99")}
	eventually(t, 10*time.Second, func() (bool, string) {
		snap, _ = c.Snapshot(goldenNode)
		web, _ = serviceVIP(snap, "ns1/web", "10.96.0.20")
		return slices.Equal(web.Backends, want), "10.96.0.20 backends " + addrs(web.Backends)
	})
	if _, ok := serviceVIP(snap, "ns1/web", "192.0.2.50"); ok {
		t.Errorf("192.0.2.50 still listed after the update removed it from the row")
	}

	// The UDP row goes: its backend goes, the TCP ones stay.
	del := `[{"op": "delete", "table": "Load_Balancer", "where": [["name", "==", "Service_ns1/web_UDP_cluster"]]}]`
	if err := labnb.Transact(ctx, srv.Endpoint(), []byte(del), log); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		snap, _ = c.Snapshot(goldenNode)
		web, _ = serviceVIP(snap, "ns1/web", "10.96.0.20")
		return len(web.Backends) == 4 && !slices.Contains(web.Backends, netip.MustParseAddr("10.128.2.8")),
			"10.96.0.20 backends " + addrs(web.Backends)
	})
	if local, ok := serviceVIP(snap, "ns2/local", "198.51.100.20"); !ok || len(local.Backends) != 2 {
		t.Errorf("an unrelated Service changed: %+v", local)
	}
}

func addrs(as []netip.Addr) string {
	var s string
	for _, a := range as {
		s += a.String() + " "
	}
	return s
}
