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
