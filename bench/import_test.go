package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// envImport lists the sizes of the kernel import job, e.g. "10000,100000"
// (the default).
const envImport = "OVNBGP_BENCH_IMPORT"

// envImportProfile names a file for a CPU profile of ovnbgp over an
// import job's idle pause and import (8 s), as OVNBGP_BENCH_DROP_PROFILE.
const envImportProfile = "OVNBGP_BENCH_IMPORT_PROFILE"

// envImportTrace names a file for an execution trace of ovnbgp over the
// same window as envImportProfile (go tool trace): when the loop waits
// for paths and when it works.
const envImportTrace = "OVNBGP_BENCH_IMPORT_TRACE"

// envImportHeap names a file for a heap profile of ovnbgp holding all the
// routes of an import job (the pprof build, as envImportProfile).
const envImportHeap = "OVNBGP_BENCH_IMPORT_HEAP"

// envIdle is how long each contender is watched idle once it holds all the
// routes, for sizes up to maxIdleSize: a Go duration, default 60s; 0 turns
// the idle measurement off.
const envIdle = "OVNBGP_BENCH_IDLE"

const (
	defaultIdle = 60 * time.Second
	// maxIdleSize: the idle measurement is "idle CPU with 10k routes"
	// (issue 9); larger sizes skip it.
	maxIdleSize = 10000
)

// maxImport: the job's prefixes are /24s of 32.0.0.0/5 (524288 of them),
// which no protected prefix of the lab overlaps.
const maxImport = 1 << 19

// The kernel tables and route protocols the contenders install into.
// ovnbgp: its import rule's table 100, its default protocol 200. FRR:
// zebra's main table, protocol bgp (186): zebra installs into another table
// only through a VRF, which this kernel lacks (LAB.md pitfall 3). BIRD:
// birdTable and birdProto (nodebird_test.go).
const (
	ovnbgpImportTable = 100
	ovnbgpProto       = 200
	frrTable          = 254 // RT_TABLE_MAIN
	frrProto          = 186 // RTPROT_BGP
)

// How the node's kernel table is watched: a filtered netlink dump (see
// routeCounter) every importInterval.
const (
	importInterval = 100 * time.Millisecond
	importTimeout  = 5 * time.Minute
)

func importSizes(b *testing.B) []int {
	b.Helper()
	sizes, err := parseImportSizes(os.Getenv(envImport))
	if err != nil {
		b.Fatal(err)
	}
	return sizes
}

// parseImportSizes reads OVNBGP_BENCH_IMPORT's value ("" = the default).
func parseImportSizes(v string) ([]int, error) {
	if strings.TrimSpace(v) == "" {
		return []int{10000, 100000}, nil
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxImport {
			return nil, fmt.Errorf("%s=%q: want sizes between 1 and %d, comma-separated, e.g. 10000,100000", envImport, v, maxImport)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// parseIdle reads OVNBGP_BENCH_IDLE's value ("" = defaultIdle, 0 = off).
func parseIdle(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return defaultIdle, nil
	case "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 60s or 2m (0 turns the idle measurement off)", envIdle, v)
	}
	if d > 0 && d < time.Second {
		return 0, fmt.Errorf("%s=%q: want at least 1s (periodic work runs every few seconds at best), or 0 to turn it off", envIdle, v)
	}
	return d, nil
}

// importPrefixes are the first n /24s of 32.0.0.0/5.
func importPrefixes(n int) []netip.Prefix {
	ps := make([]netip.Prefix, n)
	for i := range ps {
		ps[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{32 + byte(i>>16), byte(i >> 8), byte(i), 0}), 24)
	}
	return ps
}

// BenchmarkImportKernel: the ToR announces N /24s (OVNBGP_BENCH_IMPORT,
// 10000 and 100000); the node installs them in its kernel. Contenders, one
// after the other against the same ToR in the same lab: ovnbgp with an
// import rule into table 100 (no OVN target); a second FRR (bgpd + zebra)
// in the node namespace installing them in its main table; BIRD 2 in the
// node namespace exporting them into table 101. Each starts with the ToR's
// neighbor shut down, so its idle RSS is measured with 0 paths; then the
// ToR lets the session up. Reported: the time from the session's
// Established (the ToR's uptime for it) to the first poll that sees all N
// in the kernel table; the daemons' CPU for it; RSS with 0 and N paths and
// (RSS - idle) / N. For N <= 10000, also the daemons' CPU while they hold
// the N routes idle (OVNBGP_BENCH_IDLE, 60 s), per minute.
func BenchmarkImportKernel(b *testing.B) {
	gate(b)
	idle, err := parseIdle(os.Getenv(envIdle))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range importSizes(b) {
		window := idle
		if n > maxIdleSize {
			window = 0
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) { importKernelRun(benchRun(b), n, window) })
	}
}

// importResult is one contender's import of N routes.
type importResult struct {
	upToAll     time.Duration // session Established -> all N in the kernel table
	firstToAll  time.Duration // the first UPDATE's write -> all N (the injector only)
	unshutToAll time.Duration // the ToR let the session up -> all N in the kernel table
	cpu         time.Duration // the node daemons' CPU time over that
	idle, full  memory        // the node daemons' memory with 0 and N paths
	slowest     time.Duration // the slowest kernel-table count
	// idleCPU is the node daemons' CPU time over idleWindow, while they
	// held all N routes and nothing changed (0 window: not measured), and
	// idleRuns how many times their threads were put on a CPU meanwhile
	// (wakeups: timers, polls, keepalives).
	idleCPU, idleWindow time.Duration
	idleRuns            uint64
}

func (r importResult) perPath(n int) float64 {
	if r.full.rss < r.idle.rss {
		return 0
	}
	return float64(r.full.rss-r.idle.rss) / float64(n)
}

// importKernelRun is the kernel import job at size n: the three
// contenders in turn, each with an idle window of idle after the import
// (0: none).
func importKernelRun(b jobRun, n int, idle time.Duration) {
	l := lab.New(b)
	nb := l.StartNB()
	nb.PopulateOVNK()
	// The blackholes go into the ToR's kernel before its zebra starts:
	// zebra then reads them in its startup dump. Added under a running
	// zebra, 500k of them overflow its netlink socket and some are lost
	// (481,321 of 500,000 reached bgpd, for good).
	ps := importPrefixes(n)
	t := &torFeed{l: l}
	t.blackholes(b, ps)
	t.frr = l.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: nodeASN, Passive: true}}})
	t.shut(b, true)
	t.load(b, ps)

	ob, fr, br := importContenders(b, l, nb, t, n, idle)

	job := fmt.Sprintf("import %d /24 into the kernel", n)
	results := []struct {
		name string
		r    importResult
	}{{ovnbgpName, ob}, {frrName, fr}, {birdName, br}}
	for _, x := range results {
		b.record(job+", session up→all in kernel", "ms", false, x.name, ms(x.r.upToAll))
		b.record(job+", routes/s from session up", "routes/s", true, x.name, float64(n)/x.r.upToAll.Seconds())
		b.record(job+", node daemons' CPU", "ms", false, x.name, ms(x.r.cpu))
		b.record(job+", node daemons' RSS idle (0 paths)", "MiB", false, x.name, mib(x.r.idle.rss))
		b.record(job+", node daemons' RSS with all", "MiB", false, x.name, mib(x.r.full.rss))
		b.record(job+", RSS per learned+imported path", "bytes", false, x.name, x.r.perPath(n))
	}
	if idle > 0 {
		for _, x := range results {
			b.record(fmt.Sprintf("idle with %d routes, node daemons' CPU per minute", n), "ms/min", false,
				x.name, perMinute(x.r.idleCPU, x.r.idleWindow))
			b.record(fmt.Sprintf("idle with %d routes, node daemons' wakeups per minute", n), "1/min", false,
				x.name, countPerMinute(x.r.idleRuns, x.r.idleWindow))
		}
	}
	b.metric(ms(ob.upToAll), "ovnbgp-ms")
	b.metric(ms(fr.upToAll), "frr-ms")
	b.metric(ms(br.upToAll), "bird-ms")
	b.metric(float64(ob.upToAll)/float64(fr.upToAll), "ovnbgp/frr")
	b.metric(float64(ob.upToAll)/float64(br.upToAll), "ovnbgp/bird")
	b.metric(ob.perPath(n), "ovnbgp-B/path")
	b.metric(fr.perPath(n), "frr-B/path")
	b.metric(br.perPath(n), "bird-B/path")
	if idle > 0 {
		b.metric(perMinute(ob.idleCPU, ob.idleWindow), "ovnbgp-idle-ms/min")
		b.metric(perMinute(fr.idleCPU, fr.idleWindow), "frr-idle-ms/min")
		b.metric(perMinute(br.idleCPU, br.idleWindow), "bird-idle-ms/min")
	}
	b.metric(0, "ns/op")
	b.Logf("import %d, session up to all in the kernel: ovnbgp %v, FRR %v, BIRD %v: ovnbgp/FRR = %.2fx, ovnbgp/BIRD = %.2fx "+
		"(goal <= 1.0x); RSS per path: ovnbgp %.0f B, FRR %.0f B, BIRD %.0f B (goal <= 1024 B)", n,
		pretty(ob.upToAll), pretty(fr.upToAll), pretty(br.upToAll),
		float64(ob.upToAll)/float64(fr.upToAll), float64(ob.upToAll)/float64(br.upToAll),
		ob.perPath(n), fr.perPath(n), br.perPath(n))
}

// importSender is what feeds a kernel import job: the FRR ToR (torFeed) or
// the fast injector. shut brings the session down and keeps it down, or
// lets it come up; established counts the sessions that came up;
// waitEstablished returns when the session is Established; state says
// whether it is and how many came up.
type importSender interface {
	shut(b testing.TB, down bool) time.Time
	established(b testing.TB) int
	waitEstablished(b testing.TB, alive func() error) time.Time
	state(b testing.TB) (up bool, established int)
	// pollEvery is how often the kernel table is counted while the
	// routes arrive.
	pollEvery() time.Duration
}

// importContenders runs the import of n prefixes from feed (shut, holding
// them) for ovnbgp, FRR and BIRD in l's node namespace, one after the
// other, each with an idle window of idle (0: none).
func importContenders(b jobRun, l *lab.Lab, nb *lab.NB, feed importSender, n int, idle time.Duration) (ob, fr, br importResult) {
	counter, err := openRouteCounter(l.Node)
	if err != nil {
		b.Fatalf("kernel route counter in %s: %v", l.Node, err)
	}
	defer counter.close()

	// ovnbgp.
	peer := lab.DefaultTor()
	// The session backstop with an operator's headroom (FRR runs with no
	// maximum-prefix at all). Within 10% of it, gobgp's own check walks
	// the whole Adj-RIB-In on every UPDATE (bgp/prefixlimit.go): set
	// OVNBGP_BENCH_MAXPREFIXES=N+1000 to measure that case.
	peer.MaxPrefixes = 2 * n
	if v := os.Getenv("OVNBGP_BENCH_MAXPREFIXES"); v != "" {
		m, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			b.Fatalf("OVNBGP_BENCH_MAXPREFIXES=%q: %v", v, err)
		}
		peer.MaxPrefixes = int(m)
	}
	importYAML := fmt.Sprintf(`kernel: {routeProtocol: %d}
import:
  - name: bench
    peers: [tor]
    network: default
    accept:
      - {prefix: 32.0.0.0/5, minLength: 24, maxLength: 24}
    maxRoutes: %d
    targets: {ovn: false, kernel: {table: %d}}
`, ovnbgpProto, n, ovnbgpImportTable)
	d := startOvnbgpWith(b, l, nb, peer, importYAML)
	sock := filepath.Join(l.Dir, "ovnbgp", "ovnbgp.sock")
	lab.Eventually(b, 60*time.Second, 50*time.Millisecond, "ovnbgp's control socket", func() error {
		if err := d.exited(); err != nil {
			return err
		}
		_, err := os.Stat(sock)
		return err
	})
	// The import's profile (OVNBGP_BENCH_IMPORT_PROFILE): from here, over
	// the idle pause and the import.
	prof := profileDaemon(b, l, "CPU profile over the import", os.Getenv(envImportProfile), "/debug/pprof/profile?seconds=8")
	trace := profileDaemon(b, l, "execution trace over the import", os.Getenv(envImportTrace), "/debug/pprof/trace?seconds=8")
	ob = runImport(b, feed, counter, ovnbgpName, n, ovnbgpImportTable, ovnbgpProto,
		map[string]int{"ovnbgp": d.pid()}, d.exited, idle)
	prof()
	trace()
	// Its heap holding all n (OVNBGP_BENCH_IMPORT_HEAP), for where the
	// memory per path goes.
	profileDaemon(b, l, "heap profile with all routes", os.Getenv(envImportHeap), "/debug/pprof/heap?gc=1")()
	// With GODEBUG=gctrace=1 in the environment, the daemon's last GC lines
	// tell its live heap apart from the GC's headroom in RSS.
	if log, err := os.ReadFile(filepath.Join(l.Dir, "ovnbgp", "ovnbgp.log")); err == nil {
		var gc []string
		for _, line := range strings.Split(string(log), "\n") {
			if strings.HasPrefix(line, "gc ") {
				gc = append(gc, line)
			}
		}
		if len(gc) > 0 {
			b.Logf("ovnbgp's last GCs (%d in all):\n%s", len(gc), strings.Join(gc[max(0, len(gc)-3):], "\n"))
		}
	}
	d.stop(b)
	feed.shut(b, true)
	// ovnbgp leaves its routes at exit (fail static).
	emptyTable(b, l, counter, ovnbgpImportTable, ovnbgpProto)

	// FRR: bgpd + zebra in the node namespace, main table.
	nf := startNodeFRR(b, l)
	fr = runImport(b, feed, counter, frrName, n, frrTable, frrProto,
		map[string]int{"bgpd": nf.pid("bgpd"), "zebra": nf.pid("zebra")}, nf.alive, idle)
	// Stop it before BIRD runs: a zebra follows every route change in the
	// namespace (it would work through BIRD's N installs on the same CPUs),
	// and its N routes would stay in the main table. zebra removes its
	// routes as it exits.
	feed.shut(b, true)
	stopStart := time.Now()
	for _, dmn := range []string{"bgpd", "zebra"} {
		if err := lab.StopPID(nf.pid(dmn), 2*time.Minute); err != nil {
			b.Fatalf("stop node %s: %v", dmn, err)
		}
	}
	b.Logf("stopped the node FRR in %v", pretty(time.Since(stopStart)))
	emptyTable(b, l, counter, frrTable, frrProto)

	// BIRD 2 in the node namespace, table 101.
	bird := startImportBIRD(b, l)
	br = runImport(b, feed, counter, birdName, n, birdTable, birdProto,
		map[string]int{"bird": bird.PID()}, birdAlive(bird), idle)

	return ob, fr, br
}

// emptyTable removes what a stopped contender left in its kernel table
// (ovnbgp keeps its routes at exit; zebra removes its own) and returns
// once the table has no route of proto. runTool, not l.Exec: flushing 500k
// routes outlasts the harness's command timeout, and `ip route flush` gives
// up (status 1) after 10 rounds on a huge table: run it until it is empty.
func emptyTable(b testing.TB, l *lab.Lab, c *routeCounter, table, proto int) {
	b.Helper()
	start := time.Now()
	for i := 0; ; i++ {
		left, err := c.count(table, proto)
		if err == nil && left == 0 {
			break
		}
		if i == 20 {
			b.Fatalf("flush table %d protocol %d: %d routes left (%v)", table, proto, left, err)
		}
		if _, _, err := runTool("ip", "-n", l.Node, "route", "flush", "table", strconv.Itoa(table), "proto", strconv.Itoa(proto)); err != nil {
			b.Logf("flush table %d protocol %d: %v", table, proto, err)
		}
	}
	b.Logf("table %d has no route of protocol %d, %v after the contender stopped", table, proto, pretty(time.Since(start)))
}

// idleSettle is how long a contender holding all N routes is left alone
// before its idle CPU is measured (the last installs returning, the
// session's first keepalives after the burst).
const idleSettle = 5 * time.Second

// runImport measures one contender that is running with the ToR's
// neighbor shut: idle memory, then the ToR lets the session up and the
// kernel table is counted until it holds all n. With idle > 0 it then
// measures the daemons' CPU over idle, holding the n routes.
func runImport(b jobRun, t importSender, c *routeCounter, name string, n, table, proto int, pids map[string]int, alive func() error, idle time.Duration) importResult {
	b.Helper()
	if got, err := c.count(table, proto); err != nil || got != 0 {
		b.Fatalf("%s: table %d already has %d routes of protocol %d (err %v)", name, table, got, proto, err)
	}
	// Idle: let the daemons finish starting (ovnbgp: its first reconciles;
	// FRR, BIRD: reading their config), then read their memory.
	time.Sleep(b.pause(2 * time.Second))
	var r importResult
	before, err := usageOf(pids)
	if err != nil {
		b.Fatal(err)
	}
	r.idle = before.mem
	estBefore := t.established(b)
	unshut := t.shut(b, false)
	up := t.waitEstablished(b, alive)
	done, slowest, err := c.waitRoutes(table, proto, n, t.pollEvery(), b.timeout(importTimeout), alive)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	after, err := usageOf(pids)
	if err != nil {
		b.Fatal(err)
	}
	count := t.established(b)
	if count != estBefore+1 {
		b.Fatalf("%s: the session came up %d times during the import, want once (a reset would restart it)", name, count-estBefore)
	}
	if got, err := c.count(table, proto); err != nil || got != n {
		b.Fatalf("%s: table %d has %d routes of protocol %d (err %v), want exactly %d", name, table, got, proto, err, n)
	}
	r.upToAll, r.unshutToAll, r.cpu, r.slowest = done.Sub(up), done.Sub(unshut), after.cpu-before.cpu, slowest
	if in, ok := t.(*injector); ok {
		first, _ := in.sent()
		r.firstToAll = done.Sub(first)
	}
	// Memory with all paths, once the daemons have settled (ovnbgp: the
	// reconcile that installed the last route may still be returning).
	time.Sleep(b.pause(2 * time.Second))
	full, err := usageOf(pids)
	if err != nil {
		b.Fatal(err)
	}
	r.full = full.mem
	b.Logf("%s: %d routes in table %d: session up→all %v (ToR unshut→all %v); CPU %v; RSS idle %.1f MiB, with all %.1f MiB "+
		"(peak %.1f MiB): %.0f B per path; slowest table count %v", name, n, table, pretty(r.upToAll), pretty(r.unshutToAll),
		pretty(r.cpu), mib(r.idle.rss), mib(r.full.rss), mib(r.full.peak), r.perPath(n), pretty(slowest))
	if idle > 0 {
		var ticks time.Duration
		r.idleCPU, r.idleRuns, r.idleWindow, ticks = measureIdle(b, t, c, name, n, table, proto, pids, alive, idle)
		b.Logf("%s: idle with %d routes: CPU %v over %v = %.1f ms/min (/proc/PID/stat: %v), %.0f wakeups/min", name, n,
			pretty(r.idleCPU), pretty(r.idleWindow), perMinute(r.idleCPU, r.idleWindow), ticks, countPerMinute(r.idleRuns, r.idleWindow))
	}
	return r
}

// measureIdle returns the daemons' CPU time and runs on a CPU over a
// window of length idle (and the window as measured) while they hold the n
// routes and nothing changes: the cost of their periodic work (keepalives,
// resyncs and kernel scans). ticks is the CPU time by /proc/PID/stat, a
// cross-check in 10 ms ticks. It fails if the session reset, a daemon died
// or the table changed meanwhile: that would not be idle.
func measureIdle(b jobRun, t importSender, c *routeCounter, name string, n, table, proto int, pids map[string]int, alive func() error, idle time.Duration) (cpu time.Duration, runs uint64, window, ticks time.Duration) {
	b.Helper()
	time.Sleep(b.pause(idleSettle))
	est := t.established(b)
	u0, err := usageOf(pids)
	if err != nil {
		b.Fatal(err)
	}
	before, err := taskCPU(pids)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(idle)
	after, err := taskCPU(pids)
	window = time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	u1, err := usageOf(pids)
	if err != nil {
		b.Fatal(err)
	}
	if err := alive(); err != nil {
		b.Fatalf("%s died while idle: %v", name, err)
	}
	if up, count := t.state(b); !up || count != est {
		b.Fatalf("%s: the session did not stay up while idle (up: %v, came up %d times more)", name, up, count-est)
	}
	if got, err := c.count(table, proto); err != nil || got != n {
		b.Fatalf("%s: table %d has %d routes of protocol %d after the idle window (err %v), want %d", name, table, got, proto, err, n)
	}
	d := cpuDelta(before, after)
	return d.cpu, d.runs, window, u1.cpu - u0.cpu
}

// torFeed is the ToR as the source of the import job: n blackhole routes
// in its kernel, redistributed into BGP, and its neighbor (the node) shut
// or not.
type torFeed struct {
	l   *lab.Lab
	frr *lab.FRR
}

func (t *torFeed) vtysh(b testing.TB, cmds ...string) {
	b.Helper()
	args := []string{"--vty_socket", t.frr.Dir, "-c", "configure terminal", "-c", "router bgp 65001"}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, _, err := runTool(vtyshBin, args...)
	if err == nil && strings.TrimSpace(out) != "" {
		err = fmt.Errorf("%s", out)
	}
	if err != nil {
		b.Fatalf("ToR vtysh %v: %v", cmds, err)
	}
}

// shut shuts the ToR's neighbor (the node) down, or lets it up, and
// returns when it did so.
func (t *torFeed) shut(b testing.TB, down bool) time.Time {
	b.Helper()
	no := "no "
	if down {
		no = ""
	}
	t.vtysh(b, no+"neighbor "+lab.NodeIPv4.String()+" shutdown")
	return time.Now()
}

// blackholes puts ps in the ToR's kernel as blackholes (one `ip -batch`).
func (t *torFeed) blackholes(b testing.TB, ps []netip.Prefix) {
	b.Helper()
	var sb strings.Builder
	for _, p := range ps {
		sb.WriteString("route add blackhole " + p.String() + "\n")
	}
	batch := filepath.Join(t.l.Dir, "tor-routes.batch")
	if err := os.WriteFile(batch, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if out, err := t.l.Exec(t.l.Tor, "ip", "-batch", batch); err != nil {
		b.Fatalf("ToR: ip -batch of %d blackholes: %v: %.500s", len(ps), err, out)
	}
	b.Logf("ToR: %d blackholes in its kernel in %v", len(ps), pretty(time.Since(start)))
}

// load redistributes the ToR's kernel routes (ps) into BGP and returns once
// its BGP table has them all.
func (t *torFeed) load(b testing.TB, ps []netip.Prefix) {
	b.Helper()
	start := time.Now()
	t.vtysh(b, "address-family ipv4 unicast", "redistribute kernel")
	lab.Eventually(b, 10*time.Minute, 200*time.Millisecond, fmt.Sprintf("the ToR's BGP table holds the %d prefixes", len(ps)), func() error {
		got, err := t.ribCount()
		if err != nil {
			return err
		}
		if got < len(ps) {
			return fmt.Errorf("%d of %d", got, len(ps))
		}
		return nil
	})
	b.Logf("ToR: %d blackholes redistributed into BGP in %v", len(ps), pretty(time.Since(start)))
}

// ribCount is how many changes the ToR's IPv4 BGP table has seen (its
// table version): each redistributed prefix adds one, so after loading n
// prefixes into a fresh ToR it is n. ("RIB entries" is no measure: it
// counts the radix tree's inner nodes too, about 2n.)
func (t *torFeed) ribCount() (int, error) {
	out, err := t.frr.VTY("show bgp ipv4 unicast summary json")
	if err != nil {
		return 0, err
	}
	var v struct {
		Version int `json:"tableVersion"`
		IPv4    *struct {
			Version int `json:"tableVersion"`
		} `json:"ipv4Unicast"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return 0, fmt.Errorf("ToR: show bgp ipv4 unicast summary json: %w: %.200s", err, out)
	}
	if v.IPv4 != nil {
		return v.IPv4.Version, nil
	}
	return v.Version, nil
}

// torNeighbor is the ToR's view of the session with the node.
type torNeighbor struct {
	State string `json:"bgpState"`
	// Established counts the sessions that came up, ever.
	Established int `json:"connectionsEstablished"`
}

func (t *torFeed) neighbor(b testing.TB) (torNeighbor, time.Time) {
	b.Helper()
	out, err := t.frr.VTY("show bgp neighbors " + lab.NodeIPv4.String() + " json")
	at := time.Now()
	if err != nil {
		b.Fatal(err)
	}
	var v map[string]torNeighbor
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		b.Fatalf("ToR: show bgp neighbors json: %v: %.300s", err, out)
	}
	nb, ok := v[lab.NodeIPv4.String()]
	if !ok {
		b.Fatalf("ToR: no neighbor %s in %.300s", lab.NodeIPv4, out)
	}
	return nb, at
}

// established is how many times the session has come up so far.
func (t *torFeed) established(b testing.TB) int {
	nb, _ := t.neighbor(b)
	return nb.Established
}

func (t *torFeed) pollEvery() time.Duration { return importInterval }

func (t *torFeed) state(b testing.TB) (up bool, established int) {
	nb, _ := t.neighbor(b)
	return nb.State == "Established", nb.Established
}

// waitEstablished polls the ToR's neighbor state every 5 ms (one vty
// query, well under a millisecond; FRR's bgpTimerUpMsec counts whole
// seconds, too coarse) and returns when the first answer saying
// Established arrived. No route can reach the node before that.
func (t *torFeed) waitEstablished(b testing.TB, alive func() error) time.Time {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		nb, at := t.neighbor(b)
		if nb.State == "Established" {
			return at
		}
		if err := alive(); err != nil {
			b.Fatal(err)
		}
		if at.After(deadline) {
			b.Fatalf("ToR: the session with the node is still %s 2 min after the ToR let it up", nb.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParseImportSizes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"", []int{10000, 100000}, false},
		{"10000", []int{10000}, false},
		{" 1000, 500000 ", []int{1000, 500000}, false},
		{"0", nil, true},
		{"10k", nil, true},
		{"600000", nil, true},
	} {
		got, err := parseImportSizes(c.in)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("parseImportSizes(%q) = %v, %v; want %v (error: %v)", c.in, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), envImport) {
			t.Errorf("parseImportSizes(%q): the error %q does not name %s", c.in, err, envImport)
		}
	}
}

func TestParseIdle(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"", 60 * time.Second, false},
		{"0", 0, false},
		{"20s", 20 * time.Second, false},
		{"2m", 2 * time.Minute, false},
		{"-1s", 0, true},
		{"100ms", 0, true},
		{"60", 0, true},
	} {
		got, err := parseIdle(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseIdle(%q) = %v, %v; want %v (error: %v)", c.in, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), envIdle) {
			t.Errorf("parseIdle(%q): the error %q does not name %s", c.in, err, envIdle)
		}
	}
}

// taskStat is what the scheduler counted for one thread so far.
type taskStat struct {
	cpu  time.Duration // time run on a CPU, user and kernel
	runs uint64        // times it was put on a CPU (timeslices)
}

// taskCPU is the CPU time and number of runs of each thread of a set of
// processes so far, by thread id, from /proc/PID/task/TID/schedstat (the
// scheduler's own sums, in nanoseconds: /proc/PID/stat counts 10 ms ticks,
// too coarse for a daemon that idles at a few ms a minute).
func taskCPU(pids map[string]int) (map[int]taskStat, error) {
	res := map[int]taskStat{}
	for name, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/task", pid)
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, task.Name(), "schedstat"))
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread ended since the listing
			}
			if err != nil {
				return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
			}
			// "run_ns wait_ns timeslices"
			f := strings.Fields(string(b))
			if len(f) != 3 {
				return nil, fmt.Errorf("%s (pid %d): %s/%d/schedstat: %q", name, pid, dir, tid, b)
			}
			ns, err1 := strconv.ParseInt(f[0], 10, 64)
			runs, err2 := strconv.ParseUint(f[2], 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("%s (pid %d): %s/%d/schedstat: %q: %w", name, pid, dir, tid, b, err)
			}
			res[tid] = taskStat{cpu: time.Duration(ns), runs: runs}
		}
	}
	return res, nil
}

// cpuDelta is the CPU time the threads used, and how many times they were
// put on a CPU, between two taskCPU readings: a thread new in after counts
// from 0; one gone from after took its counts since before with it
// (uncounted; daemon threads rarely end).
func cpuDelta(before, after map[int]taskStat) taskStat {
	var d taskStat
	for tid, a := range after {
		b := before[tid]
		if a.cpu > b.cpu {
			d.cpu += a.cpu - b.cpu
		}
		if a.runs > b.runs {
			d.runs += a.runs - b.runs
		}
	}
	return d
}

// perMinute scales cpu used over window to a minute, in ms.
func perMinute(cpu, window time.Duration) float64 {
	return ms(cpu) * float64(time.Minute) / float64(window)
}

// countPerMinute scales a count over window to a minute.
func countPerMinute(n uint64, window time.Duration) float64 {
	return float64(n) * float64(time.Minute) / float64(window)
}

func TestCPUDelta(t *testing.T) {
	before := map[int]taskStat{1: {10 * time.Millisecond, 4}, 2: {5 * time.Millisecond, 7}, 3: {time.Second, 100}}
	after := map[int]taskStat{1: {15 * time.Millisecond, 6}, 2: {5 * time.Millisecond, 7}, 4: {2 * time.Millisecond, 3}}
	if got, want := cpuDelta(before, after), (taskStat{7 * time.Millisecond, 5}); got != want {
		t.Errorf("cpuDelta = %+v, want %+v (thread 1: +5 ms +2 runs, 2: +0, 3: gone, 4: new with 2 ms, 3 runs)", got, want)
	}
	if got := perMinute(500*time.Millisecond, 30*time.Second); got != 1000 {
		t.Errorf("perMinute(500ms over 30s) = %v ms/min, want 1000", got)
	}
	if got := countPerMinute(50, 20*time.Second); got != 150 {
		t.Errorf("countPerMinute(50 over 20s) = %v, want 150", got)
	}
}

// TestTaskCPU reads this test process's threads: the sum grows while a
// goroutine spins, and only then does the test end.
func TestTaskCPU(t *testing.T) {
	pids := map[string]int{"test": os.Getpid()}
	before, err := taskCPU(pids)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) == 0 {
		t.Fatal("taskCPU found no threads in this process")
	}
	deadline := time.Now().Add(time.Minute)
	for x := 0; ; x++ {
		after, err := taskCPU(pids)
		if err != nil {
			t.Fatal(err)
		}
		d := cpuDelta(before, after)
		if d.cpu >= 20*time.Millisecond && d.runs > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("this process's threads ran %v (%d times) in a minute of spinning, want >= 20 ms", d.cpu, d.runs)
		}
		for i := 0; i < 1e6; i++ {
			x ^= i
		}
	}
}
