package config

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// mergeBomb is a YAML alias bomb made of merge keys: each level is an
// advertise rule whose merge list holds fan inline mappings, each merging
// the previous level. Decoding the last rule follows fan^depth merges; the
// document stays around a kilobyte and a half.
func mergeBomb(depth, fan int) string {
	var b strings.Builder
	b.WriteString("advertise:\n  - &r0 {name: pods, kind: podNetwork, networks: [default]}\n")
	for i := 1; i <= depth; i++ {
		b.WriteString("  - &r" + itoa(i) + "\n    <<: [")
		for j := range fan {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("{<<: *r" + itoa(i-1) + "}")
		}
		b.WriteString("]\n")
	}
	return baseDoc[:strings.Index(baseDoc, "advertise:")] + b.String()
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// TestMergeKeyBomb: nested merge lists that expand exponentially are
// refused with an error naming the problem (before the fix, depth 8 took
// minutes).
func TestMergeKeyBomb(t *testing.T) {
	for depth := 8; depth <= 12; depth++ {
		doc := mergeBomb(depth, 9)
		if depth == 8 {
			t.Logf("depth 8 bomb: %d bytes", len(doc))
		}
		errs := parseErrors(t, doc, fakeHost(nil))
		if len(errs) != 1 || !strings.Contains(errs[0].Msg, "alias bomb") {
			t.Fatalf("depth %d: errors %v, want one naming the alias bomb", depth, errs)
		}
		if errs[0].File != "config.yaml" {
			t.Errorf("the error does not name the file: %v", errs[0])
		}
	}
	// A small fan-out is decoded in full: its only problems are the
	// repeated rule names.
	for _, e := range parseErrors(t, mergeBomb(2, 3), fakeHost(nil)) {
		if !strings.Contains(e.Msg, "is also the name of") {
			t.Errorf("small merge document: unexpected problem %v", e)
		}
	}
}

// TestLoadContextCanceled: a canceled context stops decoding with an error.
func TestLoadContextCanceled(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte(mergeBomb(6, 9)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := LoadContext(ctx, f)
	if err == nil || !strings.Contains(err.Error(), "decoding stopped: context canceled") {
		t.Fatalf("LoadContext with a canceled context: %v, want decoding stopped", err)
	}
}

func TestDocumentTooLarge(t *testing.T) {
	doc := baseDoc + "# " + strings.Repeat("x", MaxConfigSize) + "\n"
	errs := parseErrors(t, doc, fakeHost(nil))
	checkErrors(t, errs, want{"", "at most 1048576 are read", 0})
}

// specialFiles makes a FIFO (no writer: a blocking read would hang), a
// directory and a listening unix socket, and names /dev/zero (endless).
func specialFiles(t *testing.T) map[string]struct{ path, kind string } {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	return map[string]struct{ path, kind string }{
		"fifo":      {fifo, "a named pipe (FIFO), not a regular file"},
		"dev zero":  {"/dev/zero", "a character device, not a regular file"},
		"directory": {sub, "a directory, not a regular file"},
		"socket":    {sock, "a socket, not a regular file"},
	}
}

// TestLoadSpecialFiles: Load refuses at once, without blocking, anything
// but a regular file; a symlink to a regular file works.
func TestLoadSpecialFiles(t *testing.T) {
	for name, f := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			_, err := Load(f.path)
			if err == nil || !strings.Contains(err.Error(), f.kind) || !strings.Contains(err.Error(), f.path) {
				t.Fatalf("Load(%s) = %v, want an error naming the file and %q", f.path, err, f.kind)
			}
		})
	}
	t.Run("symlink to a regular file", func(t *testing.T) {
		dir := t.TempDir()
		real := filepath.Join(dir, "real.yaml")
		if err := os.WriteFile(real, []byte(baseDoc), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "config.yaml")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		// The fake host's routerID and hostname are not needed: baseDoc
		// sets both.
		if _, err := Load(link); err != nil {
			t.Fatalf("Load(symlink): %v", err)
		}
	})
	t.Run("symlink to a FIFO", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.Symlink(specialFiles(t)["fifo"].path, link); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(link); err == nil || !strings.Contains(err.Error(), "a named pipe (FIFO)") {
			t.Fatalf("Load(symlink to FIFO) = %v, want it refused", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		big := filepath.Join(t.TempDir(), "big.yaml")
		if err := os.WriteFile(big, []byte(baseDoc+"# "+strings.Repeat("x", MaxConfigSize)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "is larger than 1048576 bytes") {
			t.Fatalf("Load(big) = %v, want it refused", err)
		}
	})
}

// TestPasswordFileSpecialFiles: a passwordFile that is not a regular file
// is refused at once, whether read by Parse or checked by Validate.
func TestPasswordFileSpecialFiles(t *testing.T) {
	for name, f := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			errs := parseErrors(t, withPasswordFile(t, f.path), fakeHost(nil))
			checkErrors(t, errs, want{"bgp.peers[0].passwordFile", f.kind, 10})

			c := mustParse(t, baseDoc)
			c.BGP.Peers[0].PasswordFile = f.path
			var verrs Errors
			if err := c.Validate(); !errors.As(err, &verrs) {
				t.Fatalf("Validate: %v, want Errors", err)
			}
			checkErrors(t, verrs, want{"bgp.peers[0].passwordFile", f.kind, 0})
		})
	}
	t.Run("symlink to a secret", func(t *testing.T) {
		dir := t.TempDir()
		real := writeSecret(t, dir, "real", secret+"\n")
		link := filepath.Join(dir, "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		if got := mustParse(t, withPasswordFile(t, link)).BGP.Peers[0].Password; got != secret {
			t.Errorf("Password = %q, want %q", got, secret)
		}
	})
	t.Run("huge", func(t *testing.T) {
		f := writeSecret(t, t.TempDir(), "huge", strings.Repeat("x", 1<<20))
		errs := parseErrors(t, withPasswordFile(t, f), fakeHost(nil))
		checkErrors(t, errs, want{"bgp.peers[0].passwordFile", "is larger than 1024 bytes", 10})
	})
}

// TestMergeKeyBombOfProblems: a bomb whose expanded mappings are full of
// unknown keys and bad values is refused as a bomb too, and the problems
// it would repeat millions of times cost memory only up to the budget.
func TestMergeKeyBombOfProblems(t *testing.T) {
	doc := strings.Replace(mergeBomb(8, 9), "{name: pods, kind: podNetwork, networks: [default]}",
		"{name: pods, kind: podNetwork, networks: [default], colour: blue, nme: x, med: banana}", 1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	errs := parseErrors(t, doc, fakeHost(nil))
	runtime.ReadMemStats(&after)
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "alias bomb") {
		t.Fatalf("errors %v, want one naming the alias bomb", errs)
	}
	// Before problems were charged, this document allocated 1.45 GB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 400<<20 {
		t.Errorf("refusing the bomb allocated %d MB, want far less", got>>20)
	}
}
