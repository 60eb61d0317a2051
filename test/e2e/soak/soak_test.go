package soak

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

func TestFit(t *testing.T) {
	slope, icpt, err := Fit([]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11})
	if err != nil || math.Abs(slope-2) > 1e-12 || math.Abs(icpt-5) > 1e-12 {
		t.Fatalf("Fit(y = 2x + 5) = %v, %v, %v", slope, icpt, err)
	}
	// noise symmetric around a flat line: slope 0
	slope, _, err = Fit([]float64{0, 1, 2, 3, 4}, []float64{10, 12, 10, 12, 10})
	if err != nil || math.Abs(slope) > 1e-12 {
		t.Fatalf("Fit(flat with noise) slope = %v, %v", slope, err)
	}
	for name, c := range map[string][2][]float64{
		"lengths differ": {{0, 1}, {1}},
		"one point":      {{0}, {1}},
		"same x":         {{1, 1, 1}, {1, 2, 3}},
	} {
		if _, _, err := Fit(c[0], c[1]); err == nil {
			t.Errorf("%s: Fit succeeded", name)
		}
	}
}

// run makes n samples every interval: the values of sample i (taken at
// i*interval) come from the functions.
func run(n int, interval time.Duration, rssMiB func(i int) float64, fds, gor func(i int) int) []Point {
	ps := make([]Point, n)
	for i := range ps {
		ps[i] = Point{At: time.Duration(i) * interval, RSS: uint64(rssMiB(i) * (1 << 20)), FDs: fds(i), Goroutines: gor(i)}
	}
	return ps
}

func flat(v int) func(int) int { return func(int) int { return v } }

// The shapes of the soak test: the short variant of make test (70 s, a
// sample about every 5 s, 30 s warm-up), make soak DURATION=30m (a sample a
// minute, 5 min warm-up) and the shortest long one, DURATION=5m (1 min
// warm-up).
var shapes = []struct {
	name     string
	n        int
	interval time.Duration
	warmup   time.Duration
}{
	{"short", 15, 5 * time.Second, 30 * time.Second},
	{"30m", 30, time.Minute, 5 * time.Minute},
	{"5m", 5, time.Minute, time.Minute},
}

// gcNoise is the resident set of a healthy Go daemon: a base of 40 MiB,
// a collector sawtooth of up to 3 MiB with a random period and phase, and
// ±0.5 MiB of jitter.
func gcNoise(r *rand.Rand) func(int) float64 {
	period := 2 + r.IntN(6)
	phase := r.IntN(period)
	amp := 3 * r.Float64()
	jit := make(map[int]float64)
	return func(i int) float64 {
		if _, ok := jit[i]; !ok {
			jit[i] = r.Float64() - 0.5
		}
		return 40 + amp*float64((i+phase)%period)/float64(period) + jit[i]
	}
}

// blips is a count that sits at base with a transient extra of one at
// random samples, the last one included: a goroutine or descriptor that
// happened to outlive the sampler's three reads. A transient lasts less
// than a sampling interval, so a blip never spans two samples. (The soak
// runs so far saw none at all: docs/soak.md.)
func blips(r *rand.Rand, base int) func(int) int {
	extra := map[int]int{}
	return func(i int) int {
		if _, ok := extra[i]; !ok {
			extra[i] = 0
			if extra[i-1] == 0 && r.IntN(8) == 0 {
				extra[i] = 1
			}
		}
		return base + extra[i]
	}
}

// TestJudgeNoiseIsNoLeak: a thousand noisy but healthy runs of each shape
// pass the default bounds.
func TestJudgeNoiseIsNoLeak(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		for k := 0; k < 1000; k++ {
			ps := run(s.n, s.interval, gcNoise(r), blips(r, 17), blips(r, 60))
			if _, _, err := Judge(ps, s.warmup, DefaultBounds()); err != nil {
				t.Fatalf("%s run %d: %v\n%+v", s.name, k, err, ps)
			}
		}
	}
}

// TestJudgeLeaks: the same noisy runs with a leak added fail, naming the
// metric that leaks and only that one.
func TestJudgeLeaks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range shapes {
		judged := s.n - int(s.warmup/s.interval)
		cases := []struct {
			name   string
			metric string
			rss    func(int) float64
			fds    func(int) int
			gor    func(int) int
		}{
			{
				// 6 MiB over the judged window of a short run
				// (e.g. 13 KiB per change at 10 changes/s), and 15 MiB
				// an hour in a long one (1.5 KiB per change)
				name: "rss", metric: MetricRSS,
				rss: func(n func(int) float64) func(int) float64 {
					per := 6.0 / float64(judged-1)
					if s.interval == time.Minute {
						per = 15.0 / 60
						if s.n == 5 {
							per = 6.0 / float64(judged-1) // 5 min: 6 MiB in 3 min
						}
					}
					return func(i int) float64 { return n(i) + per*float64(i) }
				}(gcNoise(r)),
				fds: blips(r, 17), gor: blips(r, 60),
			},
			{
				// one descriptor every third sample
				name: "fds", metric: MetricFDs, rss: gcNoise(r),
				fds: func(b func(int) int) func(int) int { return func(i int) int { return b(i) + i/3 } }(flat(17)),
				gor: blips(r, 60),
			},
			{
				// a single descriptor lost between the warm-up and the end,
				// in the middle of the window, with no noise
				name: "one fd", metric: MetricFDs, rss: gcNoise(r),
				fds: func(i int) int {
					if i >= int(s.warmup/s.interval)+judged/2 {
						return 18
					}
					return 17
				},
				gor: flat(60),
			},
			{
				// one goroutine a sample
				name: "goroutines", metric: MetricGoroutines, rss: gcNoise(r), fds: blips(r, 17),
				gor: func(i int) int { return 60 + i },
			},
		}
		for _, c := range cases {
			if c.name == "one fd" && judged < 4 {
				continue // too few samples for a lone step to be told from a blip
			}
			ps := run(s.n, s.interval, c.rss, c.fds, c.gor)
			vs, _, err := Judge(ps, s.warmup, DefaultBounds())
			if err == nil {
				t.Errorf("%s, %s leak: Judge passed: %v", s.name, c.name, vs)
				continue
			}
			if !strings.Contains(err.Error(), c.metric+" grows") {
				t.Errorf("%s, %s leak: error %q does not name %s", s.name, c.name, err, c.metric)
			}
			for _, v := range vs {
				if (v.Metric == c.metric) == v.OK {
					t.Errorf("%s, %s leak: verdict %s", s.name, c.name, v)
				}
			}
		}
	}
}

// TestJudgeWarmup: growth during the warm-up is not judged; the same
// growth judged from the start is a leak.
func TestJudgeWarmup(t *testing.T) {
	rss := func(i int) float64 {
		if i < 5 {
			return 20 + 5*float64(i) // the daemon filling its caches
		}
		return 45
	}
	gor := func(i int) int { return 40 + 10*min(i, 5) }
	ps := run(20, 4*time.Second, rss, flat(17), gor)
	if vs, _, err := Judge(ps, 20*time.Second, DefaultBounds()); err != nil {
		t.Fatalf("growth inside the warm-up judged: %v %v", err, vs)
	}
	if _, _, err := Judge(ps, 0, DefaultBounds()); err == nil ||
		!strings.Contains(err.Error(), "rss grows") || !strings.Contains(err.Error(), "goroutines grows") {
		t.Fatalf("the same growth without warm-up: %v, want rss and goroutines named", err)
	}
}

func TestJudgeRefuses(t *testing.T) {
	ps := run(4, time.Second, func(int) float64 { return 1 }, flat(1), flat(1))
	if _, _, err := Judge(ps, 2*time.Second, DefaultBounds()); err == nil || !strings.Contains(err.Error(), "need at least 3") {
		t.Errorf("2 samples after the warm-up: %v", err)
	}
	ps[2].At = ps[1].At
	if _, _, err := Judge(ps, 0, DefaultBounds()); err == nil || !strings.Contains(err.Error(), "not after") {
		t.Errorf("samples out of order: %v", err)
	}
}

func TestBoundLimit(t *testing.T) {
	b := Bound{Allowance: 4, PerHour: 8}
	if got := b.Limit(10 * time.Minute); got != 4 {
		t.Errorf("limit over 10 min = %v, want the allowance 4", got)
	}
	if got := b.Limit(2 * time.Hour); got != 16 {
		t.Errorf("limit over 2 h = %v, want 16", got)
	}
}

func TestGoroutines(t *testing.T) {
	page := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
# HELP ovnbgp_peers x
# TYPE ovnbgp_peers gauge
ovnbgp_peers{state="established"} 1
`
	if n, err := Goroutines(strings.NewReader(page)); err != nil || n != 42 {
		t.Errorf("Goroutines = %d, %v; want 42", n, err)
	}
	if _, err := Goroutines(strings.NewReader("# TYPE go_threads gauge\ngo_threads 7\n")); err == nil ||
		!strings.Contains(err.Error(), "go_threads") {
		t.Errorf("page without go_goroutines: %v", err)
	}
}

func TestSample(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	before, err := Sample(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f2, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Sample(os.Getpid())
	f.Close()
	f2.Close()
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS == 0 || before.FDs < 3 || after.FDs != before.FDs+1 {
		t.Errorf("Sample: before %+v, after opening a file %+v", before, after)
	}
	if _, err := Sample(0x7ffffff0); err == nil {
		t.Error("Sample of a process that does not exist succeeded")
	}
}
