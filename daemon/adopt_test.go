package daemon

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// ownedUplink is learnedUplink as installed by an earlier run: an owned
// OVN row and a kernel route in table 100.
func ownedUplink() ([]model.OVNRoute, []model.KernelRoute) {
	return []model.OVNRoute{{UUID: "u1", Router: "GR_node1", Prefix: learnedUplink.Prefix,
			NextHop: learnedUplink.NextHop, OutputPort: "rtoe-GR_node1", Rule: "uplink"}},
		[]model.KernelRoute{{Table: 100, Prefix: learnedUplink.Prefix, Protocol: 200,
			NextHops: []model.NextHop{{Addr: learnedUplink.NextHop, Dev: "eth0"}}}}
}

// TestWithdrawAtOnceWithoutEndOfRIB: a route learned in this run that the
// peer withdraws leaves OVN and the kernel on the next pass, although the
// peer never sent End-of-RIB and deferralTime (1 h) is far away (issue 17:
// every delete was held for deferralTime after each start).
func TestWithdrawAtOnceWithoutEndOfRIB(t *testing.T) {
	h := startImport(t, "auto", nil, nil, func(h *harness) { h.cfg.gr, h.cfg.deferral = true, "1h" })
	h.sp.setLearned(learnedUplink)
	h.d.poke()
	h.eventually("the route in OVN and the kernel", func() bool {
		return len(h.ovnPrefixes()) == 1 && len(h.kernelPrefixes()) == 1
	})
	h.sp.setLearned() // withdrawn; no End-of-RIB ever
	h.d.poke()
	h.eventually("the withdrawn route gone from OVN and the kernel", func() bool {
		return len(h.ovnPrefixes()) == 0 && len(h.kernelPrefixes()) == 0
	})
}

// TestAdoptedHeldUntilEndOfRIB: a route found installed at start that the
// peer does not send again stays until the peer's End-of-RIB (fail
// static), with a reason that says so; the one it re-sent is adopted no
// more: withdrawn later, it goes at once.
func TestAdoptedHeldUntilEndOfRIB(t *testing.T) {
	owned, kernel := ownedUplink()
	other := learnedUplink
	other.Prefix = netip.MustParsePrefix("198.51.101.0/24")
	owned2, kernel2 := owned[0], kernel[0]
	owned2.UUID, owned2.Prefix, kernel2.Prefix = "u2", other.Prefix, other.Prefix
	h := startImport(t, "auto", append(owned, owned2), append(kernel, kernel2), func(h *harness) { h.cfg.gr, h.cfg.deferral = true, "1h" })
	h.sp.setLearned(other) // 198.51.101.0/24 sent again, 198.51.100.0/24 not
	h.d.poke()
	h.passDone()
	h.passDone()
	if got := h.ovnPrefixes(); len(got) != 2 || len(h.kernelPrefixes()) != 2 {
		t.Fatalf("adopted route deleted before End-of-RIB: OVN %v, kernel %v", got, h.kernelPrefixes())
	}
	h.d.mu.Lock()
	held := h.d.pl.heldOps()
	h.d.mu.Unlock()
	if len(held) != 2 || held[0].Reason == "" {
		t.Errorf("held %+v, want the OVN and kernel deletes of 198.51.100.0/24 with a reason", held)
	}
	h.sp.setLearned() // the re-sent one withdrawn: it was learned in this run
	h.d.poke()
	h.eventually("the withdrawn re-sent route gone, the adopted one kept", func() bool {
		return slices.Equal(h.ovnPrefixes(), []string{"GR_node1 198.51.100.0/24 via 192.0.2.1"}) && len(h.kernelPrefixes()) == 1
	})
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.d.poke()
	h.eventually("the adopted route gone at End-of-RIB", func() bool {
		return len(h.ovnPrefixes()) == 0 && len(h.kernelPrefixes()) == 0
	})
}

// TestDeferralWakesTheLoop: when deferralTime ends, the loop plans again
// by itself: the adopted route goes then, not at the next 60 s resync
// (issue 17: with the default 120 s the routes went at start + 180 s).
func TestDeferralWakesTheLoop(t *testing.T) {
	owned, kernel := ownedUplink()
	h := startImport(t, "auto", owned, kernel, func(h *harness) { h.cfg.gr, h.cfg.deferral = true, "1s" })
	// No poke, no change: only the deferral's end can make the loop
	// delete it before the resync a minute later.
	h.eventually("the adopted route gone once deferralTime passed", func() bool {
		return len(h.ovnPrefixes()) == 0 && len(h.kernelPrefixes()) == 0
	})
}

// TestQuietPeerWithoutGracefulRestart: a peer that negotiated no graceful
// restart sends no End-of-RIB (FRR, ExaBGP); its table counts as complete
// once it has been quiet for tableSettle while Established, so an adopted
// route it no longer sends goes seconds after the start, not after
// deferralTime (1 h).
func TestQuietPeerWithoutGracefulRestart(t *testing.T) {
	owned, kernel := ownedUplink()
	h := startImport(t, "auto", owned, kernel, func(h *harness) {
		h.cfg.deferral = "1h"
		h.sp.noGR = true
		h.sp.since = time.Now()
	})
	h.eventually("the adopted route gone once the peer's table settled", func() bool {
		return len(h.ovnPrefixes()) == 0 && len(h.kernelPrefixes()) == 0
	})
}

// TestPeerGracefulRestartKeptByTheDaemon: a peer that negotiated graceful
// restart loses its session gracefully (hold timer, TCP reset) and gobgp
// drops its paths anyway (it forgets the capability's families on
// UpdatePeer, bgp/bfd.go): the daemon keeps its last copy, stale, so the
// routes stay in OVN and the kernel while the peer is away and after it is
// back; the one it sends again is fresh, the one it does not goes at its
// End-of-RIB for the family (RFC 4724 4.2).
func TestPeerGracefulRestartKeptByTheDaemon(t *testing.T) {
	h, other := startGRPeer(t)
	stale := func(want bool) func() bool {
		return func() bool {
			h.d.mu.Lock()
			defer h.d.mu.Unlock()
			p, ok := h.d.pl.imp.table.Learned(model.Key{Peer: "tor", Prefix: learnedUplink.Prefix})
			return ok && p.Stale == want
		}
	}
	// The session ends gracefully; gobgp drops what the peer sent.
	h.sp.mu.Lock()
	endGracefully(h)
	h.sp.mu.Unlock()
	h.sp.setLearned()
	h.d.poke()
	h.eventually("the paths kept stale by the daemon", stale(true))
	h.passDone()
	if len(h.ovnPrefixes()) != 2 || len(h.kernelPrefixes()) != 2 {
		t.Fatalf("routes of a peer away in its graceful restart deleted: OVN %v, kernel %v", h.ovnPrefixes(), h.kernelPrefixes())
	}
	// Back (the F bit set), with one route sent again, no End-of-RIB yet.
	h.sp.mu.Lock()
	h.sp.state, h.sp.since = model.StateEstablished, time.Now()
	h.sp.mu.Unlock()
	h.sp.setLearned(other)
	h.passDone()
	h.passDone()
	if len(h.ovnPrefixes()) != 2 || len(h.kernelPrefixes()) != 2 {
		t.Fatalf("stale routes deleted before the peer's End-of-RIB: OVN %v, kernel %v", h.ovnPrefixes(), h.kernelPrefixes())
	}
	h.sp.mu.Lock()
	h.sp.eor, h.sp.eorFamilies = true, map[string]bool{"ipv4": true}
	h.sp.mu.Unlock()
	h.d.poke()
	h.eventually("the route not sent again gone at End-of-RIB, the other kept", func() bool {
		return slices.Equal(h.ovnPrefixes(), []string{"GR_node1 198.51.101.0/24 via 192.0.2.1"}) && len(h.kernelPrefixes()) == 1
	})
}

// TestSessionEndsMidPass: the session ends gracefully after the pass read
// the sessions and before it took what changed (gobgp drops the paths
// first and reports the session's end after): the pass must not decide the
// drop on windows that still say Established. The routes stay, stale.
func TestSessionEndsMidPass(t *testing.T) {
	h := startImport(t, "auto", nil, nil, func(h *harness) {
		h.cfg.gr, h.cfg.deferral = true, "1h"
		h.sp.eor, h.sp.since = true, time.Now()
	})
	h.sp.setLearned(learnedUplink)
	h.d.poke()
	h.eventually("the route in OVN and the kernel", func() bool {
		return len(h.ovnPrefixes()) == 1 && len(h.kernelPrefixes()) == 1
	})
	h.passDone()
	h.nb.mu.Lock()
	applies := len(h.nb.applies)
	h.nb.mu.Unlock()
	var once sync.Once
	h.sp.mu.Lock()
	h.sp.onTake = func() {
		once.Do(func() {
			h.sp.mu.Lock()
			endGracefully(h)
			h.sp.learned = nil
			h.sp.gen++
			h.sp.mu.Unlock()
		})
	}
	h.sp.mu.Unlock()
	h.passDone()
	h.passDone()
	if len(h.ovnPrefixes()) != 1 || len(h.kernelPrefixes()) != 1 {
		t.Fatalf("a route a graceful restart keeps deleted: the session ended between the pass's read of the sessions and of the paths: OVN %v, kernel %v",
			h.ovnPrefixes(), h.kernelPrefixes())
	}
	h.nb.mu.Lock()
	defer h.nb.mu.Unlock()
	for _, ops := range h.nb.applies[applies:] {
		for _, op := range ops {
			if op.Op == model.OpDelete {
				t.Errorf("OVN row deleted while the peer is away in its graceful restart: %+v", op)
			}
		}
	}
}

// TestWithdrawnThenGracefulEnd: the peer withdraws a route, and its
// session ends gracefully before the daemon's next take: the withdrawn
// route goes (it is not kept stale with the others, which gobgp dropped
// with the session).
func TestWithdrawnThenGracefulEnd(t *testing.T) {
	h, _ := startGRPeer(t)
	h.passDone()
	h.sp.mu.Lock()
	// An explicit withdrawal (the delta's Gone), then the graceful end:
	// gobgp drops the rest (the state event puts the peer in Resync).
	h.sp.learned = nil
	h.sp.pending.Gone = append(h.sp.pending.Gone, model.Key{Peer: "tor", Prefix: learnedUplink.Prefix})
	endGracefully(h)
	h.sp.gen++
	h.sp.mu.Unlock()
	h.d.poke()
	h.eventually("the withdrawn route gone, the other kept stale", func() bool {
		return slices.Equal(h.ovnPrefixes(), []string{"GR_node1 198.51.101.0/24 via 192.0.2.1"}) && len(h.kernelPrefixes()) == 1
	})
	h.passDone()
	if got := h.ovnPrefixes(); !slices.Equal(got, []string{"GR_node1 198.51.101.0/24 via 192.0.2.1"}) {
		t.Errorf("OVN %v after the peer is away: want the route it did not withdraw", got)
	}
}

// startGRPeer starts an auto import whose peer negotiated graceful restart
// and has sent its End-of-RIB, with learnedUplink and other (the next
// /24) installed in OVN and the kernel.
func startGRPeer(t *testing.T) (*harness, model.LearnedPath) {
	t.Helper()
	other := learnedUplink
	other.Prefix = netip.MustParsePrefix("198.51.101.0/24")
	h := startImport(t, "auto", nil, nil, func(h *harness) {
		h.cfg.gr, h.cfg.deferral = true, "1h"
		h.sp.eor, h.sp.since = true, time.Now()
	})
	h.sp.setLearned(learnedUplink, other)
	h.d.poke()
	h.eventually("both routes in OVN and the kernel", func() bool {
		return len(h.ovnPrefixes()) == 2 && len(h.kernelPrefixes()) == 2
	})
	return h, other
}

// endGracefully makes the fake's session end as a hold-timer expiry does
// (graceful, now); the caller holds h.sp.mu.
func endGracefully(h *harness) {
	h.sp.state, h.sp.eor, h.sp.down, h.sp.downGraceful = model.StateIdle, false, time.Now(), true
}
