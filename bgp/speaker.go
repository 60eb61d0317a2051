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
// methods may be called from any goroutine; mutations (SetPeers, Set, Stop)
// are serialized.
//
// Lock order: mu, then holdMu, then gate.mu, then journal.mu, then st,
// then tasks.mu. A goroutine holding one may take only those after it;
// none is held while calling notify. gobgp's event callbacks (onPeerEvent,
// onPaths, onEndOfRIB) never take mu: what needs mu (switchBFD, the
// session-start repair, reenablePeer) runs as a task.
//
// Every goroutine and timer the Speaker starts is a task (tasks.go):
// Stop cancels the pending ones and waits for the running ones.
type Speaker struct {
	bgp    *server.BgpServer
	global config.BGP
	log    *zap.Logger
	notify func()
	// gobgpLevel is the level gobgp's own slog records must reach.
	gobgpLevel  *slog.LevelVar
	cancelWatch context.CancelFunc
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
	// prefixHold is how long a session torn down by maxPrefixes stays
	// down before ovnbgp re-enables it (FRR's "maximum-prefix N restart").
	prefixHold time.Duration
	// limitCheck is how often, in nanoseconds, the limit worker checks
	// an armed prefix limit against the exact count (prefixlimit.go).
	limitCheck atomic.Int64
	// limitWake wakes the limit worker; limitStop ends it. armReq asks
	// it to arm a limit at once (prefixAdmit).
	limitWake chan struct{}
	limitStop chan struct{}
	armReq    chan armRequest
	// bfdStop ends bfdLoop; bfdWake wakes it when a session turns BFD on.
	bfdStop, bfdWake chan struct{}
	// bfdPolls counts bfdLoop's reads of gobgp's BFD states, bfdIdle the
	// times it went idle: no session runs BFD (for tests).
	bfdPolls, bfdIdle atomic.Uint64
	// limitReads and limitArms count the exact reads of Adj-RIB-In
	// counts and the prefix limit changes in gobgp (for tests).
	limitReads, limitArms atomic.Uint64
	// limitTimers counts the limit worker's timer starts: none while no
	// peer has a prefix limit; limitAuditSkips the audits done without a
	// read (for tests).
	limitTimers, limitAuditSkips atomic.Uint64
	// repairChecks counts the session start checks done, repairs those
	// that re-sent a table, lastRepair is the latest (sessionup.go;
	// SessionRepairs).
	repairChecks, repairs atomic.Uint64
	lastRepair            atomic.Pointer[model.SessionRepair]
	// held: no new session may start (hold.go); holdTimer ends the hold
	// at its bound. holdMu guards holdTimer.
	held      atomic.Bool
	holdMu    sync.Mutex
	holdTimer *task
	// tasks owns the goroutines and timers started below (tasks.go).
	tasks tasks

	// mu serializes SetPeers, Set and Stop and guards the fields below.
	mu      sync.Mutex
	stopped bool
	// peers are the peers configured in gobgp, by name.
	peers map[string]config.Peer
	// peerErrs are the peers that could not be configured, with why.
	peerErrs map[string]string
	adv      advState
	// bmp are the BMP servers configured in gobgp (bmp.go).
	bmp map[netip.AddrPort]bmpStation

	// journal is what peers sent since the last TakeLearned.
	journal *journal

	// st guards the session bookkeeping fed by gobgp's event goroutine.
	st       sync.Mutex
	byAddr   map[netip.Addr]string
	sessions map[netip.Addr]*session
	// learnFrom are the configured peers by address, for the conversion
	// of gobgp's path events (which name the address).
	learnFrom map[netip.Addr]config.Peer
	// bounds are the configured peers' Adj-RIB-In upper bounds, by
	// address (prefixlimit.go).
	bounds map[netip.Addr]*prefixBound
}

// session is what gobgp's peer events tell us and ListPeer does not.
type session struct {
	// state is the last state gobgp reported.
	state     model.SessionState
	since     time.Time
	lastError string
	// lastErrorAt is when lastError happened.
	lastErrorAt time.Time
	// notif describes the last NOTIFICATION sent or received, at notifAt.
	notif   string
	notifAt time.Time
	// recvAt is when the peer last sent a NOTIFICATION.
	recvAt time.Time
	// collidedAt is when ovnbgp closed its own connection to the peer to
	// resolve a connection collision (collision.go).
	collidedAt time.Time
	// actives counts the events that said Active: each one lets one
	// connection go to gobgp (collision.go).
	actives uint64
	// families are those negotiated with the peer, while Established.
	families map[config.Family]bool
	// eor are the families whose End-of-RIB marker the peer really sent
	// in the current session (gobgp's own EndOfRibReceived flag is also
	// set, without any marker, when ovnbgp restarts and the peer's OPEN
	// carries the Restart State bit: it means "do not wait", not "the
	// table is complete", and fail static must not act on it).
	eor map[config.Family]bool
	// down is when the session was last seen leave Established, or first
	// seen without it; zero while Established.
	down time.Time
	// gr is the graceful-restart capability of the peer's last OPEN
	// (model.PeerSync.GR); graceful says the last session ended the way
	// gobgp keeps the peer's paths stale for, leftAt when it left
	// Established.
	gr       *model.PeerGR
	graceful bool
	leftAt   time.Time
	// lastUpdate is when an UPDATE of this session was last taken.
	lastUpdate time.Time
	// reenable is pending while the session is held down by maxPrefixes.
	reenable *task
	// bfdOn: BFD is on in gobgp for this peer (bfd.go: only while
	// Established). bfd is its last state read, entered at bfdSince.
	bfdOn    bool
	bfd      model.BFDState
	bfdSince time.Time
	// bfdDown says why BFD last went down, at bfdDownAt; bfdExpired:
	// by ovnbgp's own detection (the session is reset), else the peer
	// signalled it (the session is kept).
	bfdDown    string
	bfdDownAt  time.Time
	bfdExpired bool
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
		tap: s.onNotification, bfdDown: s.onBFDDown}
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
		handoff:    handoff,
		dial:       newDialer(log, handoff, s.dialReady, s.claimDialed, s.onNotification),
		gate:       connGate{live: map[netip.Addr]handed{}, used: map[netip.Addr]uint64{}},
		peers:      map[string]config.Peer{},
		peerErrs:   map[string]string{},
		adv:        newAdvState(),
		bmp:        map[netip.AddrPort]bmpStation{},
		byAddr:     map[netip.Addr]string{},
		sessions:   map[netip.Addr]*session{},
		learnFrom:  map[netip.Addr]config.Peer{},
		journal:    newJournal(),
		prefixHold: defaultPrefixHold,
		bounds:     map[netip.Addr]*prefixBound{},
		limitWake:  make(chan struct{}, 1),
		limitStop:  make(chan struct{}),
		armReq:     make(chan armRequest),
		bfdStop:    make(chan struct{}),
		bfdWake:    make(chan struct{}, 1),
	}
	s.limitCheck.Store(int64(defaultLimitCheck))
	go srv.Serve()
	if err := s.start(ctx); err != nil {
		_ = s.shutdown(ctx, false)
		s.tasks.wait()
		return nil, err
	}
	s.tasks.goFn(func() { s.limitLoop(s.limitStop) })
	s.tasks.goFn(func() { s.bfdLoop(s.bfdStop) })
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
	}
	if err := s.bgp.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		return fmt.Errorf("start bgp (asn %d, router id %v): %w", s.global.ASN, s.global.RouterID, err)
	}
	if port > 0 {
		ln, err := newListener(s.log, port, s.handoff, s.onNotification, s.acceptedOpen)
		if err != nil {
			return fmt.Errorf("start bgp: %w", err)
		}
		s.ln = ln
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
	err := s.bgp.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: s.onPeerEvent,
		OnPathUpdate: func(paths []*apiutil.Path, _ time.Time) { s.onPaths(paths) },
		OnPathEor:    func(p *apiutil.Path, _ time.Time) { s.onEndOfRIB(p) },
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
// Stop is idempotent, and returns once every task of the speaker has
// returned (tasks.go).
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
	if s.limitStop != nil {
		close(s.limitStop)
	}
	if s.bfdStop != nil {
		close(s.bfdStop)
	}
	s.dial.close()
	if s.ln != nil {
		s.ln.close()
	}
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
	// tasks.close cancelled the hold bound and the re-enables.
	s.holdMu.Lock()
	s.holdTimer = nil
	s.holdMu.Unlock()
	s.st.Lock()
	for _, ss := range s.sessions {
		ss.reenable = nil
	}
	s.st.Unlock()
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

	s.st.Lock()
	name := s.byAddr[addr]
	ss := s.sessions[addr]
	if ss == nil {
		ss = &session{}
		s.sessions[addr] = ss
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
		if b := s.bounds[addr]; b != nil && !wasUp {
			// A new session: read its exact counts (stale paths of
			// graceful restart included).
			b.reread.Store(true)
			defer s.wakeLimits()
		}
		ss.down = time.Time{}
		ss.families = negotiated(ev.Peer.State.RemoteCap)
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
		reason = fmt.Sprintf("the peer sent more prefixes than maxPrefixes allows: session reset (Cease); ovnbgp re-enables it in %s", s.prefixHold)
		ss.lastError = reason
		ss.lastErrorAt = ts
		ss.reenable = s.tasks.after(s.prefixHold, func() { s.reenablePeer(addr) })
	}
	since := ss.since
	bfdOn := ss.bfdOn
	fresh := state == model.StateEstablished && !wasUp && ss.gr == nil
	s.st.Unlock()
	if state == model.StateEstablished && !wasUp && name != "" {
		s.sessionUp(name, addr, ts, since)
		s.tasks.goFn(func() { s.switchBFD(addr, since, true) })
	}
	if bfdOn && state != model.StateEstablished {
		s.tasks.goFn(func() { s.switchBFD(addr, since, false) })
	}
	// Every state change may come with Adj-RIB-In changes gobgp makes
	// without a path event (graceful-restart stale marking, the paths
	// of an UPDATE that crossed maxPrefixes): read the table again. Not
	// for a new session without graceful restart: its table starts
	// empty (the last session's paths were dropped, each reported as a
	// withdrawal), every path it gets comes as an event, and a walk
	// would read the whole table a second time while it arrives (at
	// 100k paths from a fast sender, ~0.9 s of CPU: issue 18).
	if !fresh {
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
		s.st.Lock()
		stale := true
		if ss := s.sessions[p.PeerAddress]; ss != nil && ss.state == model.StateEstablished {
			if ss.eor == nil {
				ss.eor = map[config.Family]bool{}
			}
			ss.eor[f] = true
			stale = ss.gr != nil
		}
		s.st.Unlock()
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

// onNotification records a NOTIFICATION gobgp sent to or received from
// the peer at addr (from gobgp's log records, see gobgpHandler).
func (s *Speaker) onNotification(addr string, sent bool, code, subcode uint8, communication string) {
	if sent && code == 6 && subcode == 3 {
		// Cease/Peer De-configured is ovnbgp's own doing: SetPeers
		// deletes a changed peer and re-adds it at once, and gobgp
		// logs the NOTIFICATION asynchronously, possibly after the new
		// session exists, which would start with it as lastError.
		return
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	a = a.Unmap()
	now := time.Now()
	text := notificationText(sent, code, subcode, communication)
	s.st.Lock()
	defer s.st.Unlock()
	if s.sessions == nil {
		return
	}
	ss := s.sessions[a]
	if ss == nil {
		return
	}
	if answersReceived(ss, sent, code) {
		return
	}
	if !sent {
		ss.recvAt = now
	}
	if sent && communication == bfdCommunication && ss.bfdExpired && !ss.bfdDownAt.IsZero() && !ss.bfdDownAt.Before(ss.since) {
		text = ss.bfdDown // onBFDDown said why, with more than the Cease
	}
	ss.notif, ss.notifAt = text, now
	ss.lastError, ss.lastErrorAt = text, now
}

// answersReceived reports whether a NOTIFICATION gobgp sent is its answer
// to one the peer sent in this same OPEN exchange: gobgp answers one
// received in OpenSent with 5/1 (Finite State Machine Error), and the
// peer's says why, so it stays lastError. The caller holds st.
func answersReceived(ss *session, sent bool, code uint8) bool {
	return sent && code == 5 && !ss.recvAt.IsZero() && !ss.recvAt.Before(ss.since)
}

// dialReady reports whether gobgp's state machine for the peer at addr
// waits for a connection (Active, as last reported) and no connection
// from the peer waits for it (see collision.go): only then does the
// dialer dial it.
func (s *Speaker) dialReady(addr netip.Addr) bool {
	s.gate.mu.Lock()
	active := s.takesOne(addr)
	s.gate.mu.Unlock()
	return active && (s.ln == nil || !s.ln.deferring(addr))
}

// connStateChanged wakes the dialer and the listener's waiting
// connections: gobgp's state for the peer at addr changed.
func (s *Speaker) connStateChanged(addr netip.Addr) {
	s.st.Lock()
	if ss := s.sessions[addr]; ss != nil && ss.state == model.StateActive {
		ss.actives++
	}
	s.st.Unlock()
	if s.dial != nil { // nil only in a speaker a unit test builds by hand
		s.dial.stateChanged(addr)
	}
	if s.ln != nil {
		s.ln.stateChanged()
	}
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

// defaultPrefixHold is how long maxPrefixes keeps a session down.
const defaultPrefixHold = time.Minute

// reenablePeer brings back a session that maxPrefixes took down.
func (s *Speaker) reenablePeer(addr netip.Addr) {
	s.st.Lock()
	if ss := s.sessions[addr]; ss != nil {
		ss.reenable = nil
	}
	name := s.byAddr[addr]
	s.st.Unlock()

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
