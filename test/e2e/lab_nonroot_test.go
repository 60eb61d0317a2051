package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// nobody is the unprivileged user `ovnbgp lab` runs as here.
const nobody = 65534

// TestLabAsNonRoot: the binary's `lab` verb, run as user nobody (no
// privileges, no OVN, no FRR involved), shows an Established peer and the
// advertised subnets within a few seconds, imports one of the provider's
// routes into GR_node1 (plan, imported, the NB row, explain), follows a
// live NB change, and
// stops cleanly on SIGTERM, leaving nothing behind. It needs root only to
// drop to nobody.
func TestLabAsNonRoot(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	bin := lab.Binary(t)

	// A directory nobody can read and execute from, holding a copy of the
	// binary (the build directory may be private to root), and a TMPDIR
	// nobody can write.
	// (t.TempDir's parent is private to root.)
	dir, err := os.MkdirTemp("", "ovnbgp-e2e-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(dir, "ovnbgp")
	if err := copyFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(self, "lab")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	start := time.Now()
	lines, stderr := startLabCmd(t, cmd)
	var seen []string
	deadline := time.After(generous)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("lab exited early:\n%s\nstderr:\n%s", strings.Join(seen, "\n"), stderr.String())
			}
			seen = append(seen, l)
			done = l == "Ctrl-C to stop."
		case <-deadline:
			t.Fatalf("lab printed no summary in %v:\n%s\nstderr:\n%s", generous, strings.Join(seen, "\n"), stderr.String())
		}
	}
	text := strings.Join(seen, "\n")
	t.Logf("as uid %d, `ovnbgp lab` summary after %v:\n%s", nobody, time.Since(start).Round(time.Millisecond), text)
	for _, want := range []string{
		"provider  127.0.0.1  65001  established",
		"provider  10.128.0.0/23  sent   default",
		"provider  10.200.0.0/24  sent   blue",
		"NB commit → provider router has 10.210.0.0/24:",
		"switch deleted → withdrawn from the provider router:",
		// The import half, as nobody: the rule's plan, then the route
		// installed on GR_node1 in the in-memory NB, and explain.
		"accepted: accepted by rule provider-in (203.0.113.0/24 length 24)",
		"rejected: no accept entry matches 198.51.100.0/24 from peer provider",
		"rejected: 10.128.2.0/23 is protected",
		"ovn     add  GR_node1  203.0.113.0/24  172.18.0.1  provider-in",
		"ovn     GR_node1  203.0.113.0/24  172.18.0.1  provider-in  installed",
		"GR_node1  203.0.113.0/24  172.18.0.1  rtoe-GR_node1  provider-in  node1",
		"installed in OVN: 203.0.113.0/24 on GR_node1 via 172.18.0.1, output port rtoe-GR_node1 (rule provider-in",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lab output lacks %q", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		for range lines {
		}
		waited <- cmd.Wait()
	}()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("lab after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(stopBound):
		t.Fatalf("lab did not stop within %v of SIGTERM", stopBound)
	}
	// `make lab` as a non-root user prints no stack trace (issue 5).
	for _, bad := range []string{"panic", "goroutine "} {
		if strings.Contains(stderr.String(), bad) || strings.Contains(text, bad) {
			t.Errorf("lab printed %q:\nstdout:\n%s\nstderr:\n%s", bad, text, stderr.String())
		}
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "ovnbgp-lab-*"))
	if len(left) > 0 {
		t.Errorf("lab left %v behind", left)
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startLabCmd starts an `ovnbgp lab` command, ends it by PID at cleanup,
// and returns its stdout as lines and its stderr (read it after the
// command has ended).
func startLabCmd(t *testing.T, cmd *exec.Cmd) (<-chan string, *strings.Builder) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = lab.StopPID(pid, 5*time.Second) })
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines, stderr
}
