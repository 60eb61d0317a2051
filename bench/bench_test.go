package bench

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// How the ToR is watched, from the start of the command. A query costs
// ~0.3 ms (single prefix) to a few ms (the count over thousands of routes);
// the instant recorded is when the first answer showing the change arrived,
// so it is up to one interval plus one query late, for every contender
// alike.
const (
	singleInterval = time.Millisecond
	singleTimeout  = 60 * time.Second
	bulkInterval   = 5 * time.Millisecond
	bulkTimeout    = 10 * time.Minute
)

// sample is one change, timed. The ToR is watched while the command
// runs, so a change that reaches it before the command returns (frr-reload.py
// goes on after applying it) is timed when it arrived; then fromCommit may
// even be negative, when the commit instant is only known as the command's
// return.
type sample struct {
	fromCommit time.Duration // commit -> ToR RIB (best paths)
	received   time.Duration // commit -> ToR has received it (not yet selected)
	fromStart  time.Duration // command start -> ToR RIB
	command    time.Duration // the command's own run time
}

// measure makes the change (announce or withdraw ps) and polls the ToR
// with cond, from the moment the command starts, until it reflects it.
func (w *world) measure(add bool, ps []netip.Prefix, interval, timeout time.Duration, cond func() (progress, error)) (sample, op, error) {
	do := w.c.withdraw
	if add {
		do = w.c.announce
	}
	var o op
	var cmdErr error
	finished := make(chan struct{})
	// The command runs beside the polls; cond never holds before it starts.
	polled := time.Now()
	go func() {
		defer close(finished)
		o, cmdErr = do(ps)
	}()
	at, err := waitFor(polled, interval, timeout, func() error {
		select {
		case <-finished:
			if cmdErr != nil {
				return cmdErr
			}
		default:
		}
		return w.c.alive()
	}, cond)
	<-finished
	if cmdErr != nil {
		return sample{}, o, cmdErr
	}
	if err != nil {
		return sample{}, o, fmt.Errorf("the ToR never reflected the change (%v after it was issued): %w", at.done.Round(time.Millisecond), err)
	}
	done, received := polled.Add(at.done), polled.Add(at.received)
	return sample{
		fromCommit: done.Sub(o.commit),
		received:   received.Sub(o.commit),
		fromStart:  done.Sub(o.start),
		command:    o.end.Sub(o.start),
	}, o, nil
}

// BenchmarkSingleChange: one /24 is added, then withdrawn, N times
// (OVNBGP_BENCH_ROUNDS, 100), after a warm-up that is not counted.
// ovnbgp gets it as a new UDN node switch in NB (one OVSDB transaction),
// FRR as a `network` statement (vtysh), or in a rewritten frr.conf
// (frr-reload.py), BIRD in a rewritten static file (`birdc configure`).
// Reported: p50/p90/p99/max from the commit to the ToR's RIB, p50/p99 from
// the commit to the ToR having received it (before its best-path hold),
// and p50/p99 from the start of the command.
func BenchmarkSingleChange(b *testing.B) {
	gate(b)
	for _, c := range contenders {
		b.Run(c.id, func(b *testing.B) {
			n := rounds(b)
			r := benchRun(b)
			singleRun(r, newWorld(r, c.id, c.name), n)
		})
	}
}

// singleRounds is the single-change job's number of rounds when
// OVNBGP_BENCH_ROUNDS is not set: with 100, p99 is the 99th of 100 samples
// (the second largest), not the largest of 20. The job then takes about
// 3.5 minutes, FRR(reload) 2.5 of them (~0.7 s a change).
const singleRounds = 100

// singleRun is the single-change job in w: n rounds of one /24 added and
// withdrawn, each awaited at the ToR (BenchmarkSingleChange; the smoke test
// runs it with n = 1).
func singleRun(b jobRun, w *world, n int) {
	name := w.name
	var adds, dels []sample
	for i := 0; i < n; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201, byte(i), 0}), 24)
		ps := []netip.Prefix{p}
		add, _, err := w.measure(true, ps, singleInterval, singleTimeout, func() (progress, error) {
			received, selected, err := w.tor.fromNode(p)
			return progress{received: received, done: selected}, err
		})
		if err != nil {
			b.Fatalf("%s: add %s: %v", name, p, err)
		}
		del, _, err := w.measure(false, ps, singleInterval, singleTimeout, func() (progress, error) {
			received, selected, err := w.tor.fromNode(p)
			return progress{received: !received, done: !received && !selected}, err
		})
		if err != nil {
			b.Fatalf("%s: withdraw %s: %v", name, p, err)
		}
		adds, dels = append(adds, add), append(dels, del)
	}
	for _, x := range []struct {
		what string
		s    []sample
	}{{"add", adds}, {"withdraw", dels}} {
		commit := field(x.s, func(s sample) time.Duration { return s.fromCommit })
		received := field(x.s, func(s sample) time.Duration { return s.received })
		start := field(x.s, func(s sample) time.Duration { return s.fromStart })
		cmd := field(x.s, func(s sample) time.Duration { return s.command })
		job := x.what + " one /24"
		for _, q := range []struct {
			label string
			v     time.Duration
		}{{"p50", percentile(commit, 50)}, {"p90", percentile(commit, 90)}, {"p99", percentile(commit, 99)}, {"max", percentile(commit, 100)}} {
			b.record(job+", commit→RIB "+q.label, "ms", false, name, ms(q.v))
			b.metric(ms(q.v), x.what+"-"+q.label+"-ms")
		}
		if x.what == "add" {
			for _, q := range []float64{50, 99} {
				label := fmt.Sprintf("p%.0f", q)
				b.record(job+", commit→ToR received "+label, "ms", false, name, ms(percentile(received, q)))
				b.metric(ms(percentile(received, q)), x.what+"-received-"+label+"-ms")
			}
		}
		for _, q := range []float64{50, 99} {
			label := fmt.Sprintf("p%.0f", q)
			b.record(job+", command start→RIB "+label, "ms", false, name, ms(percentile(start, q)))
			b.metric(ms(percentile(start, q)), x.what+"-fromstart-"+label+"-ms")
		}
		b.Logf("%s %s, %d rounds: commit→ToR RIB p50 %v p90 %v p99 %v max %v; commit→ToR received p50 %v p99 %v; "+
			"command start→ToR RIB p50 %v p90 %v p99 %v max %v; command p50 %v\n  commit→RIB, in order: %s\n  commit→received, in order: %s",
			name, job, len(x.s),
			pretty(percentile(commit, 50)), pretty(percentile(commit, 90)), pretty(percentile(commit, 99)), pretty(percentile(commit, 100)),
			pretty(percentile(received, 50)), pretty(percentile(received, 99)),
			pretty(percentile(start, 50)), pretty(percentile(start, 90)), pretty(percentile(start, 99)), pretty(percentile(start, 100)),
			pretty(percentile(cmd, 50)), list(commit), list(received))
	}
	b.metric(0, "ns/op")
}

// BenchmarkBulk: N /24s (OVNBGP_BENCH_BULK, 1000; e.g. "1000,5000") are
// added in one operation (one NB transaction of N UDN node switches; one
// vtysh with N `network` statements; one frr.conf with N of them,
// reloaded; one static file with N routes and `birdc configure`), then
// withdrawn the same way. Reported: the time until the ToR
// has all N as best paths (and none after the withdraw), routes/s, and the
// node-side daemons' memory and CPU.
func BenchmarkBulk(b *testing.B) {
	gate(b)
	for _, c := range contenders {
		b.Run(c.id, func(b *testing.B) {
			sizes := bulkSizes(b)
			r := benchRun(b)
			bulkRun(r, newWorld(r, c.id, c.name), sizes, bulkPrefixes, "/24", 0)
		})
	}
}

// envBulkHeap names files (FILE-N) for heap profiles of ovnbgp holding the
// N of a bulk add that reports RSS per prefix (BenchmarkAdvertiseBulk),
// read when its RSS is: the daemon built with -tags ovnbgp_pprof and
// OVNBGP_PPROF set (profileDaemon).
const envBulkHeap = "OVNBGP_BENCH_BULK_HEAP"

// bulkRun adds gen(n) in one operation and withdraws them again, for each
// size n, in w, timing both and reading the node daemons' CPU and RSS.
// unit names the prefixes in the rows ("/24", "VIP"). With settle > 0 the
// RSS with n advertised is also read settle after the add (the daemon
// returns free memory once it has been idle), and the RSS per prefix
// reported: (that RSS - the idle RSS before the first add) / n. (The RSS
// right before a later add still holds what the runtime kept from the
// earlier sizes.)
func bulkRun(b jobRun, w *world, sizes []int, gen func(int) []netip.Prefix, unit string, settle time.Duration) {
	name := w.name
	idle, err := usageOf(w.c.daemons())
	if err != nil {
		b.Fatal(err)
	}
	if settle > 0 {
		// Once per run, not per size: the median is over runs.
		b.record(fmt.Sprintf("node daemons' idle RSS before bulk %s", unit), "MiB", false, name, mib(idle.mem.rss))
	}
	for _, n := range sizes {
		ps := gen(n)
		before, err := usageOf(w.c.daemons())
		if err != nil {
			b.Fatal(err)
		}
		want := w.base + n
		add, o, err := w.measure(true, ps, bulkInterval, b.timeout(bulkTimeout), func() (progress, error) {
			received, selected, err := w.tor.counts()
			return progress{received: received == want, done: selected == want}, err
		})
		if err != nil {
			b.Fatalf("%s: bulk add of %d: %v", name, n, err)
		}
		after, err := usageOf(w.c.daemons())
		if err != nil {
			b.Fatal(err)
		}
		// Untimed: the count is right, now check that it counts the right
		// prefixes.
		best, err := w.tor.frr.BestFrom("ipv4", w.tor.from)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range ps {
			if _, found := slices.BinarySearchFunc(best, p, model.ComparePrefix); !found {
				b.Fatalf("%s: the ToR has %d best paths from the node but not %s", name, len(best), p)
			}
		}
		settled := after
		if settle > 0 {
			// A measurement, not an assertion: nothing to wait on but time.
			time.Sleep(settle)
			if settled, err = usageOf(w.c.daemons()); err != nil {
				b.Fatal(err)
			}
			if out := os.Getenv(envBulkHeap); out != "" && name == ovnbgpName {
				profileDaemon(b, w.l, fmt.Sprintf("heap profile holding the %d", n), fmt.Sprintf("%s-%d", out, n), "/debug/pprof/heap?gc=1")()
			}
		}
		del, _, err := w.measure(false, ps, bulkInterval, b.timeout(bulkTimeout), func() (progress, error) {
			received, selected, err := w.tor.counts()
			return progress{received: received == w.base, done: selected == w.base}, err
		})
		if err != nil {
			b.Fatalf("%s: bulk withdraw of %d: %v", name, n, err)
		}

		job := fmt.Sprintf("bulk add %d %s", n, unit)
		rate := float64(n) / add.fromStart.Seconds()
		daemonCPU := after.cpu - before.cpu
		b.record(job+", commit→all received by the ToR", "ms", false, name, ms(add.received))
		b.record(job+", commit→all in RIB", "ms", false, name, ms(add.fromCommit))
		b.record(job+", command start→all in RIB", "ms", false, name, ms(add.fromStart))
		b.record(job+", routes/s from command start", "routes/s", true, name, rate)
		b.record(fmt.Sprintf("bulk withdraw %d %s, command start→none in RIB", n, unit), "ms", false, name, ms(del.fromStart))
		b.record(job+", node daemons' CPU", "ms", false, name, ms(daemonCPU))
		if o.cpu > 0 {
			b.record(job+", command's CPU", "ms", false, name, ms(o.cpu))
		}
		b.record(fmt.Sprintf("node daemons' RSS before bulk add %d %s", n, unit), "MiB", false, name, mib(before.mem.rss))
		b.record(job+", node daemons' RSS after", "MiB", false, name, mib(after.mem.rss))
		sfx := fmt.Sprintf("-%d", n)
		perPrefix := 0.0
		if settle > 0 {
			perPrefix = (float64(settled.mem.rss) - float64(idle.mem.rss)) / float64(n)
			b.record(fmt.Sprintf("%s, node daemons' RSS %v after", job, settle), "MiB", false, name, mib(settled.mem.rss))
			b.record(fmt.Sprintf("%s, (RSS %v after - idle RSS) / N", job, settle), "B", false, name, perPrefix)
			b.metric(perPrefix, "rss-per-prefix"+sfx+"-B")
		}
		b.metric(ms(add.fromStart), "add"+sfx+"-ms")
		b.metric(ms(add.received), "add-received"+sfx+"-ms")
		b.metric(rate, "add"+sfx+"-routes/s")
		b.metric(ms(del.fromStart), "withdraw"+sfx+"-ms")
		b.metric(mib(after.mem.rss), "rss"+sfx+"-MiB")
		b.Logf("%s %s: command %v (CPU %v; committed at %s UTC, to set beside the daemon's log), commit→all received by the ToR %v, commit→all in ToR RIB %v, command start→all %v (%.0f routes/s); "+
			"withdraw: command %v, start→none %v; node daemons %s: CPU %v during the add, RSS %.1f MiB (peak %.1f MiB), before %.1f MiB, "+
			"%v later %.1f MiB (%.0f B per prefix over the idle %.1f MiB)",
			name, job, pretty(add.command), pretty(o.cpu), o.commit.UTC().Format("15:04:05.000"), pretty(add.received), pretty(add.fromCommit), pretty(add.fromStart), rate,
			pretty(del.command), pretty(del.fromStart), names(w.c.daemons()), pretty(daemonCPU),
			mib(after.mem.rss), mib(after.mem.peak), mib(before.mem.rss), settle, mib(settled.mem.rss), perPrefix, mib(idle.mem.rss))
	}
	b.metric(0, "ns/op")
}

// bulkPrefixes are the first n /24s of 10.0.0.0/10, in address order.
func bulkPrefixes(n int) []netip.Prefix {
	ps := make([]netip.Prefix, n)
	for i := range ps {
		ps[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
	}
	return ps
}

func field(s []sample, f func(sample) time.Duration) []time.Duration {
	ds := make([]time.Duration, len(s))
	for i, x := range s {
		ds[i] = f(x)
	}
	return ds
}

// pretty rounds d for logs: 0.1 ms below a second, 1 ms above.
func pretty(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

func list(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = pretty(d).String()
	}
	return strings.Join(s, " ")
}

func names(m map[string]int) string {
	var s []string
	for n, pid := range m {
		s = append(s, fmt.Sprintf("%s(%d)", n, pid))
	}
	slices.Sort(s)
	return strings.Join(s, "+")
}
