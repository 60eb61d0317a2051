// Package soak judges a soak run of the daemon: samples of its resident
// memory, open file descriptors and goroutines taken over time, a
// least-squares line fitted through the samples after a warm-up, and a bound
// on the growth that line shows. A leak makes the line climb; the noise of a
// healthy process (the Go collector's sawtooth, a descriptor or goroutine
// that exists for a moment) does not, or stays under the bound. The bounds
// and why they are what they are: docs/soak.md.
//
// Sample reads a live process (/proc/PID/status VmRSS, /proc/PID/fd) and
// Goroutines the go_goroutines gauge of a Prometheus text page; Judge is
// pure, and its tests feed it synthetic samples, leaking and not.
package soak

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
)

// Point is one sample of the process.
type Point struct {
	// At is the time since the run started.
	At time.Duration
	// RSS is the resident set size in bytes (VmRSS).
	RSS uint64
	// FDs is the number of open file descriptors.
	FDs int
	// Goroutines is the go_goroutines gauge.
	Goroutines int
}

// Metric names, as Judge reports them.
const (
	MetricRSS        = "rss"
	MetricFDs        = "fds"
	MetricGoroutines = "goroutines"
)

// Bound is the growth a metric may show over the judged window: the fitted
// line may rise by at most max(Allowance, PerHour × window length), in the
// metric's unit (MiB for RSS, a count for the others). Allowance covers the
// noise of a short window, PerHour the slow drift a long one may show
// without a leak (0: none at all).
type Bound struct {
	Allowance float64
	PerHour   float64
}

// Limit is the growth allowed over a window of length w.
func (b Bound) Limit(w time.Duration) float64 {
	return math.Max(b.Allowance, b.PerHour*w.Hours())
}

// Bounds has one Bound per metric.
type Bounds struct {
	RSS, FDs, Goroutines Bound
}

// DefaultBounds are the bounds of the soak test (docs/soak.md says why):
// RSS may rise by 4 MiB over any window, or 8 MiB/hour over a long one;
// descriptors and goroutines may not rise by one over the window.
func DefaultBounds() Bounds {
	return Bounds{
		RSS:        Bound{Allowance: 4, PerHour: 8},
		FDs:        Bound{Allowance: 1},
		Goroutines: Bound{Allowance: 1},
	}
}

// Verdict is Judge's finding for one metric.
type Verdict struct {
	Metric string
	// Unit of Slope, Growth and Limit: "MiB" or "" (a count).
	Unit string
	// Slope is the fitted line's slope, per hour.
	Slope float64
	// Growth is how far the fitted line rises over the window (Slope ×
	// window), and Limit the growth the bound allows there.
	Growth, Limit float64
	// First and Last are the first and last judged values.
	First, Last float64
	// OK: the growth is within the limit (see Judge).
	OK bool
}

func (v Verdict) String() string {
	u := v.Unit
	if u != "" {
		u = " " + u
	}
	status := "ok"
	if !v.OK {
		status = "LEAK"
	}
	return fmt.Sprintf("%s %+.2f%s/h (growth %+.2f%s over the window, limit %.2f%s; %.6g -> %.6g) %s",
		v.Metric, v.Slope, u, v.Growth, u, v.Limit, u, v.First, v.Last, status)
}

// MinSamples is the fewest samples after the warm-up Judge accepts: a line
// through fewer says nothing.
const MinSamples = 3

// Judge fits a least-squares line through each metric of the points taken
// at or after warmup and checks its growth over the window they span (first
// to last judged point) against bounds. It returns one verdict per metric
// (RSS, FDs, goroutines) and an error naming every metric that grew beyond
// its bound, or saying why the points cannot be judged (too few after the
// warm-up, not in time order). A metric fails when its growth exceeds the
// limit, or reaches it when the limit is a whole count (a descriptor or a
// goroutine is one or none).
func Judge(points []Point, warmup time.Duration, b Bounds) ([]Verdict, time.Duration, error) {
	var judged []Point
	for i, p := range points {
		if i > 0 && p.At <= points[i-1].At {
			return nil, 0, fmt.Errorf("sample %d at %v is not after sample %d at %v", i, p.At, i-1, points[i-1].At)
		}
		if p.At >= warmup {
			judged = append(judged, p)
		}
	}
	if len(judged) < MinSamples {
		return nil, 0, fmt.Errorf("%d samples after the %v warm-up, need at least %d: run longer or sample more often", len(judged), warmup, MinSamples)
	}
	window := judged[len(judged)-1].At - judged[0].At
	xs := make([]float64, len(judged))
	for i, p := range judged {
		xs[i] = p.At.Hours()
	}
	series := []struct {
		name, unit string
		bound      Bound
		whole      bool // counts: the limit itself is a leak
		value      func(Point) float64
	}{
		{MetricRSS, "MiB", b.RSS, false, func(p Point) float64 { return float64(p.RSS) / (1 << 20) }},
		{MetricFDs, "", b.FDs, true, func(p Point) float64 { return float64(p.FDs) }},
		{MetricGoroutines, "", b.Goroutines, true, func(p Point) float64 { return float64(p.Goroutines) }},
	}
	var verdicts []Verdict
	var errs []error
	for _, s := range series {
		ys := make([]float64, len(judged))
		for i, p := range judged {
			ys[i] = s.value(p)
		}
		slope, _, err := Fit(xs, ys)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", s.name, err)
		}
		v := Verdict{Metric: s.name, Unit: s.unit, Slope: slope, Growth: slope * window.Hours(),
			Limit: s.bound.Limit(window), First: ys[0], Last: ys[len(ys)-1]}
		v.OK = v.Growth < v.Limit || (!s.whole && v.Growth == v.Limit)
		if !v.OK {
			errs = append(errs, fmt.Errorf("%s grows: %s", s.name, v))
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, window, errors.Join(errs...)
}

// Fit is the least-squares line y = slope·x + intercept through the points
// (xs[i], ys[i]). It needs two distinct xs.
func Fit(xs, ys []float64) (slope, intercept float64, err error) {
	if len(xs) != len(ys) {
		return 0, 0, fmt.Errorf("fit: %d xs but %d ys", len(xs), len(ys))
	}
	n := float64(len(xs))
	if n < 2 {
		return 0, 0, fmt.Errorf("fit: %d points, need 2", len(xs))
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxy, sxx float64
	for i := range xs {
		dx := xs[i] - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0, 0, errors.New("fit: every x is the same")
	}
	slope = sxy / sxx
	return slope, my - slope*mx, nil
}

// Sample reads process pid's resident set size (VmRSS) and its number of
// open file descriptors from /proc; Goroutines is left 0.
func Sample(pid int) (Point, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return Point{}, fmt.Errorf("process %d: %w", pid, err)
	}
	st, err := p.NewStatus()
	if err != nil {
		return Point{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	fds, err := p.FileDescriptorsLen()
	if err != nil {
		return Point{}, fmt.Errorf("/proc/%d/fd: %w", pid, err)
	}
	if st.VmRSS == 0 {
		return Point{}, fmt.Errorf("/proc/%d/status: no VmRSS (a zombie?)", pid)
	}
	return Point{RSS: st.VmRSS, FDs: fds}, nil
}

// Goroutines reads the go_goroutines gauge from a Prometheus text
// exposition (the daemon's /metrics).
func Goroutines(page io.Reader) (int, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(page)
	if err != nil {
		return 0, fmt.Errorf("metrics page: %w", err)
	}
	f, ok := fams["go_goroutines"]
	if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
		names := make([]string, 0, len(fams))
		for n := range fams {
			if strings.HasPrefix(n, "go_") {
				names = append(names, n)
			}
		}
		return 0, fmt.Errorf("metrics page: no single go_goroutines gauge (go_* metrics: %v)", names)
	}
	return int(f.GetMetric()[0].GetGauge().GetValue()), nil
}
