package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// BFD (RFC 5880, single-hop RFC 5881) is gobgp v4.8.0's own: a peer whose
// gobgp config carries Bfd gets a BFD session (UDP 3784), and when that
// session goes down gobgp hard-resets the BGP session (ResetPeer, Cease/
// Administrative Reset "BFD is down"), which withdraws everything learned
// from the peer at once.
//
// Two traps of gobgp's BFD with FRR 8.4 (docs/architecture.md, "BFD"):
//
//   - A peer added with BFD flaps its first session: FRR's bgpd installs
//     its BFD session, then re-installs it with the session's source
//     address once BGP is Established; bfdd signals AdminDown for the old
//     one, and gobgp resets the BGP session on AdminDown (RFC 5882 3.2
//     says take no action). So ovnbgp adds every peer without BFD, turns
//     BFD on (UpdatePeer, no session reset) once the session is
//     Established, and off again when it leaves Established: every
//     session, the first and each reconnect, comes up the same way.
//   - gobgp resets the session when the peer signals AdminDown (FRR: the
//     BFD profile's or peer's "shutdown"), which RFC 5882 3.2 forbids. gobgp
//     has no option for it, so ovnbgp stands between gobgp's BFD and the
//     reset (bfdResetter, set by reflection as handoffTo does): a reset
//     asked by BFD goes through only when ovnbgp's own BFD detection fired
//     (gobgp's "Expired"), not when the peer signalled Down or AdminDown
//     (gobgp's "Remote peer signaled BFD down", the same for both). A peer
//     whose BFD detected a failure takes its BGP session down itself (FRR
//     does), and the node's own detection covers the rest.
const (
	// bfdPoll is how often the BFD states are read (ListBfdPeer) while a
	// BFD session runs: for `peers`' since and the state-change log. The
	// failover itself does not wait for it: gobgp resets the session.
	bfdPoll = 100 * time.Millisecond
	// bfdCommunication is what gobgp's BFD sends with the Cease.
	bfdCommunication = "BFD is down"
)

// bfdConfig is p's BFD as gobgp wants it (intervals in microseconds).
func bfdConfig(p config.Peer) *api.BfdPeerConfig {
	return &api.BfdPeerConfig{
		Enabled:                  true,
		DesiredMinimumTxInterval: uint32(p.BFD.MinTx / time.Microsecond),
		RequiredMinimumReceive:   uint32(p.BFD.MinRx / time.Microsecond),
		DetectionMultiplier:      uint32(p.BFD.Multiplier),
	}
}

// bfdResetter is what gobgp's BFD calls to reset a session (bfdTo): it
// passes the call on to gobgp unless keep says the session stays.
type bfdResetter struct {
	srv  *server.BgpServer
	keep func(addr string) bool
}

// ResetPeer is the method gobgp's BFD calls (its peerState interface).
func (r bfdResetter) ResetPeer(ctx context.Context, req *api.ResetPeerRequest) error {
	if req.GetCommunication() == bfdCommunication && r.keep(req.GetAddress()) {
		return nil
	}
	return r.srv.ResetPeer(ctx, req)
}

// bfdKeepsSession reports whether a reset asked by gobgp's BFD for the
// peer at addr must not happen: its BFD went down because the peer
// signalled Down or AdminDown (onBFDDown, logged right before the call),
// not by ovnbgp's own detection.
func (s *Speaker) bfdKeepsSession(addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	s.sess.mu.Lock()
	ss := s.sess.all[a.Unmap()]
	keep := ss != nil && !ss.bfdDownAt.IsZero() && !ss.bfdExpired && time.Since(ss.bfdDownAt) < time.Second
	name := s.sess.byAddr[a.Unmap()]
	s.sess.mu.Unlock()
	if keep {
		s.log.Info("bfd: the peer signalled Down or AdminDown: session kept (RFC 5882 3.2)", zap.String("peer", name))
	}
	return keep
}

// bfdRunning reports whether BFD is on in gobgp for the peer at addr.
func (t *sessions) bfdRunning(addr netip.Addr) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ss := t.all[addr]
	return ss != nil && ss.bfdOn
}

// switchBFD turns BFD on in gobgp for the peer at addr whose session came
// up at since (if it is still that session and the peer has BFD enabled),
// or off when its session is no longer Established. It runs on its own
// goroutine: gobgp's event callback must not call gobgp.
func (s *Speaker) switchBFD(addr netip.Addr, since time.Time, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.sess.mu.Lock()
	name := s.sess.byAddr[addr]
	ss := s.sess.all[addr]
	s.sess.mu.Unlock()
	p, ok := s.peers[name]
	if !ok || p.Address != addr || ss == nil {
		return
	}
	s.sess.mu.Lock()
	want := on && p.BFD.Enabled && ss.state == model.StateEstablished && ss.since.Equal(since)
	if !on && ss.state == model.StateEstablished {
		want = ss.bfdOn // up again meanwhile: leave it
	}
	if ss.bfdOn == want {
		s.sess.mu.Unlock()
		return
	}
	ss.bfdOn = want
	now := time.Now()
	if want {
		ss.bfd, ss.bfdSince = model.BFDDown, now
	} else if ss.bfd != model.BFDDown {
		ss.bfd, ss.bfdSince = model.BFDDown, now
	}
	s.sess.mu.Unlock()
	if want {
		s.bfd.wake()
	}
	if _, err := s.bgp.UpdatePeer(context.Background(), &api.UpdatePeerRequest{Peer: s.apiPeer(p)}); err != nil {
		s.sess.mu.Lock()
		ss.bfdOn = !want
		s.sess.mu.Unlock()
		if !want {
			s.bfd.wake()
		}
		s.log.Warn("switching BFD failed", zap.String("peer", name), zap.Bool("on", want), zap.Error(err))
		return
	}
	if want {
		s.log.Info("bfd started: the session is established", zap.String("peer", name))
	} else {
		s.log.Debug("bfd stopped until the session is established again", zap.String("peer", name))
	}
}

// onBFDDown records that gobgp's BFD for the peer at addr went down and is
// about to reset the session: expired (no packet within the detection
// time) or signalled by the peer (Down or AdminDown: gobgp does not say
// which). It is called from gobgp's log records, before the reset.
func (t *sessions) onBFDDown(addr string, expired bool) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	a = a.Unmap()
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ss := t.all[a]
	p, ok := t.learnFrom[a]
	if ss == nil || !ok || !ss.bfdOn {
		return
	}
	why := fmt.Sprintf("BFD down: no BFD packet from the peer within the detection time (%d × %s): session reset",
		p.BFD.Multiplier, p.BFD.MinRx)
	if !expired {
		why = "BFD down: the peer signalled BFD Down or AdminDown: session kept (RFC 5882 3.2; a peer whose BFD detected a failure resets the session itself)"
	}
	ss.bfdDown, ss.bfdDownAt, ss.bfdExpired = why, now, expired
	ss.lastError, ss.lastErrorAt = why, now
	ss.bfd, ss.bfdSince = model.BFDDown, now
}

// bfdLoop reads gobgp's BFD states every bfdPoll while a BFD session runs,
// keeps when each entered its state and logs the changes. While no session
// runs BFD it sleeps until switchBFD or SetPeers wakes it: an idle node with many
// routes must not wake ten times a second for nothing.
func (s *Speaker) bfdLoop(stop <-chan struct{}) {
	for {
		s.bfd.idle.Add(1)
		select {
		case <-stop:
			return
		case <-s.bfd.kick:
		}
		t := time.NewTicker(bfdPoll)
		for running := true; running; {
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
				running = s.pollBFD()
			}
		}
		t.Stop()
	}
}

// bfdGuard is BFD's worker (bfdLoop, a task) and what it is told
// through. Its channels are set by init and never change; the
// worker alone receives from kick; anyone may call wake. The per-session
// BFD state it polls for is kept by sessions (sessions.go), under its mu.
type bfdGuard struct {
	// stop (closed by shutdown) ends bfdLoop; kick wakes it when a
	// session turns BFD on.
	stop, kick chan struct{}
	// polls counts bfdLoop's reads of gobgp's BFD states, idle the
	// times it went idle: no session runs BFD (for tests).
	polls, idle atomic.Uint64
}

// init sets g up, before the worker starts (New).
func (g *bfdGuard) init() { g.stop, g.kick = make(chan struct{}), make(chan struct{}, 1) }

// wake has bfdLoop poll: a session turned BFD on. A wake already pending
// is enough.
func (g *bfdGuard) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// pollBFD reads gobgp's BFD states once and records the changes. It
// returns false when no session runs BFD (nothing was read).
func (s *Speaker) pollBFD() bool {
	s.bfd.polls.Add(1)
	if !s.sess.anyBFD() {
		return false
	}
	states := map[netip.Addr]model.BFDState{}
	s.bgp.ListBfdPeer(context.Background(), func(addr string, st *api.BfdPeerState) {
		if a, err := netip.ParseAddr(addr); err == nil {
			states[a.Unmap()] = bfdState(st.GetSessionState())
		}
	})
	now := time.Now()
	type change struct {
		peer     string
		from, to model.BFDState
	}
	var changes []change
	s.sess.mu.Lock()
	for addr, ss := range s.sess.all {
		st, ok := states[addr]
		if !ss.bfdOn || !ok || st == ss.bfd {
			continue
		}
		changes = append(changes, change{s.sess.byAddr[addr], ss.bfd, st})
		ss.bfd, ss.bfdSince = st, now
	}
	s.sess.mu.Unlock()
	for _, c := range changes {
		s.log.Info("bfd state changed", zap.String("peer", c.peer), zap.String("from", string(c.from)), zap.String("state", string(c.to)))
	}
	return true
}

// anyBFD reports whether a session runs BFD.
func (t *sessions) anyBFD() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ss := range t.all {
		if ss.bfdOn {
			return true
		}
	}
	return false
}

// bfdStatus is the BFD part of a peer's status; the caller holds sess.mu.
func bfdStatus(c config.Peer, ss *session) *model.BFDStatus {
	if !c.BFD.Enabled {
		return nil
	}
	b := &model.BFDStatus{State: model.BFDDown, DetectTimeMs: (time.Duration(c.BFD.Multiplier) * c.BFD.MinRx).Milliseconds()}
	if ss != nil {
		b.Running = ss.bfdOn
		if ss.bfd != "" {
			b.State = ss.bfd
		}
		b.Since = ss.bfdSince
		if b.Since.IsZero() {
			b.Since = ss.since
		}
	}
	return b
}

func bfdState(st api.BfdSessionState) model.BFDState {
	switch st {
	case api.BfdSessionState_BFD_SESSION_STATE_UP:
		return model.BFDUp
	case api.BfdSessionState_BFD_SESSION_STATE_INIT:
		return model.BFDInit
	case api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:
		return model.BFDAdminDown
	}
	return model.BFDDown
}
