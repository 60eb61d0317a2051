package bgp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// Generous timeouts: the first dial comes ~2 s after AddPeer and a reset
// session stays Idle 5 s; nothing here asserts speed.
const (
	sessionTimeout = 30 * time.Second
	routeTimeout   = 20 * time.Second
)

const (
	nodeASN = 64512
	provASN = 65001
)

// lab is one test's loopback addresses: the node speaker on .2 dials
// providers on .3, .4, … of 127.0.<n>.0/24.
type lab struct {
	t   testing.TB
	n   int
	log *zap.Logger
	// pokes counts each speaker's notify calls, by speaker name.
	pokes map[string]*atomic.Int64
	buf   *syncBuffer
}

// logs is what the speakers logged so far.
func (l *lab) logs() string { return l.buf.String() }

// newLab also collects the speakers' logs, printed if the test fails
// (gobgp goroutines may still log after the test, so not through t.Log).
func newLab(t testing.TB, n int) *lab {
	t.Helper()
	buf := &syncBuffer{}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	l := &lab{t: t, n: n, log: zap.New(zapcore.NewCore(enc, buf, zap.InfoLevel)), pokes: map[string]*atomic.Int64{}, buf: buf}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("speaker logs:\n%s", buf.String())
		}
	})
	return l
}

func (l *lab) logger() *zap.Logger { return l.log }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) Sync() error { return nil }

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (l *lab) addr(host int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 0, byte(l.n), byte(host)})
}

// parallel runs the test in parallel with the others, except under the
// race detector: gobgp v4.8.0's StartBgp writes package-level variables
// (table.SelectionOptions, table.UseMultiplePaths) that every server reads,
// so two servers starting while a third propagates paths is a data race
// inside gobgp (benign: they all write the same defaults; a daemon runs one
// server at a time).
func parallel(t *testing.T) {
	if !raceEnabled {
		t.Parallel()
	}
}

// freePort returns a TCP port that is free on every address (gobgp
// listens on 0.0.0.0 and ::).
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// speaker starts a Speaker that is stopped when the test ends.
func (l *lab) speaker(name string, global config.BGP) *Speaker {
	l.t.Helper()
	log := l.logger().Named(name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pokes := new(atomic.Int64)
	l.pokes[name] = pokes
	s, err := New(ctx, global, log, func() { pokes.Add(1) })
	if err != nil {
		l.t.Fatalf("start speaker %s: %v", name, err)
	}
	l.t.Cleanup(func() {
		// Bounded: a Stop that hangs fails the test, naming what runs.
		done := make(chan error, 1)
		go func() { done <- s.Stop(context.Background(), false) }()
		select {
		case <-done:
		case <-time.After(stopBound):
			l.t.Errorf("Stop of speaker %s did not return within %v; goroutines of package bgp still running:\n%s",
				name, stopBound, ownStacks())
		}
	})
	return s
}

// node is the ovnbgp side: it never listens and dials every provider from
// 127.0.<n>.2.
func (l *lab) node(gr bool, peers ...config.Peer) *Speaker {
	l.t.Helper()
	return l.speaker("node", config.BGP{
		ASN: nodeASN, RouterID: l.addr(2), ListenPort: -1,
		GracefulRestart: config.GracefulRestart{Enabled: gr, RestartTime: 120 * time.Second},
		Peers:           peers,
	})
}

// provider is a router on 127.0.<n>.<host> listening on its own port, with
// the node as a passive peer named "node".
func (l *lab) provider(host, port int, asn uint32, gr bool, password string) *Speaker {
	l.t.Helper()
	return l.speaker(fmt.Sprintf("provider%d", host), config.BGP{
		ASN: asn, RouterID: l.addr(host), ListenPort: port,
		GracefulRestart: config.GracefulRestart{Enabled: gr, RestartTime: 120 * time.Second},
		Peers: []config.Peer{{
			Name: "node", Address: l.addr(2), ASN: nodeASN, Passive: true, Password: password,
			HoldTime: 90 * time.Second, ConnectRetry: 5 * time.Second,
			Families: []config.Family{config.IPv4, config.IPv6},
		}},
	})
}

// peerOf is the node's config for the provider on host:port.
func (l *lab) peerOf(name string, host, port int, asn uint32) config.Peer {
	return config.Peer{
		Name: name, Address: l.addr(host), ASN: asn, Port: port, SourceAddress: l.addr(2),
		HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, ConnectRetry: 5 * time.Second,
		Families: []config.Family{config.IPv4, config.IPv6},
	}
}

// eventually polls cond until it holds or timeout passes; cond returns
// what it saw, for the failure message.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var saw string
	for {
		var ok bool
		ok, saw = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v; last saw: %s", what, timeout, saw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// never checks that cond stays false during d.
func never(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, saw := cond(); ok {
			t.Fatalf("%s happened: %s", what, saw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func peerState(t testing.TB, s *Speaker, peer string) model.PeerStatus {
	t.Helper()
	ps, err := s.Peers(context.Background())
	if err != nil {
		t.Fatalf("peers: %v", err)
	}
	for _, p := range ps {
		if p.Name == peer {
			return p
		}
	}
	return model.PeerStatus{Name: peer, State: "absent"}
}

func waitEstablished(t testing.TB, s *Speaker, peer string) model.PeerStatus {
	t.Helper()
	var st model.PeerStatus
	eventually(t, sessionTimeout, "peer "+peer+" established", func() (bool, string) {
		st = peerState(t, s, peer)
		// gobgp's state may say Established before its event did: Since
		// is the event's once the session's record says so too.
		return st.State == model.StateEstablished && s.sessionRecorded(st.Address), fmt.Sprintf("%s (%s)", st.State, st.LastError)
	})
	return st
}

// sessionRecorded reports whether the session record of addr says
// Established (its state event was handled).
func (s *Speaker) sessionRecorded(addr netip.Addr) bool {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	ss := s.sess.all[addr]
	return ss != nil && ss.state == model.StateEstablished
}

// learned is what s learned from peer, by prefix.
func learned(t testing.TB, s *Speaker, peer string) map[netip.Prefix]model.LearnedPath {
	t.Helper()
	ps, err := s.Learned(context.Background(), peer)
	if err != nil {
		t.Fatalf("learned from %s: %v", peer, err)
	}
	out := map[netip.Prefix]model.LearnedPath{}
	for _, p := range ps {
		out[p.Prefix] = p
	}
	return out
}

func prefixesOf(m map[netip.Prefix]model.LearnedPath) string {
	var ps []string
	for p := range m {
		ps = append(ps, p.String())
	}
	slices.Sort(ps)
	return "[" + strings.Join(ps, " ") + "]"
}

// waitLearned waits until s has learned exactly prefixes from peer.
func waitLearned(t testing.TB, s *Speaker, peer string, prefixes ...netip.Prefix) map[netip.Prefix]model.LearnedPath {
	t.Helper()
	var m map[netip.Prefix]model.LearnedPath
	eventually(t, routeTimeout, fmt.Sprintf("learned %v from %s", prefixes, peer), func() (bool, string) {
		m = learned(t, s, peer)
		if len(m) != len(prefixes) {
			return false, prefixesOf(m)
		}
		for _, p := range prefixes {
			if _, ok := m[p]; !ok {
				return false, prefixesOf(m)
			}
		}
		return true, ""
	})
	return m
}

func set(t testing.TB, s *Speaker, advs ...model.Advertisement) {
	t.Helper()
	if err := setAll(context.Background(), s, advs); err != nil {
		t.Fatalf("set %v: %v", advs, err)
	}
}

func adv(peer, prefix string, attrs model.PathAttrs) model.Advertisement {
	return model.Advertisement{Peer: peer, Prefix: netip.MustParsePrefix(prefix), Attrs: attrs}
}

// cmpOpts compares netip values by value.
var cmpOpts = cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// sent is advs as Advertised reports them on an Established session with
// every family negotiated.
func sent(advs ...model.Advertisement) []model.Advertisement {
	out := make([]model.Advertisement, len(advs))
	for i, a := range advs {
		a.State = model.AdvSent
		out[i] = a
	}
	return out
}

// bare strips what Advertised adds, for comparing with Set's input.
func bare(advs []model.Advertisement) []model.Advertisement {
	out := make([]model.Advertisement, len(advs))
	for i, a := range advs {
		a.State, a.Reason, a.Problem = "", "", ""
		out[i] = a
	}
	return out
}

// setAll makes s advertise exactly advs the way the daemon does: it applies
// plan's diff of advs against what is in effect.
func setAll(ctx context.Context, s *Speaker, advs []model.Advertisement) error {
	return s.Apply(ctx, plan.DiffAdvertisements(advs, s.Advertised()))
}
