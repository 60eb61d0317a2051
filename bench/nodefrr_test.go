package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// nodeASN is the node's AS for every contender (the harness's default).
const nodeASN = 65010

// vtyshBin is FRR's shell, the tool frr-k8s and MetalLB drive FRR with.
const vtyshBin = "/usr/bin/vtysh"

// frrReloadScript is FRR's frr-reload.py (Debian's frr package ships it).
var frrReloadScript = filepath.Join(lab.FRRDir, "frr-reload.py")

// nodeFRR is the FRR contender's node speaker: a second FRR (zebra + bgpd)
// in the lab's node namespace, in place of ovnbgp, peering with the ToR as
// ovnbgp does (AS 65010 at 192.0.2.0, dialing 192.0.2.1). Its files and vty
// sockets are in Dir.
type nodeFRR struct {
	Dir string
	// Hostname is the host's name, as frr-k8s writes it in frr.conf: vtysh
	// shows it in the running config, so the daemons have it too.
	Hostname string
	// Config is the FRRConfig it started with; the reload contender renders
	// its frr.conf from it.
	Config lab.FRRConfig
}

// startNodeFRR starts the node speaker with no prefixes and waits until bgpd
// answers. Both daemons are stopped by PID at the end of the benchmark
// (the harness would also end them when it deletes the namespace).
func startNodeFRR(b testing.TB, l *lab.Lab) *nodeFRR {
	b.Helper()
	for _, f := range []string{vtyshBin, filepath.Join(lab.FRRDir, "zebra"), filepath.Join(lab.FRRDir, "bgpd")} {
		if _, err := os.Stat(f); err != nil {
			b.Skipf("FRR contender needs %s: %v (run scripts/test-deps.sh as root)", f, err)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		b.Fatal(err)
	}
	n := &nodeFRR{Dir: l.Mkdir("node-frr"), Hostname: host, Config: lab.FRRConfig{
		ASN: nodeASN, RouterID: lab.NodeIPv4,
		Neighbors: []lab.FRRNeighbor{{Address: lab.TorIPv4, ASN: 65001}},
	}}
	bgpd, err := n.Config.Render(host, n.Dir)
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{
		"zebra.conf": fmt.Sprintf("hostname %s\nlog file %s/frr.log informational\n", host, n.Dir),
		"bgpd.conf":  bgpd,
		// frr-reload.py refuses to reload without the integrated config.
		"vtysh.conf": "service integrated-vtysh-config\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "run"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := lab.ChownFRR(n.Dir); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("--- node FRR log (last 40 lines)\n%s", lab.Tail(filepath.Join(n.Dir, "frr.log"), 40))
		}
		for _, d := range []string{"bgpd", "zebra"} {
			if pid := n.pid(d); pid > 0 {
				if err := lab.StopPID(pid, 5*time.Second); err != nil {
					b.Logf("stop node %s: %v", d, err)
				}
			}
		}
	})
	for _, d := range []string{"zebra", "bgpd"} {
		out, err := l.Exec(l.Node, filepath.Join(lab.FRRDir, d), "-d", "-F", "traditional",
			"-u", "frr", "-g", "frr", "-z", filepath.Join(n.Dir, "zserv.api"), "--vty_socket", n.Dir,
			"-f", filepath.Join(n.Dir, d+".conf"), "-i", filepath.Join(n.Dir, d+".pid"))
		if err != nil {
			b.Fatalf("start node %s: %v: %s", d, err, out)
		}
		if d == "zebra" {
			lab.Eventually(b, 10*time.Second, 20*time.Millisecond, "node zebra's zserv socket", func() error {
				_, err := os.Stat(filepath.Join(n.Dir, "zserv.api"))
				return err
			})
		}
	}
	lab.Eventually(b, 10*time.Second, 50*time.Millisecond, "node bgpd answers vtysh", func() error {
		_, _, err := n.vtysh("-c", "show bgp summary")
		return err
	})
	return n
}

// vtysh runs vtysh on the node speaker's sockets (from the root namespace: a
// unix socket path needs no `ip netns exec`) and returns its output and the
// CPU time it used.
func (n *nodeFRR) vtysh(args ...string) (string, time.Duration, error) {
	return runTool(vtyshBin, append([]string{"--vty_socket", n.Dir, "--config_dir", n.Dir}, args...)...)
}

// pid is the process id of daemon d ("bgpd", "zebra") from its pid file, or
// 0.
func (n *nodeFRR) pid(d string) int {
	b, err := os.ReadFile(filepath.Join(n.Dir, d+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// alive returns an error when bgpd or zebra is gone.
func (n *nodeFRR) alive() error {
	for _, d := range []string{"bgpd", "zebra"} {
		if pid := n.pid(d); pid <= 0 || !lab.Alive(pid) {
			return fmt.Errorf("node FRR %s (pid %d) is not running", d, pid)
		}
	}
	return nil
}

// runTool runs a command and returns its combined output and the CPU time
// (user + system) it and the children it waited for used. A non-zero exit
// status is an error carrying the output.
func runTool(name string, args ...string) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return out.String(), cpu, fmt.Errorf("%s %s: %w: %.2000s", filepath.Base(name), abbrev(args), err, out.String())
	}
	return out.String(), cpu, nil
}

// abbrev shortens a long argument list for error messages.
func abbrev(args []string) string {
	if len(args) > 12 {
		return strings.Join(args[:12], " ") + fmt.Sprintf(" ... (%d more)", len(args)-12)
	}
	return strings.Join(args, " ")
}
