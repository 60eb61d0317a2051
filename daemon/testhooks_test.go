package daemon

import (
	"bytes"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The text only testhooks_on.go holds (its testHookHang): a binary that
// contains it has the hang hook compiled in.
const testHookMarker = "test hook: SIGUSR2: the reconcile loop hangs now, for good"

// TestTestHooksOnlyWithTag: the hang hook (testhooks_on.go) is compiled
// only with -tags ovnbgp_testhooks, no other file of the module uses that
// tag, and the release binary ($OVNBGP_BIN, `make build`) does not contain
// the hook, while the test-hooks binary ($OVNBGP_TESTHOOKS_BIN) does.
func TestTestHooksOnlyWithTag(t *testing.T) {
	plain := build.Default
	plain.BuildTags = nil
	tagged := build.Default
	tagged.BuildTags = []string{"ovnbgp_testhooks"}
	for _, c := range []struct {
		file          string
		plain, tagged bool
	}{
		{"testhooks.go", true, true},
		{"testhooks_off.go", true, false},
		{"testhooks_on.go", false, true},
	} {
		for _, b := range []struct {
			name string
			ctx  *build.Context
			want bool
		}{{"without tags", &plain, c.plain}, {"with -tags ovnbgp_testhooks", &tagged, c.tagged}} {
			got, err := b.ctx.MatchFile(".", c.file)
			if err != nil {
				t.Fatal(err)
			}
			if got != b.want {
				t.Errorf("%s compiled %s: %v, want %v", c.file, b.name, got, b.want)
			}
		}
	}
	src, err := os.ReadFile("testhooks_on.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(`"`+testHookMarker+`"`)) {
		t.Fatalf("testhooks_on.go no longer logs %q: update testHookMarker", testHookMarker)
	}

	// The tag guards only these files: a hook elsewhere would escape
	// this test.
	var users []string
	err = filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "tools") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "//go:build") && strings.Contains(l, "ovnbgp_testhooks") {
				users = append(users, filepath.ToSlash(p))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(users)
	if want := []string{"../daemon/testhooks_off.go", "../daemon/testhooks_on.go"}; !slices.Equal(users, want) {
		t.Errorf("files with a ovnbgp_testhooks build constraint: %v, want %v", users, want)
	}

	for _, b := range []struct {
		env  string
		want bool
	}{{"OVNBGP_BIN", false}, {"OVNBGP_TESTHOOKS_BIN", true}} {
		path := os.Getenv(b.env)
		if path == "" {
			t.Logf("$%s not set (make test sets it): its binary not checked", b.env)
			continue
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("$%s: %v", b.env, err)
		}
		if got := bytes.Contains(bin, []byte(testHookMarker)); got != b.want {
			t.Errorf("$%s (%s) contains the hang hook's text %q: %v, want %v", b.env, path, testHookMarker, got, b.want)
		} else {
			t.Logf("$%s (%s): hang hook compiled in: %v", b.env, path, got)
		}
	}
}
