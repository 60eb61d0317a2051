package bgp

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// transport is the TCP side of every session: ovnbgp's listener
// (listener.go), its dialer (dialer.go), the gate that resolves collisions
// between them (collision.go), and the hold that keeps new sessions from
// starting (hold.go). The listener and the dialer hand gobgp, whose peers
// are all passive, the connections it takes through handoff.
//
// Its locks are its parts' (holdMu, dial.mu, gate.mu, ln.mu, in that
// order: the Speaker's lock order). The listener and the dialer own their
// goroutines and are told what to do under Speaker.mu (SetPeers: setPeers,
// remove; shutdown: close); the gate is entered by their goroutines
// (dialReady, claimDialed, acceptedOpen) and by deletePeer (forget); the
// hold by HoldSessions and ReleaseSessions (the daemon, and the hold's
// bound, a task).
type transport struct {
	// ln is ovnbgp's BGP listener (nil with listenPort -1); it sends the
	// connections that start with an OPEN to gobgp through handoff.
	ln      *listener
	handoff chan net.Conn
	// dial dials the peers that are not passive and hands the
	// connections to gobgp through handoff (see dialer.go): every peer is
	// passive in gobgp.
	dial *dialer
	// gate records the connection gobgp got last per peer (collision.go).
	gate connGate
	// held: no new session may start (hold.go); holdTimer ends the hold
	// at its bound. holdMu guards holdTimer.
	held      atomic.Bool
	holdMu    sync.Mutex
	holdTimer *task
}

// wake tells the dialer (for each of addrs) and the listener's waiting
// connections that gobgp's state for a peer changed, or the hold ended:
// what waits for gobgp to take a connection looks again.
func (t *transport) wake(addrs ...netip.Addr) {
	if t.dial != nil { // nil only in a speaker a unit test builds by hand
		for _, a := range addrs {
			t.dial.stateChanged(a)
		}
	}
	if t.ln != nil {
		t.ln.stateChanged()
	}
}

// deferring reports whether the listener holds a connection from the
// peer at addr that waits for gobgp (then the dialer does not dial).
func (t *transport) deferring(addr netip.Addr) bool {
	return t.ln != nil && t.ln.deferring(addr)
}

// close ends the dialer and the listener, and waits for their goroutines;
// shutdown calls it, under Speaker.mu (none of them takes it).
func (t *transport) close() {
	t.dial.close()
	if t.ln != nil {
		t.ln.close()
	}
}
