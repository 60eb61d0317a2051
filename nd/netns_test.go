package nd

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// requireNetns fails under CI=true, and skips elsewhere, when network
// namespaces and raw sockets cannot be had here.
func requireNetns(t testing.TB) {
	t.Helper()
	var missing []string
	if runtime.GOOS != "linux" {
		missing = append(missing, "Linux")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "ip (iproute2)")
	}
	if len(missing) > 0 {
		prereq.Missing(t, "nd netns tests need "+strings.Join(missing, ", ")+" (run as root; scripts/test-deps.sh installs iproute2)")
	}
}

// testNS is a network namespace the test made, deleted at its end.
type testNS struct {
	t    testing.TB
	name string
	h    netns.NsHandle
}

func newNS(t testing.TB, role string) *testNS {
	t.Helper()
	requireNetns(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "ovnbgp-nd-" + hex.EncodeToString(b[:]) + "-" + role
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	n := &testNS{t: t, name: name}
	t.Cleanup(func() {
		if n.h.IsOpen() {
			_ = n.h.Close()
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	n.h = h
	n.sh("echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad; echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad")
	n.ip("link", "set", "lo", "up")
	return n
}

// vethPair joins a (device da) and b (device db) with a veth that has only
// the kernel's link-local addresses (no DAD), and waits for them.
func vethPair(t testing.TB, a *testNS, da string, b *testNS, db string) {
	t.Helper()
	a.ip("link", "add", da, "type", "veth", "peer", "name", db, "netns", b.name)
	a.sh("echo 0 >/proc/sys/net/ipv6/conf/" + da + "/accept_dad")
	b.sh("echo 0 >/proc/sys/net/ipv6/conf/" + db + "/accept_dad")
	a.ip("link", "set", da, "up")
	b.ip("link", "set", db, "up")
	a.linkLocal(da)
	b.linkLocal(db)
}

// linkLocal waits for dev's usable link-local address and returns it,
// zoned.
func (n *testNS) linkLocal(dev string) netip.Addr {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := n.ip("-6", "-o", "addr", "show", "dev", dev, "scope", "link")
		if !strings.Contains(out, "tentative") {
			for _, f := range strings.Fields(out) {
				if p, err := netip.ParsePrefix(f); err == nil && p.Addr().IsLinkLocalUnicast() {
					return p.Addr().WithZone(dev)
				}
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("no usable link-local address on %s in %s within 30s: %s", dev, n.name, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *testNS) ip(args ...string) string {
	n.t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("ip -n %s %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (n *testNS) sh(script string) string {
	n.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.name, "sh", "-c", script).CombinedOutput()
	if err != nil {
		n.t.Fatalf("in %s: %s: %v: %s", n.name, script, err, out)
	}
	return string(out)
}

// notes records Notify calls.
type notes struct {
	mu  sync.Mutex
	got []string // "link peer"
}

func (n *notes) notify(link string, peer netip.Addr) {
	n.mu.Lock()
	n.got = append(n.got, link+" "+peer.String())
	n.mu.Unlock()
}

func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

// eventually polls cond every 20 ms until it returns "" or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v: %s", what, timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
