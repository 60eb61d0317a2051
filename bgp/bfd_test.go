package bgp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// bfdPeers lists the addresses gobgp runs a BFD session for.
func bfdPeers(s *Speaker) []string {
	var out []string
	s.bgp.ListBfdPeer(context.Background(), func(addr string, _ *api.BfdPeerState) { out = append(out, addr) })
	return out
}

// BFD is on in gobgp only while the session is Established, and turning it
// on or off, or changing its timers, never resets the session. (The
// provider runs no BFD: BFD stays down, which resets nothing.)
func TestBFDFollowsSession(t *testing.T) {
	parallel(t)
	l := newLab(t, 41)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	a := l.peerOf("a", 3, port, provASN)
	a.BFD = config.BFD{Enabled: true, MinTx: 300 * time.Millisecond, MinRx: 300 * time.Millisecond, Multiplier: 3}
	node := l.node(false, a)
	ctx := context.Background()
	since := waitEstablished(t, node, "a").Since
	running := func(want bool) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("BFD running %v", want), func() (bool, string) {
			p := peerState(t, node, "a")
			on := p.BFD != nil && p.BFD.Running
			return on == want && (len(bfdPeers(node)) == 1) == want, fmt.Sprintf("bfd %+v, gobgp's BFD peers %v", p.BFD, bfdPeers(node))
		})
	}
	running(true)
	if p := peerState(t, node, "a"); p.BFD.DetectTimeMs != 900 || p.BFD.State == model.BFDUp {
		t.Errorf("bfd = %+v, want not up (the provider runs no BFD), detection 900 ms", p.BFD)
	}

	off := a
	off.BFD.Enabled = false
	faster := a
	faster.BFD.MinRx = 100 * time.Millisecond
	for _, step := range []struct {
		name string
		p    config.Peer
		on   bool
	}{{"bfd off", off, false}, {"bfd on", a, true}, {"bfd timers", faster, true}} {
		if err := node.SetPeers(ctx, []config.Peer{step.p}); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		running(step.on)
		if p := peerState(t, node, "a"); p.State != model.StateEstablished || !p.Since.Equal(since) {
			t.Fatalf("%s reset the session: %s since %v, was established since %v", step.name, p.State, p.Since, since)
		}
	}
	if p := peerState(t, node, "a"); p.BFD.DetectTimeMs != 300 {
		t.Errorf("detection time after the timer change = %d ms, want 300", p.BFD.DetectTimeMs)
	}

	// The session goes down: BFD stops until it is Established again.
	if err := prov.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	running(false)
}

// bfdLoop reads gobgp's BFD states only while a session runs BFD: a node
// without BFD (most of them) does not wake ten times a second for nothing
// (the side-by-side bench's idle CPU: 263 ms a minute, half of it this).
func TestBFDPollsOnlyWhileRunning(t *testing.T) {
	parallel(t)
	l := newLab(t, 100)
	port := freePort(t)
	l.provider(3, port, provASN, false, "")
	a := l.peerOf("a", 3, port, provASN)
	node := l.node(false, a)
	ctx := context.Background()
	waitEstablished(t, node, "a")
	idle := func(n uint64) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("bfdLoop idle %d times", n), func() (bool, string) {
			return node.bfd.idle.Load() >= n, fmt.Sprintf("idle %d times", node.bfd.idle.Load())
		})
	}
	// quiet: no poll over many poll intervals. There is no event for
	// "nothing happened"; the old loop polled every bfdPoll.
	quiet := func(what string) {
		t.Helper()
		before := node.bfd.polls.Load()
		time.Sleep(5 * bfdPoll)
		if n := node.bfd.polls.Load() - before; n != 0 {
			t.Fatalf("%s: bfdLoop polled %d times in %v, want 0", what, n, 5*bfdPoll)
		}
	}
	idle(1)
	quiet("no peer runs BFD")

	on := a
	on.BFD = config.BFD{Enabled: true, MinTx: 300 * time.Millisecond, MinRx: 300 * time.Millisecond, Multiplier: 3}
	if err := node.SetPeers(ctx, []config.Peer{on}); err != nil {
		t.Fatal(err)
	}
	polls := node.bfd.polls.Load()
	eventually(t, 10*time.Second, "bfdLoop polls while BFD runs", func() (bool, string) {
		return node.bfd.polls.Load() >= polls+3, fmt.Sprintf("%d polls", node.bfd.polls.Load()-polls)
	})

	idled := node.bfd.idle.Load()
	if err := node.SetPeers(ctx, []config.Peer{a}); err != nil {
		t.Fatal(err)
	}
	idle(idled + 1)
	quiet("BFD turned off")
}
