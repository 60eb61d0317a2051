package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
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

// TestGobgpLogLevelFollows: gobgp's records follow the zap level live.
func TestGobgpLogLevelFollows(t *testing.T) {
	lvl := zap.NewAtomicLevelAt(zap.DebugLevel)
	core, logs := observer.New(lvl)
	floor := new(slog.LevelVar)
	floor.Set(slog.LevelInfo)
	h := gobgpHandler{inner: zapslog.NewHandler(core), core: core, floor: floor}
	log := slog.New(h).With("Topic", "Peer")

	log.Info("at debug: passes")
	log.Debug("gobgp debug: never")
	lvl.SetLevel(zap.InfoLevel) // a reload from debug to info
	log.Info("at info: filtered")
	log.Warn("at info: warn passes")
	lvl.SetLevel(zap.DebugLevel)
	log.Info("at debug again: passes")

	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	want := []string{"at debug: passes", "at info: warn passes", "at debug again: passes"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gobgp records logged = %q, want %q", got, want)
	}
	_ = zapcore.DebugLevel
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
	} {
		if got := notificationText(c.sent, c.code, c.sub, c.comm); got != c.want {
			t.Errorf("notificationText(%v, %d, %d, %q) = %q, want %q", c.sent, c.code, c.sub, c.comm, got, c.want)
		}
	}
}

var _ = context.Background
var _ = model.StateEstablished
