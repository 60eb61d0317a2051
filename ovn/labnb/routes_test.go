package labnb_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// TestRouterStaticRoutes: what RouterStaticRoutes reads is what is in the
// router's static_routes: the topology's own rows and one written beside
// them, with its output port and external IDs, by prefix.
func TestRouterStaticRoutes(t *testing.T) {
	ctx := context.Background()
	log := zap.NewNop()
	nb, err := labnb.NewMemoryServer(log, filepath.Join(t.TempDir(), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	if err := labnb.Topology(ctx, nb.Endpoint(), "node1", log); err != nil {
		t.Fatal(err)
	}
	if _, err := labnb.RawInsertStaticRoutes(ctx, nb.Endpoint(), "GR_node1", "node1", []labnb.StaticRoute{{
		Prefix: netip.MustParsePrefix("203.0.113.0/24"), NextHop: netip.MustParseAddr("172.18.0.1"), OutputPort: "rtoe-GR_node1",
	}}, false, log); err != nil {
		t.Fatal(err)
	}
	got, err := labnb.RouterStaticRoutes(ctx, nb.Endpoint(), "GR_node1", log)
	if err != nil {
		t.Fatal(err)
	}
	want := []labnb.RouterRoute{
		{Prefix: "0.0.0.0/0", NextHop: "172.18.0.1", OutputPort: "rtoe-GR_node1"},
		{Prefix: "10.128.0.0/14", NextHop: "100.64.0.1"},
		{Prefix: "203.0.113.0/24", NextHop: "172.18.0.1", OutputPort: "rtoe-GR_node1",
			ExternalIDs: map[string]string{"ovnbgp.io/owner": "node1", "ovnbgp.io/rule": "raw"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d routes %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Prefix != w.Prefix || g.NextHop != w.NextHop || g.OutputPort != w.OutputPort || len(g.ExternalIDs) != len(w.ExternalIDs) {
			t.Errorf("route %d = %+v, want %+v", i, g, w)
		}
		for k, v := range w.ExternalIDs {
			if g.ExternalIDs[k] != v {
				t.Errorf("route %d external_ids[%s] = %q, want %q", i, k, g.ExternalIDs[k], v)
			}
		}
	}
	if _, err := labnb.RouterStaticRoutes(ctx, nb.Endpoint(), "GR_nosuch", log); err == nil {
		t.Error("no error for a router that does not exist")
	}
}
