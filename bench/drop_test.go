package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// envDrop lists the sizes of the drop job, e.g. "30000,100000" (default
// 100000).
const envDrop = "OVNBGP_BENCH_DROP"

// dropMaxRoutes is the import rule's maxRoutes in the drop job: the
// default of config.ImportRule, so nearly every prefix is held back.
const dropMaxRoutes = 1000

// How the loop is watched: the daemon's systemd watchdog ping, sent from
// its loop every half of WATCHDOG_USEC (so every dropPing), to a
// NOTIFY_SOCKET the bench listens on; and /v1/status asked every
// dropStatusEvery (Daemon.mu: what every CLI call waits for).
const (
	dropWatchdog    = 10 * time.Millisecond
	dropPing        = dropWatchdog / 2
	dropStatusEvery = 5 * time.Millisecond
	// dropAfter: the probes run this long before the drop and after the
	// last route is gone.
	dropAfter = time.Second
)

// BenchmarkImportDrop (issue 17, item 7): a peer with N accepted prefixes
// (OVNBGP_BENCH_DROP, 100000), far more than the rule's maxRoutes (1000),
// drops its session (the ToR shuts the neighbor). Before the fix the cap's
// recap scanned every held-back prefix for each kept one that left, and
// the loop froze for minutes. Reported, over the drop (from the ToR's
// shutdown until the node's kernel table is empty and the daemon's table
// holds no path, plus dropAfter): the loop's stalls, the gaps between its
// watchdog pings (nominal dropPing), p50, p99 and max; the latency of
// /v1/status, p50, p99 and max; and the time from the shutdown to the
// kernel table empty. ovnbgp only: FRR and BIRD have no import cap that
// holds routes back and lets them in when a slot frees.
func BenchmarkImportDrop(b *testing.B) {
	gate(b)
	sizes := []int{100000}
	if v := strings.TrimSpace(os.Getenv(envDrop)); v != "" {
		var err error
		if sizes, err = parseImportSizes(v); err != nil {
			b.Fatal(strings.ReplaceAll(err.Error(), envImport, envDrop))
		}
	}
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) { importDropRun(benchRun(b), n, dropMaxRoutes) })
	}
}

// pinger records the daemon's watchdog pings (sd_notify "WATCHDOG=1").
type pinger struct {
	conn *net.UnixConn
	mu   sync.Mutex
	at   []time.Time
	done chan struct{}
}

func listenPings(b testing.TB, path string) *pinger {
	b.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		b.Fatalf("notify socket: %v", err)
	}
	p := &pinger{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			now := time.Now()
			if bytes.Contains(buf[:n], []byte("WATCHDOG=1")) {
				p.mu.Lock()
				p.at = append(p.at, now)
				p.mu.Unlock()
			}
		}
	}()
	b.Cleanup(p.close)
	return p
}

func (p *pinger) close() {
	p.conn.Close()
	<-p.done
}

// gaps are the times between consecutive pings, of those whose second
// ping came in [from, to] (the gap that spans from counts).
func (p *pinger) gaps(from, to time.Time) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(p.at); i++ {
		if p.at[i].Before(from) || p.at[i].After(to) {
			continue
		}
		out = append(out, p.at[i].Sub(p.at[i-1]))
	}
	return out
}

// statusProbe asks /v1/status every dropStatusEvery and records each
// answer's latency and the last answer.
type statusProbe struct {
	mu   sync.Mutex
	lat  []time.Duration
	at   []time.Time
	last api.Status
	err  error
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func probeStatus(sock string) *statusProbe {
	s := &statusProbe{stop: make(chan struct{}), done: make(chan struct{})}
	c := api.NewClient(sock)
	go func() {
		defer close(s.done)
		for {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			st, err := c.Status(ctx)
			cancel()
			lat := time.Since(start)
			s.mu.Lock()
			s.lat, s.at = append(s.lat, lat), append(s.at, start)
			s.last, s.err = st, err
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(time.Until(start.Add(dropStatusEvery))):
			}
		}
	}()
	return s
}

func (s *statusProbe) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// status is the last answer, and how many it got.
func (s *statusProbe) status() (api.Status, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, len(s.lat), s.err
}

// latencies are those of the requests sent in [from, to].
func (s *statusProbe) latencies(from, to time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for i, at := range s.at {
		if !at.Before(from) && !at.After(to) {
			out = append(out, s.lat[i])
		}
	}
	return out
}

func paths(st api.Status) int {
	if st.Import == nil {
		return -1
	}
	return st.Import.Accepted + st.Import.Rejected
}

// importDropRun is the drop job: a peer with n accepted prefixes, an
// import rule with maxRoutes, the peer drops.
func importDropRun(b jobRun, n, maxRoutes int) {
	after := b.pause(dropAfter)
	l := lab.New(b)
	nb := l.StartNB()
	nb.PopulateOVNK()
	ps := importPrefixes(n)
	t := &torFeed{l: l}
	t.blackholes(b, ps)
	t.frr = l.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: nodeASN, Passive: true}}})
	t.shut(b, true)
	t.load(b, ps)
	counter, err := openRouteCounter(l.Node)
	if err != nil {
		b.Fatalf("kernel route counter in %s: %v", l.Node, err)
	}
	defer counter.close()

	peer := lab.DefaultTor()
	peer.MaxPrefixes = 2 * n
	importYAML := fmt.Sprintf(`kernel: {routeProtocol: %d}
import:
  - name: bench
    peers: [tor]
    network: default
    accept:
      - {prefix: 32.0.0.0/5, minLength: 24, maxLength: 24}
    maxRoutes: %d
    targets: {ovn: false, kernel: {table: %d}}
`, ovnbgpProto, maxRoutes, ovnbgpImportTable)
	// FRR sends no End-of-RIB without graceful restart: a short deferral,
	// so that fail static holds nothing back when the peer drops.
	cfg := lab.DaemonConfig{Peers: []lab.Peer{peer}, Advertise: podsRule, DeferralTime: 5 * time.Second}
	pings := listenPings(b, filepath.Join(l.Dir, "notify.sock"))
	d := startOvnbgpEnv(b, l, nb, cfg, importYAML, []string{
		"NOTIFY_SOCKET=" + filepath.Join(l.Dir, "notify.sock"),
		"WATCHDOG_USEC=" + strconv.Itoa(int(dropWatchdog/time.Microsecond)),
	})
	sock := filepath.Join(l.Dir, "ovnbgp", "ovnbgp.sock")
	lab.Eventually(b, 60*time.Second, 50*time.Millisecond, "ovnbgp's control socket", func() error {
		if err := d.exited(); err != nil {
			return err
		}
		_, err := os.Stat(sock)
		return err
	})
	c := api.NewClient(sock)

	// The session up, all N learned, the cap's 1000 in the kernel.
	t.shut(b, false)
	t.waitEstablished(b, d.exited)
	lab.Eventually(b, b.timeout(5*time.Minute), 200*time.Millisecond, fmt.Sprintf("ovnbgp holds %d paths, %d of them in table %d", n, min(n, maxRoutes), ovnbgpImportTable), func() error {
		if err := d.exited(); err != nil {
			return err
		}
		st, err := c.Status(context.Background())
		if err != nil {
			return err
		}
		k, err := counter.count(ovnbgpImportTable, ovnbgpProto)
		if err != nil {
			return err
		}
		// The ToR sends the node's own two pod subnets back too.
		if paths(st) < n || k != min(n, maxRoutes) {
			return fmt.Errorf("%d paths, %d routes in the kernel", paths(st), k)
		}
		return nil
	})
	// Let the passes that follow the load run (the peer's walk after its
	// burst, a memory trim).
	time.Sleep(b.pause(3 * time.Second))

	probe := probeStatus(sock)
	defer probe.close()
	prof := profileDrop(b, l)
	time.Sleep(after)
	before := time.Now()
	down := t.shut(b, true)
	var gone time.Time
	wait := b.timeout(5 * time.Minute)
	deadline := down.Add(wait)
	for {
		if err := d.exited(); err != nil {
			b.Fatal(err)
		}
		st, asked, serr := probe.status()
		k, err := counter.count(ovnbgpImportTable, ovnbgpProto)
		if err != nil {
			b.Fatal(err)
		}
		if gone.IsZero() && k == 0 {
			gone = time.Now()
		}
		if !gone.IsZero() && paths(st) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%v after the ToR shut the session: %d routes in table %d, the daemon holds %d paths (%d status answers, last error %v)",
				wait, k, ovnbgpImportTable, paths(st), asked, serr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	settled := time.Now()
	time.Sleep(after)
	end := time.Now()
	probe.close()
	pings.close()
	prof()

	idle := pings.gaps(before.Add(-after), before)
	gaps := pings.gaps(down, end)
	lat := probe.latencies(down, end)
	if len(gaps) == 0 || len(lat) == 0 {
		b.Fatalf("no watchdog ping (%d) or status answer (%d) during the drop: is the watchdog off?", len(gaps), len(lat))
	}
	over := 0
	for _, g := range gaps {
		if g > 50*time.Millisecond {
			over++
		}
	}
	job := fmt.Sprintf("a %d-prefix peer drops (maxRoutes %d)", n, maxRoutes)
	b.record(job+", loop stall p50", "ms", false, ovnbgpName, ms(percentile(gaps, 50)))
	b.record(job+", loop stall p99", "ms", false, ovnbgpName, ms(percentile(gaps, 99)))
	b.record(job+", loop stall max", "ms", false, ovnbgpName, ms(percentile(gaps, 100)))
	b.record(job+", status answer p99", "ms", false, ovnbgpName, ms(percentile(lat, 99)))
	b.record(job+", status answer max", "ms", false, ovnbgpName, ms(percentile(lat, 100)))
	b.record(job+", session down→kernel table empty", "ms", false, ovnbgpName, ms(gone.Sub(down)))
	b.metric(ms(percentile(gaps, 99)), "stall-p99-ms")
	b.metric(ms(percentile(gaps, 100)), "stall-max-ms")
	b.metric(ms(percentile(lat, 99)), "status-p99-ms")
	b.metric(0, "ns/op")
	b.Logf("%d-prefix peer drops, maxRoutes %d: loop stalls (watchdog ping gaps, nominal %v; idle before: p99 %v, max %v) over %v: "+
		"%d gaps, p50 %v, p99 %v, max %v, %d above 50 ms; /v1/status answered %d times, p50 %v, p99 %v, max %v; "+
		"session down→kernel table empty %v, →daemon's table empty %v (goal: no stall above 50 ms)",
		n, maxRoutes, dropPing, pretty(percentile(idle, 99)), pretty(percentile(idle, 100)), pretty(end.Sub(down)),
		len(gaps), pretty(percentile(gaps, 50)), pretty(percentile(gaps, 99)), pretty(percentile(gaps, 100)), over,
		len(lat), pretty(percentile(lat, 50)), pretty(percentile(lat, 99)), pretty(percentile(lat, 100)),
		pretty(gone.Sub(down)), pretty(settled.Sub(down)))
}

// envDropProfile names a file for a CPU profile of the daemon over the
// drop (OVNBGP_BENCH_DROP_PROFILE=/tmp/drop.prof): the daemon must be
// built with -tags ovnbgp_pprof and OVNBGP_PPROF=127.0.0.1:6060 set
// (bench/README.md, "Profiling the daemon"). The returned func waits for
// the profile.
const envDropProfile = "OVNBGP_BENCH_DROP_PROFILE"

func profileDrop(b testing.TB, l *lab.Lab) func() {
	cpu := profileDaemon(b, l, "CPU profile over the drop", os.Getenv(envDropProfile), "/debug/pprof/profile?seconds=6")
	trace := profileDaemon(b, l, "execution trace over the drop", os.Getenv(envDropTrace), "/debug/pprof/trace?seconds=6")
	return func() { cpu(); trace() }
}

// profileDaemon fetches the daemon's pprof path into out (nothing when out
// or OVNBGP_PPROF is empty: the daemon must be built with -tags
// ovnbgp_pprof, bench/README.md "Profiling the daemon"), on a goroutine;
// the returned func waits for it.
func profileDaemon(b testing.TB, l *lab.Lab, what, out, path string) func() {
	addr := os.Getenv("OVNBGP_PPROF")
	if addr == "" || out == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, _, err := runTool("ip", "netns", "exec", l.Node, "curl", "-sfo", out, "http://"+addr+path); err != nil {
			b.Logf("%s: %v", what, err)
			return
		}
		b.Logf("the daemon's %s: %s", what, out)
	}()
	return wg.Wait
}

// envDropTrace names a file for an execution trace of the daemon over the
// drop (go tool trace), under the same conditions as envDropProfile: where
// the loop goroutine waits, not only where the CPU goes.
const envDropTrace = "OVNBGP_BENCH_DROP_TRACE"
