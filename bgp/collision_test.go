package bgp

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// tcpConn is one end of a real loopback TCP connection.
func tcpConn(t *testing.T) *openConn {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return &openConn{TCPConn: c.(*net.TCPConn)}
}

// openFrom is an OPEN message from AS asn with BGP Identifier id.
func openFrom(asn uint16, id string) []byte {
	b := make([]byte, 29)
	for i := range 16 {
		b[i] = 0xff
	}
	b[17], b[18], b[19] = 29, 1, 4
	b[20], b[21] = byte(asn>>8), byte(asn)
	b[22], b[23] = 0, 90
	copy(b[24:28], netip.MustParseAddr(id).AsSlice())
	return b
}

// TestCollisionVerdicts: RFC 4271 6.8 and RFC 6286 3 between the
// connection ovnbgp dialed (in gobgp's hands) and one the peer dialed
// that sent its OPEN; and what an accepted connection does without a
// collision.
func TestCollisionVerdicts(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.1")
	peer := listenPeer{name: "tor", asn: 65001}
	// newSpeaker has seen one Active event for the peer, and then state.
	newSpeaker := func(state model.SessionState, localASN uint32) *Speaker {
		return &Speaker{
			global: config.BGP{ASN: localASN, RouterID: netip.MustParseAddr("192.0.2.100")},
			log:    zap.NewNop(),
			sess:   sessions{all: map[netip.Addr]*session{addr: {state: state, actives: 1}}},
			tr:     transport{gate: connGate{live: map[netip.Addr]handed{}, used: map[netip.Addr]uint64{}}},
		}
	}
	for _, c := range []struct {
		name     string
		state    model.SessionState
		localASN uint32
		peerID   string
		want     verdict
		oursOpen bool
	}{
		{"our ID higher: ours stays", model.StateOpenSent, 65010, "192.0.2.1", closeIt, true},
		{"peer's ID higher: the peer's stays", model.StateOpenConfirm, 65010, "192.0.2.200", waitActive, false},
		{"same ID, our AS higher: ours stays", model.StateOpenSent, 65010, "192.0.2.100", closeIt, true},
		{"same ID, peer's AS higher: the peer's stays", model.StateOpenSent, 64512, "192.0.2.100", waitActive, false},
		{"ours Established: gobgp closes the new one", model.StateEstablished, 65010, "192.0.2.200", handOver, true},
	} {
		s := newSpeaker(model.StateActive, c.localASN)
		ours := tcpConn(t)
		if !s.claimDialed(addr, ours) {
			t.Fatalf("%s: claimDialed refused with no connection in gobgp's hands", c.name)
		}
		s.sess.all[addr].state = c.state
		theirs := tcpConn(t)
		if got := s.acceptedOpen(peer, addr, openFrom(65001, c.peerID), theirs); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
		if open := !ours.closed.Load(); open != c.oursOpen {
			t.Errorf("%s: our dialed connection open = %v, want %v", c.name, open, c.oursOpen)
		}
		// gobgp's "read-failed" after ovnbgp closed its own connection
		// is not the session's lastError.
		if ss := s.sess.all[addr]; closedInCollision(ss) == c.oursOpen {
			t.Errorf("%s: closedInCollision = %v, want %v", c.name, closedInCollision(ss), !c.oursOpen)
		}
	}

	// No collision: Active hands over and records it, so that the dialer
	// then closes what it dials instead of handing it to gobgp.
	s := newSpeaker(model.StateActive, 65010)
	acc := tcpConn(t)
	if got := s.acceptedOpen(peer, addr, openFrom(65001, "192.0.2.1"), acc); got != handOver {
		t.Errorf("Active: verdict %d, want handOver", got)
	}
	if s.claimDialed(addr, tcpConn(t)) {
		t.Error("claimDialed accepted while gobgp has the peer's connection open")
	}
	// A second connection from the peer while gobgp opens on the first:
	// gobgp closes it (as before), nothing recorded.
	if got := s.acceptedOpen(peer, addr, openFrom(65001, "192.0.2.1"), tcpConn(t)); got != handOver {
		t.Errorf("second accepted: verdict %d, want handOver", got)
	}
	acc.Close() // gobgp closed it, and the last event still says Active
	if s.claimDialed(addr, tcpConn(t)) {
		t.Error("claimDialed accepted on a stale Active (one connection went to gobgp since)")
	}
	if got := s.acceptedOpen(peer, addr, openFrom(65001, "192.0.2.1"), tcpConn(t)); got != waitActive {
		t.Errorf("stale Active: verdict %d, want waitActive", got)
	}
	s.sess.all[addr].actives++ // gobgp came back through Idle to Active
	if !s.claimDialed(addr, tcpConn(t)) {
		t.Error("claimDialed refused after a new Active")
	}
	// A connection to another local address than the peer's
	// sourceAddress: gobgp would close it and stay Active; closed here.
	s = newSpeaker(model.StateActive, 65010)
	withSource := peer
	withSource.source = netip.MustParseAddr("127.0.0.2")
	if got := s.acceptedOpen(withSource, addr, openFrom(65001, "192.0.2.1"), tcpConn(t)); got != closeIt {
		t.Errorf("wrong local address: verdict %d, want closeIt", got)
	}
	if !s.takesOne(addr) {
		t.Error("a connection closed for its local address used up the Active period")
	}
	// Idle (gobgp would close it), unknown, or a state left over from a
	// connection gobgp already closed: wait for Active.
	for _, st := range []model.SessionState{model.StateIdle, "", model.StateOpenSent, model.StateOpenConfirm, model.StateEstablished} {
		s := newSpeaker(st, 65010)
		if got := s.acceptedOpen(peer, addr, openFrom(65001, "192.0.2.1"), tcpConn(t)); got != waitActive {
			t.Errorf("state %q: verdict %d, want waitActive", st, got)
		}
	}
}

// TestListenerWaitsForActive: a peer's connection that sent its OPEN
// while gobgp cannot take it (Idle) waits with the listener, marked so
// that the dialer holds off, and goes to gobgp once a state change makes
// the decision handOver; closeIt closes it.
func TestListenerWaitsForActive(t *testing.T) {
	parallel(t)
	l := newLab(t, 59)
	peerAddr := l.addr(9)
	var v atomic.Int32
	v.Store(int32(waitActive))
	asked := make(chan struct{}, 100)
	port := freePort(t)
	ch := make(chan net.Conn)
	ln, err := newListener(l.logger(), port, ch, nil, func(listenPeer, netip.Addr, []byte, *openConn) verdict {
		select {
		case asked <- struct{}{}:
		default:
		}
		return verdict(v.Load())
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.close)
	if err := ln.setPeers(map[netip.Addr]listenPeer{peerAddr: {name: "p"}}); err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, peerAddr, port)
	if _, err := c.Write(openMsg()); err != nil {
		t.Fatal(err)
	}
	<-asked
	eventually(t, sessionTimeout, "the connection is deferred", func() (bool, string) {
		return ln.deferring(peerAddr), "not deferring"
	})
	v.Store(int32(handOver))
	ln.stateChanged()
	select {
	case got := <-ch:
		got.Close()
	case <-time.After(sessionTimeout):
		t.Fatal("the deferred connection was not handed over after the state change")
	}
	if ln.deferring(peerAddr) {
		t.Error("still deferring after the hand-over")
	}

	v.Store(int32(closeIt))
	c2 := dialFrom(t, peerAddr, port)
	if _, err := c2.Write(openMsg()); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, c2, "a connection that lost the collision")
}
