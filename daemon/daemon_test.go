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
	"reflect"
	"slices"
	"strconv"
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
// failPrefix makes Set refuse one prefix, failSetPeers the next n SetPeers.
type fakeSpeaker struct {
	mu   sync.Mutex
	advs []model.Advertisement
	// wholeReads and keyReads count the calls of Advertised and
	// AdvertisedOf.
	wholeReads, keyReads int
	// peak and low are the most and the fewest advertisements each peer
	// held at once (Apply).
	peak, low    map[string]int
	peers        []config.Peer
	sets         int
	stopped      bool
	graceful     bool
	failPrefix   netip.Prefix
	failed       []model.Advertisement // what Set refused, as NotApplied reports it
	failSetPeers int
	setPeerCalls int
	state        model.SessionState // of every peer; "" = established
	bfd          model.BFDState     // of every peer; "" = BFD not enabled
	// learned is what EachLearned walks; learnedN more paths are made up
	// on the fly (a big table that costs the fake no memory), and each
	// is passed to onLearned first.
	learned   []model.LearnedPath
	learnedN  int
	onLearned func(i int)
	// failLearnedAfter > 0 makes the walk fail after that many made-up
	// paths; onPeers is called by Peers, unlocked.
	failLearnedAfter int
	onPeers          func()
	gen, taken       uint64             // setLearned's changes, and the last TakeLearned's
	pending          model.LearnedDelta // change's, until TakeLearned
	walks            int                // EachLearned calls
	eor              bool               // every peer's EndOfRIB
	// noGR: Sync reports no graceful-restart capability (no End-of-RIB
	// expected); since and lastUpdate are Sync's Since and LastUpdate.
	noGR              bool
	since, lastUpdate time.Time
	// down and downGraceful are Sync's Down and Graceful (the last
	// session's end); eorFamilies its EndOfRIBFamilies.
	down         time.Time
	downGraceful bool
	eorFamilies  map[string]bool
	// onTake is called by TakeLearned first, unlocked.
	onTake  func()
	applies []model.AdvertDiff // every Apply's diff, in order
	// bmp is the last SetBMP's servers, bmpSys its sysName and sysDescr,
	// bmpSets the number of SetBMP calls.
	bmp     []config.BMPServer
	bmpSys  [2]string
	bmpSets int
	// failBMP > 0 makes that many more SetBMP calls fail.
	failBMP int
	// tracking is the last TrackLearned's value, tracked whether it was
	// called at all.
	tracking, tracked bool
	// calls are the session-related calls in order: "hold", "setPeers"
	// (with peers), "apply", "release" (hold_test.go).
	calls []string
}

func (f *fakeSpeaker) SetPeers(_ context.Context, p []config.Peer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setPeerCalls++
	if len(p) > 0 {
		f.calls = append(f.calls, "setPeers")
	}
	if f.failSetPeers > 0 {
		f.failSetPeers--
		return errors.New("peer refused")
	}
	f.peers = p
	return nil
}

func (f *fakeSpeaker) Apply(_ context.Context, d model.AdvertDiff) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets++
	f.applies = append(f.applies, d)
	f.calls = append(f.calls, "apply")
	defer func() {
		if f.low == nil {
			f.low = map[string]int{}
		}
		now := map[string]int{}
		for _, a := range f.advs {
			now[a.Peer]++
		}
		for _, p := range f.peers {
			if l, ok := f.low[p.Name]; !ok || now[p.Name] < l {
				f.low[p.Name] = now[p.Name]
			}
		}
	}()
	var err error
	f.failed = nil
	// Like package bgp, one Apply adds before it withdraws: what a peer
	// holds at its peak within the call.
	if f.peak == nil {
		f.peak = map[string]int{}
	}
	holds := map[string]int{}
	for _, a := range f.advs {
		holds[a.Peer]++
	}
	for _, a := range d.Announce {
		if !slices.ContainsFunc(f.advs, func(o model.Advertisement) bool { return o.Key() == a.Key() }) {
			holds[a.Peer]++
		}
	}
	for peer, n := range holds {
		f.peak[peer] = max(f.peak[peer], n)
	}
	for _, w := range d.Withdraw {
		f.advs = slices.DeleteFunc(f.advs, func(a model.Advertisement) bool { return a.Key() == w.Key() })
	}
	for _, a := range slices.Concat(d.Announce, d.Change) {
		// Like package bgp: a prefix for a peer not added is refused.
		if !slices.ContainsFunc(f.peers, func(p config.Peer) bool { return p.Name == a.Peer }) {
			err = errors.New("unknown peer " + a.Peer)
			continue
		}
		if a.Prefix == f.failPrefix {
			err = errors.New("refused " + a.Prefix.String())
			f.failed = append(f.failed, model.Advertisement{Peer: a.Peer, Prefix: a.Prefix, Attrs: a.Attrs,
				State: model.AdvNotApplied, Problem: err.Error() + "; not sent"})
			continue
		}
		f.advs = slices.DeleteFunc(f.advs, func(x model.Advertisement) bool { return x.Key() == a.Key() })
		f.advs = append(f.advs, model.Advertisement{Peer: a.Peer, Prefix: a.Prefix, Attrs: a.Attrs})
	}
	plan.SortAdvertisements(f.advs)
	return err
}

func (f *fakeSpeaker) Advertised() []model.Advertisement {
	f.mu.Lock()
	f.wholeReads++
	f.mu.Unlock()
	return f.advertised()
}

func (f *fakeSpeaker) advertised() []model.Advertisement {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.advs)
	for i := range out {
		out[i].State = model.AdvSent
		if f.state != "" && f.state != model.StateEstablished {
			out[i].State, out[i].Reason = model.AdvPending, "session "+string(f.state)
		}
	}
	return out
}

// AdvertisedOf is Advertised of keys, in their order.
func (f *fakeSpeaker) AdvertisedOf(keys []model.Key) []model.Advertisement {
	f.mu.Lock()
	f.keyReads++
	f.mu.Unlock()
	by := map[model.Key]model.Advertisement{}
	for _, a := range f.advertised() {
		by[a.Key()] = a
	}
	var out []model.Advertisement
	for _, k := range keys {
		if a, ok := by[k]; ok {
			out = append(out, a)
		}
	}
	return out
}

func (f *fakeSpeaker) SessionRepairs() model.SessionRepairs { return model.SessionRepairs{} }

func (f *fakeSpeaker) NotApplied() []model.Advertisement {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.failed)
}

func (f *fakeSpeaker) Peers(context.Context) ([]model.PeerStatus, error) {
	f.mu.Lock()
	on := f.onPeers
	f.mu.Unlock()
	if on != nil {
		on()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	state := f.state
	if state == "" {
		state = model.StateEstablished
	}
	var out []model.PeerStatus
	for _, p := range f.peers {
		var fams []model.FamilyCounts
		for _, fam := range p.Families {
			fams = append(fams, model.FamilyCounts{Family: string(fam), Negotiated: state == model.StateEstablished})
		}
		out = append(out, model.PeerStatus{Name: p.Name, Address: p.Address, ASN: p.ASN, State: state, EndOfRIB: f.eor, Families: fams})
		if f.bfd != "" {
			out[len(out)-1].BFD = &model.BFDStatus{State: f.bfd}
		}
	}
	return out, nil
}

func (f *fakeSpeaker) EachLearned(ctx context.Context, peer string, fn func(model.LearnedPath) error) error {
	f.mu.Lock()
	learned, n, on, failAfter, stopped := slices.Clone(f.learned), f.learnedN, f.onLearned, f.failLearnedAfter, f.stopped
	f.walks++
	f.mu.Unlock()
	if stopped {
		return errors.New("speaker is stopped") // as package bgp answers
	}
	for _, p := range learned {
		if peer != "" && p.Peer != peer {
			continue
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	for i := range n {
		if failAfter > 0 && i == failAfter {
			return errors.New("table walk failed")
		}
		if on != nil {
			on(i)
		}
		p := model.LearnedPath{
			Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32),
			NextHop: netip.MustParseAddr("192.0.2.1"), ASPath: []uint32{65001, 65002, 65003}, Origin: "igp",
			Communities: []string{"65001:100", "65001:200"}, Reason: "no import rule accepts it (default deny, RFC 8212)",
		}
		if err := fn(p); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeSpeaker) SetBMP(_ context.Context, servers []config.BMPServer, sysName, sysDescr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bmpSets++
	if f.failBMP > 0 {
		f.failBMP--
		return errors.New("bmp server x: refused")
	}
	f.bmp, f.bmpSys = servers, [2]string{sysName, sysDescr}
	return nil
}

func (f *fakeSpeaker) BMP(context.Context) ([]model.BMPStation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []model.BMPStation
	for _, s := range f.bmp {
		out = append(out, model.BMPStation{Name: s.Name, Station: netip.AddrPortFrom(s.Address, uint16(s.Port)), Up: true})
	}
	return out, nil
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
	mu        sync.Mutex
	snap      model.Snapshot
	ok        bool
	notify    func()
	closed    bool
	snapshots int // calls of Snapshot
	applies   [][]model.OVNOp
	uuids     int
	// last is the snapshot the last SnapshotDelta returned, gen its
	// generation.
	last *model.Snapshot
	gen  uint64
}

func (f *fakeNB) Snapshot(node string) (model.Snapshot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshots++
	s := f.snap
	s.Node = node
	return s, f.ok
}

// SnapshotDelta is Snapshot with what changed since the last call, found
// as the real client does not (by comparing the two snapshots): egress IPs
// and VIPs by address, anything else but the owned routes as Context.
func (f *fakeNB) SnapshotDelta(node string, since uint64) (model.Snapshot, model.SnapshotDelta, uint64, bool) {
	s, ok := f.Snapshot(node)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !ok {
		return s, model.SnapshotDelta{All: true}, 0, false
	}
	var d model.SnapshotDelta
	switch {
	case f.last == nil || since == 0 || since != f.gen:
		d.All = true
	default:
		d = snapshotDelta(*f.last, s)
	}
	if f.last == nil || !d.Empty() {
		f.gen++
	}
	f.last = &s
	return s, d, f.gen, true
}

// snapshotDelta compares two snapshots as SnapshotDelta says.
func snapshotDelta(old, now model.Snapshot) model.SnapshotDelta {
	var d model.SnapshotDelta
	eips := map[netip.Addr][]string{}
	for _, e := range old.EgressIPs {
		eips[e.IP] = append(eips[e.IP], fmt.Sprintf("%+v", e))
	}
	for _, e := range now.EgressIPs {
		eips[e.IP] = append(eips[e.IP], "+"+fmt.Sprintf("%+v", e))
	}
	vips := map[netip.Addr][]string{}
	for _, v := range old.ServiceVIPs {
		vips[v.VIP] = append(vips[v.VIP], fmt.Sprintf("%+v", v))
	}
	for _, v := range now.ServiceVIPs {
		vips[v.VIP] = append(vips[v.VIP], "+"+fmt.Sprintf("%+v", v))
	}
	changed := func(entries []string) bool {
		var a, b []string
		for _, e := range entries {
			if strings.HasPrefix(e, "+") {
				b = append(b, e[1:])
			} else {
				a = append(a, e)
			}
		}
		return !slices.Equal(a, b)
	}
	for a, e := range eips {
		if changed(e) {
			d.EgressIPs = append(d.EgressIPs, a)
		}
	}
	for a, e := range vips {
		if changed(e) {
			d.ServiceVIPs = append(d.ServiceVIPs, a)
		}
	}
	slices.SortFunc(d.EgressIPs, netip.Addr.Compare)
	slices.SortFunc(d.ServiceVIPs, netip.Addr.Compare)
	d.OwnedRoutes = !reflect.DeepEqual(old.OwnedRoutes, now.OwnedRoutes)
	o, n := old, now
	o.EgressIPs, o.ServiceVIPs, o.OwnedRoutes = nil, nil, nil
	n.EgressIPs, n.ServiceVIPs, n.OwnedRoutes = nil, nil, nil
	d.Context = !reflect.DeepEqual(o, n)
	return d
}

func (f *fakeNB) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshots
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
	if n != nil { // nil before the daemon dialled: its first pass reads the snapshot anyway
		n()
	}
}

func network(name string, prefixes ...string) model.Network {
	n := model.Network{Name: name, Topology: "layer3"}
	for _, p := range prefixes {
		n.Subnets = append(n.Subnets, model.Subnet{Prefix: netip.MustParsePrefix(p), Source: "Logical_Switch " + name})
	}
	return n
}

// cfgText is the harness's config file.
type cfgText struct {
	networks string // the pods rule's networks
	sock     string
	asn      uint32 // 0 = 65010
	gr       bool   // bgp.gracefulRestart.enabled
	logLevel string // "" = info
	// deferral is bgp.gracefulRestart.deferralTime ("" = default);
	// extra is appended as it is (e.g. import rules).
	deferral string
	extra    string
	// peerExtra is added to the peer's keys (", maxAdvertised: 2"),
	// advertiseExtra after the pods rule (more rules).
	peerExtra, advertiseExtra string
	// stateDir is the drain state's directory (the harness sets it).
	stateDir string
}

func (c cfgText) String() string {
	asn, lvl, deferral := c.asn, c.logLevel, ""
	if c.deferral != "" {
		deferral = ", deferralTime: " + c.deferral
	}
	if asn == 0 {
		asn = 65010
	}
	if lvl == "" {
		lvl = "info"
	}
	return fmt.Sprintf(`node: {name: node1}
bgp:
  asn: %d
  routerID: 192.0.2.0
  listenPort: -1
  gracefulRestart: {enabled: %v%s}
  peers:
    - {name: tor, address: 192.0.2.1, asn: 65001%s}
ovn: {northbound: "unix:/nonexistent/nb.sock"}
advertise:
  - {name: pods, kind: podNetwork, networks: [%s]}
%scontrol: {socket: %s}
metrics: {address: ""}
log: {level: %s}
stateDir: %s
%s`, asn, c.gr, deferral, c.peerExtra, c.networks, c.advertiseExtra, c.sock, lvl, c.stateDir, c.extra)
}

type harness struct {
	t       testing.TB
	dir     string
	cfgPath string
	sock    string
	sp      *fakeSpeaker
	nb      *fakeNB
	host    *fakeHost
	d       *Daemon
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	// Set by options before the daemon starts:
	cfg        cfgText
	lim        limits
	logger     *zap.Logger
	level      *zap.AtomicLevel
	newSpeaker func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error)
	loadConfig func(string) (*config.Config, error)
	dialLog    *zap.Logger // the logger DialNB was given
	// openHostErr makes OpenHost fail (netlink unavailable).
	openHostErr error
	// runErr is what run returned (stop records it).
	runErr      error
	wantRunFail bool
}

func (h *harness) writeConfig(c cfgText) {
	h.t.Helper()
	c.sock = h.sock
	if c.stateDir == "" {
		c.stateDir = filepath.Join(h.dir, "state")
	}
	if err := os.WriteFile(h.cfgPath, []byte(c.String()), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// testLimits are small enough for tests to see every bound act.
func testLimits() limits {
	l := defaultLimits()
	l.parseTimeout = 10 * time.Second
	l.peerRetryMin, l.peerRetryMax = 10*time.Millisecond, 100*time.Millisecond
	return l
}

func start(t testing.TB, networks string, options ...func(*harness)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, cfgPath: filepath.Join(dir, "config.yaml"), sock: filepath.Join(dir, "ctl.sock"),
		sp: &fakeSpeaker{}, nb: &fakeNB{}, host: &fakeHost{}, done: make(chan error, 1), cfg: cfgText{networks: networks}, lim: testLimits(),
		logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))}
	h.newSpeaker = func(_ context.Context, cfg config.BGP, _ *zap.Logger, _ func()) (Speaker, error) {
		// Like bgp.New: the peers of the global config are added. The
		// one fake serves every speaker the daemon starts.
		h.sp.mu.Lock()
		h.sp.stopped = false
		h.sp.mu.Unlock()
		return h.sp, h.sp.SetPeers(context.Background(), cfg.Peers)
	}
	h.loadConfig = config.Load
	for _, o := range options {
		o(h)
	}
	h.writeConfig(h.cfg)
	cfg, err := config.Load(h.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := newLogging(cfg.Log, h.logger, h.level)
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{
		NewSpeaker: func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error) {
			return h.newSpeaker(ctx, cfg, log, notify)
		},
		DialNB: func(_ context.Context, _ config.OVN, log *zap.Logger, notify func()) (Northbound, error) {
			h.nb.mu.Lock()
			h.nb.notify = notify
			h.dialLog = log
			h.nb.mu.Unlock()
			return h.nb, nil
		},
		LoadConfig: func(_ context.Context, path string) (*config.Config, error) { return h.loadConfig(path) },
		OpenHost: func(_ int, _ *zap.Logger, notify func()) (Host, error) {
			if h.openHostErr != nil {
				return nil, h.openHostErr
			}
			h.host.mu.Lock()
			h.host.notify = notify
			h.host.mu.Unlock()
			return h.host, nil
		},
	}
	h.d = newDaemon(Options{ConfigPath: h.cfgPath, Version: "test"}, deps, h.lim, logs, cfg)
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
		case h.runErr = <-h.done:
			if h.runErr != nil && !h.wantRunFail {
				h.t.Errorf("run: %v", h.runErr)
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
		time.Sleep(5 * time.Millisecond)
	}
}

// passDone waits until the loop has finished a whole pass begun after this
// call: the NB is read at the start of every pass and the loop runs one
// pass at a time, so a second read after a poke proves the first pass
// ended.
func (h *harness) passDone() {
	h.t.Helper()
	n := h.nb.reads()
	h.d.poke()
	h.eventually("a reconcile pass", func() bool { return h.nb.reads() >= n+1 })
	h.d.poke()
	h.eventually("a second reconcile pass", func() bool { return h.nb.reads() >= n+2 })
}

func (h *harness) wantPrefixes(want ...string) {
	h.t.Helper()
	slices.Sort(want)
	h.eventually("advertised "+strings.Join(want, ", "), func() bool { return slices.Equal(h.sp.prefixes(), want) })
}

func TestNothingBeforeFirstSync(t *testing.T) {
	h := start(t, `"*"`)
	h.nb.set(false, network("default", "10.128.0.0/23"))
	h.passDone()
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
	h.sp.mu.Lock()
	h.sp.learned = []model.LearnedPath{
		{Peer: "tor", Prefix: netip.MustParsePrefix("198.51.100.0/24"), Accepted: true, Reason: "rule uplink"},
		{Peer: "tor", Prefix: netip.MustParsePrefix("203.0.113.0/24"), Reason: "default deny"},
		{Peer: "tor", Prefix: netip.MustParsePrefix("192.0.2.128/25"), Accepted: true, Reason: "rule uplink"},
		{Peer: "tor", Prefix: netip.MustParsePrefix("203.0.113.128/25"), Reason: "default deny"},
	}
	h.sp.mu.Unlock()
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
	prefixes := func(paths []api.LearnedRoute) string {
		var s []string
		for _, p := range paths {
			s = append(s, p.Prefix.String())
		}
		return strings.Join(s, " ")
	}
	rejected, err := c.Learned(ctx, "tor", true)
	if got, want := prefixes(rejected), "203.0.113.0/24 203.0.113.128/25"; err != nil || got != want {
		t.Fatalf("Learned(rejected) = %s, %v; want %s", got, err, want)
	}
	all, err := c.Learned(ctx, "", false)
	if got, want := prefixes(all), "198.51.100.0/24 203.0.113.0/24 192.0.2.128/25 203.0.113.128/25"; err != nil || got != want {
		t.Fatalf("Learned = %s, %v; want %s", got, err, want)
	}
	if _, err := c.Learned(ctx, "nope", false); err == nil || !strings.Contains(err.Error(), `no such peer "nope"`) {
		t.Fatalf("learned, unknown peer: err = %v", err)
	}
	st, err := c.Status(ctx)
	if err != nil || !st.Ready || st.Node != "node1" || st.Reconciles == 0 || st.Phase != api.PhaseRunning {
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
	h.writeConfig(cfgText{networks: `"*"`})
	h.d.reload <- struct{}{}
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	if st := h.d.status(); st.ConfigError != "" {
		t.Fatalf("ConfigError = %q after a good reload", st.ConfigError)
	}
}

func TestStopIsGracefulOnlyWithGR(t *testing.T) {
	for _, gr := range []bool{false, true} {
		t.Run(fmt.Sprintf("gracefulRestart=%v", gr), func(t *testing.T) {
			h := start(t, "default", func(h *harness) { h.cfg.gr = gr })
			h.stop()
			h.sp.mu.Lock()
			defer h.sp.mu.Unlock()
			if !h.sp.stopped || h.sp.graceful != gr {
				t.Fatalf("stopped=%v graceful=%v; want a stop with graceful=%v", h.sp.stopped, h.sp.graceful, gr)
			}
			if !h.nb.closed {
				t.Fatal("NB client not closed")
			}
			if _, err := os.Stat(h.sock); !os.IsNotExist(err) {
				t.Fatalf("control socket left behind: %v", err)
			}
		})
	}
}

// metricsScraper serves the daemon's metrics on a free loopback port for
// the test and returns a function that scrapes /metrics, and the address.
func metricsScraper(t *testing.T, h *harness) (func() string, string) {
	t.Helper()
	m, err := h.d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	addr := m.ln.Addr().String()
	return func() string {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}, addr
}

// ovnbgp_peer_bfd_up follows the peer's BFD state; it is absent while BFD
// is not enabled.
func TestMetricsBFD(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	scrape, _ := metricsScraper(t, h)
	if body := scrape(); strings.Contains(body, "ovnbgp_peer_bfd_up{") {
		t.Errorf("ovnbgp_peer_bfd_up without BFD enabled:\n%s", body)
	}
	for _, c := range []struct {
		state model.BFDState
		line  string
	}{{model.BFDUp, `ovnbgp_peer_bfd_up{peer="tor"} 1`}, {model.BFDDown, `ovnbgp_peer_bfd_up{peer="tor"} 0`}} {
		h.sp.mu.Lock()
		h.sp.bfd = c.state
		h.sp.mu.Unlock()
		if body := scrape(); !strings.Contains(body, c.line+"\n") {
			t.Errorf("BFD %s: metrics lack %q", c.state, c.line)
		}
	}
}

// metricValue is the value of the unlabelled sample name in a scrape.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("metrics lack %s", name)
	return 0
}

func TestMetrics(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	scrape, addr := metricsScraper(t, h)
	want := func(body string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(body, l+"\n") {
				t.Errorf("metrics lack %q", l)
			}
		}
	}
	want(scrape(),
		`ovnbgp_peer_established{peer="tor"} 1`,
		`ovnbgp_peer_state{peer="tor"} 6`,
		`ovnbgp_advertisements{peer="tor",state="sent"} 1`,
		`ovnbgp_northbound_connected 1`,
		`ovnbgp_reconcile_failing 0`,
		`ovnbgp_build_info{node="node1",version="test"} 1`,
		`ovnbgp_reconcile_errors_total 0`,
	)
	if v := metricValue(t, scrape(), "ovnbgp_reconcile_duration_seconds_count"); v < 1 {
		t.Errorf("ovnbgp_reconcile_duration_seconds_count = %v after a reconcile, want >= 1", v)
	}

	// Every value follows the daemon's state.
	h.sp.mu.Lock()
	h.sp.state = model.StateActive
	h.sp.failPrefix = netip.MustParsePrefix("10.130.0.0/23")
	h.sp.mu.Unlock()
	h.nb.set(true, network("default", "10.128.0.0/23", "10.129.0.0/23", "10.130.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.129.0.0/23")
	h.eventually("the failure in status", func() bool { return h.d.status().LastError != "" })
	h.nb.mu.Lock()
	h.nb.ok = false // disconnected (Status reports ok as connected)
	h.nb.mu.Unlock()
	want(scrape(),
		`ovnbgp_peer_established{peer="tor"} 0`,
		`ovnbgp_peer_state{peer="tor"} 3`,
		`ovnbgp_advertisements{peer="tor",state="pending"} 2`,
		`ovnbgp_advertisements_not_applied{peer="tor"} 1`,
		`ovnbgp_northbound_connected 0`,
		`ovnbgp_reconcile_failing 1`,
	)
	if v := metricValue(t, scrape(), "ovnbgp_reconcile_errors_total"); v < 1 {
		t.Errorf("ovnbgp_reconcile_errors_total = %v after a failed reconcile, want >= 1", v)
	}

	// The refused prefix is in status and in `routes advertised`, with its
	// problem.
	if n := h.d.status().NotApplied; n != 1 {
		t.Errorf("status NotApplied = %d, want 1", n)
	}
	var refused []model.Advertisement
	for _, a := range h.d.advertised(h.sp, "tor") {
		if a.State == model.AdvNotApplied {
			refused = append(refused, a)
		}
	}
	if len(refused) != 1 || refused[0].Prefix.String() != "10.130.0.0/23" || !strings.Contains(refused[0].Problem, "refused") ||
		refused[0].Rule == "" {
		t.Errorf("routes advertised lists as not applied %+v, want 10.130.0.0/23 with its rule and problem", refused)
	}

	if _, err := h.d.serveMetrics(addr); err == nil || !strings.Contains(err.Error(), `metrics.address: ""`) {
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
	// A whole pass without NB data: had it told systemd anything, that
	// message would come before the status below.
	h.passDone()
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

// TestExportCapLogOnce: the export cap warns once when a peer starts
// holding prefixes back, not at every change of the count (churn at the
// cap), and says at Info when it holds nothing back again.
func TestExportCapLogOnce(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	d := &Daemon{log: zap.New(core)}
	held := func(n int) map[string]int {
		if n == 0 {
			return map[string]int{}
		}
		return map[string]int{"tor": n}
	}
	why := func(string) (string, int) { return "held back: export cap", 5 }
	steps := []struct {
		before, now int
		want        string
	}{
		{0, 2, "warn export cap reached: prefixes held back"},
		{2, 3, ""},
		{3, 1, ""},
		{1, 0, "info export cap no longer holds anything back"},
		{0, 0, ""},
		{0, 1, "warn export cap reached: prefixes held back"},
	}
	for _, st := range steps {
		d.logExportCaps(held(st.before), held(st.now), why)
		var got []string
		for _, e := range logs.TakeAll() {
			got = append(got, e.Level.String()+" "+e.Message)
		}
		if strings.Join(got, "; ") != st.want {
			t.Errorf("held back %d -> %d: logged %q, want %q", st.before, st.now, got, st.want)
		}
	}
}

// TestExportCapHeldBack: a peer's maxAdvertised keeps the speaker from
// being asked for more (the pod subnet first, then egress IPs in prefix
// order); what is held back is in `routes advertised` with its state and
// why, and in `peers`; when the cap fits again, it is sent.
func TestExportCapHeldBack(t *testing.T) {
	h := start(t, "default", func(h *harness) {
		h.cfg.peerExtra = ", maxAdvertised: 2"
		h.cfg.advertiseExtra = "  - {name: eips, kind: egressIP}\n"
	})
	eip := func(ip string) model.EgressIP {
		return model.EgressIP{IP: netip.MustParseAddr(ip), Network: "default", Router: "GR_node1", Name: "e", Source: "NAT " + ip}
	}
	h.nb.mu.Lock()
	h.nb.snap, h.nb.ok = model.Snapshot{Networks: []model.Network{network("default", "10.128.0.0/23")},
		EgressIPs: []model.EgressIP{eip("172.18.0.102"), eip("172.18.0.100"), eip("172.18.0.101")}}, true
	n := h.nb.notify
	h.nb.mu.Unlock()
	if n != nil {
		n()
	}
	h.d.poke()
	h.wantPrefixes("tor 10.128.0.0/23", "tor 172.18.0.100/32")
	c := api.NewClient(h.sock)
	ctx := context.Background()
	h.eventually("two held back in routes advertised", func() bool {
		advs, err := c.Advertised(ctx, "")
		if err != nil {
			return false
		}
		var held []string
		for _, a := range advs {
			// How many tor selected is read when the list is shown.
			if a.State == model.AdvHeldBack && a.Reason == "held back: export cap: peer tor takes at most 2 prefixes (maxAdvertised), 4 selected" {
				held = append(held, a.Prefix.String())
			}
		}
		return slices.Equal(held, []string{"172.18.0.101/32", "172.18.0.102/32"})
	})
	peers, err := c.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].HeldBack != 2 {
		t.Fatalf("Peers = %+v, %v; want tor with 2 held back", peers, err)
	}
	scrape, _ := metricsScraper(t, h)
	if body := scrape(); !strings.Contains(body, `ovnbgp_export_cap_reached{peer="tor"} 1`+"\n") {
		t.Errorf("metrics lack ovnbgp_export_cap_reached 1 for tor while it holds back prefixes")
	}

	// 172.18.0.99 comes first in prefix order: it displaces 172.18.0.100,
	// which must be withdrawn before 172.18.0.99 is announced.
	h.nb.mu.Lock()
	h.nb.snap.EgressIPs = append(h.nb.snap.EgressIPs, eip("172.18.0.99"))
	h.nb.mu.Unlock()
	h.d.poke()
	h.wantPrefixes("tor 10.128.0.0/23", "tor 172.18.0.99/32")
	h.sp.mu.Lock()
	peak := h.sp.peak["tor"]
	h.sp.mu.Unlock()
	if peak > 2 {
		t.Errorf("tor held %d prefixes at once, its cap is 2", peak)
	}

	h.nb.mu.Lock()
	h.nb.snap.EgressIPs = h.nb.snap.EgressIPs[:1] // only 172.18.0.102 left
	h.nb.mu.Unlock()
	h.d.poke()
	h.wantPrefixes("tor 10.128.0.0/23", "tor 172.18.0.102/32")
	if peers, err := c.Peers(ctx); err != nil || peers[0].HeldBack != 0 {
		t.Fatalf("Peers after the cap fits = %+v, %v; want none held back", peers, err)
	}
	if body := scrape(); !strings.Contains(body, `ovnbgp_export_cap_reached{peer="tor"} 0`+"\n") {
		t.Errorf("metrics lack ovnbgp_export_cap_reached 0 for tor once the cap fits")
	}
}

// TestApplyAdvertiseSplit: a capped peer that gets a prefix displacing
// another never holds more than its cap, and an uncapped peer whose prefix
// is replaced is never left without one (its change is not split).
func TestApplyAdvertiseSplit(t *testing.T) {
	a := func(peer, prefix string) model.Advertisement {
		return model.Advertisement{Peer: peer, Prefix: netip.MustParsePrefix(prefix)}
	}
	capped := config.Peer{Name: "tor", MaxAdvertised: 2}
	other := config.Peer{Name: "tor2"}
	cfg := &config.Config{BGP: config.BGP{Peers: []config.Peer{capped, other}}}
	sp := &fakeSpeaker{peers: []config.Peer{capped, other},
		advs: []model.Advertisement{a("tor", "192.0.2.10/32"), a("tor", "192.0.2.11/32"), a("tor2", "192.0.2.20/32")}}
	diff := model.AdvertDiff{
		Withdraw: []model.Advertisement{a("tor", "192.0.2.10/32"), a("tor2", "192.0.2.20/32")},
		Announce: []model.Advertisement{a("tor", "192.0.2.9/32"), a("tor2", "192.0.2.21/32")},
	}
	if err := applyAdvertise(context.Background(), cfg, sp, diff); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(sp.prefixes()), "[tor 192.0.2.11/32 tor 192.0.2.9/32 tor2 192.0.2.21/32]"; got != want {
		t.Errorf("after the diff the speaker has %s, want %s", got, want)
	}
	if sp.peak["tor"] > 2 {
		t.Errorf("tor held %d prefixes at once, its cap is 2", sp.peak["tor"])
	}
	if sp.low["tor2"] < 1 {
		t.Errorf("tor2 was left with %d prefixes between the withdrawal and the announcement of its replacement", sp.low["tor2"])
	}
}
