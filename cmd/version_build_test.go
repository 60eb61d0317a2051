package cmd

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rootOut runs a command in the module root and returns its
// trimmed stdout.
func rootOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = ".."
	out, err := c.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// versionJSON runs `BIN version -o json` and decodes it.
func versionJSON(t *testing.T, bin string) map[string]any {
	t.Helper()
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version -o json: %v", bin, err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version -o json: %v\n%s", bin, err, out)
	}
	return v
}

// TestVersionOfBuiltBinaries builds the real binary twice, with the
// Makefile's stamps (make build) and with a plain `go build`, and checks
// what `ovnbgp version` says about each: the version, the commit and
// whether the tree was dirty, the Go version and the gobgp and libovsdb
// module versions. The plain build has no stamps and falls back on the
// VCS information the go command records.
func TestVersionOfBuiltBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git not found: the version stamps come from git")
	}
	if _, err := os.Stat("../.git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("not a git checkout: no commit to compare the version stamps with")
		}
		t.Skip("not a git checkout: no commit to compare with")
	}
	head := rootOut(t, "git", "rev-parse", "HEAD")
	treeState := "clean"
	if rootOut(t, "git", "status", "--porcelain") != "" {
		treeState = "dirty"
	}
	want := map[string]string{
		"commit":    head,
		"treeState": treeState,
		"go":        rootOut(t, "go", "env", "GOVERSION"),
		"gobgp":     rootOut(t, "go", "list", "-m", "-f", "{{.Version}}", "github.com/osrg/gobgp/v4"),
		"libovsdb":  rootOut(t, "go", "list", "-m", "-f", "{{.Version}}", "github.com/ovn-org/libovsdb"),
	}
	dir := t.TempDir()

	check := func(t *testing.T, bin, wantVersion string) {
		t.Helper()
		v := versionJSON(t, bin)
		w := map[string]string{"version": wantVersion}
		for k, x := range want {
			w[k] = x
		}
		for k, x := range w {
			if got, _ := v[k].(string); got != x {
				t.Errorf("%s version: %s = %q, want %q (all: %v)", filepath.Base(bin), k, got, x, v)
			}
		}
		if got, _ := v["commitDate"].(string); got == "" {
			t.Errorf("%s version: no commitDate (all: %v)", filepath.Base(bin), v)
		}
		table, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("%s version: %v", bin, err)
		}
		for _, s := range []string{wantVersion, want["commit"], want["go"], "gobgp " + want["gobgp"], "libovsdb " + want["libovsdb"]} {
			if !strings.Contains(string(table), s) {
				t.Errorf("%s version does not show %q:\n%s", filepath.Base(bin), s, table)
			}
		}
	}

	t.Run("make build", func(t *testing.T) {
		bin := filepath.Join(dir, "ovnbgp-make")
		rootOut(t, "make", "-s", "build", "BIN="+bin, "VERSION=v0.0.0-versiontest")
		check(t, bin, "v0.0.0-versiontest")
	})
	t.Run("go build", func(t *testing.T) {
		// Without the Makefile's stamps the binary reports what the go
		// command recorded from git. The go command records nothing in a
		// git worktree (it looks for a .git directory) or with
		// -buildvcs=false in GOFLAGS (set on some machines), so build a
		// repository of its own: the working tree's files committed in a
		// fresh git repository, built with -buildvcs=true.
		src := filepath.Join(dir, "src")
		for _, f := range strings.Split(rootOut(t, "git", "ls-files", "--cached", "--others", "--exclude-standard"), "\n") {
			b, err := os.ReadFile(filepath.Join("..", f))
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted, not yet committed
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"init", "--quiet"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "t"}} {
			c := exec.Command("git", args...)
			c.Dir = src
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		c := exec.Command("git", "rev-parse", "HEAD")
		c.Dir = src
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		want["commit"] = strings.TrimSpace(string(out))
		want["treeState"] = "clean"
		bin := filepath.Join(dir, "ovnbgp-plain")
		c = exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", bin, ".")
		c.Dir = src
		c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=true")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		// The go command's version for the commit (a pseudo-version):
		// `go version -m` reads it back from the binary.
		var wantVersion string
		for _, l := range strings.Split(rootOut(t, "go", "version", "-m", bin), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/ovnbgp/ovnbgp" {
				wantVersion = f[2]
			}
		}
		if wantVersion == "" || wantVersion == "(devel)" {
			t.Fatalf("go version -m %s: no main module version from git (%q)", bin, wantVersion)
		}
		check(t, bin, wantVersion)
	})
}
