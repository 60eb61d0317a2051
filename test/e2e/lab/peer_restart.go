package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Graceful restarts of the peers (the peer matrix, issue 17 item 3): the
// peer's BGP daemon dies without a NOTIFICATION, as a crash or an upgrade
// with graceful restart does, and starts again (RFC 4724 section 4: its
// OPEN then sets the Restart State bit).

// KillBGPD ends FRR's bgpd with SIGKILL (by PID, from its pid file), so that
// it sends no NOTIFICATION, and waits until it is gone. zebra and bfdd keep
// running, and zebra keeps bgpd's kernel routes: FRR's graceful restart.
func (f *FRR) KillBGPD() error {
	pidFile := filepath.Join(f.Dir, "bgpd.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("bgpd pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("bgpd pid file %s: %q", pidFile, b)
	}
	f.mu.Lock()
	if f.vty != nil {
		f.vty.Close()
		f.vty = nil
	}
	f.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill bgpd %d: %w", pid, err)
	}
	if !waitDead(pid, 10*time.Second) {
		return fmt.Errorf("bgpd %d alive 10 s after SIGKILL", pid)
	}
	_ = os.Remove(pidFile)
	_ = os.Remove(filepath.Join(f.Dir, "bgpd.vty"))
	return nil
}

// StartBGPD writes conf over bgpd.conf and starts bgpd alone (after
// KillBGPD), as StartFRR starts it, and waits until its vty answers.
func (f *FRR) StartBGPD(conf string) error {
	path := filepath.Join(f.Dir, "bgpd.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	if err := ChownFRR(f.Dir); err != nil {
		return err
	}
	f.bgpd = conf
	out, err := f.lab.Exec(f.NS, filepath.Join(FRRDir, "bgpd"), "-d", "-F", "traditional",
		"-u", "frr", "-g", "frr", "-z", filepath.Join(f.Dir, "zserv.api"), "--vty_socket", f.Dir,
		"-f", path, "-i", filepath.Join(f.Dir, "bgpd.pid"))
	if err != nil {
		return fmt.Errorf("start bgpd: %v: %s\nbgpd.conf:\n%s", err, out, conf)
	}
	if _, err := Poll(10*time.Second, 20*time.Millisecond, func() error {
		_, err := f.VTY("show bgp summary")
		return err
	}); err != nil {
		return fmt.Errorf("bgpd's vty: %w", err)
	}
	return nil
}

// Kill ends BIRD with SIGKILL (by PID): no NOTIFICATION, the sessions
// just drop, as in a crash. Start or StartRecovery runs it again.
func (b *BIRD) Kill() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return fmt.Errorf("bird is not running")
	}
	_ = b.cmd.Process.Kill()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("bird %d alive 10 s after SIGKILL", b.cmd.Process.Pid)
	}
	b.cmd = nil
	return nil
}

// StartRecovery starts BIRD with -R, graceful recovery: its OPENs set the
// Restart State bit (and the Forwarding State bit of each family), it
// waits for the End-of-RIB of its graceful restart peers and sends its own.
func (b *BIRD) StartRecovery() error { return b.start("-R") }

// WriteConfig replaces BIRD's config file with text (birdc configure, a
// restart or a recovery reads it).
func (b *BIRD) WriteConfig(text string) error {
	return os.WriteFile(filepath.Join(b.Dir, "bird.conf"), []byte(text), 0o644)
}
