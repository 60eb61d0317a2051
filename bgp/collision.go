package bgp

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/model"
)

// Connection collision (RFC 4271 6.8). Every gobgp peer is passive: gobgp
// takes the first connection handed to it while Active and closes every
// other one it is handed later, whoever dialed it. Two speakers that do so
// and dial each other at once each keep the connection they dialed and
// close the other's: both sessions fail and retry in step. So ovnbgp
// resolves the collision itself, before gobgp sees the second connection:
// when the listener has a peer's whole OPEN while ovnbgp's own connection
// to that peer is in the OPEN exchange, the connection dialed by the
// speaker with the higher BGP Identifier stays (RFC 6286 3: the higher AS
// number when the identifiers are equal). If that is ours, the accepted
// connection is closed; if it is the peer's, ours is closed and the
// accepted one waits until gobgp is Active again (after its idle hold),
// then goes to gobgp, which sends its OPEN on it.

// verdict is what the listener does with a peer's connection that sent
// its OPEN.
type verdict int

const (
	// handOver: give it to gobgp now.
	handOver verdict = iota
	// closeIt: ours won the collision.
	closeIt
	// waitActive: hold it until gobgp waits for a connection.
	waitActive
)

// openID is the BGP Identifier of a whole OPEN message (RFC 4271 4.2).
func openID(open []byte) netip.Addr {
	if len(open) < bgpHeaderLen+10 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(open[bgpHeaderLen+5 : bgpHeaderLen+9]))
}

// localWins reports whether the connection the local speaker dialed stays
// (RFC 4271 6.8, RFC 6286 3).
func localWins(localID, remoteID netip.Addr, localASN, remoteASN uint32) bool {
	l, r := binary.BigEndian.Uint32(localID.AsSlice()), binary.BigEndian.Uint32(remoteID.AsSlice())
	if l != r {
		return l > r
	}
	return localASN > remoteASN
}

// closedInCollision reports whether ovnbgp closed its own connection to
// resolve a collision since the session's last state change: gobgp's
// "read-failed" that follows is no error. The caller holds sess.mu.
func closedInCollision(ss *session) bool {
	return !ss.collidedAt.IsZero() && !ss.collidedAt.Before(ss.since)
}

// handed is the connection gobgp got last for a peer, and who dialed it.
type handed struct {
	c      *openConn
	dialed bool
}

// connGate serializes what the dialer and the listener hand to gobgp for
// each peer, so that both never think gobgp has none.
type connGate struct {
	mu   sync.Mutex
	live map[netip.Addr]handed
	// used is the peer's session.actives when a connection last went
	// to gobgp: gobgp takes one per Active period (it leaves Active
	// with it, or fails and comes back through Idle with a new event),
	// so a last event saying Active is stale once one went.
	used map[netip.Addr]uint64
}

// current is the connection gobgp got for addr while it is open; the
// caller holds mu.
func (g *connGate) current(addr netip.Addr) (handed, bool) {
	h, ok := g.live[addr]
	if !ok || h.c.closed.Load() {
		delete(g.live, addr)
		return handed{}, false
	}
	return h, true
}

// forget drops what was recorded for addr (its peer is deleted).
func (g *connGate) forget(addr netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, addr)
	delete(g.used, addr)
}

// takesOne reports whether gobgp waits for a connection for addr: the
// last event said Active and no connection went to gobgp since, and the
// sessions are not held (hold.go). The caller holds gate.mu.
func (s *Speaker) takesOne(addr netip.Addr) bool {
	if s.tr.held.Load() {
		return false
	}
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	ss := s.sess.all[addr]
	return ss != nil && ss.state == model.StateActive && ss.actives > s.tr.gate.used[addr]
}

// give records c as the connection gobgp gets for addr; the caller holds
// gate.mu.
func (s *Speaker) give(addr netip.Addr, c *openConn, dialed bool) {
	s.sess.mu.Lock()
	if ss := s.sess.all[addr]; ss != nil {
		s.tr.gate.used[addr] = ss.actives
	}
	s.sess.mu.Unlock()
	s.tr.gate.live[addr] = handed{c: c, dialed: dialed}
	c.admit = s.prefixAdmit(addr)
}

// claimDialed records c, dialed by ovnbgp, as gobgp's connection for addr,
// unless gobgp has another one open (then the caller closes c: gobgp sent
// no OPEN on it, so the peer sees no collision).
func (s *Speaker) claimDialed(addr netip.Addr, c *openConn) bool {
	s.tr.gate.mu.Lock()
	defer s.tr.gate.mu.Unlock()
	if _, ok := s.tr.gate.current(addr); ok || !s.takesOne(addr) {
		return false
	}
	s.give(addr, c, true)
	return true
}

// acceptedOpen decides what becomes of c, a connection from the peer p at
// addr that sent open, given gobgp's state for the peer and the connection
// gobgp has for it; c is recorded when it goes to gobgp.
func (s *Speaker) acceptedOpen(p listenPeer, addr netip.Addr, open []byte, c *openConn) verdict {
	if p.source.IsValid() && p.iface == "" {
		// gobgp closes such a connection and stays Active; ovnbgp
		// would count it as the one gobgp took.
		if local := addrOf(c.LocalAddr()); local != p.source {
			s.log.Info("bgp listener: closed a connection from the peer to an address that is not its sourceAddress",
				zap.String("peer", p.name), zap.Stringer("address", addr), zap.Stringer("local", local), zap.Stringer("sourceAddress", p.source))
			return closeIt
		}
	}
	s.tr.gate.mu.Lock()
	defer s.tr.gate.mu.Unlock()
	s.sess.mu.Lock()
	state := model.SessionState("")
	if ss := s.sess.all[addr]; ss != nil {
		state = ss.state
	}
	s.sess.mu.Unlock()

	cur, ok := s.tr.gate.current(addr)
	if ok && cur.dialed && state != model.StateEstablished {
		id := openID(open)
		if !id.IsValid() || localWins(s.global.RouterID, id, s.global.ASN, p.asn) {
			s.log.Debug("connection collision: ours stays, the peer's closed",
				zap.String("peer", p.name), zap.Stringer("address", addr), zap.Stringer("peerID", id))
			return closeIt
		}
		s.log.Debug("connection collision: the peer's stays (higher BGP Identifier), ours closed",
			zap.String("peer", p.name), zap.Stringer("address", addr), zap.Stringer("peerID", id))
		s.sess.mu.Lock()
		if ss := s.sess.all[addr]; ss != nil {
			ss.collidedAt = time.Now()
		}
		s.sess.mu.Unlock()
		cur.c.Close()
		delete(s.tr.gate.live, addr)
		return waitActive
	}
	switch {
	case ok:
		// gobgp is opening or Established on another connection the
		// peer dialed (or Established on ours): it closes this one.
		// Should its collision resolution keep this one instead, its
		// UPDATEs are wire-counted like any other (prefixlimit.go).
		c.admit = s.prefixAdmit(addr)
		return handOver
	case s.takesOne(addr):
		s.give(addr, c, false)
		return handOver
	}
	// Every connection gobgp takes is recorded here: with none open,
	// gobgp is Idle (where it closes what it is handed), or about to be
	// when the last event still says Active (one went to gobgp since),
	// OpenSent, OpenConfirm or Established (its connection just closed).
	// Wait for the next Active.
	return waitActive
}
