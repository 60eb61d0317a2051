package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// The BIRD contender's kernel table and route protocol: its own table 101
// (BIRD's kernel protocol takes any table, no VRF needed), and BIRD's
// default protocol number for the routes it installs, RTPROT_BIRD (12,
// `bird` in /etc/iproute2/rt_protos).
const (
	birdTable = 101
	birdProto = 12
)

// nodeBIRDConfig is BIRD 2's config as the node's import speaker, with its
// log in dir: one BGP session to the ToR importing everything, and a kernel
// protocol exporting BIRD's best routes into table birdTable. Everything
// not written is BIRD's shipped default; the options that matter for the
// job are spelled out with those defaults, so that the config says what was
// measured (bench/README.md explains each).
func nodeBIRDConfig(dir string) string {
	return fmt.Sprintf(`# BIRD 2 as the node's import speaker (ovnbgp bench, BenchmarkImportKernel).
# No debug or trace classes: info logs, as the other contenders run.
log "%[1]s/bird.log" { info, remote, warning, error, auth, fatal, bug };
router id %[2]s;

# Interfaces and their addresses, for the BGP next hop ("gateway direct").
protocol device { }

# Into the kernel: table %[4]d, protocol bird (%[5]d). As shipped: the
# table is dumped and compared every 60 s (scan time: BIRD's periodic
# resync); no learning of others' routes; routes removed at exit; no
# merging of paths into ECMP (one peer: nothing to merge).
protocol kernel k4 {
  kernel table %[4]d;
  scan time 60;
  learn off;
  persist off;
  merge paths off;
  ipv4 { import none; export all; };
}

# The ToR. Timers as the other contenders have them (keepalive 3 s, hold
# 9 s, connect retry 2 s); error wait 1-5 s instead of 60-300 s, so that
# the session comes up soon after the ToR lets it (the ToR's shutdown
# notification counts as an error). No receive or import limit: FRR runs
# with no maximum-prefix.
protocol bgp %[6]s {
  local %[2]s as %[3]d;
  neighbor %[7]s as 65001;
  hold time 9; keepalive time 3; connect retry time 2;
  error wait time 1, 5;
  ipv4 { import all; export none; receive limit off; import limit off; };
}
`, dir, lab.NodeIPv4, nodeASN, birdTable, birdProto, lab.BIRDProtocol, lab.TorIPv4)
}

// startImportBIRD starts BIRD 2 in the node namespace with nodeBIRDConfig.
// The harness stops it by PID at the end of the benchmark. Without BIRD
// the benchmark skips (fails under CI=true).
func startImportBIRD(b testing.TB, l *lab.Lab) *lab.BIRD {
	b.Helper()
	return l.StartBIRD(l.Node, lab.BIRDConfig{Text: nodeBIRDConfig})
}

// birdAlive returns an error when the BIRD contender is gone.
func birdAlive(bird *lab.BIRD) func() error {
	return func() error {
		if pid := bird.PID(); pid <= 0 || !lab.Alive(pid) {
			return fmt.Errorf("node BIRD (pid %d) is not running: %s", pid, lab.Tail(filepath.Join(bird.Dir, "bird.log"), 10))
		}
		return nil
	}
}

// TestNodeBIRDConfig: BIRD's own parser (`bird -p`) accepts the contender's
// config, and the config says what the README says it does.
func TestNodeBIRDConfig(t *testing.T) {
	if _, err := os.Stat(lab.BIRDPath); err != nil {
		prereq.Missing(t, fmt.Sprintf("%s: %v (BIRD 2: run scripts/test-deps.sh as root)", lab.BIRDPath, err))
	}
	dir := t.TempDir()
	text := nodeBIRDConfig(dir)
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(lab.BIRDPath, "-p", "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("bird -p rejects the contender's config: %v: %s\n%s", err, out, text)
	}
	for _, want := range []string{
		fmt.Sprintf("kernel table %d;", birdTable),
		"ipv4 { import none; export all; };",
		"protocol bgp " + lab.BIRDProtocol + " {",
		fmt.Sprintf("local %s as %d;", lab.NodeIPv4, nodeASN),
		fmt.Sprintf("neighbor %s as 65001;", lab.TorIPv4),
		"hold time 9; keepalive time 3;",
		"receive limit off; import limit off;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the config lacks %q:\n%s", want, text)
		}
	}
}
