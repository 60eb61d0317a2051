package prereq

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeTB records what Missing does to a test; Fatal and Skip end the
// goroutine as the real ones do.
type fakeTB struct {
	testing.TB
	name          string
	mu            sync.Mutex
	fatal, skip   string
	fatalCalled   bool
	skipCalled    bool
	helperCounted int
}

func sprint(args []any) string { return fmt.Sprintln(args...) }

func goexit() { runtime.Goexit() }

func (f *fakeTB) Helper()      { f.helperCounted++ }
func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Fatal(args ...any) {
	f.mu.Lock()
	f.fatal, f.fatalCalled = strings.TrimSpace(sprint(args)), true
	f.mu.Unlock()
	goexit()
}
func (f *fakeTB) Skip(args ...any) {
	f.mu.Lock()
	f.skip, f.skipCalled = strings.TrimSpace(sprint(args)), true
	f.mu.Unlock()
	goexit()
}

// missing runs Missing on a fake test in a goroutine of its own (Fatal and
// Skip end it).
func missing(f *fakeTB, msg string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Missing(f, msg)
	}()
	<-done
}

// TestMissingSkipsAndNotes: outside CI, Missing skips with the message and
// leaves one note in $OVNBGP_SKIP_DIR naming the package, the test and
// the reason.
func TestMissingSkipsAndNotes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CI", "")
	t.Setenv(EnvDir, dir)
	f := &fakeTB{name: "TestSomething/sub"}
	missing(f, "frr missing (run scripts/test-deps.sh as root)")
	if !f.skipCalled || f.fatalCalled || f.skip != "frr missing (run scripts/test-deps.sh as root)" {
		t.Fatalf("Missing outside CI: skip %v %q, fatal %v %q; want a skip with the message", f.skipCalled, f.skip, f.fatalCalled, f.fatal)
	}
	notes, err := Notes(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Note{Package: "test/prereq", Test: "TestSomething/sub", Reason: "frr missing (run scripts/test-deps.sh as root)"}
	if len(notes) != 1 || notes[0] != want {
		t.Fatalf("notes %+v, want [%+v]", notes, want)
	}
}

// TestMissingFailsInCI: under CI=true Missing fails the test, and leaves
// no note (the failure is the report).
func TestMissingFailsInCI(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CI", "true")
	t.Setenv(EnvDir, dir)
	f := &fakeTB{name: "TestSomething"}
	missing(f, "needs root")
	if !f.fatalCalled || f.skipCalled || f.fatal != "needs root; CI=true: failing instead of skipping" {
		t.Fatalf("Missing under CI=true: fatal %v %q, skip %v; want a failure", f.fatalCalled, f.fatal, f.skipCalled)
	}
	if notes, _ := Notes(dir); len(notes) != 0 {
		t.Errorf("notes under CI=true: %+v", notes)
	}
}

// TestMissingWithoutDir: without $OVNBGP_SKIP_DIR (go test by hand) it
// only skips.
func TestMissingWithoutDir(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv(EnvDir, "")
	f := &fakeTB{name: "TestSomething"}
	missing(f, "needs root")
	if !f.skipCalled {
		t.Fatal("Missing did not skip")
	}
}

// TestSummary: nothing noted is one quiet line; notes are grouped by
// package and reason, with the count and the tests, in a banner.
func TestSummary(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if n, err := Summary(dir, &out); err != nil || n != 0 {
		t.Fatalf("Summary of no notes: %d, %v", n, err)
	}
	if got := out.String(); got != "make test: no test skipped for a missing prerequisite\n" {
		t.Errorf("Summary of no notes:\n%s", got)
	}
	if n, err := Summary(filepath.Join(dir, "absent"), &out); err != nil || n != 0 {
		t.Errorf("Summary of an absent directory: %d, %v", n, err)
	}

	for _, n := range []Note{
		{"test/e2e", "TestB", "end-to-end prerequisites missing: root"},
		{"test/e2e", "TestA", "end-to-end prerequisites missing: root"},
		{"test/e2e", "TestA", "end-to-end prerequisites missing: root"}, // again: make race ran it too
		{"packaging", "TestPackages", "podman not found"},
		{"make race", "-", "no C compiler"},
	} {
		if err := write(dir, n); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	n, err := Summary(dir, &out)
	if err != nil || n != 4 {
		t.Fatalf("Summary: %d, %v, want 4", n, err)
	}
	got := out.String()
	for _, want := range []string{
		"SKIPPED",
		"4 skipped for a missing prerequisite",
		"  make race: no C compiler\n",
		"  packaging: podman not found\n      TestPackages\n",
		"  test/e2e (2 tests): end-to-end prerequisites missing: root\n      TestA TestB\n",
		"CI=true",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "make race") > strings.Index(got, "packaging:") || strings.Index(got, "packaging:") > strings.Index(got, "test/e2e") {
		t.Errorf("Summary not sorted by package:\n%s", got)
	}
}

func TestMain(m *testing.M) {
	// The notes of this package's own tests go to their temporary
	// directories, never to make test's.
	os.Unsetenv(EnvDir)
	os.Exit(m.Run())
}
