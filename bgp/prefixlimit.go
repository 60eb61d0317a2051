package bgp

import (
	"context"
	"encoding/binary"
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
// limit.hold), but its check counts the peer's whole Adj-RIB-In family on
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
// crossed 90%: the count may be there soon). While armed, it reads the count every limit.check and
// disarms below 80%. Reads while disarmed are thus at least 10% of
// maxPrefixes of announcements apart: O(1) amortized per path. gobgp applies a new limit in
// place and, when the count is over it already, takes the session down at
// once. The arming takes a worker wake-up and one gobgp call, and gobgp
// reads ahead: the wire count below (prefixAdmit) holds the UPDATE that
// would outrun it.
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
	// wire counts the NLRI of the UPDATEs the peer's connections pass
	// to gobgp, counted before gobgp reads them (prefixAdmit): never
	// decreases. wireTrigger is the wire count at which the bound reaches
	// armAt (MaxUint64 while armed or without a limit).
	wire        [2]atomic.Uint64
	wireTrigger [2]atomic.Uint64
	// wireAt is when wire last grew (UnixNano): a read that finds the
	// family quiet for leakAge knows gobgp has taken everything counted.
	wireAt [2]atomic.Int64

	// The rest is guarded by Speaker.mu.
	// leak is the part of wire - announced that will never get a path
	// event (paths gobgp takes without one, treat-as-withdraw, the UPDATE
	// that crossed a limit, a closed connection's tail): measured at a
	// read for a new session or after a quiet leakAge, and left out of
	// inflight from then on, so that it cannot grow for the whole life of
	// the peer (a ToR that sends our advertisements back adds one per
	// change) and arm the limit for good.
	leak [2]uint64
	// base is the exact count at the last read, baseAnn the announced
	// count and baseWire the wire count just before that read.
	base, baseAnn, baseWire [2]uint64
	// armed: gobgp has the prefix limit for the family.
	armed    [2]bool
	lastRead time.Time
	// readWire is the wire count at the last read, and settled whether
	// that read had nothing in flight (a new session, or the wire quiet
	// for leakAge): its count was then complete, and stays an upper
	// bound while the wire does not move (unmoved).
	readWire [2]uint64
	settled  [2]bool
}

// unmoved reports whether every family of p had a complete count at the
// last read and no NLRI came on the wire since: the Adj-RIB-In cannot
// have grown (paths without an event included), so an audit would read
// the same count; the caller holds mu.
func (b *prefixBound) unmoved(p config.Peer) bool {
	for _, f := range p.Families {
		fi := famIdx(f)
		if !b.settled[fi] || b.wire[fi].Load() != b.readWire[fi] {
			return false
		}
	}
	return true
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
		t, w := uint64(math.MaxUint64), uint64(math.MaxUint64)
		if p.MaxPrefixes > 0 && !b.armed[fi] {
			at := armAt(p.MaxPrefixes)
			t, w = b.baseAnn[fi], b.baseWire[fi]
			if b.base[fi] < at {
				t += at - b.base[fi]
				w += at - b.base[fi]
			}
		}
		b.trigger[fi].Store(t)
		b.wireTrigger[fi].Store(w)
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

// reenablePeer brings back a session that maxPrefixes took down.
func (s *Speaker) reenablePeer(addr netip.Addr) {
	s.sess.mu.Lock()
	if ss := s.sess.all[addr]; ss != nil {
		ss.reenable = nil
	}
	name := s.sess.byAddr[addr]
	s.sess.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.bgp.EnablePeer(ctx, &api.EnablePeerRequest{Address: addr.String()}); err != nil {
		s.log.Warn("re-enabling a peer after its prefix limit failed", zap.String("peer", name), zap.Error(err))
		return
	}
	s.log.Info("peer re-enabled after its prefix limit", zap.String("peer", name), zap.Stringer("address", addr))
}

// limitAudit is how often the exact count is read while disarmed (for the
// paths without events, see above), unless nothing came on the wire since
// a complete count (prefixBound.unmoved): an idle peer costs no walk.
const limitAudit = 30 * time.Second

// defaultPrefixHold is how long maxPrefixes keeps a session down.
const defaultPrefixHold = time.Minute

// defaultLimitCheck is how often an armed limit is checked.
const defaultLimitCheck = 5 * time.Second

// limitGuard is the prefix limit's worker (limitLoop, a task) and what
// it is told through. Its fields are set by init and then only
// read (hold, which tests set before any session, and the channels) or
// atomic; the worker alone receives from kick and armReq. Anyone may call
// wake; prefixAdmit (a connection's reader) sends armReq. The bounds it
// reads are kept by sessions (sessions.go) and, apart from their atomics,
// guarded by Speaker.mu, which the worker takes.
type limitGuard struct {
	// hold is how long a session torn down by maxPrefixes stays down
	// before ovnbgp re-enables it (FRR's "maximum-prefix N restart").
	hold time.Duration
	// check is how often, in nanoseconds, the worker checks an armed
	// prefix limit against the exact count.
	check atomic.Int64
	// kick wakes the worker; stop (closed by shutdown) ends it. armReq
	// asks it to arm a limit at once (prefixAdmit).
	kick   chan struct{}
	stop   chan struct{}
	armReq chan armRequest
	// reads and arms count the exact reads of Adj-RIB-In counts and the
	// prefix limit changes in gobgp; timers the worker's timer starts
	// (none while no peer has a limit), auditSkips the audits done
	// without a read (for tests).
	reads, arms, timers, auditSkips atomic.Uint64
}

// init sets g up, before the worker starts (New).
func (g *limitGuard) init() {
	g.hold = defaultPrefixHold
	g.kick, g.stop, g.armReq = make(chan struct{}, 1), make(chan struct{}), make(chan armRequest)
	g.check.Store(int64(defaultLimitCheck))
}

// wake wakes the limit worker; it never blocks.
func (g *limitGuard) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// limitLoop is the limit worker: it runs until stop is closed. It sleeps
// with no timer while no peer has a prefix limit (an idle node must not
// wake for nothing): a peer given one wakes it (addPeer, SetPeers), as do
// the journal (a bound reached 90%) and a new session. Otherwise its timer
// is for the earliest due exact read (limit.check while armed, limitAudit
// while not), which checkLimits returns.
func (s *Speaker) limitLoop(stop <-chan struct{}) {
	var t *time.Timer
	var due <-chan time.Time
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-s.limit.kick:
		case r := <-s.limit.armReq:
			s.armFromWire(r)
			close(r.done)
		case <-due:
		}
		next, ok := s.checkLimits(time.Now())
		if t != nil {
			t.Stop()
		}
		t, due = nil, nil
		if ok {
			s.limit.timers.Add(1)
			t = time.NewTimer(next)
			due = t.C
		}
	}
}

// checkLimits reads the exact counts of the peers that need it and arms
// or disarms their limits. It returns how long until the next read is due
// on the clock alone, and false when none is (no peer has a limit).
func (s *Speaker) checkLimits(now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, false
	}
	every := time.Duration(s.limit.check.Load())
	var next time.Duration
	any := false
	for _, name := range sortedKeys(s.peers) {
		p := s.peers[name]
		b := s.sess.bound(p.Address)
		if b == nil || p.MaxPrefixes == 0 {
			continue
		}
		audit := now.Sub(b.lastRead) >= limitAudit
		if audit && b.unmoved(p) {
			// Nothing came since a complete count: the audit is done
			// without a read (each walks the whole Adj-RIB-In).
			audit, b.lastRead = false, now
			s.limit.auditSkips.Add(1)
		}
		need := b.reread.Load() || audit
		for _, f := range p.Families {
			fi := famIdx(f)
			if b.armed[fi] && now.Sub(b.lastRead) >= every ||
				!b.armed[fi] && b.announced[fi].Load() >= b.trigger[fi].Load() {
				need = true
			}
		}
		if need {
			s.readLimit(p, b, now, [2]bool{})
		}
		// The next read of p on the clock: the audit, or the armed check.
		wait := limitAudit
		for _, f := range p.Families {
			if b.armed[famIdx(f)] {
				wait = every
			}
		}
		wait = max(wait-now.Sub(b.lastRead), 0)
		if !any || wait < next {
			next = wait
		}
		any = true
	}
	return next, any
}

// readLimit reads the exact Adj-RIB-In counts of p, restarts its bounds
// from them and arms or disarms its limits; the caller holds mu. wireReq
// are the families whose wire bound reached 90% (prefixAdmit holds an
// UPDATE for them).
//
// gobgp's count lags the wire: the NLRI counted on the wire but not yet
// seen as path events (inflight: the wire count less the announced count)
// may still be on their way into the Adj-RIB-In, so every decision is on
// the count plus inflight, and the wire bound restarts from there. Paths
// gobgp takes without an event, see above, and those treated as withdraw
// never get one: they count as in flight (erring on the side of arming)
// until a read for a new session, or one after the wire stood still for
// leakAge, sets them aside as leak.
func (s *Speaker) readLimit(p config.Peer, b *prefixBound, now time.Time, wireReq [2]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ann, wire [2]uint64
	var triggered [2]bool
	for fi := range ann {
		ann[fi] = b.announced[fi].Load()
		wire[fi] = b.wire[fi].Load()
		triggered[fi] = ann[fi] >= b.trigger[fi].Load()
	}
	// A read for a new session: nothing of the old connection is in
	// flight any more (the paths of the UPDATE that crossed a limit, for
	// one, never get an event).
	newSession := b.reread.Swap(false)
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
	s.limit.reads.Add(1)
	b.lastRead = now
	b.settled = [2]bool{}
	if err != nil {
		s.log.Warn("reading a peer's prefix counts failed", zap.String("peer", p.Name), zap.Error(err))
		if wireReq != [2]bool{} {
			// An UPDATE waits for the limit: arm without the count.
			s.armBlind(p, b, wireReq)
		}
		return
	}
	if !established {
		// gobgp counts nothing then, but may keep stale paths (graceful
		// restart): keep the bound; the session coming up reads again.
		return
	}
	old := b.armed
	var eff [2]uint64
	for _, f := range p.Families {
		fi := famIdx(f)
		pending := wire[fi] - min(wire[fi], ann[fi])
		quiet := now.Sub(time.Unix(0, b.wireAt[fi].Load())) >= leakAge
		if newSession || quiet {
			// Nothing is in flight: what has no event now never will.
			b.leak[fi] = pending
		}
		inflight := pending - min(pending, b.leak[fi])
		b.readWire[fi], b.settled[fi] = wire[fi], newSession || quiet
		eff[fi] = counts[fi] + inflight
		b.base[fi], b.baseAnn[fi], b.baseWire[fi] = counts[fi], ann[fi], wire[fi]-inflight
		if b.armed[fi] {
			b.armed[fi] = !belowDisarm(eff[fi], p.MaxPrefixes)
		} else {
			// If the bound reached 90% (not a read for a new session
			// or the audit), arm if the exact count is at 80% or more
			// (the armed band). A count below stays disarmed, with
			// its next wake-up at least 10% of maxPrefixes of
			// announcements away, so that replacements cannot make
			// every UPDATE cost a read. (A bound still at 90% over a
			// count below 80% is a flood under way: its paths found the
			// trigger reached and woke the worker again.)
			b.armed[fi] = (triggered[fi] || wireReq[fi]) && !belowDisarm(eff[fi], p.MaxPrefixes)
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
		s.limit.arms.Add(1)
		for _, f := range p.Families {
			fi := famIdx(f)
			if b.armed[fi] != old[fi] {
				s.log.Debug("prefix limit in gobgp changed", zap.String("peer", p.Name), zap.String("family", string(f)),
					zap.Bool("armed", b.armed[fi]), zap.Uint64("count", counts[fi]), zap.Uint64("inflight", eff[fi]-counts[fi]),
					zap.Bool("fromWire", wireReq[fi]), zap.Uint32("maxPrefixes", p.MaxPrefixes))
			}
		}
	}
	b.setTriggers(p)
}

// bound is the bound of the peer at addr (nil if none).
func (t *sessions) bound(addr netip.Addr) *prefixBound {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bounds[addr]
}

// The bound above is fed by gobgp's path events, which come after gobgp
// took an UPDATE's paths into the Adj-RIB-In. gobgp reads ahead of what it
// has processed, so a peer that sends large UPDATEs fast (16,000 NLRI in
// an extended message) can have its whole flood in the Adj-RIB-In before
// the worker wakes: 200,000 prefixes went in against a maxPrefixes of
// 100,000 (TestPrefixLimitFloodInBigUpdates, e2e TestHostileMaxPrefixes).
// So the connection also counts each UPDATE's NLRI before gobgp reads it
// (prefixAdmit, the wire count: an upper bound of announcements as well),
// and an UPDATE that takes the wire bound to armAt waits until the limit is
// armed in gobgp. gobgp processes UPDATEs in order, and everything before
// that UPDATE kept the count under 90%: the limit then holds to within
// one UPDATE. An armed limit is read exactly after limit.check and disarmed
// below 80% as above (replacements can arm it this way too). The wait is
// bounded (armWait), so that a stop of gobgp's reader, which waits for
// this Read while ovnbgp holds mu (SetPeers), is delayed, never stuck; the
// path-event bound stays the backstop then.

// armWait bounds how long an UPDATE waits for the limit to be armed.
const armWait = 2 * time.Second

// leakAge is how long a family's wire count must stand still before a read
// takes what is still without a path event as never coming (leak): gobgp
// takes an UPDATE within milliseconds once it has read it.
const leakAge = 5 * time.Second

// armRequest asks the limit worker to arm the limit of the peer at addr
// for the families in fams; done is closed when it is done.
type armRequest struct {
	addr netip.Addr
	fams [2]bool
	done chan struct{}
}

// prefixAdmit is the admit function of the connections of the peer at
// addr (openConn.admit): it counts each UPDATE's NLRI per family before
// gobgp reads it, and holds an UPDATE that takes the wire bound to armAt
// until the limit is armed (at most armWait, or until the connection
// closes or the speaker stops).
func (s *Speaker) prefixAdmit(addr netip.Addr) func(msg []byte, closing <-chan struct{}) {
	return func(msg []byte, closing <-chan struct{}) {
		b := s.sess.bound(addr)
		if b == nil {
			return
		}
		counts := updateNLRICount(msg)
		var need [2]bool
		for fi, n := range counts {
			if n == 0 {
				continue
			}
			b.wireAt[fi].Store(time.Now().UnixNano())
			if b.wire[fi].Add(n) >= b.wireTrigger[fi].Load() {
				need[fi] = true
			}
		}
		if !need[0] && !need[1] {
			return
		}
		r := armRequest{addr: addr, fams: need, done: make(chan struct{})}
		t := time.NewTimer(armWait)
		defer t.Stop()
		select {
		case s.limit.armReq <- r:
		case <-closing:
			return
		case <-s.limit.stop:
			return
		case <-t.C:
			return
		}
		select {
		case <-r.done:
		case <-closing:
		case <-s.limit.stop:
		case <-t.C:
			s.log.Warn("an UPDATE that takes the peer near maxPrefixes went to gobgp before the limit was armed", zap.Stringer("address", addr))
		}
	}
}

// armFromWire decides on r (the wire bound reached 90%) with an exact
// read: the limit is armed if the count plus what is in flight is at 80% or
// more.
func (s *Speaker) armFromWire(r armRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	for _, name := range sortedKeys(s.peers) {
		if p := s.peers[name]; p.Address == r.addr && p.MaxPrefixes > 0 {
			if b := s.sess.bound(r.addr); b != nil {
				s.readLimit(p, b, time.Now(), r.fams)
			}
			return
		}
	}
}

// armBlind arms the limit of p for fams without an exact count; the
// caller holds mu. The armed check reads the count after limit.check.
func (s *Speaker) armBlind(p config.Peer, b *prefixBound, fams [2]bool) {
	old := b.armed
	for _, f := range p.Families {
		if fi := famIdx(f); fams[fi] {
			b.armed[fi] = true
		}
	}
	if b.armed == old {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.bgp.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: s.apiPeer(p)}); err != nil {
		b.armed = old
		s.log.Warn("changing a peer's prefix limit in gobgp failed", zap.String("peer", p.Name), zap.Error(err))
		return
	}
	s.limit.arms.Add(1)
	b.setTriggers(p)
}

// updateNLRICount counts the prefixes an UPDATE announces, per family
// (IPv4 and IPv6 unicast: the NLRI field and MP_REACH_NLRI); other
// messages count nothing. It stops at anything malformed (gobgp deals with
// that); it never undercounts a well-formed UPDATE.
func updateNLRICount(msg []byte) [2]uint64 {
	var n [2]uint64
	if len(msg) < bgpHeaderLen+4 || msg[18] != 2 {
		return n
	}
	body := msg[bgpHeaderLen:]
	wlen := int(binary.BigEndian.Uint16(body))
	if 2+wlen+2 > len(body) {
		return n
	}
	alen := int(binary.BigEndian.Uint16(body[2+wlen:]))
	start := 4 + wlen
	if start+alen > len(body) {
		return n
	}
	attrs := body[start : start+alen]
	n[0] = countPrefixes(body[start+alen:], 32)
	for len(attrs) >= 3 {
		flags, typ := attrs[0], attrs[1]
		hl, vlen := 3, int(attrs[2])
		if flags&0x10 != 0 {
			if len(attrs) < 4 {
				break
			}
			hl, vlen = 4, int(binary.BigEndian.Uint16(attrs[2:4]))
		}
		if hl+vlen > len(attrs) {
			break
		}
		if v := attrs[hl : hl+vlen]; typ == 14 && len(v) >= 5 && v[2] == 1 {
			// MP_REACH_NLRI: AFI, SAFI, next hop length and next hop,
			// a reserved octet, NLRI
			afi := binary.BigEndian.Uint16(v)
			if nh := int(v[3]); 5+nh <= len(v) && (afi == 1 || afi == 2) {
				fi, bits := 0, 32
				if afi == 2 {
					fi, bits = 1, 128
				}
				n[fi] += countPrefixes(v[5+nh:], bits)
			}
		}
		attrs = attrs[hl+vlen:]
	}
	return n
}

// countPrefixes counts the prefixes of an NLRI field (length in bits, then
// the octets), up to the first one longer than maxBits or cut short.
func countPrefixes(b []byte, maxBits int) uint64 {
	var n uint64
	for len(b) > 0 {
		bits := int(b[0])
		if bits > maxBits || 1+(bits+7)/8 > len(b) {
			break
		}
		b = b[1+(bits+7)/8:]
		n++
	}
	return n
}
