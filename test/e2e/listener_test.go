package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// passiveWorld is NB and a daemon listening on 179 with FRR ("tor") as a
// passive peer; FRR itself is not started yet.
func passiveWorld(t *testing.T) *world {
	t.Helper()
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	tor := lab.DefaultTor()
	tor.Passive = true
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{ListenPort: 179, Peers: []lab.Peer{tor}})
	// The control socket answers before the speaker exists: wait for the
	// peer to be configured and for port 179 to listen.
	lab.Eventually(t, generous, 100*time.Millisecond, "the daemon has peer tor and listens on 179", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		p, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		if p.State != model.StateActive && p.State != model.StateIdle && p.State != model.StateConnect {
			return fmt.Errorf("peer tor is %s", p.State)
		}
		out, err := w.lab.Exec(w.lab.Node, "ss", "-Hltn", "( sport = :179 )")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "LISTEN") {
			return fmt.Errorf("nothing listens on port 179: %q", out)
		}
		return nil
	})
	return w
}

// startFRRDialing starts FRR with the node as a neighbor it dials.
func (w *world) startFRRDialing() {
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010}}})
}

// holdConnections starts, in namespace ns and as uid (nobody when
// nonRoot), a shell that opens n TCP connections to the node's port 179,
// says "ready" and keeps them open, silent, until killed (by PID, at the
// end of the test at the latest). It returns the PID.
func holdConnections(t *testing.T, l *lab.Lab, ns string, nonRoot bool, n int) int {
	t.Helper()
	script := fmt.Sprintf(`for i in $(seq %d); do exec {fd}<>/dev/tcp/%s/179 || exit 1; done; echo ready; exec sleep 600`, n, lab.NodeIPv4)
	args := []string{"netns", "exec", ns}
	if nonRoot {
		args = append(args, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
	}
	args = append(args, "bash", "-c", script)
	cmd := exec.Command("ip", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the connection holder: %v", err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("holder said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("the connection holder failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the connection holder did not open its connections in 30 s")
	}
	return pid
}

func fdCount(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// TestListenerSurvivesFDExhaustion: the daemon runs out of descriptors
// while user nobody holds connections to its BGP port (its soft
// RLIMIT_NOFILE lowered to one above what it has open, as a flood would);
// once they are released and the limit restored, FRR dialing in gets
// Established. gobgp's own accept loop ended for good on the first
// EMFILE, and port 179 then queued connections nobody accepted.
func TestListenerSurvivesFDExhaustion(t *testing.T) {
	t.Parallel()
	w := passiveWorld(t)
	pid := w.d.PID()
	n, err := fdCount(pid)
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: uint64(n + 1), Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &low, nil); err != nil {
		t.Fatalf("lower the daemon's RLIMIT_NOFILE to %d: %v", n+1, err)
	}
	t.Logf("daemon pid %d: %d descriptors open, soft limit now %d (was %d)", pid, n, n+1, old.Cur)

	// nobody, from the peer's address, opens connections to port 179.
	holder := holdConnections(t, w.lab, w.lab.Tor, true, 20)
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "the daemon hits EMFILE", func() error {
		b, err := os.ReadFile(w.d.Log)
		if err != nil {
			return err
		}
		if !acceptFailedLine(string(b)) {
			c, _ := fdCount(pid)
			return fmt.Errorf("no 'bgp listener: accept failed' line with 'too many open files' in the daemon's log (%d descriptors open)", c)
		}
		return nil
	})

	// Release: the connections close, the limit comes back.
	_ = syscall.Kill(holder, syscall.SIGKILL)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	w.startFRRDialing()
	if _, err := lab.Poll(generous, 250*time.Millisecond, func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		return w.frr.Established(lab.NodeIPv4)
	}); err != nil {
		t.Fatalf("FRR dialing the daemon after the descriptor exhaustion: not Established after %v: %v", generous, err)
	}
	t.Logf("FRR established %v after it started", time.Since(started).Round(time.Millisecond))
	waitRIB(t, generous, started, "routes over the session FRR dialed", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
}

// TestSilentConnectionFromPeer: a TCP connection from the peer's address
// to port 179 that sends nothing does not keep FRR's real session out.
// gobgp took such a connection into OpenSent and refused every other
// connection from the peer for its 240 s OpenSent hold time.
func TestSilentConnectionFromPeer(t *testing.T) {
	t.Parallel()
	w := passiveWorld(t)
	holdConnections(t, w.lab, w.lab.Tor, false, 1)
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "the daemon accepted the silent connection", func() error {
		out, err := w.lab.Exec(w.lab.Node, "ss", "-Htnp", "state", "established", "( sport = :179 )")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "ovnbgp") {
			return fmt.Errorf("no accepted connection on port 179: %q", out)
		}
		return nil
	})

	started := time.Now()
	w.startFRRDialing()
	// 120 s, generous on shared machines: FRR dials every 2 s, and the
	// fault held the session out for 240 s.
	if _, err := lab.Poll(120*time.Second, 250*time.Millisecond, func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		return w.frr.Established(lab.NodeIPv4)
	}); err != nil {
		t.Fatalf("FRR not Established within 120 s while a silent connection from its address is open: %v", err)
	}
	t.Logf("FRR established %v after it started", time.Since(started).Round(time.Millisecond))
}

// acceptFailedLine reports whether the log has the BGP listener's own
// accept-failed line for EMFILE (not any "too many open files").
func acceptFailedLine(log string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "bgp listener: accept failed") && strings.Contains(line, "too many open files") {
			return true
		}
	}
	return false
}
