package lab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// BIRDPath is BIRD 2's daemon (env OVNBGP_E2E_BIRD); birdc is beside it.
var BIRDPath = envOr("OVNBGP_E2E_BIRD", "/usr/sbin/bird")

// BIRDConfig is a BIRD 2 router with one BGP session, IPv4 unicast.
type BIRDConfig struct {
	// RouterID and Local are BIRD's address (required); ASN its AS.
	RouterID netip.Addr
	ASN      uint32
	// Neighbor is the node's address, NeighborASN its AS (65010).
	Neighbor    netip.Addr
	NeighborASN uint32
	// Passive: BIRD never dials, it waits for the node.
	Passive bool
	// Originate are IPv4 prefixes BIRD announces (static blackholes).
	Originate []netip.Prefix
	// GracefulRestart sets `graceful restart on` (BIRD keeps the node's
	// routes stale while it restarts).
	GracefulRestart bool
	// Kernel installs the routes BIRD learns over BGP into its namespace's
	// main table (protocol kernel), where `ip monitor route` sees each
	// withdrawal.
	Kernel bool
	// Include, when set, is a file included at the top level after the
	// static protocol s4, as Calico's bird.cfg includes the bird_aggr.cfg
	// confd renders (a `protocol static` of the node's blocks); its static
	// routes are exported too. `birdc configure` re-reads it.
	Include string
	// Text, when set, renders BIRD's whole config from its directory (for
	// the log file) in place of the template: the fields above are then
	// ignored. Name the BGP protocol BIRDProtocol for Established and
	// Learned.
	Text func(dir string) string
}

// BIRDProtocol is the name of the BGP protocol (session) in BIRD's config.
const BIRDProtocol = "node1"

var birdTemplate = template.Must(template.New("bird.conf").Parse(`log "{{.Dir}}/bird.log" all;
router id {{.RouterID}};
protocol device { }
protocol static s4 {
  ipv4;
{{- range .Originate}}
  route {{.}} blackhole;
{{- end}}
}
{{- if .Include}}
include "{{.Include}}";
{{- end}}
{{- if .Kernel}}
protocol kernel k4 {
  ipv4 { import none; export where source = RTS_BGP; };
}
{{- end}}
protocol bgp {{.Protocol}} {
  local {{.RouterID}} as {{.ASN}};
  neighbor {{.Neighbor}} as {{.NeighborASN}};
  hold time 9; keepalive time 3; connect retry time 2;
  # BIRD drops a direct session when its link goes down, then waits
  # "error wait time" (default 60 s, up to 300 s) before it takes a
  # connection again: a test must not wait minutes after each flap
  error wait time 1, 5;
{{- if .Passive}}
  passive on;
{{- end}}
{{- if .GracefulRestart}}
  graceful restart on;
{{- end}}
  ipv4 { import all; export where source = RTS_STATIC; };
}
`))

// BIRD is BIRD 2 running in the foreground as the test's child in one of
// the lab's namespaces, its config, log and control socket in Dir.
type BIRD struct {
	t   testing.TB
	lab *Lab
	Dir string
	NS  string
	// Sock is the control socket birdc talks to.
	Sock string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartBIRD starts BIRD 2 in namespace ns and waits until it answers on
// its control socket. It is stopped (by PID) at the end of the test; on
// failure its log is printed. Without BIRD the test skips (fails under
// CI=true).
func (l *Lab) StartBIRD(ns string, cfg BIRDConfig) *BIRD {
	t := l.T
	t.Helper()
	if _, err := os.Stat(BIRDPath); err != nil {
		msg := BIRDPath + " missing: BIRD 2 (run scripts/test-deps.sh as root)"
		prereq.Missing(t, msg)
	}
	if cfg.ASN == 0 {
		cfg.ASN = 65004
	}
	if cfg.NeighborASN == 0 {
		cfg.NeighborASN = 65010
	}
	dir := l.MkdirUnique("bird")
	b := &BIRD{t: t, lab: l, Dir: dir, NS: ns, Sock: filepath.Join(dir, "bird.ctl")}
	var text bytes.Buffer
	if cfg.Text != nil {
		text.WriteString(cfg.Text(dir))
	} else if err := birdTemplate.Execute(&text, map[string]any{"Dir": dir, "RouterID": cfg.RouterID, "ASN": cfg.ASN,
		"Neighbor": cfg.Neighbor, "NeighborASN": cfg.NeighborASN, "Passive": cfg.Passive,
		"Originate": cfg.Originate, "GracefulRestart": cfg.GracefulRestart, "Kernel": cfg.Kernel, "Include": cfg.Include, "Protocol": BIRDProtocol}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bird.conf"), text.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, err := b.Birdc("show protocols all " + BIRDProtocol)
			t.Logf("--- BIRD config\n%s--- birdc show protocols all (err=%v)\n%s\n--- BIRD log (last 40 lines)\n%s",
				text.String(), err, out, Tail(filepath.Join(dir, "bird.log"), 40))
		}
		b.Stop()
	})
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	return b
}

// Start starts BIRD (again, after Stop) and waits for its control socket.
func (b *BIRD) Start() error { return b.start() }

// start is Start with extra arguments for bird (e.g. -R).
func (b *BIRD) start(extra ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return fmt.Errorf("bird already running (pid %d)", b.cmd.Process.Pid)
	}
	_ = os.Remove(b.Sock)
	out, err := os.OpenFile(filepath.Join(b.Dir, "bird.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	// `ip netns exec` execs bird: cmd's PID is BIRD's.
	cmd := exec.Command("ip", append([]string{"netns", "exec", b.NS, BIRDPath, "-f", "-c", filepath.Join(b.Dir, "bird.conf"),
		"-s", b.Sock, "-P", filepath.Join(b.Dir, "bird.pid")}, extra...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start bird: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.cmd, b.done = cmd, done
	_, err = Poll(10*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-done:
			return fmt.Errorf("bird exited: %s", Tail(filepath.Join(b.Dir, "bird.out"), 10))
		default:
		}
		_, err := b.Birdc("show status")
		return err
	})
	return err
}

// Stop ends BIRD by PID (SIGTERM, SIGKILL after 5 s) and reaps it.
func (b *BIRD) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
}

// PID is the running BIRD's process id, 0 when it is not running.
func (b *BIRD) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return 0
	}
	select {
	case <-b.done:
		return 0
	default:
		return b.cmd.Process.Pid
	}
}

// Birdc runs one birdc command on BIRD's control socket and returns its
// output.
func (b *BIRD) Birdc(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	args := append([]string{"-s", b.Sock}, strings.Fields(command)...)
	out, err := exec.CommandContext(ctx, filepath.Join(filepath.Dir(BIRDPath), "birdc"), args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", command, err, out)
	}
	return string(out), nil
}

// Established returns nil when BIRD's BGP session is Established, else an
// error with its state.
func (b *BIRD) Established() error {
	out, err := b.Birdc("show protocols " + BIRDProtocol)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == BIRDProtocol {
			if strings.Contains(line, "Established") {
				return nil
			}
			return fmt.Errorf("BIRD session %s: %s", BIRDProtocol, strings.TrimSpace(line))
		}
	}
	return fmt.Errorf("BIRD has no protocol %s: %q", BIRDProtocol, out)
}

// Learned returns the prefixes BIRD holds from its BGP session (the routes
// whose source is the protocol, best or not) with how many routes each has:
// more than one is a duplicate.
func (b *BIRD) Learned() (map[netip.Prefix]int, error) {
	out, err := b.Birdc("show route all protocol " + BIRDProtocol)
	if err != nil {
		return nil, err
	}
	res := map[netip.Prefix]int{}
	var last netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// "10.128.0.0/23  unicast [node1 ...] * (100) [AS65010i]" starts a
		// prefix; a further route of the same prefix starts with "unicast".
		if p, err := netip.ParsePrefix(f[0]); err == nil && len(line) > 0 && line[0] != ' ' && line[0] != '\t' {
			last = p
			res[p]++
			continue
		}
		if f[0] == "unicast" && last.IsValid() {
			res[last]++
		}
	}
	return res, nil
}
