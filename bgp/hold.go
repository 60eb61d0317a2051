package bgp

import (
	"time"

	"go.uber.org/zap"
)

// Sessions held until the first table is in.
//
// With graceful restart every session of ovnbgp opens as a restarting
// speaker (peers.go), and gobgp sends a peer the whole table, then
// End-of-RIB for each family, as soon as every peer has sent its own
// End-of-RIB. Over a fast link that is a few milliseconds after the
// peers are added: sooner than the daemon's first Apply, which follows
// SetPeers. A peer that kept our routes stale then gets an End-of-RIB with
// an empty table, drops every stale route at once and learns them again
// when the Apply lands: a withdraw and re-announce of every route on every
// restart (TestAdvertRestartFRR saw it). So the daemon holds the sessions
// while it gives a new speaker its peers and its first table, and releases
// them once the table is in the RIB: gobgp's End-of-RIB then follows the
// whole table.

// HoldSessions keeps new sessions from starting until ReleaseSessions, or
// for at most bound: the dialer does not dial, and the listener keeps the
// connections peers open (as it does while gobgp is not Active). Sessions
// that are up are not touched. Call it before SetPeers adds the peers.
func (s *Speaker) HoldSessions(bound time.Duration) {
	s.tr.holdMu.Lock()
	defer s.tr.holdMu.Unlock()
	s.tr.holdTimer.stop()
	s.tr.held.Store(true)
	s.tr.holdTimer = s.tasks.after(bound, func() {
		if s.tr.held.Load() {
			s.log.Warn("bgp sessions held longer than their bound: starting them", zap.Duration("bound", bound))
		}
		s.ReleaseSessions()
	})
}

// ReleaseSessions lets the sessions HoldSessions held start now. It is
// idempotent, and a no-op without a hold.
func (s *Speaker) ReleaseSessions() {
	s.tr.holdMu.Lock()
	s.tr.holdTimer.stop()
	s.tr.holdTimer = nil
	was := s.tr.held.Swap(false)
	s.tr.holdMu.Unlock()
	if !was {
		return
	}
	addrs := s.sess.addrs()
	// Wake what waits for gobgp to take a connection (takesOne).
	s.tr.wake(addrs...)
	s.log.Debug("bgp sessions released", zap.Int("peers", len(addrs)))
}
