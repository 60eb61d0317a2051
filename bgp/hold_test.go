package bgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// eorPeer is a graceful-restart helper on the wire: its OPEN offers
// graceful restart for IPv4 and IPv6 (forwarding preserved), it sends
// End-of-RIB for both at once, as FRR and BIRD do, and it records what the
// node sends, in order: "+<prefix>" for an announcement, "eor <family>"
// for an End-of-RIB.
type eorPeer struct {
	t      testing.TB
	ln     net.Listener
	mu     sync.Mutex
	conns  int
	events []string
}

func newEORPeer(t testing.TB, addr netip.Addr, port int) *eorPeer {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		t.Fatalf("eor peer: listen: %v", err)
	}
	p := &eorPeer{t: t, ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.serve(c, addr) }()
		}
	}()
	return p
}

func (p *eorPeer) serve(c net.Conn, id netip.Addr) {
	defer c.Close()
	p.mu.Lock()
	p.conns++
	p.mu.Unlock()
	if _, err := readMessage(c); err != nil { // the node's OPEN
		return
	}
	caps := []bgppkt.ParameterCapabilityInterface{
		bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC),
		bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv6_UC),
		bgppkt.NewCapFourOctetASNumber(provASN),
		bgppkt.NewCapGracefulRestart(false, false, 120, []*bgppkt.CapGracefulRestartTuple{
			bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv4_UC, true),
			bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv6_UC, true),
		}),
	}
	open, err := bgppkt.NewBGPOpenMessage(provASN, 90, id, []bgppkt.OptionParameterInterface{bgppkt.NewOptionParameterCapability(caps)})
	if err != nil {
		p.t.Errorf("eor peer: open: %v", err)
		return
	}
	for _, m := range []*bgppkt.BGPMessage{open, bgppkt.NewBGPKeepAliveMessage(),
		bgppkt.NewEndOfRib(bgppkt.RF_IPv4_UC), bgppkt.NewEndOfRib(bgppkt.RF_IPv6_UC)} {
		if writeMessage(c, m) != nil {
			return
		}
	}
	for {
		m, err := readMessage(c)
		if err != nil {
			return
		}
		u, ok := m.Body.(*bgppkt.BGPUpdate)
		if !ok {
			continue
		}
		var ev []string
		if eor, f := u.IsEndOfRib(); eor {
			ev = append(ev, "eor "+f.String())
		}
		for _, n := range u.NLRI {
			ev = append(ev, "+"+n.NLRI.String())
		}
		for _, a := range u.PathAttributes {
			if mp, ok := a.(*bgppkt.PathAttributeMpReachNLRI); ok {
				for _, n := range mp.Value {
					ev = append(ev, "+"+n.NLRI.String())
				}
			}
		}
		p.mu.Lock()
		p.events = append(p.events, ev...)
		p.mu.Unlock()
	}
}

// seen are the connections made and what the node sent so far.
func (p *eorPeer) seen() (int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns, slices.Clone(p.events)
}

// bothEORs reports whether the node sent End-of-RIB for both families.
func (p *eorPeer) bothEORs() (bool, string) {
	_, ev := p.seen()
	return slices.Contains(ev, "eor "+bgppkt.RF_IPv4_UC.String()) && slices.Contains(ev, "eor "+bgppkt.RF_IPv6_UC.String()),
		strings.Join(ev, ", ")
}

var holdAdvs = []model.Advertisement{
	adv("a", "10.171.0.0/24", model.PathAttrs{}),
	adv("a", "fd00:171::/64", model.PathAttrs{}),
}

// TestHeldSessionsStartWithTheTable: with graceful restart, a session
// HoldSessions held starts only at ReleaseSessions, and the peer gets the
// table that was applied meanwhile before the End-of-RIB of each family:
// a helper that kept our routes stale keeps them (bgp/hold.go).
func TestHeldSessionsStartWithTheTable(t *testing.T) {
	parallel(t)
	l := newLab(t, 171)
	port := freePort(t)
	peer := newEORPeer(t, l.addr(3), port)
	node := l.node(true)
	node.HoldSessions(time.Minute)
	ctx := context.Background()
	if err := node.SetPeers(ctx, []config.Peer{l.peerOf("a", 3, port, provASN)}); err != nil {
		t.Fatal(err)
	}
	never(t, time.Second, "a connection while the sessions are held", func() (bool, string) {
		n, _ := peer.seen()
		return n > 0, fmt.Sprintf("%d connections", n)
	})
	set(t, node, holdAdvs...)
	node.ReleaseSessions()
	eventually(t, sessionTimeout, "End-of-RIB for both families", peer.bothEORs)
	_, ev := peer.seen()
	for _, f := range []struct {
		prefix string
		fam    bgppkt.Family
	}{{"10.171.0.0/24", bgppkt.RF_IPv4_UC}, {"fd00:171::/64", bgppkt.RF_IPv6_UC}} {
		a, eor := slices.Index(ev, "+"+f.prefix), slices.Index(ev, "eor "+f.fam.String())
		if a < 0 || a > eor {
			t.Errorf("the peer got %s, want %s before the End-of-RIB of its family", strings.Join(ev, ", "), f.prefix)
		}
	}
	node.ReleaseSessions() // idempotent
}

// TestUnheldSessionSendsEndOfRIBFirst pins what the hold is for (gobgp
// v4.8.0): a restarting speaker's session that comes up before the table
// is in sends End-of-RIB for each family at once, once the peer sent its
// own, even with nothing to send; the table comes after it. A helper
// drops every stale route at that End-of-RIB.
func TestUnheldSessionSendsEndOfRIBFirst(t *testing.T) {
	parallel(t)
	l := newLab(t, 172)
	port := freePort(t)
	peer := newEORPeer(t, l.addr(3), port)
	node := l.node(true, l.peerOf("a", 3, port, provASN))
	eventually(t, sessionTimeout, "End-of-RIB for both families (an empty table)", peer.bothEORs)
	set(t, node, holdAdvs...)
	eventually(t, sessionTimeout, "the table after the End-of-RIB", func() (bool, string) {
		_, ev := peer.seen()
		return slices.Contains(ev, "+10.171.0.0/24") && slices.Contains(ev, "+fd00:171::/64"), strings.Join(ev, ", ")
	})
	if _, ev := peer.seen(); !strings.HasPrefix(ev[0], "eor ") || !strings.HasPrefix(ev[1], "eor ") {
		t.Errorf("the peer got %s, want both End-of-RIBs first (gobgp changed: bgp/hold.go may not be needed any more)", strings.Join(ev, ", "))
	}
}
