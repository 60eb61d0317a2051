package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/model"
)

// gobgp v4.8.0 sends a new session its table from the server's
// Established handler, and only after that handler returns does the peer's
// FSM state say Established (fsmHandler.loop: callback, then
// fsm.state.Store). A path added, a path withdrawn or a soft reset made in
// that window is skipped for the peer (needToAdvertise reads the old
// state), and nothing sends it later: the peer misses a route, or keeps one
// the node no longer has, until the next change of that prefix. The window
// is microseconds wide; a change that lands at session start (a daemon
// starting with its sessions, an NB change while a session comes up) can
// hit it (TestSetPeers did in CI).
//
// Worse, an operation that arrives while the handler runs waits for it
// (the handler holds gobgp's shared lock) and then runs at once, inside
// the window.
//
// ovnbgp repairs it: once a new session has been up for sessionSettle, if
// a path was added or withdrawn or an export policy re-evaluated across the
// window (the operation ended after the session-up event and began at most
// sessionWindow after it), the peer gets a soft reset OUT (gobgp re-sends
// what the export policy selects). A path that left the RIB in such an
// operation is put back, selected by no peer, and removed again, so that
// its withdrawal goes out (gobgp sends a withdrawal to every Established
// peer).
const (
	sessionSettle = time.Second
	// sessionWindow bounds how long after the session-up event gobgp
	// may still not have stored the Established state (microseconds,
	// unless its goroutine is preempted right there).
	sessionWindow = 100 * time.Millisecond
	// opsKeep bounds how long an operation is remembered for a repair.
	opsKeep = 10 * time.Second
)

// exportOp is one call that changed the RIB or re-ran an export policy:
// when it began and ended, and the prefixes whose path it withdrew.
type exportOp struct {
	start, end time.Time
	gone       []netip.Prefix
}

// exportChanged records, under mu, an operation that began at start and
// ends now; gone are the prefixes whose local path it withdrew.
func (s *Speaker) exportChanged(start time.Time, gone []netip.Prefix) {
	a := &s.adv
	now := time.Now()
	keep := a.ops[:0]
	for _, op := range a.ops {
		if now.Sub(op.end) <= opsKeep {
			keep = append(keep, op)
		}
	}
	a.ops = append(keep, exportOp{start: start, end: now, gone: gone})
}

// sessionUp schedules the repair of a session that came up at ts (gobgp's
// event time, taken in the handler). since identifies the session: a newer
// one gets its own repair.
func (s *Speaker) sessionUp(peer string, addr netip.Addr, ts, since time.Time) {
	s.tasks.after(sessionSettle, func() { s.repairSessionStart(peer, addr, ts, since) })
}

// repairSessionStart re-sends the peer its table when an operation may
// have fallen in the window of its session that came up at ts, and
// withdraws again what such an operation withdrew.
func (s *Speaker) repairSessionStart(peer string, addr netip.Addr, ts, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	// Counted when done (after repairs): a test that sees the check
	// also sees its outcome.
	defer s.repairChecks.Add(1)
	if p, ok := s.peers[peer]; !ok || p.Address != addr {
		return
	}
	s.sess.mu.Lock()
	ss := s.sess.all[addr]
	same := ss != nil && ss.state == model.StateEstablished && ss.since.Equal(since)
	s.sess.mu.Unlock()
	if !same {
		return
	}
	a := &s.adv
	raced := false
	seen := map[netip.Prefix]bool{}
	var back []netip.Prefix
	for _, op := range a.ops {
		if op.end.Before(ts) || op.start.After(ts.Add(sessionWindow)) {
			continue
		}
		raced = true
		// Still out of the RIB and in no peer's selection: put back, the
		// path is filtered for every peer.
		for _, p := range op.gone {
			if _, in := a.rib[p]; in || seen[p] || s.selected(p) {
				continue
			}
			seen[p] = true
			back = append(back, p)
		}
	}
	if !raced {
		return
	}
	slices.SortFunc(back, model.ComparePrefix)
	ctx := context.Background()
	rep := model.SessionRepair{Peer: peer, At: time.Now()}
	var errs []error
	if err := s.addPaths(back); err != nil {
		errs = append(errs, fmt.Errorf("put withdrawn paths back: %w", err))
	}
	for _, p := range back {
		if _, in := a.rib[p]; in {
			rep.PutBack++
		}
	}
	err := s.bgp.ResetPeer(ctx, &api.ResetPeerRequest{
		Address:   addr.String(),
		Soft:      true,
		Direction: api.ResetPeerRequest_DIRECTION_OUT,
	})
	if err != nil {
		// The next change of the peer's selection retries it.
		a.resets[peer] = true
		errs = append(errs, fmt.Errorf("soft reset out: %w", err))
	} else {
		rep.SoftReset = true
	}
	var again []netip.Prefix
	for _, p := range back {
		if _, in := a.rib[p]; in {
			again = append(again, p)
		}
	}
	if err := s.deletePaths(again); err != nil {
		errs = append(errs, fmt.Errorf("remove the paths put back: %w", err))
	}
	for _, p := range again {
		if _, in := a.rib[p]; !in {
			rep.Removed++
		}
	}
	fields := []zap.Field{zap.String("peer", peer), zap.Int("pathsPutBack", rep.PutBack),
		zap.Bool("softResetOut", rep.SoftReset), zap.Int("pathsRemovedAgain", rep.Removed)}
	if err := errors.Join(errs...); err != nil {
		rep.Error = err.Error()
		s.log.Warn("session start repair: a change may have raced the new session; its table was sent again, with errors",
			append(fields, zap.Error(err))...)
	} else {
		s.log.Info("session start repair: a change may have raced the new session; its table was sent again", fields...)
	}
	s.lastRepair.Store(&rep)
	s.repairs.Add(1)
}

// SessionRepairs returns the session-start repair counts and the latest
// repair.
func (s *Speaker) SessionRepairs() model.SessionRepairs {
	return model.SessionRepairs{Checks: s.repairChecks.Load(), Repairs: s.repairs.Load(), Last: s.lastRepair.Load()}
}

// selected reports whether some peer's export statement holds p.
func (s *Speaker) selected(p netip.Prefix) bool {
	for _, g := range s.adv.groups {
		if _, ok := g.prefixes[p]; ok {
			return true
		}
	}
	return false
}
