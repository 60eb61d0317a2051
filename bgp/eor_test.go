package bgp

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestEndOfRIBNeedsTheMarker: PeerStatus.EndOfRIB is true only once the
// peer really sent End-of-RIB in the current session. gobgp also sets its
// EndOfRibReceived flag with no marker (ovnbgp restarting, the peer's OPEN
// with the Restart State bit): fail static deleted every imported route on
// that before the peer had re-sent a single path (found by
// test/e2e TestImportFailStatic).
func TestEndOfRIBNeedsTheMarker(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.1")
	c := config.Peer{Name: "tor", Address: addr, ASN: provASN, Families: []config.Family{config.IPv4}}
	s := &Speaker{log: zap.NewNop(), notify: func() {}, sess: sessions{byAddr: map[netip.Addr]string{addr: "tor"},
		all: map[netip.Addr]*session{}}, peers: map[string]config.Peer{"tor": c}}
	// gobgp's view: Established, End-of-RIB "received" for IPv4
	p := &api.Peer{
		State: &api.PeerState{SessionState: api.PeerState_SESSION_STATE_ESTABLISHED, NeighborAddress: addr.String()},
		AfiSafis: []*api.AfiSafi{{
			State:             &api.AfiSafiState{Family: apiFamily(config.IPv4)},
			MpGracefulRestart: &api.MpGracefulRestart{State: &api.MpGracefulRestartState{EndOfRibReceived: true}},
		}},
	}
	event := func(st bgppkt.FSMState) {
		s.onPeerEvent(&apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_STATE, Peer: apiutil.Peer{
			State: apiutil.PeerState{NeighborAddress: addr, SessionState: st,
				RemoteCap: []bgppkt.ParameterCapabilityInterface{bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC)}},
		}}, time.Now())
	}
	marker := func() {
		s.onEndOfRIB(&apiutil.Path{Family: bgppkt.RF_IPv4_UC, PeerAddress: addr})
	}
	check := func(when string, want bool) {
		t.Helper()
		if got := s.peerStatus(c, p); got.State != model.StateEstablished || got.EndOfRIB != want {
			t.Errorf("%s: state %s, EndOfRIB %v, want established and %v", when, got.State, got.EndOfRIB, want)
		}
		// The daemon's per-pass question agrees, without asking gobgp.
		if got := s.Sync()["tor"].EndOfRIB; got != want {
			t.Errorf("%s: Sync().EndOfRIB %v, want %v", when, got, want)
		}
	}
	event(bgppkt.BGP_FSM_ESTABLISHED)
	check("established, gobgp's flag set, no marker", false)
	marker()
	check("after the marker", true)
	event(bgppkt.BGP_FSM_ESTABLISHED) // the same session reported again
	check("same session", true)
	event(bgppkt.BGP_FSM_IDLE)
	event(bgppkt.BGP_FSM_ESTABLISHED)
	check("a new session, no marker yet", false)
	marker()
	check("the new session's marker", true)
}

// TestSyncGracefulRestart: Sync reports the graceful-restart capability of
// the peer's OPEN (restart time, R and N bits, the families and their
// Forwarding State bits) only when graceful restart is enabled on our side
// too, and keeps it after the session ends, with when and whether it ended
// gracefully (gobgp keeps the paths stale).
func TestSyncGracefulRestart(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.1")
	c := config.Peer{Name: "tor", Address: addr, ASN: provASN, Families: []config.Family{config.IPv4, config.IPv6}}
	newSpeaker := func(gr bool) *Speaker {
		return &Speaker{log: zap.NewNop(), notify: func() {}, sess: sessions{byAddr: map[netip.Addr]string{addr: "tor"},
			all: map[netip.Addr]*session{}}, peers: map[string]config.Peer{"tor": c},
			global: config.BGP{GracefulRestart: config.GracefulRestart{Enabled: gr}}}
	}
	caps := []bgppkt.ParameterCapabilityInterface{
		bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC), bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv6_UC),
		bgppkt.NewCapGracefulRestart(true, false, 90, []*bgppkt.CapGracefulRestartTuple{
			bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv4_UC, true),
			bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv6_UC, false)}),
	}
	event := func(s *Speaker, st bgppkt.FSMState, reason api.PeerState_DisconnectReason, ts time.Time) {
		s.onPeerEvent(&apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_STATE, Peer: apiutil.Peer{
			State: apiutil.PeerState{NeighborAddress: addr, SessionState: st, RemoteCap: caps, DisconnectReason: reason},
		}}, ts)
	}
	up := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s := newSpeaker(true)
	event(s, bgppkt.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, up)
	got := s.Sync()["tor"]
	want := &model.PeerGR{RestartTime: 90 * time.Second, Restarting: true, Families: map[string]bool{"ipv4": true, "ipv6": false}}
	if !got.Established || !got.Since.Equal(up) || got.GR == nil || !reflect.DeepEqual(got.GR, want) {
		t.Errorf("established: %+v (GR %+v), want GR %+v", got, got.GR, want)
	}
	down := up.Add(time.Minute)
	event(s, bgppkt.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_GRACEFUL_RESTART, down)
	got = s.Sync()["tor"]
	if got.Established || !got.Down.Equal(down) || !got.Graceful || !reflect.DeepEqual(got.GR, want) {
		t.Errorf("after a graceful end: %+v, want down at %s, graceful, the same GR", got, down)
	}
	event(s, bgppkt.BGP_FSM_ACTIVE, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, down.Add(time.Second))
	if got = s.Sync()["tor"]; !got.Down.Equal(down) || !got.Graceful {
		t.Errorf("idle → active: %+v, want down and graceful kept", got)
	}
	event(s, bgppkt.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, down.Add(2*time.Second))
	event(s, bgppkt.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_NOTIFICATION_RECEIVED, down.Add(3*time.Second))
	if got = s.Sync()["tor"]; got.Graceful {
		t.Errorf("ended by a NOTIFICATION: graceful %v", got.Graceful)
	}
	// Graceful restart off on our side: nothing was negotiated.
	s = newSpeaker(false)
	event(s, bgppkt.BGP_FSM_ESTABLISHED, api.PeerState_DISCONNECT_REASON_UNSPECIFIED, up)
	if got = s.Sync()["tor"]; got.GR != nil {
		t.Errorf("graceful restart off here: GR %+v, want nil", got.GR)
	}
}

// TestJournalDropWaitsForTheSessionState: a path gobgp drops from the
// Adj-RIB-In itself (a withdrawal that keeps its attributes) while the
// speaker still sees the session Established is not reported gone: gobgp
// reports the session's end right after, and the daemon must know how it
// ended (gracefully: the routes stay stale) before it takes the drop. A
// withdrawal the peer sent (no attributes) is reported at once; a drop
// after the session is seen down too.
func TestJournalDropWaitsForTheSessionState(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.1")
	s := &Speaker{log: zap.NewNop(), notify: func() {}, global: config.BGP{ASN: nodeASN, RouterID: netip.MustParseAddr("192.0.2.9")},
		journal: newJournal(), sess: sessions{learnFrom: map[netip.Addr]config.Peer{addr: {Name: "tor", Address: addr, ASN: provASN}},
			all: map[netip.Addr]*session{addr: {state: model.StateEstablished, gr: &model.PeerGR{RestartTime: 120 * time.Second}}}}}
	nh, _ := bgppkt.NewPathAttributeNextHop(addr)
	attrs := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(0), nh,
		bgppkt.NewPathAttributeAsPath([]bgppkt.AsPathParamInterface{bgppkt.NewAs4PathParam(bgppkt.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{provASN})})}
	path := func(prefix string, withdraw bool, attrs []bgppkt.PathAttributeInterface) *apiutil.Path {
		n, _ := bgppkt.NewIPAddrPrefix(netip.MustParsePrefix(prefix))
		return &apiutil.Path{Family: bgppkt.RF_IPv4_UC, Nlri: n, Attrs: attrs, Withdrawal: withdraw, Age: 1, PeerAddress: addr}
	}
	s.journalPaths([]*apiutil.Path{path("10.1.0.0/24", false, attrs), path("10.2.0.0/24", false, attrs)})
	s.TakeLearned()
	s.journalPaths([]*apiutil.Path{path("10.1.0.0/24", true, nil), path("10.2.0.0/24", true, attrs)})
	d := s.TakeLearned()
	if len(d.Gone) != 1 || d.Gone[0].Prefix.String() != "10.1.0.0/24" {
		t.Errorf("gone %v, want only the withdrawn 10.1.0.0/24 (the dropped one waits for the session's state)", d.Gone)
	}
	s.sess.all[addr].state = model.StateIdle
	s.journalPaths([]*apiutil.Path{path("10.2.0.0/24", true, attrs)})
	if d := s.TakeLearned(); len(d.Gone) != 1 {
		t.Errorf("gone %v after the session is seen down, want 10.2.0.0/24", d.Gone)
	}
	// Without graceful restart nothing is kept: the drop is reported at
	// once (a 100k drop costs a take, not a walk).
	s.sess.all[addr].state, s.sess.all[addr].gr = model.StateEstablished, nil
	s.journalPaths([]*apiutil.Path{path("10.2.0.0/24", true, attrs)})
	if d := s.TakeLearned(); len(d.Gone) != 1 {
		t.Errorf("gone %v for a peer without graceful restart, want 10.2.0.0/24", d.Gone)
	}
}

// TestRemovedPeerLeavesNoRecord: gobgp reports a deleted peer's last state
// change (Idle) after SetPeers removed it; that event records nothing. One
// record was left per old address before (an unnumbered peer whose learned
// address changes leaves one behind at each change).
func TestRemovedPeerLeavesNoRecord(t *testing.T) {
	addr := netip.MustParseAddr("fe80::1")
	s := &Speaker{log: zap.NewNop(), notify: func() {}, sess: sessions{byAddr: map[netip.Addr]string{},
		all: map[netip.Addr]*session{}}, peers: map[string]config.Peer{}}
	s.onPeerEvent(&apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_STATE, Peer: apiutil.Peer{
		State: apiutil.PeerState{NeighborAddress: addr, SessionState: bgppkt.BGP_FSM_IDLE,
			DisconnectReason: api.PeerState_DISCONNECT_REASON_DECONFIGURED},
	}}, time.Now())
	if n := len(s.sess.all); n != 0 {
		t.Errorf("%d session records after the event of a removed peer, want none", n)
	}
}

// TestQuietStatesNotWalked (issue 18): the steps of a session coming up
// (Active, OpenSent, OpenConfirm, Established) put the peer in Resync only
// while gobgp may hold its paths stale (the last session's OPEN had the
// graceful-restart capability): an empty Adj-RIB-In has nothing to walk.
// The OpenConfirm just before Established was taken with the first paths
// of a fast sender, and its walk read all 100k again once they were in.
// A session's end is always walked.
func TestQuietStatesNotWalked(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.1")
	c := config.Peer{Name: "tor", Address: addr, ASN: provASN, Families: []config.Family{config.IPv4}}
	s := &Speaker{log: zap.NewNop(), notify: func() {}, journal: newJournal(),
		sess: sessions{byAddr: map[netip.Addr]string{addr: "tor"}, learnFrom: map[netip.Addr]config.Peer{addr: c},
			all: map[netip.Addr]*session{}}, peers: map[string]config.Peer{"tor": c},
		global: config.BGP{GracefulRestart: config.GracefulRestart{Enabled: true}}}
	plain := []bgppkt.ParameterCapabilityInterface{bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC)}
	withGR := append(slices.Clone(plain), bgppkt.NewCapGracefulRestart(false, false, 90,
		[]*bgppkt.CapGracefulRestartTuple{bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv4_UC, true)}))
	step := func(caps []bgppkt.ParameterCapabilityInterface, st bgppkt.FSMState, reason api.PeerState_DisconnectReason, walk bool) {
		t.Helper()
		s.onPeerEvent(&apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_STATE, Peer: apiutil.Peer{
			State: apiutil.PeerState{NeighborAddress: addr, SessionState: st, RemoteCap: caps, DisconnectReason: reason},
		}}, time.Now())
		if got := s.TakeLearned().Resync; (len(got) > 0) != walk {
			t.Errorf("after %v: Resync %v, want a walk: %v", st, got, walk)
		}
	}
	none := api.PeerState_DISCONNECT_REASON_UNSPECIFIED
	for _, st := range []bgppkt.FSMState{bgppkt.BGP_FSM_ACTIVE, bgppkt.BGP_FSM_OPENSENT, bgppkt.BGP_FSM_OPENCONFIRM, bgppkt.BGP_FSM_ESTABLISHED} {
		step(plain, st, none, false)
	}
	step(plain, bgppkt.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_NOTIFICATION_RECEIVED, true)
	for _, st := range []bgppkt.FSMState{bgppkt.BGP_FSM_ACTIVE, bgppkt.BGP_FSM_OPENSENT, bgppkt.BGP_FSM_OPENCONFIRM} {
		step(plain, st, none, false)
	}
	// A session with graceful restart: its paths stay stale after a
	// graceful end, and gobgp drops them without an event when the
	// restart timer expires: every step is walked until a session comes
	// up again.
	step(withGR, bgppkt.BGP_FSM_ESTABLISHED, none, true)
	step(withGR, bgppkt.BGP_FSM_IDLE, api.PeerState_DISCONNECT_REASON_GRACEFUL_RESTART, true)
	for _, st := range []bgppkt.FSMState{bgppkt.BGP_FSM_ACTIVE, bgppkt.BGP_FSM_OPENSENT, bgppkt.BGP_FSM_OPENCONFIRM} {
		step(withGR, st, none, true)
	}
}
