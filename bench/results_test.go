package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// envOut is the directory results.json and benchmarks.png are written to
// (default bench/out; a relative path is taken from the repository root).
const envOut = "OVNBGP_BENCH_OUT"

// The files a run writes into the output directory.
const (
	resultsName = "results.json"
	chartName   = "benchmarks.png"
)

// resultsFile is results.json: what a run of the benchmarks measured (every
// run's value, not only the medians the table shows), where and with what.
type resultsFile struct {
	// Date is when the run ended, UTC.
	Date time.Time `json:"date"`
	// Args are the test binary's arguments (-test.bench, -test.count...).
	Args []string `json:"args"`
	// Passed is false when a benchmark failed: the rows are what was
	// recorded before.
	Passed   bool              `json:"passed"`
	Machine  machineInfo       `json:"machine"`
	Versions map[string]string `json:"versions"`
	Rows     []resultRow       `json:"rows"`
}

type machineInfo struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryMiB int    `json:"memoryMiB"`
	Kernel    string `json:"kernel"`
	OS        string `json:"os"`
	// Debian is /etc/debian_version (the point release).
	Debian string `json:"debian,omitempty"`
}

// resultRow is one row of the table with every contender's runs in the
// order they ran, and their medians.
type resultRow struct {
	Job            string               `json:"job"`
	Unit           string               `json:"unit"`
	HigherIsBetter bool                 `json:"higherIsBetter"`
	Runs           map[string][]float64 `json:"runs"`
	Median         map[string]float64   `json:"median"`
}

// snapshot copies the rows recorded so far.
func (r *results) snapshot() []row {
	r.mu.Lock()
	defer r.mu.Unlock()
	rows := make([]row, len(r.rows))
	for i, x := range r.rows {
		rows[i] = x
		rows[i].runs = make(map[string][]float64, len(x.runs))
		for c, vs := range x.runs {
			rows[i].runs[c] = slices.Clone(vs)
		}
	}
	return rows
}

func toResultRows(rows []row) []resultRow {
	out := make([]resultRow, 0, len(rows))
	for _, r := range rows {
		x := resultRow{Job: r.job, Unit: r.unit, HigherIsBetter: r.higherIsBetter,
			Runs: map[string][]float64{}, Median: map[string]float64{}}
		for c, vs := range r.runs {
			if len(vs) == 0 {
				continue
			}
			x.Runs[c] = slices.Clone(vs)
			x.Median[c] = median(vs)
		}
		out = append(out, x)
	}
	return out
}

// rows turns the file's rows back into the table's (the medians are
// recomputed from the runs).
func (f *resultsFile) rows() []row {
	rows := make([]row, 0, len(f.Rows))
	for _, x := range f.Rows {
		r := row{job: x.Job, unit: x.Unit, higherIsBetter: x.HigherIsBetter, runs: map[string][]float64{}}
		for c, vs := range x.Runs {
			r.runs[c] = slices.Clone(vs)
		}
		rows = append(rows, r)
	}
	return rows
}

// newResultsFile describes this run: rows, the machine, the versions of
// every contender's software.
func newResultsFile(rows []row, passed bool) resultsFile {
	return resultsFile{
		Date:     time.Now().UTC().Truncate(time.Second),
		Args:     os.Args[1:],
		Passed:   passed,
		Machine:  thisMachine(),
		Versions: versions(),
		Rows:     toResultRows(rows),
	}
}

// writeResults writes f as dir/results.json, creating dir.
func writeResults(dir string, f resultsFile) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results directory (%s): %w", envOut, err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	path := filepath.Join(dir, resultsName)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}

// readResults reads a results.json that writeResults wrote.
func readResults(path string) (resultsFile, error) {
	var f resultsFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("read results: %w (a results.json is written by a benchmark run, e.g. sudo bench/run.sh -compare)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: not a results.json of bench/: %w", path, err)
	}
	if len(f.Rows) == 0 {
		return f, fmt.Errorf("%s: no rows: the run it came from measured nothing", path)
	}
	return f, nil
}

// mergeResults combines the results of several runs, e.g. the import jobs
// and the advertise jobs run apart: rows in the files' order, the runs of a
// row that is in several files put together. The machine must be the same;
// a version that differs (a commit) is shown with every value. The date is
// the latest run's.
func mergeResults(files []resultsFile) (resultsFile, error) {
	if len(files) == 0 {
		return resultsFile{}, errors.New("no results to combine")
	}
	out := files[0]
	out.Args = slices.Clone(out.Args)
	out.Versions = map[string]string{}
	for k, v := range files[0].Versions {
		out.Versions[k] = v
	}
	var rows []row
	index := map[[2]string]int{}
	add := func(f resultsFile) {
		for _, r := range f.rows() {
			k := [2]string{r.job, r.unit}
			i, ok := index[k]
			if !ok {
				index[k] = len(rows)
				rows = append(rows, r)
				continue
			}
			for c, vs := range r.runs {
				rows[i].runs[c] = append(rows[i].runs[c], vs...)
			}
		}
	}
	add(files[0])
	for _, f := range files[1:] {
		if f.Machine.CPU != out.Machine.CPU || f.Machine.Cores != out.Machine.Cores || f.Machine.Kernel != out.Machine.Kernel {
			return resultsFile{}, fmt.Errorf("results from two machines (%s, %d cores, kernel %s; %s, %d cores, kernel %s): not combined",
				out.Machine.CPU, out.Machine.Cores, out.Machine.Kernel, f.Machine.CPU, f.Machine.Cores, f.Machine.Kernel)
		}
		if f.Date.After(out.Date) {
			out.Date = f.Date
		}
		out.Passed = out.Passed && f.Passed
		out.Args = append(append(out.Args, ";"), f.Args...)
		for k, v := range f.Versions {
			if have, ok := out.Versions[k]; !ok {
				out.Versions[k] = v
			} else if !slices.Contains(strings.Split(have, " + "), v) {
				out.Versions[k] = have + " + " + v
			}
		}
		add(f)
	}
	out.Rows = toResultRows(rows)
	return out, nil
}

// outDir is where results.json and benchmarks.png go: $OVNBGP_BENCH_OUT, or
// bench/out. A relative path is taken from the repository root, the parent
// of the package directory go test runs the test binary in (cwd).
func outDir(cwd string) string {
	d := os.Getenv(envOut)
	if d == "" {
		d = filepath.Join("bench", "out")
	}
	if filepath.IsAbs(d) {
		return filepath.Clean(d)
	}
	return filepath.Join(filepath.Dir(cwd), d)
}

func thisMachine() machineInfo {
	m := machineInfo{Cores: runtime.NumCPU()}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int
		if _, err := fmt.Sscanf(kb, "%d kB", &n); err == nil {
			m.MemoryMiB = n / 1024
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.OS = strings.Trim(procField("/etc/os-release", "PRETTY_NAME"), `"`)
	if b, err := os.ReadFile("/etc/debian_version"); err == nil {
		m.Debian = strings.TrimSpace(string(b))
	}
	return m
}

// procField is the value of the first "key: value" or "key=value" line of
// a file such as /proc/cpuinfo or /etc/os-release; "" if there is none.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			k, v, ok = strings.Cut(s.Text(), "=")
		}
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// versions of what the benchmarks ran: Go, ovnbgp (git describe of this
// tree, and the binary's own `version` when OVNBGP_BIN gives one), FRR,
// BIRD, ovsdb-server. A tool that is missing says so instead.
func versions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	v["ovnbgp"] = firstLine(versionOf("git", "describe", "--tags", "--always", "--dirty"))
	if bin := os.Getenv("OVNBGP_BIN"); bin != "" {
		v["ovnbgpBinary"] = bin + ": " + firstLine(versionOf(bin, "version"))
	}
	if s, err := versionOf("dpkg-query", "-W", "-f", "${Version}", "frr"); err == nil && s != "" {
		v["frr"] = s
	} else {
		v["frr"] = firstLine(versionOf("vtysh", "--version"))
	}
	v["bird"] = firstLine(versionOf("bird", "--version"))
	v["ovsdb-server"] = firstLine(versionOf("ovsdb-server", "--version"))
	return v
}

// versionOf runs a short command and returns its output (stdout and stderr: bird
// prints its version on stderr).
func versionOf(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		var notFound *exec.Error
		if errors.As(err, &notFound) {
			return "", fmt.Errorf("%s: not installed", name)
		}
		return strings.TrimSpace(string(out)), fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// firstLine is the first line of a command's output, or "unknown (why)".
func firstLine(s string, err error) string {
	if err != nil {
		return "unknown (" + firstLine(err.Error(), nil) + ")"
	}
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

// TestResultsFile: the rows of a run written to results.json and read back
// are the same rows, every run's value kept, with their medians, the
// machine and the versions.
func TestResultsFile(t *testing.T) {
	rows := []row{
		{job: "add one /24, commit→RIB p50", unit: "ms", runs: map[string][]float64{ovnbgpName: {1.5, 1.3, 1.4}, vtyshName: {48, 49}}},
		{job: "bulk add 1000 /24, routes/s from command start", unit: "routes/s", higherIsBetter: true, runs: map[string][]float64{ovnbgpName: {3000}}},
	}
	dir := filepath.Join(t.TempDir(), "new", "out") // created
	path, err := writeResults(dir, newResultsFile(rows, true))
	if err != nil {
		t.Fatal(err)
	}
	f, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.rows(); !rowsEqual(got, rows) {
		t.Errorf("read back %+v, want %+v", got, rows)
	}
	if got := f.Rows[0].Median; got[ovnbgpName] != 1.4 || got[vtyshName] != 48.5 {
		t.Errorf("medians %v, want ovnbgp 1.4 and FRR(vtysh) 48.5", got)
	}
	if !f.Passed || f.Date.IsZero() || len(f.Args) != len(os.Args)-1 {
		t.Errorf("passed %v, date %v, args %q: want true, now, the test binary's", f.Passed, f.Date, f.Args)
	}
	m := f.Machine
	if m.Cores < 1 || m.CPU == "" || m.Kernel == "" || m.OS == "" || m.MemoryMiB < 1 {
		t.Errorf("machine %+v: want CPU, cores, memory, kernel and OS", m)
	}
	for _, k := range []string{"go", "ovnbgp", "frr", "bird", "ovsdb-server"} {
		if f.Versions[k] == "" {
			t.Errorf("versions %v: no %q", f.Versions, k)
		}
	}
	if f.Versions["go"] != runtime.Version() {
		t.Errorf("go version %q, want %q", f.Versions["go"], runtime.Version())
	}
}

func TestReadResultsErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "missing.json"), "bench/run.sh -compare"},
		{write("junk.json", "not json"), "not a results.json"},
		{write("other.json", `{"benchmarks": []}`), "unknown field"},
		{write("empty.json", `{"rows": []}`), "no rows"},
	} {
		_, err := readResults(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readResults(%s) = %v, want an error saying %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}

func TestOutDir(t *testing.T) {
	cwd := "/src/ovnbgp/bench" // where go test runs the package's tests
	for _, tc := range []struct{ env, want string }{
		{"", "/src/ovnbgp/bench/out"},
		{"docs", "/src/ovnbgp/docs"},
		{"/var/tmp/b/", "/var/tmp/b"},
	} {
		t.Setenv(envOut, tc.env)
		if got := outDir(cwd); got != tc.want {
			t.Errorf("%s=%q: outDir = %q, want %q", envOut, tc.env, got, tc.want)
		}
	}
}

func rowsEqual(a, b []row) bool {
	return slices.EqualFunc(a, b, func(x, y row) bool {
		if x.job != y.job || x.unit != y.unit || x.higherIsBetter != y.higherIsBetter || len(x.runs) != len(y.runs) {
			return false
		}
		for c, vs := range x.runs {
			if !slices.Equal(vs, y.runs[c]) {
				return false
			}
		}
		return true
	})
}

// TestMergeResults: two runs' results (import and advertise run apart)
// combine into one: rows of both, the runs of a shared row together, the
// later date, every differing version; two machines are refused.
func TestMergeResults(t *testing.T) {
	m := machineInfo{CPU: "AMD EPYC", Cores: 2, Kernel: "6.18"}
	d1 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	a := resultsFile{Date: d1, Passed: true, Machine: m, Args: []string{"-test.bench=ImportKernel"},
		Versions: map[string]string{"ovnbgp": "c50e9ef", "frr": "8.4.4"},
		Rows: toResultRows([]row{
			{job: "import", unit: "ms", runs: map[string][]float64{ovnbgpName: {1, 2, 3}}},
			{job: "shared", unit: "ms", runs: map[string][]float64{ovnbgpName: {10}}},
		})}
	b := resultsFile{Date: d1.Add(time.Hour), Passed: false, Machine: m, Args: []string{"-test.bench=SingleChange"},
		Versions: map[string]string{"ovnbgp": "abc1234", "frr": "8.4.4", "bird": "2.0.12"},
		Rows: toResultRows([]row{
			{job: "shared", unit: "ms", runs: map[string][]float64{ovnbgpName: {20, 30}, vtyshName: {5}}},
			{job: "add", unit: "ms", runs: map[string][]float64{vtyshName: {7}}},
		})}
	got, err := mergeResults([]resultsFile{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, r := range got.Rows {
		jobs = append(jobs, r.Job)
	}
	if strings.Join(jobs, ",") != "import,shared,add" {
		t.Errorf("rows %v, want import, shared, add", jobs)
	}
	if r := got.Rows[1]; !slices.Equal(r.Runs[ovnbgpName], []float64{10, 20, 30}) || r.Median[ovnbgpName] != 20 || r.Median[vtyshName] != 5 {
		t.Errorf("shared row %+v: want ovnbgp's runs 10, 20, 30 (median 20) and vtysh's 5", r)
	}
	if got.Versions["ovnbgp"] != "c50e9ef + abc1234" || got.Versions["frr"] != "8.4.4" || got.Versions["bird"] != "2.0.12" {
		t.Errorf("versions %v", got.Versions)
	}
	if !got.Date.Equal(b.Date) || got.Passed {
		t.Errorf("date %v passed %v: want the later date and not passed", got.Date, got.Passed)
	}
	// a's rows are not changed by the merge.
	if !slices.Equal(a.Rows[1].Runs[ovnbgpName], []float64{10}) {
		t.Errorf("the merge changed its input: %v", a.Rows[1].Runs)
	}
	other := b
	other.Machine.Cores = 8
	if _, err := mergeResults([]resultsFile{a, other}); err == nil || !strings.Contains(err.Error(), "two machines") {
		t.Errorf("two machines: %v, want refused", err)
	}
}
