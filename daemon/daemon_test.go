package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// fakeSpeaker keeps the advertised set in memory, as package bgp does with
// gobgp's RIB, and like it refuses prefixes for peers it does not have;
// failPrefix makes Set refuse one prefix.
type fakeSpeaker struct {
	mu         sync.Mutex
	advs       []model.Advertisement
	peers      []config.Peer
	sets       int
	stopped    bool
	graceful   bool
	failPrefix netip.Prefix
}

func (f *fakeSpeaker) SetPeers(_ context.Context, p []config.Peer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = p
	return nil
}

func (f *fakeSpeaker) Set(_ context.Context, advs []model.Advertisement) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets++
	var err error
	f.advs = nil
	for _, a := range advs {
		// Like package bgp: a prefix for a peer not added is refused.
		if !slices.ContainsFunc(f.peers, func(p config.Peer) bool { return p.Name == a.Peer }) {
			err = errors.New("unknown peer " + a.Peer)
			continue
		}
		if a.Prefix == f.failPrefix {
			err = errors.New("refused " + a.Prefix.String())
			continue
		}
		f.advs = append(f.advs, model.Advertisement{Peer: a.Peer, Prefix: a.Prefix, Attrs: a.Attrs})
	}
	return err
}

func (f *fakeSpeaker) Advertised() []model.Advertisement {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.advs)
}

func (f *fakeSpeaker) NotApplied() []model.Advertisement { return nil }

func (f *fakeSpeaker) Peers(context.Context) ([]model.PeerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []model.PeerStatus
	for _, p := range f.peers {
		out = append(out, model.PeerStatus{Name: p.Name, Address: p.Address, ASN: p.ASN, State: model.StateEstablished})
	}
	return out, nil
}

func (f *fakeSpeaker) Learned(context.Context, string) ([]model.LearnedPath, error) {
	return []model.LearnedPath{{Peer: "tor", Prefix: netip.MustParsePrefix("203.0.113.0/24"), Reason: "default deny"}}, nil
}

func (f *fakeSpeaker) Stop(_ context.Context, graceful bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped, f.graceful = true, graceful
	return nil
}

func (f *fakeSpeaker) prefixes() []string {
	var out []string
	for _, a := range f.Advertised() {
		out = append(out, a.Peer+" "+a.Prefix.String())
	}
	slices.Sort(out)
	return out
}

type fakeNB struct {
	mu     sync.Mutex
	snap   model.Snapshot
	ok     bool
	notify func()
	closed bool
}

func (f *fakeNB) Snapshot(node string) (model.Snapshot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	s.Node = node
	return s, f.ok
}

func (f *fakeNB) Status() api.NBStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.NBStatus{Endpoint: "fake", Connected: f.ok}
}

func (f *fakeNB) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// set replaces the snapshot and fires the change notification, as the
// libovsdb cache handlers do.
func (f *fakeNB) set(ok bool, nets ...model.Network) {
	f.mu.Lock()
	f.snap, f.ok = model.Snapshot{Networks: nets}, ok
	n := f.notify
	f.mu.Unlock()
	n()
}

func network(name string, prefixes ...string) model.Network {
	n := model.Network{Name: name, Topology: "layer3"}
	for _, p := range prefixes {
		n.Subnets = append(n.Subnets, model.Subnet{Prefix: netip.MustParsePrefix(p), Source: "Logical_Switch " + name})
	}
	return n
}

const baseConfig = `node: {name: node1}
bgp:
  asn: 65010
  routerID: 192.0.2.0
  listenPort: -1
  peers:
    - {name: tor, address: 192.0.2.1, asn: 65001}
ovn: {northbound: "unix:/nonexistent/nb.sock"}
advertise:
  - {name: pods, kind: podNetwork, networks: [%s]}
control: {socket: %s}
metrics: {address: ""}
`

type harness struct {
	t       *testing.T
	dir     string
	cfgPath string
	sock    string
	sp      *fakeSpeaker
	nb      *fakeNB
	d       *Daemon
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
}

func writeConfig(t *testing.T, path, networks, sock string) {
	t.Helper()
	body := strings.Replace(strings.Replace(baseConfig, "%s", networks, 1), "%s", sock, 1)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, networks string) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, cfgPath: filepath.Join(dir, "config.yaml"), sock: filepath.Join(dir, "ctl.sock"),
		sp: &fakeSpeaker{}, nb: &fakeNB{}, done: make(chan error, 1)}
	writeConfig(t, h.cfgPath, networks, h.sock)
	cfg, err := config.Load(h.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := newLogging(cfg.Log, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	h.d = &Daemon{
		opts: Options{ConfigPath: h.cfgPath, Version: "test"},
		deps: Deps{
			NewSpeaker: func(_ context.Context, cfg config.BGP, _ *zap.Logger, _ func()) (Speaker, error) {
				// Like bgp.New: the peers of the global config are added.
				return h.sp, h.sp.SetPeers(context.Background(), cfg.Peers)
			},
			DialNB: func(_ context.Context, _ config.OVN, _ *zap.Logger, notify func()) (Northbound, error) {
				h.nb.mu.Lock()
				h.nb.notify = notify
				h.nb.mu.Unlock()
				return h.nb, nil
			},
		},
		log: logs.logger, logs: logs, signal: make(chan struct{}, 1), reload: make(chan struct{}, 1),
		cfg: cfg, startedAt: time.Now(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.d.run(ctx) }()
	t.Cleanup(h.stop)
	h.eventually("control socket", func() bool { _, err := os.Stat(h.sock); return err == nil })
	return h
}

// stop ends the daemon once; later calls do nothing.
func (h *harness) stop() {
	h.once.Do(func() {
		h.cancel()
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			h.t.Error("daemon did not stop")
		}
	})
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) wantPrefixes(want ...string) {
	h.t.Helper()
	slices.Sort(want)
	h.eventually("advertised "+strings.Join(want, ", "), func() bool { return slices.Equal(h.sp.prefixes(), want) })
}

func TestNothingBeforeFirstSync(t *testing.T) {
	h := start(t, `"*"`)
	h.nb.set(false, network("default", "10.128.0.0/23"))
	time.Sleep(100 * time.Millisecond)
	if got := h.sp.prefixes(); len(got) != 0 {
		t.Fatalf("advertised %v before the NB synced", got)
	}
	if peers, _ := h.sp.Peers(context.Background()); len(peers) != 0 {
		t.Fatalf("sessions started before the first plan: %v", peers)
	}
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	if peers, _ := h.sp.Peers(context.Background()); len(peers) != 1 {
		t.Fatalf("peers = %v after the first plan, want tor", peers)
	}
}

func TestFollowsSnapshot(t *testing.T) {
	h := start(t, "default, blue")
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"), network("red", "10.201.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.nb.set(true)
	h.wantPrefixes()
}

func TestControlAPI(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	c := api.NewClient(h.sock)
	ctx := context.Background()

	advs, err := c.Advertised(ctx, "")
	if err != nil || len(advs) != 1 || advs[0].Rule != "pods" || advs[0].Network != "default" || advs[0].Source != "Logical_Switch default" {
		t.Fatalf("Advertised = %+v, %v; want one with rule, network and source", advs, err)
	}
	if _, err := c.Advertised(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `no such peer "nope"`) {
		t.Fatalf("unknown peer: err = %v", err)
	}
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].Name != "tor" {
		t.Fatalf("Peers = %+v, %v", peers, err)
	}
	rejected, err := c.Learned(ctx, "tor", true)
	if err != nil || len(rejected) != 1 {
		t.Fatalf("Learned(rejected) = %+v, %v", rejected, err)
	}
	st, err := c.Status(ctx)
	if err != nil || !st.Ready || st.Node != "node1" || st.Reconciles == 0 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if fi, err := os.Stat(h.sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

func TestPartialApplyIsRetried(t *testing.T) {
	h := start(t, `"*"`)
	h.sp.mu.Lock()
	h.sp.failPrefix = netip.MustParsePrefix("10.200.0.0/24")
	h.sp.mu.Unlock()
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.eventually("the failure in status", func() bool { return h.d.status().LastError != "" })
	h.sp.mu.Lock()
	h.sp.failPrefix = netip.Prefix{}
	h.sp.mu.Unlock()
	// No new event: the retry timer alone must finish the job.
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
}

func TestReload(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")

	// A bad config is refused and the running one kept.
	if err := os.WriteFile(h.cfgPath, []byte("bgp: {asn: banana}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.d.reload <- struct{}{}
	h.eventually("the config error in status", func() bool { return strings.Contains(h.d.status().ConfigError, "bgp.asn") })
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")

	// A good one takes effect.
	writeConfig(t, h.cfgPath, `"*"`, h.sock)
	h.d.reload <- struct{}{}
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	if st := h.d.status(); st.ConfigError != "" {
		t.Fatalf("ConfigError = %q after a good reload", st.ConfigError)
	}
}

func TestStopIsGracefulOnlyWithGR(t *testing.T) {
	h := start(t, "default")
	h.stop()
	h.sp.mu.Lock()
	defer h.sp.mu.Unlock()
	if !h.sp.stopped || h.sp.graceful {
		t.Fatalf("stopped=%v graceful=%v; want a stop without graceful restart", h.sp.stopped, h.sp.graceful)
	}
	if !h.nb.closed {
		t.Fatal("NB client not closed")
	}
	if _, err := os.Stat(h.sock); !os.IsNotExist(err) {
		t.Fatalf("control socket left behind: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	m, err := h.d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	resp, err := http.Get("http://" + m.ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`ovnbgp_peer_established{peer="tor"} 1`,
		`ovnbgp_peer_state{peer="tor"} 6`,
		`ovnbgp_advertisements{peer="tor"} 1`,
		`ovnbgp_northbound_connected 1`,
		`ovnbgp_reconcile_failing 0`,
		`ovnbgp_build_info{node="node1",version="test"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if _, err := h.d.serveMetrics(m.ln.Addr().String()); err == nil || !strings.Contains(err.Error(), `metrics.address: ""`) {
		t.Errorf("port in use: err = %v, want advice to turn metrics off", err)
	}
}

// TestSdNotify: systemd hears READY=1 only after the first reconcile with
// NB data, then STOPPING=1 on the way out.
func TestSdNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func() string {
		select {
		case m := <-msgs:
			return m
		case <-time.After(10 * time.Second):
			return "(nothing)"
		}
	}
	h := start(t, "default")
	select {
	case m := <-msgs:
		t.Fatalf("systemd told %q before the NB synced", m)
	case <-time.After(200 * time.Millisecond):
	}
	h.nb.set(true, network("default", "10.128.0.0/23"))
	if m := next(); m != "STATUS=advertising 1 routes" {
		t.Fatalf("first message %q, want the status", m)
	}
	if m := next(); m != "READY=1" {
		t.Fatalf("second message %q, want READY=1", m)
	}
	h.stop()
	for m := next(); m != "STOPPING=1"; m = next() {
		if m == "(nothing)" {
			t.Fatal("no STOPPING=1")
		}
	}
}

func TestPeerWait(t *testing.T) {
	for _, tt := range []struct {
		gr   config.GracefulRestart
		want time.Duration
	}{
		{config.GracefulRestart{}, readyGrace},
		{config.GracefulRestart{Enabled: false, RestartTime: 120 * time.Second}, readyGrace},
		{config.GracefulRestart{Enabled: true, RestartTime: 120 * time.Second}, 120 * time.Second},
		{config.GracefulRestart{Enabled: true, RestartTime: 5 * time.Second}, readyGrace},
	} {
		if got := peerWait(&config.Config{BGP: config.BGP{GracefulRestart: tt.gr}}); got != tt.want {
			t.Errorf("peerWait(%+v) = %v, want %v", tt.gr, got, tt.want)
		}
	}
}

func TestLogDiffSummarizes(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	d := &Daemon{log: zap.New(core)}
	var many []model.Advertisement
	for i := range 1000 {
		many = append(many, model.Advertisement{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)})
	}
	d.logDiff(plan.AdvertDiff{Announce: many}, nil)
	if got := logs.TakeAll(); len(got) != 1 || got[0].ContextMap()["announce"] != int64(1000) || got[0].ContextMap()["prefixes"] != nil {
		t.Fatalf("1000 announcements logged as %d Info lines: %+v; want one summary without the list", len(got), got)
	}
	d.logDiff(plan.AdvertDiff{Withdraw: many[:1]}, nil)
	got := logs.TakeAll()
	if len(got) != 1 || fmt.Sprint(got[0].ContextMap()["prefixes"]) != "[-10.0.0.0/24→tor]" {
		t.Fatalf("one withdrawal logged as %+v; want it named", got)
	}
	d.logDiff(plan.AdvertDiff{}, nil)
	if n := logs.Len(); n != 0 {
		t.Fatalf("no change logged %d lines", n)
	}
}
