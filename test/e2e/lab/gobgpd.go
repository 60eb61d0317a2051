package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// GoBGPDPath is Debian's gobgpd (package gobgpd, GoBGP 3.10; env
// OVNBGP_E2E_GOBGPD); its CLI gobgp is beside it.
var GoBGPDPath = envOr("OVNBGP_E2E_GOBGPD", "/usr/bin/gobgpd")

// GoBGPNeighbor is one neighbor of gobgpd, in the unicast family of its
// address.
type GoBGPNeighbor struct {
	Address netip.Addr
	ASN     uint32
}

// GoBGPConfig is a gobgpd router (a TOML config file).
type GoBGPConfig struct {
	// ASN is gobgpd's AS (65001), RouterID its router ID (TorIPv4).
	ASN      uint32
	RouterID netip.Addr
	// Neighbors are passive (gobgpd waits for the node to dial).
	Neighbors []GoBGPNeighbor
	// HoldTime and Keepalive in seconds (9 and 3 when 0).
	HoldTime, Keepalive int
	// APIPort is the gRPC port of gobgpd's API on the namespace's loopback,
	// which the gobgp CLI talks to (50051).
	APIPort int
}

// GoBGP is gobgpd running in the foreground as the test's child in one of
// the lab's namespaces, its config and log in Dir. Routes are added and
// removed with the gobgp CLI (CLI): `global rib add PREFIX [nexthop N]
// -a ipv4`, `neighbor ADDR reset`.
type GoBGP struct {
	t   testing.TB
	Dir string
	NS  string
	cfg GoBGPConfig

	cmd  *exec.Cmd
	done chan struct{}
}

// Render returns gobgpd's TOML config.
func (c GoBGPConfig) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = 179\n", c.ASN, c.RouterID)
	for _, n := range c.Neighbors {
		fam := "ipv4-unicast"
		if n.Address.Is6() {
			fam = "ipv6-unicast"
		}
		fmt.Fprintf(&b, `[[neighbors]]
  [neighbors.config]
    neighbor-address = %q
    peer-as = %d
  [neighbors.transport.config]
    passive-mode = true
  [neighbors.timers.config]
    connect-retry = 1
    hold-time = %d
    keepalive-interval = %d
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = %q
`, n.Address, n.ASN, c.HoldTime, c.Keepalive, fam)
	}
	return b.String()
}

// StartGoBGP starts gobgpd in namespace ns and waits until its API answers.
// It is stopped (by PID) at the end of the test; on failure its log is
// printed. Without gobgpd the test skips (fails under CI=true).
func (l *Lab) StartGoBGP(ns string, cfg GoBGPConfig) *GoBGP {
	t := l.T
	t.Helper()
	if _, err := os.Stat(GoBGPDPath); err != nil {
		msg := GoBGPDPath + " missing: Debian's gobgpd (run scripts/test-deps.sh as root)"
		prereq.Missing(t, msg)
	}
	if cfg.ASN == 0 {
		cfg.ASN = 65001
	}
	if !cfg.RouterID.IsValid() {
		cfg.RouterID = TorIPv4
	}
	if cfg.HoldTime == 0 {
		cfg.HoldTime, cfg.Keepalive = 9, 3
	}
	if cfg.APIPort == 0 {
		cfg.APIPort = 50051
	}
	dir := l.MkdirUnique("gobgpd")
	g := &GoBGP{t: t, Dir: dir, NS: ns, cfg: cfg, done: make(chan struct{})}
	conf := filepath.Join(dir, "gobgpd.toml")
	if err := os.WriteFile(conf, []byte(cfg.Render()), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "gobgpd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// `ip netns exec` execs gobgpd: cmd's PID is gobgpd's. The API listens
	// on the namespace's own loopback only.
	g.cmd = exec.Command("ip", "netns", "exec", ns, GoBGPDPath, "-f", conf, "-t", "toml",
		"--api-hosts", fmt.Sprintf("127.0.0.1:%d", cfg.APIPort), "--pprof-disable", "-l", "info")
	g.cmd.Stdout, g.cmd.Stderr = logf, logf
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start gobgpd: %v", err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			out, err := g.CLI("neighbor")
			t.Logf("--- gobgpd config\n%s--- gobgp neighbor (err=%v)\n%s\n--- gobgpd log (last 40 lines)\n%s",
				cfg.Render(), err, out, Tail(filepath.Join(dir, "gobgpd.log"), 40))
		}
		g.Stop()
	})
	if _, err := Poll(15*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-g.done:
			return fmt.Errorf("gobgpd exited: %s", Tail(filepath.Join(dir, "gobgpd.log"), 10))
		default:
		}
		_, err := g.CLI("global")
		return err
	}); err != nil {
		t.Fatalf("gobgpd's API: %v", err)
	}
	return g
}

// CLI runs `gobgp -u 127.0.0.1 -p PORT args...` in gobgpd's namespace and
// returns its output.
func (g *GoBGP) CLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cli := filepath.Join(filepath.Dir(GoBGPDPath), "gobgp")
	full := append([]string{"netns", "exec", g.NS, cli, "-u", "127.0.0.1", "-p", fmt.Sprint(g.cfg.APIPort)}, args...)
	out, err := exec.CommandContext(ctx, "ip", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("gobgp %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Stop ends gobgpd by PID (SIGTERM, SIGKILL after 5 s).
func (g *GoBGP) Stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}
