package bench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartPatterns choose the rows benchmarks.png shows, one panel per row
// whose job name matches, in this order (then in the table's order): the
// import and the advertise comparisons. A pattern no row matches (a job
// that did not run) adds no panel.
func chartPatterns() []string {
	return []string{
		// Import (BenchmarkImportKernel), per size.
		`^import \d+ /24 into the kernel.*, session up→all in kernel$`,
		`^import \d+ /24 into the kernel.*, RSS per learned\+imported path$`,
		`^idle with \d+ routes, node daemons' CPU`,
		// Advertise: one change (BenchmarkSingleChange), bulk
		// (BenchmarkBulk: /24s; BenchmarkAdvertiseBulk: VIPs).
		`^add one /24, commit→RIB p(50|99)$`,
		`^withdraw one /24, commit→RIB p(50|99)$`,
		// One egress IP or VIP changed among many (BenchmarkAdvertiseChange),
		// from the command's start: BIRD sends before birdc returns, so
		// its commit→received is below 0.
		`^one egress IP or VIP changed, \d+ advertised: command start→ToR received \(all \d+\) p(50|99)$`,
		// One pod added or removed among many (BenchmarkAdvertiseWorkload,
		// issue 19), from the command's start for the same reason.
		`^one pod added or removed, \d+ pods: command start→ToR received \(all \d+\) p(50|99)$`,
		// From the command's start: vtysh and birdc return after much of
		// the work is done, so their "commit" comes late.
		`^bulk add \d+ .*, command start→all in RIB$`,
	}
}

// chartRows are the rows of rows that patterns choose, in the patterns'
// order, each row once.
func chartRows(rows []row, patterns []string) ([]row, error) {
	var out []row
	taken := make([]bool, len(rows))
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("chart pattern %q: %w", p, err)
		}
		for i, r := range rows {
			if !taken[i] && re.MatchString(r.job) {
				taken[i] = true
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// The chart's geometry: panels of panelW × panelH pixels, at most
// chartCols side by side.
const (
	chartDPI  = 100
	panelW    = 640
	panelH    = 440
	chartCols = 3
)

// captionH is the height in pixels of the caption above the panels: two
// lines at most.
const captionH = 44

// chartSize is the size in pixels of a chart of n panels, with the caption.
func chartSize(n int) (w, h int) {
	cols := min(n, chartCols)
	rows := (n + cols - 1) / cols
	return cols * panelW, rows*panelH + captionH
}

// chartCaption is the line above the panels: where and with what the run
// was made, from its results.json.
func chartCaption(f resultsFile) string {
	runs := 0
	for _, r := range f.rows() {
		for _, vs := range r.runs {
			runs = max(runs, len(vs))
		}
	}
	parts := []string{"ovnbgp " + f.Versions["ovnbgp"]}
	for _, k := range []string{"frr", "bird", "ovsdb-server"} {
		if v := f.Versions[k]; v != "" && !strings.HasPrefix(v, "unknown") {
			parts = append(parts, k+" "+strings.TrimPrefix(strings.TrimPrefix(v, "BIRD version "), "ovsdb-server (Open vSwitch) "))
		}
	}
	m := f.Machine
	system := m.OS
	if m.Debian != "" {
		system = "Debian " + m.Debian
	}
	kernel, _, _ := strings.Cut(m.Kernel, "-")
	bars := "bars: one run"
	if runs > 1 {
		bars = fmt.Sprintf("bars: median of %d runs, whiskers: min–max", runs)
	}
	return fmt.Sprintf("%s · %s, %d cores, %s, kernel %s · %s · %s",
		f.Date.Format("2006-01-02"), m.CPU, m.Cores, system, kernel, strings.Join(parts, ", "), bars)
}

// contenderColor is c's bar color, the same in every panel.
func contenderColor(c string, present []string) color.Color {
	palette := []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, // ovnbgp: blue
		{0xff, 0x7f, 0x0e, 0xff},
		{0xd6, 0x27, 0x28, 0xff},
		{0x2c, 0xa0, 0x2c, 0xff},
		{0x94, 0x67, 0xbd, 0xff},
		{0x8c, 0x56, 0x4b, 0xff},
		{0xe3, 0x77, 0xc2, 0xff},
		{0x7f, 0x7f, 0x7f, 0xff},
	}
	for i, x := range contenderOrder {
		if x == c {
			return palette[i%len(palette)]
		}
	}
	// Not a known contender: after them, by its column.
	for i, x := range present {
		if x == c {
			return palette[(len(contenderOrder)+i)%len(palette)]
		}
	}
	return palette[len(palette)-1]
}

// renderChart draws the caption, then one panel per row, a bar per
// contender that ran it at its median, whiskers from the lowest to the
// highest run, the median written above, as a PNG to w.
func renderChart(w io.Writer, rows []row, caption string) error {
	if len(rows) == 0 {
		return fmt.Errorf("chart: no rows to draw")
	}
	present := presentContenders(rows)
	cols := min(len(rows), chartCols)
	nrows := (len(rows) + cols - 1) / cols
	plots := make([][]*plot.Plot, nrows)
	for j := range plots {
		plots[j] = make([]*plot.Plot, cols)
	}
	for k, r := range rows {
		p, err := panel(r, present)
		if err != nil {
			return fmt.Errorf("chart: %q: %w", r.job, err)
		}
		plots[k/cols][k%cols] = p
	}
	pw, ph := chartSize(len(rows))
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(pw)*vg.Inch/chartDPI, vg.Length(ph)*vg.Inch/chartDPI), vgimg.UseDPI(chartDPI))
	dc := draw.New(img)
	capStyle := plot.New().Title.TextStyle
	capStyle.Font.Size = vg.Points(10)
	capStyle.XAlign, capStyle.YAlign = draw.XCenter, draw.YCenter
	capHeight := vg.Length(captionH) * vg.Inch / chartDPI
	// About 6 pixels a character at 10 points: one line over two panels or
	// more, two over one.
	dc.FillText(capStyle, vg.Point{X: dc.Center().X, Y: dc.Max.Y - capHeight/2}, wrapText(caption, pw/6))
	dc = draw.Crop(dc, 0, 0, 0, -capHeight)
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for j := range plots {
		for i, p := range plots[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("chart: encode PNG: %w", err)
	}
	return nil
}

// panel is row r's plot.
func panel(r row, present []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = wrapText(r.job, 52)
	p.Title.TextStyle.Font.Size = vg.Points(10)
	better := "lower is better"
	if r.higherIsBetter {
		better = "higher is better"
	}
	var names []string
	top, runs := 0.0, 0
	for _, c := range present {
		vs := r.runs[c]
		if len(vs) == 0 {
			continue
		}
		x := float64(len(names))
		names = append(names, c)
		m := median(vs)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range vs {
			lo, hi = min(lo, v), max(hi, v)
		}
		top, runs = max(top, hi), max(runs, len(vs))
		bar, err := plotter.NewBarChart(plotter.Values{m}, vg.Points(34))
		if err != nil {
			return nil, err
		}
		bar.XMin = x
		bar.Color = contenderColor(c, present)
		bar.LineStyle.Width = 0
		p.Add(bar)
		if len(vs) > 1 {
			p.Add(&plotter.YErrorBars{
				XYs:       plotter.XYs{{X: x, Y: m}},
				YErrors:   plotter.YErrors{{Low: m - lo, High: hi - m}},
				LineStyle: draw.LineStyle{Color: color.Black, Width: vg.Points(1)},
				CapWidth:  vg.Points(10),
			})
		}
		label, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: hi}}, Labels: []string{formatValue(m)}})
		if err != nil {
			return nil, err
		}
		for i := range label.TextStyle {
			label.TextStyle[i].XAlign = draw.XCenter
			label.TextStyle[i].Font.Size = vg.Points(9)
		}
		label.Offset = vg.Point{Y: vg.Points(3)}
		p.Add(label)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no contender has a value")
	}
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Min, p.Y.Max = 0, top*1.15
	if top == 0 {
		p.Y.Max = 1
	}
	p.Y.Label.Text = fmt.Sprintf("%s, %s", r.unit, better)
	if runs > 1 {
		p.Y.Label.Text += fmt.Sprintf("; median, min–max of %d runs", runs)
	}
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	return p, nil
}

// wrapText breaks s into lines of at most n runes, at spaces.
func wrapText(s string, n int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(w)) > n {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// errNoPanels: no row matches chartPatterns (a run of jobs the chart does
// not show); not a failure.
var errNoPanels = errors.New("chart: no row of this run matches the chart's patterns (chartPatterns in bench/chart_test.go): no " + chartName + " written")

// writeChart writes dir/benchmarks.png of the rows chartPatterns choose;
// it writes nothing and says so when none is chosen.
func writeChart(dir string, rows []row, caption string) (string, error) {
	chosen, err := chartRows(rows, chartPatterns())
	if err != nil {
		return "", err
	}
	if len(chosen) == 0 {
		return "", errNoPanels
	}
	var b bytes.Buffer
	if err := renderChart(&b, chosen, caption); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("chart directory (%s): %w", envOut, err)
	}
	path := filepath.Join(dir, chartName)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write chart: %w", err)
	}
	return path, nil
}

// resultsFlag re-renders the table and the chart of an earlier run:
//
//	go test ./bench/ -run TestRenderChart -args -results bench/out/results.json
//
// or bench/run.sh -chart [results.json]. A relative path is taken from the
// repository root; the chart is written to $OVNBGP_BENCH_OUT if set, else
// beside the results file.
var resultsFlag = flag.String("results", "", "a results.json to re-render the table and "+chartName+" of, or several, comma-separated, to combine (bench/run.sh -chart)")

// TestRenderChart renders a chart of a small made-up run and checks the
// PNG: its size from the number of panels the patterns chose, and every
// contender's bar color in it. With -results it re-renders an earlier run
// instead.
func TestRenderChart(t *testing.T) {
	if *resultsFlag != "" {
		rerender(t, *resultsFlag)
		return
	}
	rows := []row{
		{job: "import 10000 /24 into the kernel, session up→all in kernel", unit: "ms",
			runs: map[string][]float64{ovnbgpName: {900, 1000, 1100}, frrName: {2000, 2100, 1900}, birdName: {500, 600, 550}}},
		{job: "import 10000 /24 into the kernel, node daemons' CPU", unit: "ms", // no pattern: no panel
			runs: map[string][]float64{ovnbgpName: {300}, frrName: {400}}},
		{job: "add one /24, commit→RIB p50", unit: "ms",
			runs: map[string][]float64{ovnbgpName: {1.5, 1.3, 1.4}, vtyshName: {48, 49, 50}, reloadName: {650, 700, 680}, birdConfName: {30, 31, 29}}},
		{job: "bulk add 10000 VIP, command start→all in RIB", unit: "ms",
			runs: map[string][]float64{ovnbgpName: {800}, vtyshName: {80}}},
		{job: "import 10000 /24 into the kernel, routes/s from session up", unit: "routes/s", higherIsBetter: true,
			runs: map[string][]float64{ovnbgpName: {10000}, frrName: {5000}}}, // no pattern
	}
	chosen, err := chartRows(rows, chartPatterns())
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, r := range chosen {
		jobs = append(jobs, r.job)
	}
	if want := []string{rows[0].job, rows[2].job, rows[3].job}; strings.Join(jobs, "|") != strings.Join(want, "|") {
		t.Fatalf("chart rows %q, want %q", jobs, want)
	}
	var b bytes.Buffer
	if err := renderChart(&b, chosen, chartCaption(newResultsFile(chosen, true))); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	if w, h := chartSize(3); img.Bounds().Dx() != w || img.Bounds().Dy() != h || w != 3*panelW || h != panelH+captionH {
		t.Errorf("chart is %v, want %dx%d (three panels in a row)", img.Bounds().Size(), w, h)
	}
	present := presentContenders(chosen)
	for _, c := range present {
		if n := countColor(img, contenderColor(c, present)); n < 200 {
			t.Errorf("%s's bars: %d pixels of their color, want at least 200", c, n)
		}
	}
	if n := countColor(img, color.White); n == img.Bounds().Dx()*img.Bounds().Dy() {
		t.Error("the chart is blank")
	}
	if _, err := chartRows(rows, []string{"("}); err == nil {
		t.Error("a bad pattern: no error")
	}
	if err := renderChart(io.Discard, nil, ""); err == nil {
		t.Error("no rows: no error")
	}
}

// TestChartPatterns: the rows the benchmarks record (their names on main,
// and as the import job names them without the FRR note) get a panel; the
// others do not.
func TestChartPatterns(t *testing.T) {
	for _, tc := range []struct {
		job  string
		want bool
	}{
		{"import 100000 /24 into the kernel (FRR: bgpd+zebra), session up→all in kernel", true},
		{"import 10000 /24 into the kernel, session up→all in kernel", true},
		{"import 100000 /24 into the kernel (FRR: bgpd+zebra), RSS per learned+imported path", true},
		{"idle with 10000 routes, node daemons' CPU per minute", true},
		{"add one /24, commit→RIB p50", true},
		{"add one /24, commit→RIB p99", true},
		{"withdraw one /24, commit→RIB p50", true},
		{"withdraw one /24, commit→RIB p99", true},
		{"bulk add 1000 /24, command start→all in RIB", true},
		{"bulk add 10000 VIP, command start→all in RIB", true},
		{"import 100000 /24 into the kernel (FRR: bgpd+zebra), node daemons' CPU", false},
		{"add one /24, commit→RIB p90", false},
		{"add one /24, commit→RIB max", false},
		{"add one /24, commit→ToR received p50", false},
		{"bulk add 1000 /24, commit→all received by the ToR", false},
		{"bulk add 1000 /24, commit→all in RIB", false},
		{"one egress IP or VIP changed, 1002 advertised: add, commit→ToR RIB p50", false},
		{"one egress IP or VIP changed, 1000 advertised: command start→ToR received (all 200) p50", true},
		{"one egress IP or VIP changed, 1000 advertised: command start→ToR received (all 200) p99", true},
		{"one egress IP or VIP changed, 1000 advertised: commit→ToR received (all 200) p50", false},
		{"one pod added or removed, 10000 pods: command start→ToR received (all 200) p99", true},
		{"one pod added or removed, 10000 pods: commit→ToR received (all 200) p50", false},
		{"bulk add 10000 pod /32, command start→all in RIB", true},
	} {
		got, err := chartRows([]row{{job: tc.job}}, chartPatterns())
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) == 1) != tc.want {
			t.Errorf("%q: a panel %v, want %v", tc.job, len(got) == 1, tc.want)
		}
	}
}

// TestChartSize: panels fill rows of chartCols.
func TestChartSize(t *testing.T) {
	for _, tc := range []struct{ n, w, h int }{
		{1, panelW, panelH + captionH},
		{3, 3 * panelW, panelH + captionH},
		{4, 3 * panelW, 2*panelH + captionH},
		{7, 3 * panelW, 3*panelH + captionH},
	} {
		if w, h := chartSize(tc.n); w != tc.w || h != tc.h {
			t.Errorf("chartSize(%d) = %d×%d, want %d×%d", tc.n, w, h, tc.w, tc.h)
		}
	}
}

func TestWriteChartNoPanel(t *testing.T) {
	dir := t.TempDir()
	_, err := writeChart(dir, []row{{job: "something else", unit: "ms", runs: map[string][]float64{ovnbgpName: {1}}}}, "")
	if !errors.Is(err, errNoPanels) || !strings.Contains(err.Error(), "chartPatterns") {
		t.Errorf("no row chosen: err %v, want one naming chartPatterns", err)
	}
	if _, err := os.Stat(filepath.Join(dir, chartName)); !os.IsNotExist(err) {
		t.Errorf("no row chosen, yet %s: %v", chartName, err)
	}
}

func countColor(img image.Image, c color.Color) int {
	r0, g0, b0, a0 := c.RGBA()
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			if r == r0 && g == g0 && b == b0 && a == a0 {
				n++
			}
		}
	}
	return n
}

// rerender prints the table of an earlier run's results.json and writes
// its chart again.
func rerender(t *testing.T, list string) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	paths := strings.Split(list, ",")
	files := make([]resultsFile, len(paths))
	for i, path := range paths {
		if !filepath.IsAbs(path) {
			paths[i] = filepath.Join(filepath.Dir(cwd), path)
		}
		if files[i], err = readResults(paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	f, err := mergeResults(files)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(paths[0])
	if os.Getenv(envOut) != "" {
		dir = outDir(cwd)
	} else if len(paths) > 1 {
		t.Fatalf("%d results files: say where the combined results.json and %s go with %s=DIR", len(paths), chartName, envOut)
	}
	rows := f.rows()
	fmt.Printf("=== %s: %s, %s, %d cores; args %s\n%s", strings.Join(paths, " + "), f.Date.Format("2006-01-02 15:04 MST"), f.Machine.CPU, f.Machine.Cores,
		strings.Join(f.Args, " "), renderTable(rows))
	if len(paths) > 1 {
		out, err := writeResults(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("combined results: %s\n", out)
	}
	out, err := writeChart(dir, rows, chartCaption(f))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chart: %s\n", out)
}

// TestChartNotInBinary: the plotting library is for this package's tests
// only; the ovnbgp binary (package main at the module root) must not link
// it.
func TestChartNotInBinary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, "list", "-deps", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps of the ovnbgp binary: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/ovnbgp/ovnbgp/cmd\n") {
		t.Fatalf("go list -deps ..: not the ovnbgp binary's packages:\n%.500s", out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "gonum.org/") {
			t.Errorf("the ovnbgp binary depends on %s: plotting belongs in bench's tests only", l)
		}
	}
}

func TestChartCaption(t *testing.T) {
	f := resultsFile{
		Date:    time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Machine: machineInfo{CPU: "AMD EPYC", Cores: 2, Kernel: "6.18.44-fc-v669", OS: "Debian GNU/Linux 12 (bookworm)", Debian: "12.11"},
		Versions: map[string]string{"ovnbgp": "v0.9.0-3-gabc", "frr": "8.4.4-1.1~deb12u2", "bird": "BIRD version 2.0.12",
			"ovsdb-server": "ovsdb-server (Open vSwitch) 3.1.0"},
		Rows: toResultRows([]row{{job: "x", unit: "ms", runs: map[string][]float64{ovnbgpName: {1, 2, 3}, vtyshName: {4, 5}}}}),
	}
	want := "2026-12-01 · AMD EPYC, 2 cores, Debian 12.11, kernel 6.18.44 · ovnbgp v0.9.0-3-gabc, frr 8.4.4-1.1~deb12u2, " +
		"bird 2.0.12, ovsdb-server 3.1.0 · bars: median of 3 runs, whiskers: min–max"
	if got := chartCaption(f); got != want {
		t.Errorf("caption\n%q, want\n%q", got, want)
	}
	f.Versions["bird"] = "unknown (bird: not installed)"
	f.Rows = toResultRows([]row{{job: "x", unit: "ms", runs: map[string][]float64{ovnbgpName: {1}}}})
	if got := chartCaption(f); strings.Contains(got, "bird") || !strings.HasSuffix(got, "bars: one run") {
		t.Errorf("caption %q: want no bird (not installed) and one run", got)
	}
}
