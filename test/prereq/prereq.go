// Package prereq is how a test skips for a missing prerequisite (root, a
// program or package, a kernel feature): under CI=true it fails instead;
// elsewhere it skips and, when $OVNBGP_SKIP_DIR is set (make test sets
// it), leaves a note there. make test ends with Summary of the notes
// (./summary), so that a run without root or the test packages ends in a
// loud list of what did not run and why, never in a silent green.
package prereq

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// EnvDir names the directory the notes go to.
const EnvDir = "OVNBGP_SKIP_DIR"

// InCI reports whether the tests run in CI (CI=true), where a missing
// prerequisite is a failure, not a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing stops a test that cannot run here: under CI=true it fails with
// msg, elsewhere it notes msg in $OVNBGP_SKIP_DIR (when set) and skips with
// it. msg names what is missing and how to get it.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatal(msg + "; CI=true: failing instead of skipping")
	}
	if dir := os.Getenv(EnvDir); dir != "" {
		if err := write(dir, Note{Package: packageDir(), Test: t.Name(), Reason: msg}); err != nil {
			// The skip still happens; the summary would miss it, so say so.
			fmt.Fprintf(os.Stderr, "prereq: noting the skip of %s: %v\n", t.Name(), err)
		}
	}
	t.Skip(msg)
}

// Note is one skip: the package (its directory in the module, or a make
// target), the test ("-" for a make target) and the reason.
type Note struct {
	Package, Test, Reason string
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// write adds n to dir as a file of its own (tests of several processes
// write at once): one line, package, test and reason separated by tabs.
// make's targets write the same line with printf.
func write(dir string, n Note) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "skip-*")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\t%s\t%s\n", oneLine(n.Package), oneLine(n.Test), oneLine(n.Reason))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// packageDir is the working directory (go test runs a package's tests in
// its directory) relative to the module root.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if rel, err := filepath.Rel(d, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			return wd
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

// Notes reads every note in dir; an absent dir holds none.
func Notes(dir string) ([]Note, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var notes []Note
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l == "" {
				continue
			}
			f := strings.SplitN(l, "\t", 3)
			for len(f) < 3 {
				f = append(f, "")
			}
			notes = append(notes, Note{Package: f[0], Test: f[1], Reason: f[2]})
		}
	}
	return notes, nil
}

// maxTests is how many test names a group lists.
const maxTests = 12

// Summary writes what dir's notes say: one quiet line when there are
// none, else a banner with the skips grouped by package and reason, and
// returns how many there are (a test noted twice counts once).
func Summary(dir string, w io.Writer) (int, error) {
	notes, err := Notes(dir)
	if err != nil {
		return 0, err
	}
	// make test's race step runs some tests a second time: one note each.
	slices.SortFunc(notes, func(a, b Note) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Test, b.Test))
	})
	notes = slices.Compact(notes)
	if len(notes) == 0 {
		_, err := fmt.Fprintln(w, "make test: no test skipped for a missing prerequisite")
		return 0, err
	}
	type group struct {
		pkg, reason string
		tests       []string
	}
	var groups []*group
	for _, n := range notes {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.pkg == n.Package && g.reason == n.Reason })
		if i < 0 {
			groups = append(groups, &group{pkg: n.Package, reason: n.Reason})
			i = len(groups) - 1
		}
		if n.Test != "" && n.Test != "-" {
			groups[i].tests = append(groups[i].tests, n.Test)
		}
	}
	slices.SortFunc(groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.reason, b.reason))
	})
	bar := strings.Repeat("=", 78)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nmake test: SKIPPED: %d skipped for a missing prerequisite; this run is not the whole suite:\n", bar, len(notes))
	for _, g := range groups {
		slices.Sort(g.tests)
		if len(g.tests) > 1 {
			fmt.Fprintf(&b, "  %s (%d tests): %s\n", g.pkg, len(g.tests), g.reason)
		} else {
			fmt.Fprintf(&b, "  %s: %s\n", g.pkg, g.reason)
		}
		if len(g.tests) > 0 {
			shown := g.tests[:min(len(g.tests), maxTests)]
			more := ""
			if len(g.tests) > maxTests {
				more = fmt.Sprintf(" and %d more", len(g.tests)-maxTests)
			}
			fmt.Fprintf(&b, "      %s%s\n", strings.Join(shown, " "), more)
		}
	}
	fmt.Fprintf(&b, "For the whole suite: run scripts/test-deps.sh and make test as root. Under CI=true each of these fails.\n%s\n", bar)
	_, err = io.WriteString(w, b.String())
	return len(notes), err
}
