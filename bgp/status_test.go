package bgp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/config"
)

// TestBadPeerASError: a peer whose ASN is not the configured one: both
// sides' lastError name the NOTIFICATION with code, subcode and name, and
// when it happened.
func TestBadPeerASError(t *testing.T) {
	parallel(t)
	l := newLab(t, 31)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	before := time.Now()
	node := l.node(false, l.peerOf("tor", 3, port, provASN+5)) // the provider is provASN

	eventually(t, sessionTimeout, "node's lastError names the NOTIFICATION it sent", func() (bool, string) {
		st := peerState(t, node, "tor")
		return strings.Contains(st.LastError, "sent NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS"), st.LastError
	})
	st := peerState(t, node, "tor")
	if st.LastErrorAt.Before(before) || st.LastErrorAt.After(time.Now()) {
		t.Errorf("LastErrorAt = %v, want between %v and now", st.LastErrorAt, before)
	}
	// gobgp does not log a NOTIFICATION it receives in OpenConfirm; the
	// provider accepted the connection, and its listener saw it go by.
	eventually(t, sessionTimeout, "provider's lastError names the NOTIFICATION it received", func() (bool, string) {
		st := peerState(t, prov, "node")
		return strings.Contains(st.LastError, "received NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS"), st.LastError
	})
}

// TestFamilyNotNegotiated: the provider offers only IPv4 while the node
// wants IPv4 and IPv6: the session is Established, but peers says IPv6 was
// not negotiated.
func TestFamilyNotNegotiated(t *testing.T) {
	parallel(t)
	l := newLab(t, 32)
	port := freePort(t)
	l.speaker("provider3", config.BGP{
		ASN: provASN, RouterID: l.addr(3), ListenPort: port,
		Peers: []config.Peer{{Name: "node", Address: l.addr(2), ASN: nodeASN, Passive: true,
			Families: []config.Family{config.IPv4}}},
	})
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	waitEstablished(t, node, "tor")
	st := peerState(t, node, "tor")
	if !strings.Contains(st.LastError, "family ipv6 not negotiated") {
		t.Errorf("lastError = %q, want it to say ipv6 was not negotiated", st.LastError)
	}
	if !countsOf(st, "ipv4").Negotiated || countsOf(st, "ipv6").Negotiated {
		t.Errorf("negotiated families: %+v", st.Families)
	}
}

// TestGobgpLogLevelFollows: a Speaker's gobgp records follow the
// daemon's zap level live: gobgp's Info "Add a peer configuration" is
// logged at debug, not after a switch to info, and again at debug.
func TestGobgpLogLevelFollows(t *testing.T) {
	parallel(t)
	lvl := zap.NewAtomicLevelAt(zap.DebugLevel)
	core, logs := observer.New(lvl)
	l := newLab(t, 43)
	// Nothing listens there: the node's dials are refused.
	port := freePort(t)
	peer := func(host int) config.Peer { return l.peerOf(fmt.Sprintf("p%d", host), host, port, provASN) }
	ctx := context.Background()
	s, err := New(ctx, config.BGP{ASN: nodeASN, RouterID: l.addr(2), ListenPort: -1, Peers: []config.Peer{peer(3)}}, zap.New(core), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(ctx, false) }()
	added := func() int { return logs.FilterMessage("Add a peer configuration").Len() }
	if n := added(); n != 1 {
		t.Fatalf("at debug: %d gobgp 'Add a peer configuration' lines, want 1", n)
	}
	lvl.SetLevel(zap.InfoLevel) // a reload from debug to info
	if err := s.SetPeers(ctx, []config.Peer{peer(3), peer(4)}); err != nil {
		t.Fatal(err)
	}
	if n := added(); n != 1 {
		t.Errorf("at info: gobgp's Info line still logged (%d lines, want 1)", n)
	}
	lvl.SetLevel(zap.DebugLevel)
	if err := s.SetPeers(ctx, []config.Peer{peer(3), peer(4), peer(5)}); err != nil {
		t.Fatal(err)
	}
	if n := added(); n != 2 {
		t.Errorf("at debug again: %d lines, want 2", n)
	}
}

// TestSniffer finds NOTIFICATIONs in a stream cut anywhere.
func TestSniffer(t *testing.T) {
	msg := func(typ byte, body ...byte) []byte {
		m := make([]byte, 19, 19+len(body))
		for i := 0; i < 16; i++ {
			m[i] = 0xff
		}
		m[16], m[17], m[18] = 0, byte(19+len(body)), typ
		return append(m, body...)
	}
	var stream []byte
	stream = append(stream, msg(1, make([]byte, 10)...)...) // OPEN
	stream = append(stream, msg(4)...)                      // KEEPALIVE
	stream = append(stream, msg(3, 2, 2, 0xfd, 0xe9)...)    // NOTIFICATION 2/2 with data
	stream = append(stream, msg(3, 6, 4)...)                // NOTIFICATION 6/4
	for _, chunk := range []int{1, 2, 7, 19, 1000} {
		var got []string
		s := &sniffer{tap: func(c, sc uint8) { got = append(got, fmt.Sprintf("%d/%d", c, sc)) }}
		for i := 0; i < len(stream); i += chunk {
			s.feed(stream[i:min(i+chunk, len(stream))])
		}
		if fmt.Sprint(got) != "[2/2 6/4]" {
			t.Errorf("chunks of %d: notifications %v, want [2/2 6/4]", chunk, got)
		}
	}
}

// TestNotificationText names codes and subcodes.
func TestNotificationText(t *testing.T) {
	for _, c := range []struct {
		sent      bool
		code, sub uint8
		comm      string
		want      string
	}{
		{true, 2, 2, "", "sent NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS"},
		{false, 6, 2, "maintenance", `received NOTIFICATION 6/2 Cease / Administrative Shutdown: "maintenance"`},
		{false, 4, 0, "", "received NOTIFICATION 4/0 Hold Timer Expired"},
		{false, 9, 1, "", "received NOTIFICATION 9/1 unknown error code"},
		{false, 2, 11, "", "received NOTIFICATION 2/11 OPEN Message Error / Role Mismatch"},
		{false, 2, 8, "", "received NOTIFICATION 2/8 OPEN Message Error / unknown subcode"},
		{false, 6, 200, "", "received NOTIFICATION 6/200 Cease / unknown subcode"},
		{false, 6, 0, "", "received NOTIFICATION 6/0 Cease"},
		// gobgp sends 6/1 only for maxPrefixes; the status may show this
		// text before the peer event that says more (a CI failure).
		{true, 6, 1, "", "sent NOTIFICATION 6/1 Cease / Maximum Number of Prefixes Reached: the peer sent more prefixes than maxPrefixes allows"},
		{false, 6, 1, "", "received NOTIFICATION 6/1 Cease / Maximum Number of Prefixes Reached"},
	} {
		if got := notificationText(c.sent, c.code, c.sub, c.comm); got != c.want {
			t.Errorf("notificationText(%v, %d, %d, %q) = %q, want %q", c.sent, c.code, c.sub, c.comm, got, c.want)
		}
	}
}

// TestOwnDeconfigureNotificationIgnored: the Cease/Peer De-configured
// that gobgp logs after SetPeers deleted a changed peer may arrive once
// the re-added session exists; it is not that session's lastError. A
// Cease the peer sends is still named.
func TestOwnDeconfigureNotificationIgnored(t *testing.T) {
	parallel(t)
	l := newLab(t, 44)
	p := l.peerOf("tor", 3, freePort(t), provASN) // nothing listens there
	s := l.node(false, p)
	eventually(t, 10*time.Second, "the session is tracked", func() (bool, string) {
		s.sess.mu.Lock()
		defer s.sess.mu.Unlock()
		return s.sess.all[p.Address] != nil, "no session"
	})
	s.sess.onNotification(p.Address.String(), true, 6, 3, "")
	if st := peerState(t, s, "tor"); strings.Contains(st.LastError, "6/3") {
		t.Errorf("lastError = %q: our own Peer De-configured landed on the new session", st.LastError)
	}
	s.sess.onNotification(p.Address.String(), false, 6, 3, "")
	if st := peerState(t, s, "tor"); !strings.Contains(st.LastError, "received NOTIFICATION 6/3 Cease / Peer De-configured") {
		t.Errorf("lastError = %q, want the peer's Cease named", st.LastError)
	}
}
