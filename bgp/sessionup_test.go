package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// The session start window of gobgp (sessionup.go) cannot be hit on
// purpose: these tests build the state it leaves behind with gobgp's own
// API, bypassing reconcile, and check that the repair puts the peer right.

// groupOf is the name of the prefix set and statement that select
// prefixes for peer (one group: no attributes).
func groupOf(t *testing.T, s *Speaker, peer string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for gid, g := range s.adv.groups {
		if gid.peer == peer {
			return g.name
		}
	}
	t.Fatalf("no export group for peer %q", peer)
	return ""
}

// sessionSince is the start of the peer's current session.
func sessionSince(s *Speaker, addr netip.Addr) time.Time {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	return s.sess.all[addr].since
}

// TestSessionStartRepairResends: a path in the RIB that the peer's export
// policy selects but that was never sent (an add in the window) reaches
// the peer through the repair.
func TestSessionStartRepairResends(t *testing.T) {
	parallel(t)
	l := newLab(t, 91)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	a := l.peerOf("a", 3, port, provASN)
	node := l.node(false, a)
	waitEstablished(t, node, "a")
	x := adv("a", "10.91.0.0/24", model.PathAttrs{})
	set(t, node, x)
	waitLearned(t, prov, "node", x.Prefix)
	name := groupOf(t, node, "a")

	// z enters the RIB while a's policy does not select it, then a's set
	// takes it without a soft reset: selected, in the RIB, never sent.
	z := pfx("10.91.1.0/24")
	ctx := context.Background()
	node.mu.Lock()
	start := time.Now()
	lp, err := localPath(z)
	if err == nil {
		_, err = node.bgp.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{lp}})
	}
	if err == nil {
		err = node.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(name, z)})
	}
	node.exportChanged(start, nil)
	node.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// A marker through the normal path: once it arrived, z would have too.
	m := adv("a", "10.91.9.0/24", model.PathAttrs{})
	set(t, node, x, m)
	waitLearned(t, prov, "node", x.Prefix, m.Prefix)

	// As if the session had come up just before.
	node.repairSessionStart("a", a.Address, start, sessionSince(node, a.Address))
	waitLearned(t, prov, "node", x.Prefix, m.Prefix, z)
}

// TestSessionStartRepairWithdraws: a path that left the RIB lately is
// withdrawn from the peer again by the repair (in the window, gobgp sends
// no withdrawal at all: propagateUpdateToNeighbors skips a peer whose FSM
// state is not Established yet, and gobgp sends a withdrawal to every
// Established peer, so it cannot be held back here), and it is never
// announced again nor left in the RIB.
func TestSessionStartRepairWithdraws(t *testing.T) {
	parallel(t)
	l := newLab(t, 92)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	a := l.peerOf("a", 3, port, provASN)
	node := l.node(false, a)
	waitEstablished(t, node, "a")
	<-w.up
	x, z := adv("a", "10.92.0.0/24", model.PathAttrs{}), adv("a", "10.92.1.0/24", model.PathAttrs{})
	set(t, node, x, z)
	eventually(t, sessionTimeout, "the peer got "+z.Prefix.String(), func() (bool, string) {
		return w.announced(z.Prefix) == 1, fmt.Sprint(w.announced(z.Prefix))
	})
	// As if the session had come up just before the withdrawal.
	ts := time.Now()
	set(t, node, x)
	eventually(t, sessionTimeout, "the peer saw "+z.Prefix.String()+" withdrawn", func() (bool, string) {
		return w.withdrawals(z.Prefix) == 1, fmt.Sprint(w.withdrawals(z.Prefix))
	})

	before := node.repairs.Load()
	node.repairSessionStart("a", a.Address, ts, sessionSince(node, a.Address))
	if node.repairs.Load() != before+1 {
		t.Fatal("the repair did not run")
	}
	if r := node.SessionRepairs(); r.Repairs != before+1 || r.Last == nil || r.Last.Peer != "a" ||
		r.Last.PutBack != 1 || !r.Last.SoftReset || r.Last.Removed != 1 || r.Last.Error != "" {
		t.Errorf("SessionRepairs() = %+v, last %+v; want the repair of a: 1 path put back, soft reset, 1 removed", r, r.Last)
	}
	eventually(t, sessionTimeout, "the repair withdrew "+z.Prefix.String()+" again", func() (bool, string) {
		return w.withdrawals(z.Prefix) == 2, fmt.Sprint(w.withdrawals(z.Prefix))
	})
	m := adv("a", "10.92.9.0/24", model.PathAttrs{})
	set(t, node, x, m)
	eventually(t, sessionTimeout, "the peer got "+m.Prefix.String(), func() (bool, string) {
		return w.announced(m.Prefix) == 1, fmt.Sprint(w.announced(m.Prefix))
	})
	if n := w.announced(z.Prefix); n != 1 {
		t.Errorf("%s announced %d times: the repair must not announce what it puts back", z.Prefix, n)
	}
	if got := ribPrefixes(node); fmt.Sprint(got) != fmt.Sprint([]netip.Prefix{x.Prefix, m.Prefix}) {
		t.Errorf("RIB after the repair: %v, want only %v and %v", got, x.Prefix, m.Prefix)
	}
}

// ribPrefixes lists the paths in gobgp's global RIB.
func ribPrefixes(s *Speaker) []netip.Prefix {
	var out []netip.Prefix
	s.eachRIBPrefix(func(p netip.Prefix) { out = append(out, p) })
	slices.SortFunc(out, model.ComparePrefix)
	return out
}

// TestSessionStartRepairOnlyAcrossTheWindow: the check runs for every new
// session (wired from its Established event) and re-sends the table only
// when an operation spans the moment the session came up.
func TestSessionStartRepairOnlyAcrossTheWindow(t *testing.T) {
	parallel(t)
	l := newLab(t, 93)
	port := freePort(t)
	l.provider(3, port, provASN, false, "")
	a := l.peerOf("a", 3, port, provASN)
	node := l.node(false)
	// An operation that began before the session and ends after it
	// came up (as one blocked by gobgp's Established handler).
	node.mu.Lock()
	now := time.Now()
	node.adv.ops = append(node.adv.ops, exportOp{start: now, end: now.Add(time.Hour)})
	node.mu.Unlock()
	if err := node.SetPeers(context.Background(), []config.Peer{a}); err != nil {
		t.Fatal(err)
	}
	first := waitEstablished(t, node, "a").Since
	eventually(t, sessionTimeout, "the session start check ran", func() (bool, string) {
		return node.repairChecks.Load() == 1, fmt.Sprint(node.repairChecks.Load(), " checks")
	})
	if n := node.repairs.Load(); n != 1 {
		t.Fatalf("%d repairs, want 1: an operation spanned the session start", n)
	}

	// A new session with no operation across its start (one ended
	// before, one begins after the window): checked, not repaired.
	node.mu.Lock()
	now = time.Now()
	node.adv.ops = []exportOp{{start: now.Add(-2 * time.Second), end: now.Add(-time.Second)}}
	node.mu.Unlock()
	a2 := a
	a2.HoldTime = 60 * time.Second
	a2.KeepaliveTime = 20 * time.Second
	if err := node.SetPeers(context.Background(), []config.Peer{a2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, sessionTimeout, "a new session", func() (bool, string) {
		st := peerState(t, node, "a")
		return st.State == model.StateEstablished && st.Since.After(first), fmt.Sprintf("%s since %v", st.State, st.Since)
	})
	second := sessionSince(node, a.Address)
	for time.Since(second) <= 2*sessionWindow {
		time.Sleep(sessionWindow / 4)
	}
	node.mu.Lock()
	now = time.Now()
	node.adv.ops = append(node.adv.ops, exportOp{start: now, end: now})
	node.mu.Unlock()
	eventually(t, sessionTimeout, "the new session's check ran", func() (bool, string) {
		return node.repairChecks.Load() == 2, fmt.Sprint(node.repairChecks.Load(), " checks")
	})
	if n := node.repairs.Load(); n != 1 {
		t.Errorf("%d repairs, want still 1: nothing spanned the new session's start", n)
	}
	// A check for a session that is not the current one does nothing.
	node.mu.Lock()
	now = time.Now()
	node.adv.ops = append(node.adv.ops, exportOp{start: now, end: now})
	node.mu.Unlock()
	node.repairSessionStart("a", a.Address, now, first)
	if n := node.repairs.Load(); n != 1 {
		t.Errorf("%d repairs, want 1: the session named is not the current one", n)
	}
}
