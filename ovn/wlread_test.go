package ovn

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// TestWorkloadsWholeRead: after libovsdb dropped events (touchAll), the
// switch ports are read whole and compared with the index's rows: a
// pod's address change is then listed as its two addresses, and the
// snapshot is what a new client reads.
func TestWorkloadsWholeRead(t *testing.T) {
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	ops, err := os.ReadFile(filepath.Join("testdata", "nb", "kubevirt-layer2-ic.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ovntest")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := labnb.NewMemoryServer(log, filepath.Join(dir, "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := labnb.Transact(ctx, srv.Endpoint(), ops, log); err != nil {
		t.Fatal(err)
	}
	dial := func() *Client {
		c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint(), Workloads: true}, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		waitSession(t, c)
		return c
	}
	c := dial()
	_, _, gen, _ := c.SnapshotDelta("node1", 0)
	c.memo.touchAll()
	if err := labnb.Transact(ctx, srv.Endpoint(), []byte(`[{"op":"update","table":"Logical_Switch_Port","where":[["name","==","ns2.green_ns2_web-5d9c7"]],
	  "row":{"addresses":["set",["0a:58:0a:64:00:14 10.100.0.22"]],"port_security":["set",["0a:58:0a:64:00:14 10.100.0.22"]]}}]`), log); err != nil {
		t.Fatal(err)
	}
	// The deltas until the snapshot shows the change (a read of the
	// whole tables may come before the transaction: an empty delta).
	var snap model.Snapshot
	var d model.SnapshotDelta
	shows := func(s model.Snapshot) bool {
		return slices.ContainsFunc(s.WorkloadIPs, func(w *model.WorkloadIP) bool { return w.IP == netip.MustParseAddr("10.100.0.22") })
	}
	for deadline := time.Now().Add(10 * time.Second); !shows(snap); {
		var g uint64
		var dd model.SnapshotDelta
		snap, dd, g, _ = c.SnapshotDelta("node1", gen)
		d.All, d.Context = d.All || dd.All, d.Context || dd.Context
		d.WorkloadIPs = append(d.WorkloadIPs, dd.WorkloadIPs...)
		gen = g
		if time.Now().After(deadline) {
			t.Fatal("the change never showed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	slices.SortFunc(d.WorkloadIPs, netip.Addr.Compare)
	d.WorkloadIPs = slices.Compact(d.WorkloadIPs)
	// All when the snapshot's addresses came from a read newer than its
	// rows (the session's first reads, before the node was asked for,
	// race the change: wlView.forNode's newer); the change is never lost.
	want := []netip.Addr{netip.MustParseAddr("10.100.0.20"), netip.MustParseAddr("10.100.0.22")}
	if !d.All && !slices.Equal(d.WorkloadIPs, want) || d.Context {
		t.Errorf("delta %+v, want WorkloadIPs %v (or All)", d, want)
	}
	fresh, _ := dial().Snapshot("node1")
	// Since differs: when each client saw the state.
	strip := func(l []*model.WorkloadIP) []model.WorkloadIP {
		out := make([]model.WorkloadIP, len(l))
		for i, w := range l {
			out[i] = *w
			out[i].Since = time.Time{}
		}
		return out
	}
	if got, w := strip(snap.WorkloadIPs), strip(fresh.WorkloadIPs); !slices.Equal(got, w) {
		t.Errorf("after the whole read\n%+v\na new client reads\n%+v", got, w)
	}
}
