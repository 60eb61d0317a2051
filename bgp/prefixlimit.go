package bgp

import (
	"context"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
)

// gobgp enforces maxPrefixes (Cease, then ovnbgp's re-enable after
// prefixHold), but its check counts the peer's whole Adj-RIB-In family on
// every UPDATE (peer.isPrefixLimit walks it): a table transfer of N
// prefixes costs O(N^2) with a limit configured, nothing without one. So
// ovnbgp configures the limit in gobgp ("arms" it) only while the peer's
// count per family may be near maxPrefixes.
//
// Per peer and family, prefixBound keeps an upper bound of the Adj-RIB-In
// count that costs O(1) per path: the exact count at the last read (a walk,
// done rarely) plus every NLRI announced since (withdrawals are not
// subtracted and a replacement counts as new, so the bound never falls
// below the real count, whatever the peer sends). When the bound reaches
// armAt (90%), the limit worker reads the exact count, restarts the bound
// from it and arms the limit if the count is at 80% or more (the bound
// crossed 90%: the count may be there soon). While armed, it reads the count every limitCheck and
// disarms below 80%. Reads while disarmed are thus at least 10% of
// maxPrefixes of announcements apart: O(1) amortized per path. gobgp applies a new limit in
// place and, when the count is over it already, takes the session down at
// once: the limit holds except for the arming latency (a worker wake-up
// and one gobgp call), during which a flood can pass maxPrefixes by what
// arrives meanwhile; the 10% headroom normally absorbs it.
//
// Paths gobgp rejects for an AS loop (our ASN more than allowOwnAs times,
// or our router ID as ORIGINATOR_ID) stay in the Adj-RIB-In without a path
// event, so the bound does not see them: an exact read every limitAudit
// catches those.

// prefixBound is the Adj-RIB-In upper bound of one peer, per family.
type prefixBound struct {
	// announced counts the NLRI the peer announced (never decreases);
	// journalPaths adds to it.
	announced [2]atomic.Uint64
	// trigger is the announced count at which the bound reaches armAt:
	// journalPaths wakes the worker then. MaxUint64 while armed or
	// without a limit.
	trigger [2]atomic.Uint64
	// reread asks for an exact read (the session came up).
	reread atomic.Bool

	// The rest is guarded by Speaker.mu.
	// base is the exact count at the last read, baseAnn the announced
	// count just before that read.
	base, baseAnn [2]uint64
	// armed: gobgp has the prefix limit for the family.
	armed    [2]bool
	lastRead time.Time
}

func newPrefixBound(p config.Peer) *prefixBound {
	b := &prefixBound{}
	b.setTriggers(p)
	return b
}

// famIdx indexes prefixBound's arrays.
func famIdx(f config.Family) int {
	if f == config.IPv6 {
		return 1
	}
	return 0
}

func pathFamIdx(p *apiutil.Path) int {
	if p.Family == bgppkt.RF_IPv6_UC {
		return 1
	}
	return 0
}

// bound is the upper bound of the count of family fi; the caller holds mu.
func (b *prefixBound) bound(fi int) uint64 {
	return b.base[fi] + b.announced[fi].Load() - b.baseAnn[fi]
}

// armAt is 90% of max, rounded up.
func armAt(max uint32) uint64 { return (uint64(max)*9 + 9) / 10 }

// belowDisarm reports whether an exact count is under 80% of max.
func belowDisarm(count uint64, max uint32) bool { return count*10 < uint64(max)*8 }

// setTriggers recomputes the wake-up points; the caller holds mu.
func (b *prefixBound) setTriggers(p config.Peer) {
	for fi := range b.trigger {
		t := uint64(math.MaxUint64)
		if p.MaxPrefixes > 0 && !b.armed[fi] {
			at := armAt(p.MaxPrefixes)
			t = b.baseAnn[fi]
			if b.base[fi] < at {
				t += at - b.base[fi]
			}
		}
		b.trigger[fi].Store(t)
	}
}

// rearm sets armed from the bound alone (SetPeers changed maxPrefixes): the
// bound never under-counts, so a limit it keeps off cannot be near; the
// caller holds mu and applies the result.
func (b *prefixBound) rearm(p config.Peer) {
	for _, f := range p.Families {
		fi := famIdx(f)
		b.armed[fi] = p.MaxPrefixes > 0 && b.bound(fi) >= armAt(p.MaxPrefixes)
	}
}

// limitAudit is how often the exact count is read while disarmed (for the
// paths without events, see above).
const limitAudit = 30 * time.Second

// defaultLimitCheck is how often an armed limit is checked.
const defaultLimitCheck = 5 * time.Second

// wakeLimits wakes the limit worker; it never blocks.
func (s *Speaker) wakeLimits() {
	select {
	case s.limitWake <- struct{}{}:
	default:
	}
}

// limitLoop is the limit worker: it runs until stop is closed.
func (s *Speaker) limitLoop(stop <-chan struct{}) {
	for {
		t := time.NewTimer(time.Duration(s.limitCheck.Load()))
		select {
		case <-stop:
			t.Stop()
			return
		case <-s.limitWake:
			t.Stop()
		case <-t.C:
		}
		s.checkLimits()
	}
}

// checkLimits reads the exact counts of the peers that need it and arms
// or disarms their limits.
func (s *Speaker) checkLimits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	now := time.Now()
	every := time.Duration(s.limitCheck.Load())
	for _, name := range sortedKeys(s.peers) {
		p := s.peers[name]
		s.st.Lock()
		b := s.bounds[p.Address]
		s.st.Unlock()
		if b == nil || p.MaxPrefixes == 0 {
			continue
		}
		need := b.reread.Load() || now.Sub(b.lastRead) >= limitAudit
		for _, f := range p.Families {
			fi := famIdx(f)
			if b.armed[fi] && now.Sub(b.lastRead) >= every ||
				!b.armed[fi] && b.announced[fi].Load() >= b.trigger[fi].Load() {
				need = true
			}
		}
		if need {
			s.readLimit(p, b, now)
		}
	}
}

// readLimit reads the exact Adj-RIB-In counts of p, restarts its bounds
// from them and arms or disarms its limits; the caller holds mu.
func (s *Speaker) readLimit(p config.Peer, b *prefixBound, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ann [2]uint64
	var triggered [2]bool
	for fi := range ann {
		ann[fi] = b.announced[fi].Load()
		triggered[fi] = ann[fi] >= b.trigger[fi].Load()
	}
	b.reread.Store(false)
	var counts [2]uint64
	established := false
	err := s.bgp.ListPeer(ctx, &api.ListPeerRequest{Address: p.Address.String()}, func(ap *api.Peer) {
		established = ap.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
		for _, as := range ap.GetAfiSafis() {
			fi := 0
			if as.GetState().GetFamily().GetAfi() == api.Family_AFI_IP6 {
				fi = 1
			}
			counts[fi] = as.GetState().GetReceived()
		}
	})
	s.limitReads.Add(1)
	b.lastRead = now
	if err != nil {
		s.log.Warn("reading a peer's prefix counts failed", zap.String("peer", p.Name), zap.Error(err))
		return
	}
	if !established {
		// gobgp counts nothing then, but may keep stale paths (graceful
		// restart): keep the bound; the session coming up reads again.
		return
	}
	old := b.armed
	for _, f := range p.Families {
		fi := famIdx(f)
		b.base[fi], b.baseAnn[fi] = counts[fi], ann[fi]
		if b.armed[fi] {
			b.armed[fi] = !belowDisarm(counts[fi], p.MaxPrefixes)
		} else {
			// If the bound reached 90% (not a read for a new session
			// or the audit), arm if the exact count is at 80% or more
			// (the armed band). A count below stays disarmed, with
			// its next wake-up at least 10% of maxPrefixes of
			// announcements away, so that replacements cannot make
			// every UPDATE cost a read. (A bound still at 90% over a
			// count below 80% is a flood under way: its paths found the
			// trigger reached and woke the worker again.)
			b.armed[fi] = triggered[fi] && !belowDisarm(counts[fi], p.MaxPrefixes)
		}
	}
	if b.armed != old {
		if _, err := s.bgp.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: s.apiPeer(p)}); err != nil {
			// Keep the old state; the trigger (or the armed check)
			// tries again at the next tick.
			b.armed = old
			s.log.Warn("changing a peer's prefix limit in gobgp failed", zap.String("peer", p.Name), zap.Error(err))
			return
		}
		s.limitArms.Add(1)
		for _, f := range p.Families {
			fi := famIdx(f)
			if b.armed[fi] != old[fi] {
				s.log.Debug("prefix limit in gobgp changed", zap.String("peer", p.Name), zap.String("family", string(f)),
					zap.Bool("armed", b.armed[fi]), zap.Uint64("count", counts[fi]), zap.Uint32("maxPrefixes", p.MaxPrefixes))
			}
		}
	}
	b.setTriggers(p)
}

// boundOf is the bound of the peer at addr (nil if none).
func (s *Speaker) boundOf(addr netip.Addr) *prefixBound {
	s.st.Lock()
	defer s.st.Unlock()
	return s.bounds[addr]
}
