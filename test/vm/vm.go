// Package vm boots Debian's kernel in qemu with a test's own initramfs and
// reads the guest's results from the serial console. The VM tests of
// packages vrf (real VRF devices) and packaging (the shipped unit under
// systemd as PID 1) share it: kernel and module discovery, the static guest
// build, the newc cpio writer, the accelerator choice (KVM when it boots,
// else TCG) and the console protocol, one "vmtest: PASS|FAIL|INFO NAME: ..."
// line per check and a final "vmtest: VERDICT PASS|FAIL".
package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// Marker starts every console line the guest reports on.
const Marker = "vmtest: "

// Kernel is a qemu binary and a Debian kernel with the modules a guest
// loads.
type Kernel struct {
	Qemu    string
	Vmlinuz string
	// Modules are the host paths of the requested modules, in order.
	Modules []string
	// Version is the kernel release (the /lib/modules directory name).
	Version string
	goBin   string
}

// Require finds qemu-system-x86_64, the go command (to build the guest) and
// a kernel with every module in modules (paths under /lib/modules/VER, e.g.
// "kernel/drivers/net/vrf.ko"). When something is missing the test fails
// under CI=true and is skipped elsewhere, with a message naming it. In
// -short mode the test is skipped.
func Require(t testing.TB, modules ...string) Kernel {
	t.Helper()
	if testing.Short() {
		t.Skip("VM test skipped in -short mode")
	}
	var k Kernel
	var missing []string
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		missing = append(missing, "linux/amd64")
	}
	var err error
	if k.Qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
		missing = append(missing, "qemu-system-x86_64")
	}
	if k.Vmlinuz, k.Version, k.Modules, err = findKernel(modules); err != nil {
		missing = append(missing, err.Error())
	}
	if k.goBin, err = exec.LookPath("go"); err != nil {
		k.goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(k.goBin); err != nil {
			missing = append(missing, "the go command (to build the guest)")
		}
	}
	Need(t, missing...)
	return k
}

// Need fails under CI=true, and skips elsewhere, naming what is missing;
// it does nothing when missing is empty.
func Need(t testing.TB, missing ...string) {
	t.Helper()
	if len(missing) == 0 {
		return
	}
	msg := "VM test needs " + strings.Join(missing, ", ") +
		" (run scripts/test-deps.sh as root: it installs qemu-system-x86, linux-image-amd64, systemd and frr)"
	prereq.Missing(t, msg)
}

// findKernel returns the newest /boot/vmlinuz-VER with every module under
// /lib/modules/VER (env OVNBGP_VM_KERNEL=VER picks one).
func findKernel(modules []string) (vmlinuz, version string, paths []string, err error) {
	vers := []string{}
	if v := os.Getenv("OVNBGP_VM_KERNEL"); v != "" {
		vers = append(vers, v)
	} else {
		found, _ := filepath.Glob("/boot/vmlinuz-*")
		slices.Sort(found)
		slices.Reverse(found)
		for _, f := range found {
			vers = append(vers, strings.TrimPrefix(f, "/boot/vmlinuz-"))
		}
	}
	var why []string
	for _, v := range vers {
		k := "/boot/vmlinuz-" + v
		if _, err := os.Stat(k); err != nil {
			why = append(why, err.Error())
			continue
		}
		var mods []string
		for _, m := range modules {
			p := filepath.Join("/lib/modules", v, m)
			if _, err := os.Stat(p); err != nil {
				why = append(why, fmt.Sprintf("%s has no %s", k, p))
				break
			}
			mods = append(mods, p)
		}
		if len(mods) == len(modules) {
			return k, v, mods, nil
		}
	}
	if len(why) == 0 {
		why = append(why, "no /boot/vmlinuz-*")
	}
	return "", "", nil, fmt.Errorf("a kernel with %s: %s", strings.Join(modules, ", "), strings.Join(why, "; "))
}

// BuildGuest builds the Go package pkg (relative to the test's directory,
// e.g. "./guest") as a static linux/amd64 binary in dir and returns its
// path.
func (k Kernel) BuildGuest(t testing.TB, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	build := exec.Command(k.goBin, "build", "-trimpath", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the guest %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Options are one boot's settings.
type Options struct {
	Initrd  string
	Memory  string   // qemu -m, default "512"
	Append  string   // the kernel command line, default "console=ttyS0 quiet panic=-1"
	Args    []string // more qemu arguments (devices)
	Timeout time.Duration
}

// Result is what one boot printed.
type Result struct {
	Console string
	// Lines are the guest's report lines without Marker, in order, and
	// Verdict the word after "VERDICT ".
	Lines   []string
	Verdict string
	Accel   string
	Took    time.Duration // qemu start to exit, of the boot that counted
	Err     error         // qemu's exit or the timeout
}

// kvmWindow is how long a KVM boot may take to print its first report
// line before KVM counts as unusable here and the boot is redone with TCG.
// A working KVM guest reaches /init in about a second (TCG: under 10 s);
// some nested hosts offer /dev/kvm but hang the guest kernel early.
const kvmWindow = 20 * time.Second

// Boot runs qemu until the guest powers off or opts.Timeout passes. The
// accelerator is env OVNBGP_VM_ACCEL (kvm or tcg); by default KVM when
// /dev/kvm opens and the guest prints its first report line within
// kvmWindow, else TCG.
func (k Kernel) Boot(t testing.TB, opts Options) Result {
	t.Helper()
	r := k.bootAuto(t, opts, os.Getenv("OVNBGP_VM_ACCEL"), kvmUsable(), kvmWindow)
	t.Logf("qemu boot to power-off %s (%s, %s)", r.Took.Round(100*time.Millisecond), filepath.Base(k.Vmlinuz), r.Accel)
	return r
}

// kvmUsable reports whether /dev/kvm opens for reading and writing.
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// bootAuto boots with accel ("kvm", "tcg", or "" or "auto": KVM when
// usable and the guest reports within window, else TCG).
func (k Kernel) bootAuto(t testing.TB, opts Options, accel string, kvm bool, window time.Duration) Result {
	t.Helper()
	switch accel {
	case "kvm", "tcg":
		return k.boot(opts, accel, 0)
	case "", "auto":
	default:
		t.Fatalf("OVNBGP_VM_ACCEL=%q: use kvm, tcg or auto (the default)", accel)
	}
	if !kvm {
		t.Log("/dev/kvm does not open: booting with TCG")
		return k.boot(opts, "tcg", 0)
	}
	r := k.boot(opts, "kvm", window)
	if !errors.Is(r.Err, errNoStart) {
		return r
	}
	t.Logf("KVM: the guest printed nothing within %s (console: %q): booting again with TCG", window, tail(r.Console, 300))
	return k.boot(opts, "tcg", 0)
}

var errNoStart = errors.New("the guest did not start")

// boot runs one qemu; with window > 0 it gives up when no report line came
// by then.
func (k Kernel) boot(opts Options, accel string, window time.Duration) Result {
	if opts.Memory == "" {
		opts.Memory = "512"
	}
	if opts.Append == "" {
		opts.Append = "console=ttyS0 quiet panic=-1"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	args := append([]string{
		"-m", opts.Memory, "-smp", "1", "-no-reboot", "-nodefaults", "-no-user-config",
		"-display", "none", "-serial", "stdio", "-accel", accel,
		"-kernel", k.Vmlinuz, "-initrd", opts.Initrd, "-append", opts.Append,
	}, opts.Args...)
	cmd := exec.CommandContext(ctx, k.Qemu, args...)
	console := &consoleBuffer{started: make(chan struct{})}
	cmd.Stdout, cmd.Stderr, cmd.Stdin = console, console, nil
	r := Result{Accel: accel}
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		var timer <-chan time.Time
		if window > 0 {
			tm := time.NewTimer(window)
			defer tm.Stop()
			timer = tm.C
		}
		select {
		case err = <-waited:
		case <-console.started:
			err = <-waited
		case <-timer:
			cancel()
			<-waited
			err = errNoStart
		}
	}
	r.Took = time.Since(start)
	if ctx.Err() != nil && !errors.Is(err, errNoStart) {
		err = fmt.Errorf("qemu timed out after %s: %w", opts.Timeout, ctx.Err())
	}
	r.Err = err
	r.Console = console.String()
	sc := bufio.NewScanner(strings.NewReader(r.Console))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		i := strings.Index(line, Marker)
		if i < 0 {
			continue
		}
		line = line[i+len(Marker):]
		if v, ok := strings.CutPrefix(line, "VERDICT "); ok {
			r.Verdict = v
			continue
		}
		r.Lines = append(r.Lines, line)
	}
	return r
}

// Check logs the report lines and fails t for each FAIL line, for each
// name in want without a "PASS name" line, and unless the verdict is PASS.
func (r Result) Check(t testing.TB, want ...string) {
	t.Helper()
	for _, l := range r.Lines {
		t.Log(l)
	}
	passed := map[string]bool{}
	for _, l := range r.Lines {
		if rest, ok := strings.CutPrefix(l, "PASS "); ok {
			name, _, _ := strings.Cut(rest, ":")
			passed[name] = true
		}
		if strings.HasPrefix(l, "FAIL") {
			t.Errorf("in the VM: %s", l)
		}
	}
	for _, w := range want {
		if !passed[w] {
			t.Errorf("in the VM: no PASS line for check %q", w)
		}
	}
	if r.Verdict != "PASS" || r.Err != nil || len(r.Lines) == 0 {
		t.Fatalf("VM verdict %q (qemu: %v); console:\n%s", r.Verdict, r.Err, r.Console)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// consoleBuffer collects qemu's output and closes started at the first
// report line.
type consoleBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	started chan struct{}
	seen    bool
}

func (c *consoleBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Write(p)
	if !c.seen && bytes.Contains(c.b.Bytes(), []byte(Marker)) {
		c.seen = true
		close(c.started)
	}
	return len(p), nil
}

func (c *consoleBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// Initramfs writes a gzipped newc cpio archive, the format the kernel
// unpacks into its initial rootfs. It always holds /dev/console.
type Initramfs struct {
	f   *os.File
	zw  *gzip.Writer
	w   cpioWriter
	dir map[string]bool
}

// NewInitramfs creates the archive at path with /dev, /proc, /sys and
// /dev/console.
func NewInitramfs(path string) (*Initramfs, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	zw := gzip.NewWriter(f)
	a := &Initramfs{f: f, zw: zw, w: cpioWriter{w: zw}, dir: map[string]bool{}}
	for _, d := range []string{"dev", "proc", "sys"} {
		a.Dir(d)
	}
	a.w.add("dev/console", 0o020600, 5<<8|1, nil)
	return a, nil
}

// Initramfs creates the archive at path with the guest program as /init
// and k's modules in /modules, listed in their load order in /modules/order;
// add more, then Close it. It fails t on an error.
func (k Kernel) Initramfs(t testing.TB, path, guest string) *Initramfs {
	t.Helper()
	a, err := NewInitramfs(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Copy("init", guest)
	var order []string
	for _, m := range k.Modules {
		a.Copy("modules/"+filepath.Base(m), m)
		order = append(order, filepath.Base(m))
	}
	a.File("modules/order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	return a
}

// Dir adds directory name and its parents (once each).
func (a *Initramfs) Dir(name string) {
	name = strings.Trim(filepath.Clean(name), "/")
	if name == "." || name == "" || a.dir[name] {
		return
	}
	a.Dir(filepath.Dir(name))
	a.dir[name] = true
	a.w.add(name, 0o040755, 0, nil)
}

// File adds a regular file with the permission bits perm, and its parent
// directories.
func (a *Initramfs) File(name string, perm os.FileMode, data []byte) {
	name = strings.Trim(filepath.Clean(name), "/")
	a.Dir(filepath.Dir(name))
	a.w.add(name, 0o100000|uint32(perm.Perm()), 0, data)
}

// Copy adds the host file src as name, with src's permission bits.
func (a *Initramfs) Copy(name, src string) {
	fi, err := os.Stat(src)
	if err == nil {
		var data []byte
		if data, err = os.ReadFile(src); err == nil {
			a.File(name, fi.Mode(), data)
			return
		}
	}
	if a.w.err == nil {
		a.w.err = err
	}
}

// CopyTree adds every regular file below the host directory src under
// name, keeping their relative paths and permission bits.
func (a *Initramfs) CopyTree(name, src string) {
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		a.Copy(filepath.Join(name, rel), p)
		return nil
	})
	if err != nil && a.w.err == nil {
		a.w.err = err
	}
}

// Close finishes the archive and returns the first error of any step.
func (a *Initramfs) Close() error {
	a.w.add("TRAILER!!!", 0, 0, nil)
	err := a.w.err
	if e := a.zw.Close(); err == nil {
		err = e
	}
	if e := a.f.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("write initramfs %s: %w", a.f.Name(), err)
	}
	return nil
}

// cpioWriter writes the "newc" (SVR4, no CRC) cpio format.
type cpioWriter struct {
	w   io.Writer
	ino int
	n   int64
	err error
}

// add writes one entry; rdev is major<<8|minor for device nodes.
func (c *cpioWriter) add(name string, mode uint32, rdev int, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev>>8, rdev&0xff, len(name)+1, 0)
	c.write([]byte(hdr + name + "\x00"))
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}
