package daemon

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// HoldSessions records the hold (package bgp keeps the sessions from
// starting until ReleaseSessions).
func (f *fakeSpeaker) HoldSessions(time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "hold")
}

// ReleaseSessions records the release.
func (f *fakeSpeaker) ReleaseSessions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "release")
}

func (f *fakeSpeaker) sessionCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// TestSessionsHeldUntilFirstTable: the sessions may start only once the
// first table is in the speaker. With graceful restart gobgp sends a peer
// End-of-RIB as soon as every session is up and the peers sent theirs
// (milliseconds over a fast link), and a peer that kept our routes stale
// drops every one that table lacks: before the fix, the sessions opened
// with SetPeers, right before the first Apply, and FRR saw every route
// withdrawn and announced again on a restart (TestAdvertRestartFRR). The
// speaker must see the hold, the peers, the first Apply, then the release.
func TestSessionsHeldUntilFirstTable(t *testing.T) {
	h := start(t, `"*"`, func(h *harness) { h.cfg.gr = true })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.passDone()
	calls := h.sp.sessionCalls()
	first := func(c string) int { return slices.Index(calls, c) }
	hold, peers, apply, release := first("hold"), first("setPeers"), first("apply"), first("release")
	if hold < 0 || peers < 0 || apply < 0 || release < 0 || !(hold < peers && peers < apply && apply < release) {
		t.Fatalf("session calls %s: want hold, setPeers, apply, release in that order", strings.Join(calls, ", "))
	}
	// Once: a later pass neither holds, nor adds the peers, nor releases
	// again (ReleaseSessions is idempotent; the first pass may call it
	// twice).
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	h.passDone()
	calls = h.sp.sessionCalls()
	for _, c := range []string{"hold", "setPeers"} {
		if n := strings.Count(strings.Join(calls, " ")+" ", c+" "); n != 1 {
			t.Errorf("%d %s calls after later passes, want 1: %s", n, c, strings.Join(calls, ", "))
		}
	}
	second := apply + 1 + slices.Index(calls[apply+1:], "apply")
	if second > apply && slices.Contains(calls[second:], "release") {
		t.Errorf("a later pass released the sessions again: %s", strings.Join(calls, ", "))
	}
}
