package bench

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// percentile is the nearest-rank percentile q (0 < q <= 100) of ds: the
// smallest sample that at least q% of the samples are less than or equal to.
// With 20 samples p50 is the 10th and p90 the 18th. It is 0 for no samples.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// The contenders, in the columns' order.
const (
	ovnbgpName = "ovnbgp"
	vtyshName  = "FRR(vtysh)"
	reloadName = "FRR(reload)"
	// frrName: FRR (bgpd + zebra) as the node's import speaker.
	frrName = "FRR"
	// birdName: BIRD 2 as the node's import speaker (bgp + kernel protocols).
	birdName = "BIRD"
	// birdConfName: BIRD 2 as the node's advertiser, a change being a
	// rewritten config and `birdc configure` (what Calico's confd does).
	birdConfName = "BIRD(configure)"
)

var contenderOrder = []string{ovnbgpName, vtyshName, reloadName, frrName, birdName, birdConfName}

// row is one line of the summary table: one measured quantity, per
// contender, with every run's value (`go test -count 3` runs each benchmark
// three times, and each run records once). A contender that did not run has
// no values.
type row struct {
	job  string
	unit string
	// higherIsBetter: routes/s; everything else (time, memory, CPU) is
	// better lower.
	higherIsBetter bool
	// runs holds each contender's values, in the order they were recorded.
	runs map[string][]float64
}

// median is the middle of vs, or the mean of the two middle values when
// their number is even; 0 for none. vs is not modified.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// median is contender c's median on r; ok is false when c has no value.
func (r row) median(c string) (float64, bool) {
	vs := r.runs[c]
	if len(vs) == 0 {
		return 0, false
	}
	return median(vs), true
}

// ratio says how many times better ovnbgp is than contender c on r, from
// their medians: c/ovnbgp for lower-is-better quantities, ovnbgp/c for
// higher-is-better ones. Below 1 means ovnbgp is worse. ok is false when
// either value is missing or 0.
func (r row) ratio(c string) (float64, bool) {
	o, ok1 := r.median(ovnbgpName)
	v, ok2 := r.median(c)
	// A time can be 0 or below: BIRD sends its UPDATE before birdc has
	// returned, so its commit→received is slightly negative. No ratio then.
	if !ok1 || !ok2 || o <= 0 || v <= 0 {
		return 0, false
	}
	if r.higherIsBetter {
		return o / v, true
	}
	return v / o, true
}

func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// formatRuns is one table cell: the median of vs, followed by the spread
// of the runs, "(min–max)", when there is more than one; "-" for none.
func formatRuns(vs []float64) string {
	switch len(vs) {
	case 0:
		return "-"
	case 1:
		return formatValue(vs[0])
	}
	return fmt.Sprintf("%s (%s–%s)", formatValue(median(vs)), formatValue(slices.Min(vs)), formatValue(slices.Max(vs)))
}

// formatCount is the runs cell of r: the number of runs of the contenders
// that ran it or, when they differ (a run failed), each one's number,
// "/"-separated in column order (the contenders whose cell is "-" left out).
func formatCount(r row, present []string) string {
	var counts []string
	for _, c := range present {
		if k := len(r.runs[c]); k > 0 {
			counts = append(counts, strconv.Itoa(k))
		}
	}
	if len(counts) == 0 {
		return "0"
	}
	if len(slices.Compact(slices.Clone(counts))) == 1 {
		return counts[0]
	}
	return strings.Join(counts, "/")
}

// presentContenders are the contenders some row has a value for, in
// contenderOrder, then any other name in alphabetical order.
func presentContenders(rows []row) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for c, vs := range r.runs {
			if len(vs) > 0 {
				seen[c] = true
			}
		}
	}
	var present []string
	for _, c := range contenderOrder {
		if seen[c] {
			present = append(present, c)
			delete(seen, c)
		}
	}
	var rest []string
	for c := range seen {
		rest = append(rest, c)
	}
	slices.Sort(rest)
	return append(present, rest...)
}

// renderTable formats rows as an aligned text table: per contender the
// median and the spread of its runs, the number of runs, and the ratios of
// each other contender's median to ovnbgp's.
func renderTable(rows []row) string {
	// Only the contenders some row has a value for get a column.
	present := presentContenders(rows)
	others := slices.DeleteFunc(slices.Clone(present), func(c string) bool { return c == ovnbgpName })
	header := []string{"job", "unit", "runs"}
	header = append(header, present...)
	for _, c := range others {
		label := c
		if strings.HasPrefix(c, "FRR(") {
			label = strings.TrimSuffix(strings.TrimPrefix(c, "FRR("), ")")
		}
		header = append(header, label+"÷ovnbgp")
	}
	lines := [][]string{header}
	for _, r := range rows {
		line := []string{r.job, r.unit, formatCount(r, present)}
		for _, c := range present {
			line = append(line, formatRuns(r.runs[c]))
		}
		for _, c := range others {
			if x, ok := r.ratio(c); ok {
				line = append(line, formatValue(x)+"×")
			} else {
				line = append(line, "-")
			}
		}
		lines = append(lines, line)
	}
	widths := make([]int, len(header))
	for _, l := range lines {
		for i, cell := range l {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	for _, l := range lines {
		for i, cell := range l {
			pad := widths[i] - len([]rune(cell))
			if i < 2 {
				b.WriteString(cell + strings.Repeat(" ", pad)) // text: left-aligned
			} else {
				b.WriteString(strings.Repeat(" ", pad) + cell) // numbers: right-aligned
			}
			if i < len(l)-1 {
				b.WriteString("  ")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestPercentile(t *testing.T) {
	var twenty []time.Duration
	for i := 20; i >= 1; i-- { // unsorted on purpose
		twenty = append(twenty, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", []time.Duration{7}, 90, 7},
		{"p50 of 20 is the 10th", twenty, 50, 10 * time.Millisecond},
		{"p90 of 20 is the 18th", twenty, 90, 18 * time.Millisecond},
		{"p100 is the max", twenty, 100, 20 * time.Millisecond},
		{"tiny q is the min", twenty, 0.1, time.Millisecond},
		{"p50 of 3", []time.Duration{3, 1, 2}, 50, 2},
	} {
		if got := percentile(tc.ds, tc.q); got != tc.want {
			t.Errorf("%s: percentile(%v, %v) = %v, want %v", tc.name, tc.ds, tc.q, got, tc.want)
		}
	}
	if twenty[0] != 20*time.Millisecond {
		t.Error("percentile sorted its argument in place")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		vs   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"two: their mean", []float64{9, 4}, 6.5},
		{"three: the middle, unsorted", []float64{12, 3, 5}, 5},
		{"three with a tie", []float64{2, 8, 2}, 2},
		{"four: mean of the middle two", []float64{40, 10, 30, 20}, 25},
	} {
		in := slices.Clone(tc.vs)
		if got := median(tc.vs); got != tc.want {
			t.Errorf("%s: median(%v) = %v, want %v", tc.name, tc.vs, got, tc.want)
		}
		if !slices.Equal(in, tc.vs) {
			t.Errorf("%s: median sorted its argument in place", tc.name)
		}
	}
}

func TestFormatRuns(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want string
	}{
		{nil, "-"},
		{[]float64{3.456}, "3.46"},
		{[]float64{49.8, 49.2}, "49.5 (49.2–49.8)"},
		{[]float64{652, 680, 611}, "652 (611–680)"},
		{[]float64{1.39, 12, 1.33}, "1.39 (1.33–12.0)"},
	} {
		if got := formatRuns(tc.vs); got != tc.want {
			t.Errorf("formatRuns(%v) = %q, want %q", tc.vs, got, tc.want)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    row
		c    string
		want float64
		ok   bool
	}{
		{"time: FRR slower", row{runs: map[string][]float64{ovnbgpName: {2}, reloadName: {1000}}}, reloadName, 500, true},
		{"time: FRR faster", row{runs: map[string][]float64{ovnbgpName: {4}, vtyshName: {2}}}, vtyshName, 0.5, true},
		{"rate", row{higherIsBetter: true, runs: map[string][]float64{ovnbgpName: {9000}, vtyshName: {3000}}}, vtyshName, 3, true},
		// Medians 5 and 70 (not the last values, 3 and 60; not the means).
		{"from medians of 3", row{runs: map[string][]float64{ovnbgpName: {12, 5, 3}, vtyshName: {100, 70, 60}}}, vtyshName, 14, true},
		// Medians 4 and 50: the mean of the middle two.
		{"from medians of 2", row{runs: map[string][]float64{ovnbgpName: {2, 6}, vtyshName: {40, 60}}}, vtyshName, 12.5, true},
		{"rate from medians", row{higherIsBetter: true, runs: map[string][]float64{ovnbgpName: {9000, 1000, 8000}, vtyshName: {4000, 2000, 100}}}, vtyshName, 4, true},
		{"missing", row{runs: map[string][]float64{ovnbgpName: {2}}}, reloadName, 0, false},
		{"no runs", row{runs: map[string][]float64{ovnbgpName: {2}, reloadName: {}}}, reloadName, 0, false},
		{"zero", row{runs: map[string][]float64{ovnbgpName: {0}, vtyshName: {3}}}, vtyshName, 0, false},
		// BIRD's UPDATE can leave before birdc returns: a negative time.
		{"negative", row{runs: map[string][]float64{ovnbgpName: {1.2}, birdConfName: {-0.1}}}, birdConfName, 0, false},
	} {
		got, ok := tc.r.ratio(tc.c)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ratio = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRenderTable(t *testing.T) {
	got := renderTable([]row{
		{job: "add 1 /24, p50", unit: "ms", runs: map[string][]float64{ovnbgpName: {3.5}, vtyshName: {70}, reloadName: {1250}}},
		{job: "bulk add 1000", unit: "routes/s", higherIsBetter: true, runs: map[string][]float64{ovnbgpName: {20000}, vtyshName: {5000}}},
	})
	want := "" +
		"job             unit      runs  ovnbgp  FRR(vtysh)  FRR(reload)  vtysh÷ovnbgp  reload÷ovnbgp\n" +
		"add 1 /24, p50  ms           1    3.50        70.0         1250         20.0×           357×\n" +
		"bulk add 1000   routes/s     1   20000        5000            -         4.00×              -\n"
	if got != want {
		t.Errorf("renderTable:\n%s\nwant:\n%s", got, want)
	}
}

// TestRenderTableRuns: three runs each, one contender with a failed run;
// BIRD, which ran only the import row, gets a column, and no "0" in the
// rows it did not run.
func TestRenderTableRuns(t *testing.T) {
	got := renderTable([]row{
		{job: "add one /24, commit→RIB p50", unit: "ms", runs: map[string][]float64{ovnbgpName: {1.5, 1.3, 1.4}, vtyshName: {48, 49, 50}, reloadName: {650, 700}}},
		{job: "import 10000 /24", unit: "ms", runs: map[string][]float64{ovnbgpName: {900, 1000, 1100}, frrName: {2000, 2100, 1900}, birdName: {500, 600, 550}}},
	})
	want := "" +
		"job                          unit   runs            ovnbgp        FRR(vtysh)    FRR(reload)               FRR           BIRD  vtysh÷ovnbgp  reload÷ovnbgp  FRR÷ovnbgp  BIRD÷ovnbgp\n" +
		"add one /24, commit→RIB p50  ms    3/3/2  1.40 (1.30–1.50)  49.0 (48.0–50.0)  675 (650–700)                 -              -         35.0×           482×           -            -\n" +
		"import 10000 /24             ms        3   1000 (900–1100)                 -              -  2000 (1900–2100)  550 (500–600)             -              -       2.00×        0.55×\n"
	if got != want {
		t.Errorf("renderTable:\n%s\nwant:\n%s", got, want)
	}
}

// TestUpdateLine: the ToR's UPDATE log lines (FRR 8.4, `debug bgp updates
// in`, `log timestamp precision 6`, as BenchmarkAdvertiseChange logged
// them) give the announcement or the withdrawal of exactly one prefix, at
// the line's microsecond.
func TestUpdateLine(t *testing.T) {
	const (
		add = "2026/12/01 05:53:24.403267 BGP: [YCKEM-GB33T] 192.0.2.0(vm) rcvd 198.19.1.244/32 IPv4 unicast"
		del = "2026/12/01 05:53:24.463754 BGP: [PAPP6-VDAWM] 192.0.2.0(vm) rcvd UPDATE about 198.19.1.244/32 IPv4 unicast -- withdrawn"
		// Other lines bgpd logs with the same debug on.
		attrs = "2026/12/01 05:53:24.403201 BGP: [ZWCSR-M7FG9] 192.0.2.0(vm) rcvd UPDATE w/ attr: nexthop 192.0.2.0, origin i, path 65010"
	)
	p := netip.MustParsePrefix("198.19.1.244/32")
	other := netip.MustParsePrefix("198.19.1.24/32")
	at := func(s string) time.Time {
		v, err := time.ParseInLocation(frrTimeLayout, s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		line      string
		p         netip.Prefix
		withdrawn bool
		want      time.Time // zero: no match
	}{
		{add, p, false, at("2026/12/01 05:53:24.403267")},
		{add, p, true, time.Time{}},
		{del, p, true, at("2026/12/01 05:53:24.463754")},
		{del, p, false, time.Time{}},
		{add, other, false, time.Time{}},
		{del, other, true, time.Time{}},
		{attrs, p, false, time.Time{}},
		{"", p, false, time.Time{}},
		{"garbage rcvd 198.19.1.244/32 IPv4 unicast", p, false, time.Time{}},
	} {
		got, ok := updateLine(c.line, c.p, c.withdrawn)
		if ok != !c.want.IsZero() || !got.Equal(c.want) {
			t.Errorf("updateLine(%q, %v, withdrawn %v) = %v, %v; want %v", c.line, c.p, c.withdrawn, got, ok, c.want)
		}
		if ok && got.Nanosecond()%1000 != 0 {
			t.Errorf("%v: not whole microseconds", got)
		}
	}
}

// TestSummaryMedianOfRuns: `go test -count 3` runs each benchmark three
// times, each recording its value once; the table shows the median of them,
// the spread, and the ratio of the medians.
func TestSummaryMedianOfRuns(t *testing.T) {
	var s results
	for _, v := range []float64{12, 5, 3} {
		s.record("add one /24, commit→RIB p50", "ms", false, ovnbgpName, v)
	}
	for _, v := range []float64{100, 70, 60} {
		s.record("add one /24, commit→RIB p50", "ms", false, vtyshName, v)
	}
	got := s.table()
	if !strings.Contains(got, "5.00 (3.00–12.0)") || !strings.Contains(got, "70.0 (60.0–100)") || !strings.Contains(got, "14.0×") {
		t.Errorf("table of three runs: want medians 5 and 70 with their spread and the ratio 14×, got:\n%s", got)
	}
}
