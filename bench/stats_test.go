package bench

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
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
// contender. A contender that did not run has no value.
type row struct {
	job  string
	unit string
	// higherIsBetter: routes/s; everything else (time, memory, CPU) is
	// better lower.
	higherIsBetter bool
	values         map[string]float64
}

// ratio says how many times better ovnbgp is than contender c on r: c/ovnbgp
// for lower-is-better quantities, ovnbgp/c for higher-is-better ones. Below
// 1 means ovnbgp is worse. ok is false when either value is missing or 0.
func (r row) ratio(c string) (float64, bool) {
	o, ok1 := r.values[ovnbgpName]
	v, ok2 := r.values[c]
	if !ok1 || !ok2 || o == 0 || v == 0 {
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

// renderTable formats rows as an aligned text table with the ratios of each
// FRR variant to ovnbgp.
func renderTable(rows []row) string {
	// Only the contenders some row has a value for get a column.
	var present []string
	for _, c := range contenderOrder {
		if slices.ContainsFunc(rows, func(r row) bool { _, ok := r.values[c]; return ok }) {
			present = append(present, c)
		}
	}
	others := slices.DeleteFunc(slices.Clone(present), func(c string) bool { return c == ovnbgpName })
	header := []string{"job", "unit"}
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
		line := []string{r.job, r.unit}
		for _, c := range present {
			if v, ok := r.values[c]; ok {
				line = append(line, formatValue(v))
			} else {
				line = append(line, "-")
			}
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

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    row
		c    string
		want float64
		ok   bool
	}{
		{"time: FRR slower", row{values: map[string]float64{ovnbgpName: 2, reloadName: 1000}}, reloadName, 500, true},
		{"time: FRR faster", row{values: map[string]float64{ovnbgpName: 4, vtyshName: 2}}, vtyshName, 0.5, true},
		{"rate", row{higherIsBetter: true, values: map[string]float64{ovnbgpName: 9000, vtyshName: 3000}}, vtyshName, 3, true},
		{"missing", row{values: map[string]float64{ovnbgpName: 2}}, reloadName, 0, false},
		{"zero", row{values: map[string]float64{ovnbgpName: 0, vtyshName: 3}}, vtyshName, 0, false},
	} {
		got, ok := tc.r.ratio(tc.c)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ratio = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRenderTable(t *testing.T) {
	got := renderTable([]row{
		{job: "add 1 /24, p50", unit: "ms", values: map[string]float64{ovnbgpName: 3.5, vtyshName: 70, reloadName: 1250}},
		{job: "bulk add 1000", unit: "routes/s", higherIsBetter: true, values: map[string]float64{ovnbgpName: 20000, vtyshName: 5000}},
	})
	want := "" +
		"job             unit      ovnbgp  FRR(vtysh)  FRR(reload)  vtysh÷ovnbgp  reload÷ovnbgp\n" +
		"add 1 /24, p50  ms          3.50        70.0         1250         20.0×           357×\n" +
		"bulk add 1000   routes/s   20000        5000            -         4.00×              -\n"
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
