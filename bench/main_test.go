package bench

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The knobs, from the environment (bench/run.sh passes them through).
const (
	// envGate must be "1" for any benchmark here to run: `go test -bench .
	// ./...` must not start network namespaces and daemons by surprise.
	envGate = "OVNBGP_BENCH"
	// envRounds is the number of measured rounds of the single-change job
	// (default singleRounds, 100).
	envRounds = "OVNBGP_BENCH_ROUNDS"
	// envBulk lists the sizes of the bulk job, e.g. "1000,5000" (default
	// 1000).
	envBulk = "OVNBGP_BENCH_BULK"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if rows := summary.snapshot(); len(rows) > 0 {
		fmt.Printf("\n=== ovnbgp vs FRR and BIRD, same ToR (FRR bgpd in a netns); each cell: median (min–max) of the runs; ratio (of the medians) = how many times better ovnbgp is (<1: worse)\n%s", renderTable(rows))
		if err := report(rows, code == 0); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			code = max(code, 1)
		}
	}
	lab.Cleanup()
	os.Exit(code)
}

// report writes results.json and benchmarks.png of rows into the output
// directory (envOut) and says where they are.
func report(rows []row, passed bool) error {
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	dir := outDir(cwd)
	f := newResultsFile(rows, passed)
	path, err := writeResults(dir, f)
	if err != nil {
		return err
	}
	fmt.Printf("\nresults (every run's values, the machine, the versions): %s\n", path)
	chart, err := writeChart(dir, rows, chartCaption(f))
	switch {
	case errors.Is(err, errNoPanels):
		fmt.Println(err)
		return nil
	case err != nil:
		return err
	}
	fmt.Printf("chart: %s\n", chart)
	return nil
}

// gate skips the benchmark unless OVNBGP_BENCH=1, saying how to run it.
func gate(b *testing.B) {
	b.Helper()
	if os.Getenv(envGate) != "1" {
		b.Skipf("ovnbgp-vs-FRR benchmarks run only with %s=1 (root, frr and ovn-central needed): "+
			"sudo bench/run.sh  (or: sudo %s=1 go test -run '^$' -bench . -benchtime 1x ./bench/)", envGate, envGate)
	}
}

// jobRun is what a job's driver runs under: a benchmark, whose numbers go
// into the summary (the table and results.json TestMain writes) and into Go
// benchmark metrics (benchstat), or the smoke test
// (TestContenderDriversSmoke), which runs every driver once at its smallest
// size and whose numbers go into a results of its own that nothing prints.
type jobRun struct {
	testing.TB
	// rows receives the job's numbers (record).
	rows *results
	// smoke: the smoke test, which measures nothing: the pauses before a
	// measurement are cut short (pause).
	smoke bool
}

// benchRun is the jobRun of benchmark b: its numbers go into the summary.
func benchRun(b *testing.B) jobRun { return jobRun{TB: b, rows: &summary} }

// record adds v to the job's rows (results.record).
func (r jobRun) record(job, unit string, higherIsBetter bool, c string, v float64) {
	r.rows.record(job, unit, higherIsBetter, c, v)
}

// metric reports v as a Go benchmark metric; the smoke test has none.
func (r jobRun) metric(v float64, unit string) {
	if b, ok := r.TB.(*testing.B); ok {
		b.ReportMetric(v, unit)
	}
}

// smokePause is the longest pause of the smoke test (pause), and
// smokeTimeout the longest wait (timeout).
const (
	smokePause   = 200 * time.Millisecond
	smokeTimeout = 30 * time.Second
)

// pause is how long a driver lets things settle before it reads a
// measurement (nothing to wait on but time): d, or at most smokePause in
// the smoke test, whose numbers mean nothing.
func (r jobRun) pause(d time.Duration) time.Duration {
	if r.smoke {
		return min(d, smokePause)
	}
	return d
}

// timeout is how long a driver waits for what a job at full size may take
// minutes to do (a bulk, a load, an import): d, or at most smokeTimeout in
// the smoke test, whose sizes are tiny, so that a broken driver fails it
// in seconds, not in the minutes of the full jobs.
func (r jobRun) timeout(d time.Duration) time.Duration {
	if r.smoke {
		return min(d, smokeTimeout)
	}
	return d
}

// maxRounds: each round uses its own /24 of 10.201.0.0/16.
const maxRounds = 256

func rounds(b *testing.B) int {
	b.Helper()
	v := os.Getenv(envRounds)
	if v == "" {
		return singleRounds
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxRounds {
		b.Fatalf("%s=%q: want 1 to %d", envRounds, v, maxRounds)
	}
	return n
}

// maxBulk is the most switches the bulk job can create: 10.0.0.0/10 holds
// 16384 /24s and overlaps nothing else the lab advertises.
const maxBulk = 16384

func bulkSizes(b *testing.B) []int {
	b.Helper()
	v := os.Getenv(envBulk)
	if v == "" {
		return []int{1000}
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxBulk {
			b.Fatalf("%s=%q: want sizes between 1 and %d, comma-separated", envBulk, v, maxBulk)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// results collects what the benchmarks measured, for the table TestMain
// prints at the end.
type results struct {
	mu   sync.Mutex
	rows []row
}

var summary results

// record adds v to contender c's values of the row named job (created in
// the order rows are first recorded): one value per run, so that with `go
// test -count 3` the table shows the median of three.
func (r *results) record(job, unit string, higherIsBetter bool, c string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.rows, func(x row) bool { return x.job == job && x.unit == unit })
	if i < 0 {
		r.rows = append(r.rows, row{job: job, unit: unit, higherIsBetter: higherIsBetter, runs: map[string][]float64{}})
		i = len(r.rows) - 1
	}
	r.rows[i].runs[c] = append(r.rows[i].runs[c], v)
}

func (r *results) table() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rows) == 0 {
		return ""
	}
	return renderTable(r.rows)
}
