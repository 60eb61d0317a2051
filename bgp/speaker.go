package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// The global policies (see doc.go): exportPolicy holds every per-peer
// statement; importPolicy accepts only our own local paths.
const (
	exportPolicy = "ovnbgp-export"
	importPolicy = "ovnbgp-import"
)

// Speaker is an embedded gobgp speaker driven in ovnbgp's own types. Its
// methods may be called from any goroutine; mutations (SetPeers, Apply, Stop)
// are serialized.
//
// It is made of parts, each with one owner (its type's comment says who
// may call it):
//
//   - the management part, in Speaker itself: mu serializes SetPeers,
//     Apply, the BMP changes, the prefix limit's decisions and Stop, and
//     guards the configured peers, the advertisements (adv: advState,
//     advertise.go) and the BMP stations, as gobgp's mgmtCh does;
//   - tr, the transport (transport.go): listener, dialer, collision gate
//     and the sessions' hold;
//   - sess, the session bookkeeping (sessions.go), fed by gobgp's events;
//   - journal, what peers sent since the last TakeLearned (journal.go);
//   - limit and bfd, the guards (prefixlimit.go, bfd.go): workers told
//     through channels, with no lock of their own;
//   - tasks, the owner of the goroutines and timers it starts (tasks.go).
//
// Lock order, by part: mu, then tr's (holdMu, dial.mu, gate.mu, ln.mu),
// then journal.mu, then sess.mu, then tasks.mu. A goroutine holding one
// may take only those after it; none is held while calling notify. The
// dialer holds dial.mu while it waits for a dial loop to end, and a loop
// takes gate.mu, sess.mu and ln.mu; Stop holds mu while the dialer and the
// listener wait for their goroutines, which never take mu. gobgp's event
// callbacks (onPeerEvent, onPaths, onEndOfRIB) never take mu: what needs
// mu (switchBFD, the session-start repair, reenablePeer) runs as a task.
//
// Every goroutine and timer the Speaker starts has an owner that Stop ends
// and waits for: its tasks (gobgp's Serve loop, the limit and BFD workers,
// the BFD switches, the session-start repairs, the re-enables, the hold
// bound, BMP's status reads), the dialer (one loop per peer it dials) and
// the listener (an accept loop per socket, a reader per connection
// waiting for its OPEN). Stop ends the dialer and the listener first
// (they wait for their goroutines), stops gobgp, then waits for the
// tasks. gobgp's own goroutines are gobgp's: StopBgp waits for its FSMs;
// stopBMP ends its BMP clients without waiting (one that retries a
// station that does not answer ends after its current pause, up to 30 s);
// its event watch's goroutine ends once cancelled, but the callbacks it
// runs are admitted by tasks (enter), none after shutdown, and Stop waits
// for those under way.
type Speaker struct {
	// Set by New, then only read.
	bgp    *server.BgpServer
	global config.BGP
	log    *zap.Logger
	notify func()
	// gobgpLevel is the level gobgp's own slog records must reach.
	gobgpLevel  *slog.LevelVar
	cancelWatch context.CancelFunc

	// mu serializes SetPeers, Apply and Stop and guards the fields
	// below, up to the parts.
	mu      sync.Mutex
	stopped bool
	// peers are the peers configured in gobgp, by name.
	peers map[string]config.Peer
	// peerErrs are the peers that could not be configured, with why.
	peerErrs map[string]string
	adv      advState
	// bmp are the BMP servers configured in gobgp (bmp.go).
	bmp map[netip.AddrPort]bmpStation
	// repairChecks counts the session start checks done, repairs those
	// that re-sent a table, lastRepair is the latest (sessionup.go;
	// SessionRepairs). Atomic.
	repairChecks, repairs atomic.Uint64
	lastRepair            atomic.Pointer[model.SessionRepair]

	// The parts, in lock order.
	tr      transport
	journal *journal
	sess    sessions
	limit   limitGuard
	bfd     bfdGuard
	tasks   tasks
}

// New starts a gobgp server with the global config, adds global.Peers and
// returns. It fails only when the speaker cannot start (bad ASN or router
// ID, listen port in use); a peer that cannot be added is logged, reported
// by Peers and retried by the next SetPeers.
//
// log receives ovnbgp's messages; gobgp's own slog records go to
// log.Named("gobgp"), from Warn up, or from Info up while log is enabled at
// Debug (checked at each record: an AtomicLevel change applies at once).
// notify is called whenever a peer changes state or a peer's Adj-RIB-In
// changes, possibly often and from gobgp's event goroutine: it
// must not block.
func New(ctx context.Context, global config.BGP, log *zap.Logger, notify func()) (*Speaker, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if notify == nil {
		notify = func() {}
	}
	if global.ASN == 0 {
		return nil, errors.New("start bgp: asn is not set")
	}
	if !global.RouterID.Is4() {
		return nil, fmt.Errorf("start bgp: router id %v is not an IPv4 address", global.RouterID)
	}

	// gobgp's own floor; the live level comes from log's core (see
	// gobgpHandler).
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelInfo)
	gl := log.Named("gobgp")
	s := &Speaker{}
	h := gobgpHandler{inner: zapslog.NewHandler(gl.Core(), zapslog.WithName(gl.Name())), core: gl.Core(), floor: lvl,
		tap: s.sess.onNotification, bfdDown: s.sess.onBFDDown}
	srv := server.NewBgpServer(server.LoggerOption(slog.New(h), lvl))
	// gobgp never listens itself: ovnbgp's listener hands it the
	// connections (see listener.go).
	handoff := make(chan net.Conn, 32)
	if err := handoffTo(srv, handoff); err != nil {
		return nil, fmt.Errorf("start bgp: %w", err)
	}
	if err := bfdTo(srv, bfdResetter{srv: srv, keep: s.bfdKeepsSession}); err != nil {
		return nil, fmt.Errorf("start bgp: %w", err)
	}
	*s = Speaker{
		bgp:        srv,
		global:     global,
		log:        log,
		notify:     notify,
		gobgpLevel: lvl,
		tr: transport{
			handoff: handoff,
			dial:    newDialer(log, handoff, s.dialReady, s.claimDialed, s.sess.onNotification),
			gate:    connGate{live: map[netip.Addr]handed{}, used: map[netip.Addr]uint64{}},
		},
		peers:    map[string]config.Peer{},
		peerErrs: map[string]string{},
		adv:      newAdvState(),
		bmp:      map[netip.AddrPort]bmpStation{},
		journal:  newJournal(),
	}
	s.sess.init()
	s.limit.init()
	s.bfd.init()
	// A task: it ends when shutdown's StopBgp returns.
	s.tasks.goFn(srv.Serve)
	if err := s.start(ctx); err != nil {
		_ = s.shutdown(ctx, false)
		s.tasks.wait()
		return nil, err
	}
	s.tasks.goFn(func() { s.limitLoop(s.limit.stop) })
	s.tasks.goFn(func() { s.bfdLoop(s.bfd.stop) })
	log.Info("bgp speaker started", zap.Uint32("asn", global.ASN),
		zap.Stringer("routerID", global.RouterID), zap.Int("listenPort", listenPort(global.ListenPort)))
	if err := s.SetPeers(ctx, global.Peers); err != nil {
		// The speaker runs: the peers that failed are reported by Peers,
		// retried and returned again by the next SetPeers.
		log.Warn("some peers were not added", zap.Error(err))
	}
	return s, nil
}

// start configures the global speaker, the default-deny policies and the
// event watch.
func (s *Speaker) start(ctx context.Context) error {
	port := listenPort(s.global.ListenPort)
	g := &api.Global{
		Asn:      s.global.ASN,
		RouterId: s.global.RouterID.String(),
		// ovnbgp listens, not gobgp (see listener.go).
		ListenPort: -1,
		// The RIB's families, ovnbgp's two. Without them gobgp makes a
		// table of 2048 shards for each family it knows, in two RIBs
		// (4.6 MB of idle heap).
		Families: []uint32{uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST])},
	}
	if err := s.bgp.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		return fmt.Errorf("start bgp (asn %d, router id %v): %w", s.global.ASN, s.global.RouterID, err)
	}
	if port > 0 {
		ln, err := newListener(s.log, port, s.tr.handoff, s.sess.onNotification, s.acceptedOpen)
		if err != nil {
			return fmt.Errorf("start bgp: %w", err)
		}
		s.tr.ln = ln
	}
	// RFC 8212: nothing a peer sends enters the Loc-RIB, so nothing learned
	// is ever re-advertised; ovnbgp imports from the Adj-RIB-In itself.
	// gobgp runs the global import policy on locally originated paths too
	// (AddPath): accept those, and only those.
	if err := s.bgp.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{
		Name: importPolicy,
		Statements: []*api.Statement{{
			Name:       importPolicy + ":local",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		}},
	}}); err != nil {
		return fmt.Errorf("add import policy: %w", err)
	}
	if err := s.bgp.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: importPolicy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		return fmt.Errorf("set default-deny import policy: %w", err)
	}
	// Export: only what a per-peer statement accepts goes out.
	if err := s.bgp.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: exportPolicy}}); err != nil {
		return fmt.Errorf("add export policy: %w", err)
	}
	if err := s.bgp.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Direction:     api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:      []*api.Policy{{Name: exportPolicy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		return fmt.Errorf("set default-deny export policy: %w", err)
	}

	wctx, cancel := context.WithCancel(context.Background())
	s.cancelWatch = cancel
	// gobgp's watch goroutine (gobgp's, not waited for) runs the
	// callbacks; each is admitted by tasks until shutdown cancelled the
	// watch, and Stop waits for those under way.
	err := s.bgp.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, ts time.Time) {
			if s.tasks.enter() {
				defer s.tasks.leave()
				s.onPeerEvent(ev, ts)
			}
		},
		OnPathUpdate: func(paths []*apiutil.Path, _ time.Time) {
			if s.tasks.enter() {
				defer s.tasks.leave()
				s.onPaths(paths)
			}
		},
		OnPathEor: func(p *apiutil.Path, _ time.Time) {
			if s.tasks.enter() {
				defer s.tasks.leave()
				s.onEndOfRIB(p)
			}
		},
	},
		server.WatchPeer(),
		// Every UPDATE a peer sends (pre-policy: the Adj-RIB-In).
		server.WatchUpdate(false, "", ""),
		// Adj-RIB-In paths gobgp drops itself: session down, GR expiry.
		server.WatchAdjInWithdraw(),
		server.WatchEor(false),
	)
	if err != nil {
		return fmt.Errorf("watch bgp events: %w", err)
	}
	return nil
}

// learnedChanged pokes the daemon: what peers sent may have changed (a
// path, an End-of-RIB, a session going up or down); TakeLearned says what.
func (s *Speaker) learnedChanged() { s.notify() }

// Stop ends every session and the speaker. With graceful, gobgp sends no
// NOTIFICATION to peers that negotiated graceful restart, so they keep our
// routes (stale) for the restart time; without it, or to peers without
// graceful restart, it sends a Cease and they withdraw our routes at once.
// Stop is idempotent, and returns once every goroutine the speaker
// started (its tasks, the dialer's and the listener's) and every call of
// gobgp's into its event callbacks has returned (see the type's comment).
func (s *Speaker) Stop(ctx context.Context, graceful bool) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.tasks.wait()
		return nil
	}
	err := s.shutdown(ctx, graceful)
	s.mu.Unlock()
	// Not under mu: a running task may wait for mu (it then sees stopped).
	s.tasks.wait()
	s.log.Info("bgp speaker stopped", zap.Bool("graceful", graceful))
	return err
}

// shutdown stops gobgp and closes tasks; the caller holds mu or owns s
// exclusively, and waits for tasks after releasing mu.
func (s *Speaker) shutdown(ctx context.Context, graceful bool) error {
	s.stopped = true
	s.tasks.close()
	if s.limit.stop != nil {
		close(s.limit.stop)
	}
	if s.bfd.stop != nil {
		close(s.bfd.stop)
	}
	s.tr.close()
	// Before StopBgp, which makes DeleteBmp fail: each station gets a
	// Termination (and no Peer Down for the sessions that end).
	s.stopBMP(ctx)
	var err error
	if e := s.bgp.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: graceful}); e != nil {
		err = fmt.Errorf("stop bgp: %w", e)
	}
	// BgpServer.Stop also stops the BFD server, which StopBgp leaves
	// running, but first repeats StopBgp and logs its "not running" failure
	// at Error: silence gobgp for that call.
	s.gobgpLevel.Set(slog.LevelError + 4)
	s.bgp.Stop()
	if s.cancelWatch != nil {
		s.cancelWatch()
	}
	// No event callback starts now; Stop waits for those under way.
	s.tasks.closeCalls()
	// tasks.close cancelled the hold bound and the re-enables.
	s.tr.holdMu.Lock()
	s.tr.holdTimer = nil
	s.tr.holdMu.Unlock()
	s.sess.dropReenables()
	return err
}

// onPeerEvent records state changes and disconnect reasons, logs them and
// pokes the daemon.
func (s *Speaker) onPeerEvent(ev *apiutil.WatchEventMessage_PeerEvent, ts time.Time) {
	if ev == nil || ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	addr := ev.Peer.State.NeighborAddress
	state := fsmState(ev.Peer.State.SessionState)
	reason := ""
	switch ev.Peer.State.DisconnectReason {
	case api.PeerState_DISCONNECT_REASON_UNSPECIFIED,
		api.PeerState_DISCONNECT_REASON_IDLE_TIMER_EXPIRED,
		api.PeerState_DISCONNECT_REASON_DECONFIGURED:
	default:
		reason = ev.Peer.State.DisconnectMessage
	}
	if ts.IsZero() {
		ts = time.Now()
	}
	tripped := ev.Peer.State.AdminState == api.PeerState_ADMIN_STATE_PFX_CT && state != model.StateEstablished

	s.sess.mu.Lock()
	name := s.sess.byAddr[addr]
	ss := s.sess.all[addr]
	if ss == nil && name == "" {
		// A removed peer's last event (gobgp reports the Idle of a
		// deleted peer after DeletePeer): nothing to record.
		s.sess.mu.Unlock()
		return
	}
	if ss == nil {
		ss = &session{}
		s.sess.all[addr] = ss
	}
	if closedInCollision(ss) {
		reason = "" // ovnbgp's own doing, not an error
	} else if reason != "" && ss.bfdExpired && !ss.bfdDownAt.IsZero() && !ss.bfdDownAt.Before(ss.since) {
		reason = ss.bfdDown // BFD reset the session (bfd.go)
	} else if reason != "" && !ss.notifAt.IsZero() && !ss.notifAt.Before(ss.since) {
		// gobgp's reason ("invalid-msg", "bad-peer-as") says less than
		// the NOTIFICATION behind it.
		reason = ss.notif
	} else if reason == "invalid-msg" {
		// Not a NOTIFICATION (ovnbgp reads those on every connection,
		// dialed or accepted): gobgp found a message invalid.
		reason = "invalid-msg: the session failed during the OPEN exchange: the peer sent a message gobgp found invalid; the peer's log may say more"
	}
	wasUp := ss.state == model.StateEstablished
	if state != model.StateEstablished || ss.state != model.StateEstablished {
		ss.eor = nil // a new session, or none: no End-of-RIB yet
	}
	if state != ss.state || ss.since.IsZero() {
		// Since is when the session entered its state: the same state
		// reported again (gobgp repeats it when a peer is updated) is
		// not a new session.
		ss.since = ts
	}
	ss.state = state
	if reason != "" {
		ss.lastError = reason
		ss.lastErrorAt = ts
	}
	switch {
	case state == model.StateEstablished:
		if b := s.sess.bounds[addr]; b != nil && !wasUp {
			// A new session: read its exact counts (stale paths of
			// graceful restart included).
			b.reread.Store(true)
			defer s.limit.wake()
		}
		ss.down = time.Time{}
		ss.families = negotiated(ev.Peer.State.RemoteCap)
		ss.enh, ss.enhKnown = extendedNextHop(ev.Peer.State.RemoteCap), true
		if !wasUp {
			ss.gr, ss.graceful, ss.lastUpdate = nil, false, time.Time{}
			if s.global.GracefulRestart.Enabled {
				ss.gr = grCapability(ev.Peer.State.RemoteCap)
			}
		}
	case ss.down.IsZero():
		ss.down = ts
		ss.families = nil
		if wasUp {
			ss.leftAt = ts
			ss.graceful = ev.Peer.State.DisconnectReason == api.PeerState_DISCONNECT_REASON_GRACEFUL_RESTART
		}
	default:
		ss.families = nil
	}
	if tripped && ss.reenable == nil {
		// gobgp sent Cease/Maximum Number of Prefixes Reached and keeps
		// the peer administratively down; bring it back after a hold,
		// so that a flood costs the peer a minute, not the session for
		// good.
		reason = fmt.Sprintf("the peer sent more prefixes than maxPrefixes allows: session reset (Cease); ovnbgp re-enables it in %s", s.limit.hold)
		ss.lastError = reason
		ss.lastErrorAt = ts
		ss.reenable = s.tasks.after(s.limit.hold, func() { s.reenablePeer(addr) })
	}
	since := ss.since
	bfdOn := ss.bfdOn
	// quiet: the peer's Adj-RIB-In is empty and stays so through this
	// change. No session of it is up, or one just came up, and the last
	// one's OPEN had no graceful-restart capability (or ours is off), so
	// gobgp kept none of its paths stale: they were dropped as it ended,
	// each reported as a withdrawal. A new session's paths all come as
	// events.
	quiet := !wasUp && ss.gr == nil
	s.sess.mu.Unlock()
	if state == model.StateEstablished && !wasUp && name != "" {
		s.sessionUp(name, addr, ts, since)
		s.tasks.goFn(func() { s.switchBFD(addr, since, true) })
	}
	if bfdOn && state != model.StateEstablished {
		s.tasks.goFn(func() { s.switchBFD(addr, since, false) })
	}
	// Every state change may come with Adj-RIB-In changes gobgp makes
	// without a path event (graceful-restart stale marking, the paths
	// of an UPDATE that crossed maxPrefixes, stale paths dropped when the
	// restart timer expires): read the table again. Not for a quiet
	// change: a new session without graceful restart, or the steps
	// before it (Active, OpenSent, OpenConfirm), with no stale paths
	// kept. A walk would read the whole table a second time while it
	// arrives: the OpenConfirm just before Established put the peer in
	// Resync, taken with the first paths, and walked once they were all
	// in (at 100k paths from a fast sender, ~0.5-0.9 s of CPU: issue 18).
	if !quiet {
		s.resyncAddr(addr)
	}
	s.connStateChanged(addr)

	fields := []zap.Field{zap.String("peer", name), zap.Stringer("address", addr), zap.String("state", string(state))}
	if reason != "" {
		fields = append(fields, zap.String("reason", reason))
	}
	if state == model.StateEstablished || reason != "" {
		s.log.Info("peer state changed", fields...)
	} else {
		s.log.Debug("peer state changed", fields...)
	}
	s.learnedChanged()
}

// onEndOfRIB records an End-of-RIB marker the peer sent (gobgp's EoR
// event) for the current session, and pokes the daemon.
func (s *Speaker) onEndOfRIB(p *apiutil.Path) {
	if p != nil {
		f := config.IPv4
		if p.Family == bgppkt.RF_IPv6_UC {
			f = config.IPv6
		}
		stale := s.sess.endOfRIB(p.PeerAddress, f)
		// gobgp drops the peer's stale paths right after this event,
		// without path events, in the same critical section: a walk
		// started after the event reads the table after the drop. A
		// session without graceful restart has no stale paths to drop.
		if stale {
			s.resyncAddr(p.PeerAddress)
		}
	}
	s.notify()
}

// dialReady reports whether gobgp's state machine for the peer at addr
// waits for a connection (Active, as last reported) and no connection
// from the peer waits for it (see collision.go): only then does the
// dialer dial it.
func (s *Speaker) dialReady(addr netip.Addr) bool {
	s.tr.gate.mu.Lock()
	active := s.takesOne(addr)
	s.tr.gate.mu.Unlock()
	return active && !s.tr.deferring(addr)
}

// connStateChanged wakes the dialer and the listener's waiting
// connections: gobgp's state for the peer at addr changed.
func (s *Speaker) connStateChanged(addr netip.Addr) {
	s.sess.countActive(addr)
	s.tr.wake(addr)
}

// grCapability is the graceful-restart capability among remote (the
// last one, as gobgp reads it), nil if none.
func grCapability(remote []bgppkt.ParameterCapabilityInterface) *model.PeerGR {
	var out *model.PeerGR
	for _, c := range remote {
		g, ok := c.(*bgppkt.CapGracefulRestart)
		if !ok {
			continue
		}
		out = &model.PeerGR{
			RestartTime:  time.Duration(g.Time) * time.Second,
			Restarting:   g.Flags&0x08 != 0,
			Notification: g.Flags&0x04 != 0,
			Families:     map[string]bool{},
		}
		for _, t := range g.Tuples {
			switch bgppkt.NewFamily(t.AFI, t.SAFI) {
			case bgppkt.RF_IPv4_UC:
				out.Families[string(config.IPv4)] = t.Flags&0x80 != 0
			case bgppkt.RF_IPv6_UC:
				out.Families[string(config.IPv6)] = t.Flags&0x80 != 0
			}
		}
	}
	return out
}

// negotiated are the families both sides offered (RFC 4760: no
// multiprotocol capability at all means IPv4 unicast).
func negotiated(remote []bgppkt.ParameterCapabilityInterface) map[config.Family]bool {
	out := map[config.Family]bool{}
	mp := false
	for _, c := range remote {
		m, ok := c.(*bgppkt.CapMultiProtocol)
		if !ok {
			continue
		}
		mp = true
		switch m.CapValue {
		case bgppkt.RF_IPv4_UC:
			out[config.IPv4] = true
		case bgppkt.RF_IPv6_UC:
			out[config.IPv6] = true
		}
	}
	if !mp {
		out[config.IPv4] = true
	}
	return out
}

// extendedNextHop says whether the peer's OPEN offers IPv4 unicast NLRI
// with an IPv6 next hop (RFC 8950 extended next hop capability). gobgp
// v4.8.0 always offers it itself (capabilitiesFromConfig in its
// pkg/server/fsm.go) but never checks the peer's: it sends IPv4 paths
// with an IPv6 next hop to any peer that negotiated IPv4, which a peer
// without the capability treats as withdrawn (BIRD 2: "mismatched
// address family"). So ovnbgp reads it here, and the plan sends IPv4
// over an IPv6 session only when it is there.
func extendedNextHop(remote []bgppkt.ParameterCapabilityInterface) bool {
	for _, c := range remote {
		e, ok := c.(*bgppkt.CapExtendedNexthop)
		if !ok {
			continue
		}
		for _, t := range e.Tuples {
			if t.NLRIAFI == bgppkt.AFI_IP && t.NLRISAFI == uint16(bgppkt.SAFI_UNICAST) && t.NexthopAFI == bgppkt.AFI_IP6 {
				return true
			}
		}
	}
	return false
}

// listenPort maps the config's port to gobgp's: -1 never listens, 0 is
// the default 179.
func listenPort(p int) int {
	switch {
	case p < 0:
		return -1
	case p == 0:
		return 179
	}
	return p
}

// ipv6Available reports whether an IPv6 socket can be bound.
func ipv6Available() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}
