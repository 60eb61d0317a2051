package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The addresses of the link between the node and the tor. Every lab uses the
// same ones: each lives in its own pair of namespaces.
var (
	NodeIPv4 = netip.MustParseAddr("192.0.2.0")
	TorIPv4  = netip.MustParseAddr("192.0.2.1")
	NodeIPv6 = netip.MustParseAddr("2001:db8:100::")
	TorIPv6  = netip.MustParseAddr("2001:db8:100::1")
)

// Interface names inside the namespaces.
const (
	NodeLink = "veth-node"
	TorLink  = "veth-tor"
)

// NamePrefix starts the name of every namespace and directory a lab creates.
const NamePrefix = "ovnbgp-e2e-"

// Lab is one test's world: a directory and two network namespaces, node and
// tor, joined by a veth with 192.0.2.0/31 - 192.0.2.1/31 and
// 2001:db8:100::/127 - 2001:db8:100::1/127.
type Lab struct {
	T testing.TB
	// ID is random; it names the namespaces and the directory.
	ID string
	// Dir is the lab's directory (mode 0755: FRR's user must reach its part).
	Dir string
	// Node and Tor are the network namespace names.
	Node, Tor string

	mu sync.Mutex
	// dirs counts the directories made per name (MkdirUnique).
	dirs map[string]int
}

// New checks the prerequisites (see Require) and builds a lab. Everything is
// removed at the end of the test.
func New(t testing.TB) *Lab {
	t.Helper()
	Require(t)
	id := randomID()
	l := &Lab{T: t, ID: id, Node: NamePrefix + id + "-node", Tor: NamePrefix + id + "-tor"}
	dir, err := os.MkdirTemp("", NamePrefix+id+"-")
	if err != nil {
		t.Fatal(err)
	}
	l.Dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("OVNBGP_E2E_KEEP") != "" {
			t.Logf("OVNBGP_E2E_KEEP set: keeping %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	for _, ns := range []string{l.Tor, l.Node} {
		if out, err := run("ip", "netns", "add", ns); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { deleteNetns(t, ns) })
	}
	l.setupLink()
	t.Logf("lab %s: netns %s (node) and %s (tor), dir %s", id, l.Node, l.Tor, dir)
	return l
}

func (l *Lab) setupLink() {
	t := l.T
	t.Helper()
	// accept_dad=0 everywhere and nodad on the addresses: IPv6 BGP must not
	// start while addresses are tentative (FRR resets the session then).
	dad := "echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad; echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad"
	steps := [][]string{
		{"ip", "netns", "exec", l.Node, "sh", "-c", dad},
		{"ip", "netns", "exec", l.Tor, "sh", "-c", dad},
		{"ip", "-n", l.Node, "link", "add", NodeLink, "type", "veth", "peer", "name", TorLink, "netns", l.Tor},
		{"ip", "netns", "exec", l.Node, "sh", "-c", "echo 0 >/proc/sys/net/ipv6/conf/" + NodeLink + "/accept_dad"},
		{"ip", "netns", "exec", l.Tor, "sh", "-c", "echo 0 >/proc/sys/net/ipv6/conf/" + TorLink + "/accept_dad"},
		{"ip", "-n", l.Node, "link", "set", "lo", "up"},
		{"ip", "-n", l.Tor, "link", "set", "lo", "up"},
		{"ip", "-n", l.Node, "addr", "add", NodeIPv4.String() + "/31", "dev", NodeLink},
		{"ip", "-n", l.Tor, "addr", "add", TorIPv4.String() + "/31", "dev", TorLink},
		{"ip", "-n", l.Node, "addr", "add", NodeIPv6.String() + "/127", "dev", NodeLink, "nodad"},
		{"ip", "-n", l.Tor, "addr", "add", TorIPv6.String() + "/127", "dev", TorLink, "nodad"},
		{"ip", "-n", l.Node, "link", "set", NodeLink, "up"},
		{"ip", "-n", l.Tor, "link", "set", TorLink, "up"},
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	// Wait for the link-local addresses, without which FRR's IPv6 next hop
	// is not set.
	Eventually(t, 10*time.Second, 50*time.Millisecond, "IPv6 link-local addresses", func() error {
		for _, side := range [][2]string{{l.Node, NodeLink}, {l.Tor, TorLink}} {
			out, err := run("ip", "-n", side[0], "-6", "addr", "show", "dev", side[1], "scope", "link")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if !strings.Contains(out, "inet6 fe80") || strings.Contains(out, "tentative") {
				return fmt.Errorf("%s in %s: %q", side[1], side[0], out)
			}
		}
		return nil
	})
}

// Exec runs a command inside namespace ns and returns its combined output.
func (l *Lab) Exec(ns string, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// TCPExtCounter reads a TcpExt counter (e.g. "TCPMD5Failure") of namespace
// ns from /proc/net/netstat.
func (l *Lab) TCPExtCounter(ns, name string) (uint64, error) {
	return l.counter(ns, "/proc/net/netstat", "TcpExt:", name)
}

// TCPCounter reads a Tcp counter (e.g. "OutRsts", "ActiveOpens") of
// namespace ns from /proc/net/snmp.
func (l *Lab) TCPCounter(ns, name string) (uint64, error) {
	return l.counter(ns, "/proc/net/snmp", "Tcp:", name)
}

// ICMPCounter reads an Icmp counter (e.g. "OutTimeExcds") of namespace ns
// from /proc/net/snmp.
func (l *Lab) ICMPCounter(ns, name string) (uint64, error) {
	return l.counter(ns, "/proc/net/snmp", "Icmp:", name)
}

// counter reads counter name of the "group" lines (a line of names, then a
// line of values) of a /proc/net file, in namespace ns.
func (l *Lab) counter(ns, file, group, name string) (uint64, error) {
	out, err := l.Exec(ns, "cat", file)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	lines := strings.Split(out, "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != group || len(values) != len(names) || values[0] != group {
			continue
		}
		for j, n := range names {
			if n == name {
				return strconv.ParseUint(values[j], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s %s not in %s", strings.TrimSuffix(group, ":"), name, file)
}

// AddTorAddress gives the tor namespace a second address a (on its
// loopback) and the node namespace a host route to it via the link: an
// address of the tor's that is not FRR's session address, e.g. for a peer
// nobody answers.
func (l *Lab) AddTorAddress(a netip.Addr) {
	l.T.Helper()
	via, bits := TorIPv4, 32
	if a.Is6() {
		via, bits = TorIPv6, 128
	}
	host := netip.PrefixFrom(a, bits).String()
	for _, s := range [][]string{
		{"ip", "-n", l.Tor, "addr", "add", host, "dev", "lo", "nodad"},
		{"ip", "-n", l.Node, "route", "add", host, "via", via.String()},
	} {
		if a.Is4() && s[len(s)-1] == "nodad" {
			s = s[:len(s)-1]
		}
		if out, err := run(s[0], s[1:]...); err != nil {
			l.T.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
}

// AddNodeAddress gives the node namespace a second address a (a host
// route on its loopback) and the tor namespace a route to it via the link:
// a node address that is not on the link, e.g. for a session dialed from a
// chosen source address.
func (l *Lab) AddNodeAddress(a netip.Addr) {
	l.T.Helper()
	via, bits := NodeIPv4, 32
	if a.Is6() {
		via, bits = NodeIPv6, 128
	}
	host := netip.PrefixFrom(a, bits).String()
	for _, s := range [][]string{
		{"ip", "-n", l.Node, "addr", "add", host, "dev", "lo"},
		{"ip", "-n", l.Tor, "route", "add", host, "via", via.String()},
	} {
		if out, err := run(s[0], s[1:]...); err != nil {
			l.T.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
}

// The addresses of the routed path of AddRoutedTorAddress: node - router
// on 198.18.0.0/31, router - tor on 198.18.0.2/31.
var (
	NodeRouted = netip.MustParseAddr("198.18.0.0") // the node's end of the path
	RouterNode = netip.MustParseAddr("198.18.0.1") // the router, node side
	RouterTor  = netip.MustParseAddr("198.18.0.2") // the router, tor side
	TorRouted  = netip.MustParseAddr("198.18.0.3") // the tor's end of the path
)

// Interface names of the routed path.
const (
	NodeRouterLink = "veth-node-rtr"
	TorRouterLink  = "veth-tor-rtr"
)

// AddRoutedTorAddress makes a third namespace, a router (IPv4 forwarding
// on), joined to the node by NodeRouterLink (NodeRouted - RouterNode, /31)
// and to the tor by TorRouterLink (RouterTor - TorRouted, /31), and gives
// the tor address a on its loopback, reachable from the node only through
// the router: one real forwarding hop, which decrements the TTL. (A second
// address on the tor's own loopback, as AddTorAddress makes, is no hop: a
// packet with TTL 1 reaches it.) The node reaches a from NodeRouted, and
// the tor routes NodeRouted back via the router. It returns the router's
// namespace, which is removed at the end of the test like the others.
func (l *Lab) AddRoutedTorAddress(a netip.Addr) string {
	t := l.T
	t.Helper()
	if !a.Is4() {
		t.Fatalf("AddRoutedTorAddress: %s: only IPv4", a)
	}
	rtr := NamePrefix + l.ID + "-rtr"
	if out, err := run("ip", "netns", "add", rtr); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", rtr, err, out)
	}
	t.Cleanup(func() { deleteNetns(t, rtr) })
	host := netip.PrefixFrom(a, 32).String()
	steps := [][]string{
		{"ip", "-n", rtr, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", rtr, "sh", "-c", "echo 1 >/proc/sys/net/ipv4/ip_forward"},
		{"ip", "-n", l.Node, "link", "add", NodeRouterLink, "type", "veth", "peer", "name", "rtr-node", "netns", rtr},
		{"ip", "-n", l.Tor, "link", "add", TorRouterLink, "type", "veth", "peer", "name", "rtr-tor", "netns", rtr},
		{"ip", "-n", l.Node, "addr", "add", NodeRouted.String() + "/31", "dev", NodeRouterLink},
		{"ip", "-n", rtr, "addr", "add", RouterNode.String() + "/31", "dev", "rtr-node"},
		{"ip", "-n", rtr, "addr", "add", RouterTor.String() + "/31", "dev", "rtr-tor"},
		{"ip", "-n", l.Tor, "addr", "add", TorRouted.String() + "/31", "dev", TorRouterLink},
		{"ip", "-n", l.Node, "link", "set", NodeRouterLink, "up"},
		{"ip", "-n", rtr, "link", "set", "rtr-node", "up"},
		{"ip", "-n", rtr, "link", "set", "rtr-tor", "up"},
		{"ip", "-n", l.Tor, "link", "set", TorRouterLink, "up"},
		{"ip", "-n", l.Tor, "addr", "add", host, "dev", "lo"},
		{"ip", "-n", rtr, "route", "add", host, "via", TorRouted.String()},
		{"ip", "-n", l.Node, "route", "add", host, "via", RouterNode.String()},
		{"ip", "-n", l.Tor, "route", "add", NodeRouted.String() + "/32", "via", RouterTor.String()},
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return rtr
}

// RouteMonitor records `ip monitor route` in a namespace: every change of
// its kernel routing tables, as it happens.
type RouteMonitor struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

// MonitorRoutes starts `ip monitor route` in namespace ns. Stop it with
// Stop; it is also ended at the end of the test.
func (l *Lab) MonitorRoutes(ns string) *RouteMonitor {
	l.T.Helper()
	m := &RouteMonitor{out: &lockedBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command("ip", "netns", "exec", ns, "ip", "monitor", "route")
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		l.T.Fatalf("ip monitor route in %s: %v", ns, err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	l.T.Cleanup(func() { m.Stop() })
	return m
}

// Output is what the monitor printed so far.
func (m *RouteMonitor) Output() string { return m.out.String() }

// Stop ends the monitor (by PID) and returns everything it printed.
func (m *RouteMonitor) Stop() string {
	select {
	case <-m.done:
	default:
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	}
	return m.out.String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// PIDs lists the live processes inside namespace ns.
func (l *Lab) PIDs(ns string) ([]int, error) {
	out, err := run("ip", "netns", "pids", ns)
	if err != nil {
		return nil, fmt.Errorf("ip netns pids %s: %v: %s", ns, err, out)
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// deleteNetns ends every process inside ns (a namespace this test created,
// so they are ours), by PID, then deletes it. `ip netns del` alone would leave
// them running, holding sockets and ports.
func deleteNetns(t testing.TB, ns string) {
	for attempt := 0; attempt < 3; attempt++ {
		out, err := run("ip", "netns", "pids", ns)
		if err != nil {
			break
		}
		pids := strings.Fields(out)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			pid, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			if err := StopPID(pid, 5*time.Second); err != nil {
				t.Logf("netns %s: %v", ns, err)
			}
		}
	}
	if out, err := run("ip", "netns", "del", ns); err != nil {
		t.Errorf("ip netns del %s: %v: %s", ns, err, out)
	}
}

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func randomID() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Mkdir creates a subdirectory of the lab directory.
func (l *Lab) Mkdir(name string) string {
	l.T.Helper()
	d := l.Dir + "/" + name
	if err := os.MkdirAll(d, 0o755); err != nil {
		l.T.Fatal(err)
	}
	return d
}

// MkdirUnique makes a new directory for a component named name: name
// itself the first time, then name-2, name-3, ... (two NB servers, two
// daemons).
func (l *Lab) MkdirUnique(name string) string {
	l.T.Helper()
	l.mu.Lock()
	if l.dirs == nil {
		l.dirs = map[string]int{}
	}
	l.dirs[name]++
	n := l.dirs[name]
	l.mu.Unlock()
	if n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	return l.Mkdir(name)
}

// PeerNamespace is a further namespace joined to the node by a veth of its
// own: another router with its own link, which can fail on its own.
type PeerNamespace struct {
	// NS is the namespace's name.
	NS string
	// NodeLink is the veth's name in the node namespace, PeerLink in NS.
	NodeLink, PeerLink string
	// NodeAddr and PeerAddr are the two ends of the link's /31.
	NodeAddr, PeerAddr netip.Addr
}

// AddPeerNamespace makes namespace <lab>-name joined to the node by veth
// "veth-<name>" (node side, name at most 10 characters) and "veth-peer"
// (its side), with node/31 and node+1/31 (node must be even). The namespace
// is removed at the end of the test, the processes in it first.
func (l *Lab) AddPeerNamespace(name string, node netip.Addr) PeerNamespace {
	t := l.T
	t.Helper()
	if len(name) > 10 || !node.Is4() || node.As4()[3]%2 != 0 {
		t.Fatalf("AddPeerNamespace(%q, %s): want a name of at most 10 characters and an even IPv4 address", name, node)
	}
	p := PeerNamespace{NS: NamePrefix + l.ID + "-" + name, NodeLink: "veth-" + name, PeerLink: "veth-peer",
		NodeAddr: node, PeerAddr: node.Next()}
	if out, err := run("ip", "netns", "add", p.NS); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", p.NS, err, out)
	}
	t.Cleanup(func() { deleteNetns(t, p.NS) })
	steps := [][]string{
		{"ip", "-n", l.Node, "link", "add", p.NodeLink, "type", "veth", "peer", "name", p.PeerLink, "netns", p.NS},
		{"ip", "-n", p.NS, "link", "set", "lo", "up"},
		{"ip", "-n", l.Node, "addr", "add", p.NodeAddr.String() + "/31", "dev", p.NodeLink},
		{"ip", "-n", p.NS, "addr", "add", p.PeerAddr.String() + "/31", "dev", p.PeerLink},
		{"ip", "-n", l.Node, "link", "set", p.NodeLink, "up"},
		{"ip", "-n", p.NS, "link", "set", p.PeerLink, "up"},
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return p
}

// AddTorLink joins the node and tor namespaces by a second veth, named dev
// on both sides (at most 15 characters), with node/31 on the node's side
// and node+1/31 on the tor's (node must be even), and returns the tor's
// address: a second node reached over a link of its own, so that the
// tor's routes through the two nodes have distinct nexthops (issue 21).
func (l *Lab) AddTorLink(dev string, node netip.Addr) netip.Addr {
	t := l.T
	t.Helper()
	if len(dev) > 15 || !node.Is4() || node.As4()[3]%2 != 0 {
		t.Fatalf("AddTorLink(%q, %s): want a name of at most 15 characters and an even IPv4 address", dev, node)
	}
	tor := node.Next()
	steps := [][]string{
		{"ip", "-n", l.Node, "link", "add", dev, "type", "veth", "peer", "name", dev, "netns", l.Tor},
		{"ip", "-n", l.Node, "addr", "add", node.String() + "/31", "dev", dev},
		{"ip", "-n", l.Tor, "addr", "add", tor.String() + "/31", "dev", dev},
		{"ip", "-n", l.Node, "link", "set", dev, "up"},
		{"ip", "-n", l.Tor, "link", "set", dev, "up"},
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return tor
}

// SetLink sets link dev of namespace ns up or down (`ip link set`): a cable
// pulled and plugged in again. Down, the kernel drops the link's connected
// and IPv4 routes at once; a TCP session over it lives on until a side's
// hold timer expires.
func (l *Lab) SetLink(ns, dev string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if out, err := run("ip", "-n", ns, "link", "set", dev, state); err != nil {
		return fmt.Errorf("ip -n %s link set %s %s: %v: %s", ns, dev, state, err, out)
	}
	return nil
}
