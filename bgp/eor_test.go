package bgp

import (
	"net/netip"
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
	s := &Speaker{log: zap.NewNop(), notify: func() {}, byAddr: map[netip.Addr]string{addr: "tor"},
		sessions: map[netip.Addr]*session{}, peers: map[string]config.Peer{"tor": c}}
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
		if got := s.EndOfRIB()["tor"]; got != want {
			t.Errorf("%s: EndOfRIB() %v, want %v", when, got, want)
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
