package nd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// frrConf is bgpd's configuration with one unnumbered neighbour on vb
// (FRR's `neighbor <if> interface`, which sends RAs and learns the peer
// only from the RAs it receives).
const frrConf = `hostname nd-tor
log file %[1]s/frr.log informational
!
router bgp 65001
 bgp router-id 10.255.0.1
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor vb interface remote-as external
 neighbor vb timers connect 2
!
`

// startFRR starts FRR's zebra and bgpd in ns as package lab does, and
// stops them by PID at the end of the test.
func startFRR(t *testing.T, ns *testNS) (vtysh func(cmd string) string) {
	t.Helper()
	for _, f := range []string{filepath.Join(lab.FRRDir, "zebra"), filepath.Join(lab.FRRDir, "bgpd"), "/usr/bin/vtysh"} {
		if _, err := os.Stat(f); err != nil {
			prereq.Missing(t, "the FRR test needs "+f+" (run scripts/test-deps.sh as root)")
		}
	}
	dir, err := os.MkdirTemp("", "ovnbgp-nd-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"zebra.conf": fmt.Sprintf("hostname nd-tor\nlog file %s/frr.log informational\n", dir),
		"bgpd.conf":  fmt.Sprintf(frrConf, dir),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := lab.ChownFRR(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range []string{"bgpd", "zebra"} {
			b, err := os.ReadFile(filepath.Join(dir, d+".pid"))
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if err := lab.StopPID(pid, 5*time.Second); err != nil {
					t.Errorf("stop %s: %v", d, err)
				}
			}
		}
		if t.Failed() {
			t.Logf("FRR log:\n%s", lab.Tail(filepath.Join(dir, "frr.log"), 40))
		}
	})
	for _, d := range []string{"zebra", "bgpd"} {
		out, err := exec.Command("ip", "netns", "exec", ns.name, filepath.Join(lab.FRRDir, d), "-d", "-F", "traditional",
			"-u", "frr", "-g", "frr", "-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir,
			"-f", filepath.Join(dir, d+".conf"), "-i", filepath.Join(dir, d+".pid")).CombinedOutput()
		if err != nil {
			t.Fatalf("start %s: %v: %s", d, err, out)
		}
		if d == "zebra" {
			eventually(t, 10*time.Second, "zebra's zserv socket", func() string {
				if _, err := os.Stat(filepath.Join(dir, "zserv.api")); err != nil {
					return err.Error()
				}
				return ""
			})
		}
	}
	return func(cmd string) string {
		out, err := exec.Command("vtysh", "--vty_socket", dir, "-c", cmd).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("vtysh -c %q: %v: %s", cmd, err, out)
		}
		return string(out)
	}
}

// TestFinderWithFRR: against FRR 8.4's `neighbor vb interface`, the Finder
// learns FRR's link-local, and FRR learns ours from our RAs: without them
// FRR neither dials nor accepts us (issue 20).
func TestFinderWithFRR(t *testing.T) {
	a, b := newNS(t, "node"), newNS(t, "tor")
	vethPair(t, a, "va", b, "vb")
	llA, llB := a.linkLocal("va"), b.linkLocal("vb")
	vtysh := startFRR(t, b)
	var n notes
	f := newFinder(t, a, &n, "va")
	eventually(t, 30*time.Second, "the Finder learns FRR's link-local", func() string {
		if s := status(f, "va"); s.Peer != llB.WithZone("va") {
			return fmt.Sprintf("%+v", s)
		}
		return ""
	})
	t.Logf("learned FRR's %s by %s", status(f, "va").Peer, status(f, "va").How)
	eventually(t, 30*time.Second, "FRR learns our link-local", func() string {
		out := vtysh("show bgp neighbors vb json")
		if !strings.Contains(out, llA.WithZone("").String()) {
			return out
		}
		return ""
	})
	// The kernel's neighbour table, as doctor reads it: FRR is a router
	// neighbour of the node, and the node's own address is not one.
	h := a.h
	r, err := NewReader(&h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fa, err := r.Link("va")
	if err != nil {
		t.Fatal(err)
	}
	if fa.Usable() != llA || len(fa.Neighbours) != 1 || fa.Neighbours[0].Addr != llB.WithZone("va") || !fa.Neighbours[0].Router {
		t.Errorf("reader: %+v", fa)
	}
	t.Logf("FRR: %s", vtysh("show interface vb"))
}
