package vm

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper()             {}
func (r *recorder) Log(a ...any)        {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(f, a...))
}
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }

// run calls f with a recorder in its own goroutine (Fatalf ends it) and
// returns what failed.
func record(t *testing.T, f func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r.errs
}

// fakeQemu writes a script standing in for qemu: with "-accel kvm" it
// prints kvmOut and hangs unless kvmOut is set, with TCG it prints a
// passing report.
func fakeQemu(t *testing.T, kvmOut string) Kernel {
	dir := t.TempDir()
	script := filepath.Join(dir, "qemu")
	body := "#!/bin/sh\ncase \"$*\" in\n*'-accel kvm'*)\n"
	if kvmOut == "" {
		body += "  echo 'early boot noise'\n  exec sleep 60;;\n"
	} else {
		body += "  printf '" + kvmOut + "';;\n"
	}
	body += "*) printf 'vmtest: PASS one: tcg\\r\\nvmtest: VERDICT PASS\\n';;\nesac\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return Kernel{Qemu: script, Vmlinuz: "/boot/vmlinuz-test"}
}

func TestBootAccelerator(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("shell script stand-in for qemu")
	}
	kvmOK := "vmtest: PASS one: kvm\\nvmtest: VERDICT PASS\\n"
	for _, c := range []struct {
		name, env, kvmOut string
		kvm               bool
		want, line        string
		fails             bool
	}{
		{name: "kvm boots", kvmOut: kvmOK, kvm: true, want: "kvm", line: "PASS one: kvm"},
		{name: "kvm hangs: tcg", kvm: true, want: "tcg", line: "PASS one: tcg"},
		{name: "no /dev/kvm: tcg", kvmOut: kvmOK, want: "tcg", line: "PASS one: tcg"},
		{name: "forced tcg", env: "tcg", kvmOut: kvmOK, kvm: true, want: "tcg", line: "PASS one: tcg"},
		{name: "forced kvm", env: "kvm", kvmOut: kvmOK, want: "kvm", line: "PASS one: kvm"},
		{name: "bad env", env: "hvf", kvm: true, fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := fakeQemu(t, c.kvmOut)
			var r Result
			start := time.Now()
			errs := record(t, func(tb testing.TB) {
				r = k.bootAuto(tb, Options{Initrd: "x", Timeout: time.Minute}, c.env, c.kvm, time.Second)
			})
			if c.fails {
				if len(errs) != 1 || !strings.Contains(errs[0], `OVNBGP_VM_ACCEL="hvf"`) {
					t.Fatalf("errors %q, want one naming OVNBGP_VM_ACCEL", errs)
				}
				return
			}
			if len(errs) > 0 || r.Err != nil || r.Accel != c.want || r.Verdict != "PASS" ||
				len(r.Lines) != 1 || r.Lines[0] != c.line {
				t.Fatalf("got accel %s, verdict %q, lines %q, err %v, errors %q (%s); want %s with %q",
					r.Accel, r.Verdict, r.Lines, r.Err, errs, time.Since(start), c.want, c.line)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	pass := Result{Lines: []string{"INFO x", "PASS a: ok", "PASS b: ok"}, Verdict: "PASS"}
	if errs := record(t, func(tb testing.TB) { pass.Check(tb, "a", "b") }); len(errs) != 0 {
		t.Errorf("all passed: %q", errs)
	}
	// A check the guest never reported fails, as does a FAIL line even
	// with a PASS verdict, and any verdict but PASS.
	errs := record(t, func(tb testing.TB) { pass.Check(tb, "a", "b", "c") })
	if len(errs) != 1 || !strings.Contains(errs[0], `"c"`) {
		t.Errorf("missing check c: %q", errs)
	}
	bad := Result{Lines: []string{"PASS a: ok", "FAIL b: broken"}, Verdict: "PASS"}
	errs = record(t, func(tb testing.TB) { bad.Check(tb, "a") })
	if len(errs) != 1 || !strings.Contains(errs[0], "FAIL b: broken") {
		t.Errorf("FAIL line: %q", errs)
	}
	noVerdict := Result{Lines: []string{"PASS a: ok"}}
	errs = record(t, func(tb testing.TB) { noVerdict.Check(tb, "a") })
	if len(errs) != 1 || !strings.Contains(errs[0], `verdict ""`) {
		t.Errorf("no verdict: %q", errs)
	}
}

// TestInitramfsNewc reads the archive back as the kernel does: newc
// headers, names, modes, data, 4-byte alignment and the trailer.
func TestInitramfsNewc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "initrd.gz")
	a, err := NewInitramfs(path)
	if err != nil {
		t.Fatal(err)
	}
	a.File("payload/etc/x/secret", 0o600, []byte("s3cret\n"))
	a.File("init", 0o755, []byte("12345"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	data := map[string]string{}
	for off := 0; ; {
		if off+110 > len(raw) || string(raw[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(raw[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(v)
		}
		mode, size, namesize := field(1), field(6), field(11)
		name := string(raw[off+110 : off+110+namesize-1])
		off = align4(off + 110 + namesize)
		if name == "TRAILER!!!" {
			break
		}
		data[name] = string(raw[off : off+size])
		off = align4(off + size)
		got = append(got, fmt.Sprintf("%s %o", name, mode))
	}
	want := []string{"dev 40755", "proc 40755", "sys 40755", "dev/console 20600",
		"payload 40755", "payload/etc 40755", "payload/etc/x 40755", "payload/etc/x/secret 100600", "init 100755"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if data["payload/etc/x/secret"] != "s3cret\n" || data["init"] != "12345" {
		t.Errorf("data %q", data)
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
