package bgp

import (
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
)

// TestDialedNotificationNamed: the node dials a provider that expects
// another ASN from it; the provider refuses the node's OPEN with
// NOTIFICATION 2/2 during the OPEN exchange, on the connection the node
// dialed. The node's lastError names what it received, code, subcode and
// name, not gobgp's "invalid-msg" or its own 5/x answer.
func TestDialedNotificationNamed(t *testing.T) {
	parallel(t)
	l := newLab(t, 33)
	port := freePort(t)
	l.speaker("provider3", config.BGP{
		ASN: provASN, RouterID: l.addr(3), ListenPort: port,
		Peers: []config.Peer{{Name: "node", Address: l.addr(2), ASN: nodeASN + 5, Passive: true,
			HoldTime: 90 * time.Second, ConnectRetry: 5 * time.Second}},
	})
	before := time.Now()
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	eventually(t, sessionTimeout, "node's lastError names the NOTIFICATION it received", func() (bool, string) {
		st := peerState(t, node, "tor")
		return strings.Contains(st.LastError, "received NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS"), st.LastError
	})
	st := peerState(t, node, "tor")
	if st.LastErrorAt.Before(before) || st.LastErrorAt.After(time.Now()) {
		t.Errorf("LastErrorAt = %v, want between %v and now", st.LastErrorAt, before)
	}
}
