package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestWalkErrorAfterEndOfRIB: the peer's table was empty at the last good
// walk; it re-sends the table and End-of-RIB, but the next walk fails. The
// pass must not pair the fresh End-of-RIB with the old, empty walk (that
// deleted the route the peer had just re-sent).
func TestWalkErrorAfterEndOfRIB(t *testing.T) {
	owned := []model.OVNRoute{{UUID: "u1", Router: "GR_node1", Prefix: learnedUplink.Prefix,
		NextHop: learnedUplink.NextHop, OutputPort: "rtoe-GR_node1", Rule: "uplink"}}
	kernel := []model.KernelRoute{{Table: 100, Prefix: learnedUplink.Prefix, Protocol: 200,
		NextHops: []model.NextHop{{Addr: learnedUplink.NextHop, Dev: "eth0"}}}}
	h := startImport(t, "auto", owned, kernel)
	h.passDone()
	h.passDone() // a good walk of an empty table; deletes held (no End-of-RIB)
	if len(h.ovnPrefixes()) != 1 || len(h.kernelPrefixes()) != 1 {
		t.Fatalf("deleted before End-of-RIB")
	}
	h.sp.mu.Lock()
	h.sp.learned = []model.LearnedPath{learnedUplink}
	h.sp.learnedN, h.sp.failLearnedAfter = 2, 1 // the walk fails
	h.sp.gen++
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.d.poke()
	h.passDone()
	h.passDone()
	if len(h.ovnPrefixes()) != 1 || len(h.kernelPrefixes()) != 1 {
		t.Errorf("the re-sent route was deleted on a failed walk: OVN %v, kernel %v", h.ovnPrefixes(), h.kernelPrefixes())
	}
	if st := h.d.status(); st.Import == nil || len(st.Import.Problems) == 0 {
		t.Errorf("status does not say the walk failed: %+v", st.Import)
	}
}

// TestNoNetlinkDeletesNothing: when the kernel side cannot be opened, every
// next hop fails its on-link check; the OVN route the peer still sends
// must not be deleted for that.
func TestNoNetlinkDeletesNothing(t *testing.T) {
	owned := []model.OVNRoute{{UUID: "u1", Router: "GR_node1", Prefix: learnedUplink.Prefix,
		NextHop: learnedUplink.NextHop, OutputPort: "rtoe-GR_node1", Rule: "uplink"}}
	h := startImport(t, "auto", owned, nil, func(h *harness) { h.openHostErr = errors.New("operation not permitted") })
	h.sp.mu.Lock()
	h.sp.learned = []model.LearnedPath{learnedUplink}
	h.sp.gen++
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.d.poke()
	h.passDone()
	h.passDone()
	if len(h.ovnPrefixes()) != 1 {
		t.Errorf("netlink unavailable deleted the OVN route the peer still sends: OVN %v", h.ovnPrefixes())
	}
}

// TestPreviewDoesNotTouchSync: a preview (plan --config NEW, NEW without
// peer tor) that reaches the sync state first on a new speaker must not
// leave tor never synced.
func TestPreviewDoesNotTouchSync(t *testing.T) {
	var mu sync.Mutex
	pl := &planner{log: zap.NewNop(), mu: &mu}
	running := &config.Config{}
	running.BGP.GracefulRestart.DeferralTime = time.Hour
	running.BGP.Peers = []config.Peer{{Name: "tor"}, {Name: "tor2"}}
	preview := &config.Config{}
	preview.BGP.GracefulRestart.DeferralTime = time.Hour
	preview.BGP.Peers = []config.Peer{{Name: "tor2"}}
	sp := &fakeSpeaker{eor: true, peers: running.BGP.Peers}
	pl.syncedPeers(context.Background(), sp, preview, true)
	got := pl.syncedPeers(context.Background(), sp, running, false)
	if !got["tor"] || !got["tor2"] {
		t.Errorf("peers with End-of-RIB are not synced: %v", got)
	}
}

// TestOnLoopAfterTheLoopEnded: once the loop has ended (the daemon stops,
// its speaker may take seconds to), a call that needs it answers at once
// instead of waiting for its client to give up.
func TestOnLoopAfterTheLoopEnded(t *testing.T) {
	d := &Daemon{calls: make(chan func(context.Context)), loopDone: make(chan struct{})}
	close(d.loopDone)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran := false
	err := d.onLoop(ctx, func(context.Context) { ran = true })
	if err == nil || ran || ctx.Err() != nil {
		t.Fatalf("onLoop after the loop ended: err %v, ran %v, ctx %v; want a stopping error at once", err, ran, ctx.Err())
	}
}
