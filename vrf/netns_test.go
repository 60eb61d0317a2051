package vrf_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/test/prereq"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// proto is the route protocol the tests give the manager (ovnbgp's default).
const proto = 200

// requireNetns fails under CI=true, and skips elsewhere, when network
// namespaces cannot be made here.
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
	if len(missing) == 0 {
		return
	}
	msg := "vrf netns tests need " + strings.Join(missing, ", ") + " (run as root; scripts/test-deps.sh installs iproute2)"
	prereq.Missing(t, msg)
}

// testNS is a network namespace the test made, with two veth pairs whose
// first ends carry addresses, so gateways inside them are on-link:
//
//	a0 192.0.2.1/24 2001:db8:a::1/64 (peer a1)
//	b0 198.51.100.1/24 2001:db8:b::1/64 (peer b1)
type testNS struct {
	t    testing.TB
	name string
	h    netns.NsHandle
}

func newNS(t testing.TB) *testNS {
	t.Helper()
	requireNetns(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "ovnbgp-vrf-" + hex.EncodeToString(b[:])
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
	n.ip("link", "set", "lo", "up")
	for _, l := range []struct{ dev, peer, v4, v6 string }{
		{"a0", "a1", "192.0.2.1/24", "2001:db8:a::1/64"},
		{"b0", "b1", "198.51.100.1/24", "2001:db8:b::1/64"},
	} {
		n.ip("link", "add", l.dev, "type", "veth", "peer", "name", l.peer)
		n.sysctl("net.ipv6.conf."+l.dev+".accept_dad", "0")
		n.ip("addr", "add", l.v4, "dev", l.dev)
		n.ip("addr", "add", l.v6, "dev", l.dev, "nodad")
		n.ip("link", "set", l.dev, "up")
		n.ip("link", "set", l.peer, "up")
	}
	n.settle("a0", "a1", "b0", "b1")
	return n
}

// settle waits until the links are operationally up with their IPv6
// link-local addresses (carrier comes up asynchronously), so the link,
// address and route events of bringing them up are over before a test
// opens a manager.
func (n *testNS) settle(links ...string) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, l := range links {
		for {
			link := n.ip("link", "show", l)
			addrs := n.ip("-6", "addr", "show", "dev", l)
			if strings.Contains(link, "state UP") && strings.Contains(addrs, "fe80::") && !strings.Contains(addrs, "tentative") {
				break
			}
			if time.Now().After(deadline) {
				n.t.Fatalf("link %s not up with a link-local address within 30s:\n%s%s", l, link, addrs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// ip runs ip -n NS ARGS and fails the test on error.
func (n *testNS) ip(args ...string) string {
	n.t.Helper()
	out, err := n.tryIP(args...)
	if err != nil {
		n.t.Fatalf("ip -n %s %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
	return out
}

func (n *testNS) tryIP(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	return string(out), err
}

func (n *testNS) sysctl(key, value string) {
	n.t.Helper()
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	cmd := exec.Command("ip", "netns", "exec", n.name, "sh", "-c", "echo "+value+" > "+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("sysctl %s=%s in %s: %v: %s", key, value, n.name, err, out)
	}
}

// foreign returns every route in every table, IPv4 and IPv6, that does not
// carry ovnbgp's protocol, as `ip -d route show table all` prints it (a
// multipath route with its nexthop lines).
func (n *testNS) foreign() string {
	n.t.Helper()
	var keep []string
	for _, fam := range []string{"-4", "-6"} {
		out := n.ip("-d", fam, "route", "show", "table", "all")
		var cur []string
		flush := func() {
			if len(cur) == 0 {
				return
			}
			head := " " + cur[0] + " "
			if !strings.Contains(head, " proto 200 ") && !strings.Contains(head, " proto ovnbgp ") {
				keep = append(keep, cur...)
			}
			cur = nil
		}
		for _, line := range strings.Split(out, "\n") {
			if line == "" {
				continue
			}
			if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				cur = append(cur, line)
				continue
			}
			flush()
			cur = []string{line}
		}
		flush()
	}
	return strings.Join(keep, "\n")
}

// foreignRules returns the ip rules that do not carry ovnbgp's protocol.
func (n *testNS) foreignRules() string {
	n.t.Helper()
	var keep []string
	for _, fam := range []string{"-4", "-6"} {
		for _, line := range strings.Split(n.ip("-d", fam, "rule", "show"), "\n") {
			if line != "" && !strings.Contains(line+" ", " proto 200 ") && !strings.Contains(line+" ", " proto ovnbgp ") {
				keep = append(keep, line)
			}
		}
	}
	return strings.Join(keep, "\n")
}

// open opens a manager in the namespace; pokes (if not nil) receives
// notify's calls, the way the daemon's size-1 channel does.
func (n *testNS) open(pokes chan struct{}) *vrf.Manager {
	n.t.Helper()
	notify := func() {}
	if pokes != nil {
		notify = func() {
			select {
			case pokes <- struct{}{}:
			default:
			}
		}
	}
	m, err := vrf.OpenAt(n.h, proto, zaptest.NewLogger(n.t), notify)
	if err != nil {
		n.t.Fatalf("vrf.OpenAt: %v", err)
	}
	n.t.Cleanup(m.Close)
	return m
}

// waitPoke waits for notify, failing after a generous timeout.
func waitPoke(t *testing.T, pokes chan struct{}, why string) {
	t.Helper()
	select {
	case <-pokes:
	case <-time.After(30 * time.Second):
		t.Fatalf("no notify within 30s after %s", why)
	}
}

// drain empties the poke channel.
func drain(pokes chan struct{}) {
	for {
		select {
		case <-pokes:
		default:
			return
		}
	}
}
