package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

func TestMain(m *testing.M) {
	runHelper() // the doctor tests' helper processes (doctor_test.go)
	code := m.Run()
	lab.Cleanup()
	os.Exit(code)
}

// Bounds that are requirements (the numbers). Everything else polls
// with generous timeouts: the machine is shared and noisy.
const (
	firstAdvertBound = 10 * time.Second // daemon start -> FRR best path
	nbChangeBound    = 1 * time.Second  // ovn-nbctl returns -> FRR RIB
	stopBound        = 5 * time.Second  // SIGTERM -> exit
	generous         = 60 * time.Second
)

var (
	green = lab.Network{Name: "green", Node: "node1", Subnet: netip.MustParsePrefix("10.201.0.0/24")}
	red   = lab.Network{Name: "red", Node: "node1", Subnet: netip.MustParsePrefix("10.202.0.0/24")}
	// never advertised by node1
	notOurs = []netip.Prefix{lab.DefaultNode2.Subnet, lab.BlueNode2.Subnet,
		netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("172.18.0.0/16")}
	nodeSubnets4 = []netip.Prefix{lab.DefaultNode1.Subnet, lab.BlueNode1.Subnet}
)

// world is one test's running lab.
type world struct {
	lab *lab.Lab
	nb  *lab.NB
	frr *lab.FRR
	d   *lab.Daemon
}

// setup builds the lab, NB with the standard topology, FRR, and starts the
// daemon. FRR defaults to one passive neighbor 192.0.2.0 (AS 65010): the
// daemon dials.
func setup(t *testing.T, fc *lab.FRRConfig, dc lab.DaemonConfig) *world {
	t.Helper()
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	if fc == nil {
		fc = &lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}}
	}
	w.frr = w.lab.StartFRR(*fc)
	w.d = w.lab.StartDaemon(w.nb, dc)
	return w
}

// bestFrom is FRR's set of best-path prefixes of family learned from peer,
// or an error if the daemon died meanwhile.
func (w *world) bestFrom(family string, peer netip.Addr) ([]netip.Prefix, error) {
	if err := w.d.Exited(); err != nil {
		return nil, err
	}
	return w.frr.BestFrom(family, peer)
}

// rib is a condition: the daemon runs, and FRR has best paths from peer for
// every prefix of want and for none of absent.
func (w *world) rib(family string, peer netip.Addr, want, absent []netip.Prefix) func() error {
	frr := w.frrRIB(family, peer, want, absent)
	return func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		return frr()
	}
}

// frrRIB is rib for when the daemon is meant to be stopped: it only looks
// at FRR.
func (w *world) frrRIB(family string, peer netip.Addr, want, absent []netip.Prefix) func() error {
	return func() error {
		got, err := w.frr.BestFrom(family, peer)
		if err != nil {
			return err
		}
		for _, p := range want {
			if !slices.Contains(got, p) {
				return fmt.Errorf("FRR best paths from %s lack %s (have %v)", peer, p, got)
			}
		}
		for _, p := range absent {
			if slices.Contains(got, p) {
				return fmt.Errorf("FRR has a best path for %s from %s (have %v)", p, peer, got)
			}
		}
		return nil
	}
}

// waitRIB waits (generously) for the condition and fails if it took longer
// than bound, so that a slow result still says how slow it was.
func waitRIB(t *testing.T, bound time.Duration, since time.Time, what string, cond func() error) time.Duration {
	t.Helper()
	_, err := lab.Poll(generous, 50*time.Millisecond, cond)
	took := time.Since(since)
	if err != nil {
		t.Fatalf("%s: not after %v: %v", what, took.Round(time.Millisecond), err)
	}
	if took > bound {
		t.Fatalf("%s: took %v, want <= %v", what, took.Round(time.Millisecond), bound)
	}
	return took
}

// TestLab checks the harness itself, without ovnbgp: namespaces and link,
// FRR and its JSON parsing, ovsdb-server and the OVN-Kubernetes topology.
func TestLab(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	out := nb.MustNBCtl("--bare", "--columns=name", "list", "logical_switch")
	for _, sw := range []string{"node1", "node2", "blue_node1", "blue_node2", "join", "blue_join"} {
		if !slices.Contains(strings.Fields(out), sw) {
			t.Errorf("NB switches %q lack %s", out, sw)
		}
	}
	if got := nb.MustNBCtl("get", "logical_switch", "node1", "other_config:ipv6_prefix"); strings.Trim(got, `"`) != "fd00:10:128:1::" {
		t.Errorf("node1 ipv6_prefix = %s", got)
	}
	if got := nb.MustNBCtl("get", "logical_switch", "blue_node1", "external_ids:k8s.ovn.org/network"); strings.Trim(got, `"`) != "blue" {
		t.Errorf("blue_node1 network = %s", got)
	}

	originated := netip.MustParsePrefix("203.0.113.0/24")
	frr := l.StartFRR(lab.FRRConfig{
		Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010}, {Address: lab.NodeIPv6, ASN: 65010}},
		Originate: []netip.Prefix{originated, netip.MustParsePrefix("2001:db8:203::/48")},
	})
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "FRR originates 203.0.113.0/24", func() error {
		best, err := frr.BestPaths("ipv4")
		if err != nil {
			return err
		}
		if _, ok := best[originated]; !ok {
			return fmt.Errorf("best paths %v", best)
		}
		return nil
	})
	ns, err := frr.Neighbors()
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 || ns[lab.NodeIPv4.String()].RemoteAS != 65010 {
		t.Errorf("FRR neighbors = %+v", ns)
	}
	if err := frr.Established(lab.NodeIPv4); err == nil {
		t.Error("FRR says Established with nobody on the other side")
	}
	// the link works, IPv4 and IPv6: TCP to FRR's bgpd from the node side
	for _, a := range []netip.Addr{lab.TorIPv4, lab.TorIPv6} {
		if out, err := l.Exec(l.Node, "timeout", "5", "bash", "-c", "exec 3<>/dev/tcp/"+a.String()+"/179"); err != nil {
			t.Errorf("TCP from node to %s:179: %v: %s", a, err, out)
		}
	}
}

// TestAdvertisesNodeSubnets: node1's pod subnets (default network and the
// layer3 UDN blue) reach FRR within 10 s of the daemon's start; node2's never.
func TestAdvertisesNodeSubnets(t *testing.T) {
	t.Parallel()
	w := setup(t, nil, lab.DaemonConfig{})
	took := waitRIB(t, firstAdvertBound, w.d.Started, "node1 subnets in FRR",
		w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs))
	t.Logf("daemon start -> FRR best paths for %v: %v", nodeSubnets4, took.Round(time.Millisecond))

	best, err := w.frr.BestPaths("ipv4")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nodeSubnets4 {
		if got := best[p]; got.NextHop != lab.NodeIPv4 || got.ASPath != "65010" {
			t.Errorf("FRR best path for %s: next hop %s, AS path %q; want %s, 65010", p, got.NextHop, got.ASPath, lab.NodeIPv4)
		}
	}
	// exactly node1's subnets, and it stays that way
	lab.Consistently(t, 3*time.Second, 200*time.Millisecond, "FRR has exactly node1's subnets", func() error {
		got, err := w.bestFrom("ipv4", lab.NodeIPv4)
		if err != nil {
			return err
		}
		if !slices.Equal(got, nodeSubnets4) {
			return fmt.Errorf("FRR best paths from %s = %v, want %v", lab.NodeIPv4, got, nodeSubnets4)
		}
		return nil
	})
}

// TestNBChangeLatency: a UDN node switch added in NB reaches FRR's RIB
// within 1 s of ovn-nbctl returning; deleting it withdraws it within 1 s.
// Not parallel: the latency is measured on an otherwise quiet machine.
func TestNBChangeLatency(t *testing.T) {
	w := setup(t, nil, lab.DaemonConfig{})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))

	const rounds = 3
	var adds, dels []time.Duration
	for i := 0; i < rounds; i++ {
		n := lab.Network{Name: fmt.Sprintf("green%d", i), Node: "node1",
			Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201, byte(i), 0}), 24)}
		if err := w.nb.Add(n); err != nil {
			t.Fatal(err)
		}
		add, err := lab.Poll(generous, 20*time.Millisecond, w.rib("ipv4", lab.NodeIPv4, []netip.Prefix{n.Subnet}, nil))
		if err != nil {
			t.Fatalf("add %s (%s): never in FRR: %v", n.Switch(), n.Subnet, err)
		}
		adds = append(adds, add)

		if err := w.nb.Delete(n); err != nil {
			t.Fatal(err)
		}
		del, err := lab.Poll(generous, 20*time.Millisecond, w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, []netip.Prefix{n.Subnet}))
		if err != nil {
			t.Fatalf("delete %s (%s): never withdrawn from FRR: %v", n.Switch(), n.Subnet, err)
		}
		dels = append(dels, del)
		t.Logf("round %d: %s %s: ovn-nbctl ls-add -> FRR best path %v; ls-del -> withdrawn %v",
			i, n.Switch(), n.Subnet, add.Round(100*time.Microsecond), del.Round(100*time.Microsecond))
	}
	for i := range adds {
		if adds[i] > nbChangeBound {
			t.Errorf("round %d: add took %v, want <= %v", i, adds[i], nbChangeBound)
		}
		if dels[i] > nbChangeBound {
			t.Errorf("round %d: withdraw took %v, want <= %v", i, dels[i], nbChangeBound)
		}
	}
	t.Logf("NB -> FRR latency over %d rounds (poll every 20 ms, so up to 20 ms late; vty query ~0.3 ms): add max %v, withdraw max %v",
		rounds, slices.Max(adds).Round(100*time.Microsecond), slices.Max(dels).Round(100*time.Microsecond))
}

// TestIPv6: an IPv6 session advertises node1's IPv6 pod subnet.
func TestIPv6(t *testing.T) {
	t.Parallel()
	peer := lab.Peer{Name: "tor6", Address: lab.TorIPv6, ASN: 65001, Families: []string{"ipv6"}}
	w := setup(t,
		&lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv6, ASN: 65010, Passive: true}}},
		lab.DaemonConfig{Peers: []lab.Peer{peer}})
	want := []netip.Prefix{lab.DefaultNode1.Subnet6}
	took := waitRIB(t, firstAdvertBound, w.d.Started, "node1's IPv6 subnet in FRR",
		w.rib("ipv6", lab.NodeIPv6, want, []netip.Prefix{lab.DefaultNode2.Subnet6}))
	t.Logf("daemon start -> FRR best path for %s: %v", want[0], took.Round(time.Millisecond))
	if err := w.frr.Established(lab.NodeIPv6); err != nil {
		t.Error(err)
	}
	best, err := w.frr.BestPaths("ipv6")
	if err != nil {
		t.Fatal(err)
	}
	if nh := best[want[0]].NextHop; nh != lab.NodeIPv6 {
		t.Errorf("FRR best path for %s: next hop %s, want %s", want[0], nh, lab.NodeIPv6)
	}
	p, err := w.d.Peer("tor6")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != model.StateEstablished || p.Address != lab.TorIPv6 {
		t.Errorf("ovnbgp peers: %+v", p)
	}
}

const md5Password = "e2e-md5-s3cret"

// TestMD5Dialing: ovnbgp dials FRR with the TCP MD5 password FRR expects.
func TestMD5Dialing(t *testing.T) {
	t.Parallel()
	tor := lab.DefaultTor()
	tor.Password = md5Password
	w := setup(t,
		&lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true, Password: md5Password}}},
		lab.DaemonConfig{Peers: []lab.Peer{tor}})
	waitRIB(t, generous, w.d.Started, "routes over the MD5 session", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
	if err := w.frr.Established(lab.NodeIPv4); err != nil {
		t.Error(err)
	}
	checkNoSecret(t, w.d, md5Password)
	checkListeners(t, w.lab, w.d) // listenPort -1, metrics off: no TCP listener at all
}

// TestMD5Passive: FRR dials ovnbgp, which listens on 179 in its namespace,
// with TCP MD5 on both sides.
func TestMD5Passive(t *testing.T) {
	t.Parallel()
	tor := lab.DefaultTor()
	tor.Password = md5Password
	tor.Passive = true
	w := setup(t,
		&lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Password: md5Password}}},
		lab.DaemonConfig{ListenPort: 179, Peers: []lab.Peer{tor}})
	waitRIB(t, generous, w.d.Started, "routes over the MD5 session FRR dialed", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
	ns, err := w.frr.Neighbors()
	if err != nil {
		t.Fatal(err)
	}
	n := ns[lab.NodeIPv4.String()]
	if n.State != "Established" {
		t.Errorf("FRR neighbor %s: %+v", lab.NodeIPv4, n)
	}
	if n.PortForeign != 179 {
		t.Errorf("FRR's session goes to node port %d, want 179 (FRR dialed the passive ovnbgp)", n.PortForeign)
	}
	checkNoSecret(t, w.d, md5Password)
	checkListeners(t, w.lab, w.d, "0.0.0.0:179", "[::]:179") // BGP only
}

// TestMD5WrongPassword: with a different password the session never comes
// up, and FRR's kernel drops ovnbgp's segments for their bad MD5 signature.
func TestMD5WrongPassword(t *testing.T) {
	t.Parallel()
	tor := lab.DefaultTor()
	tor.Password = "not-the-" + md5Password
	w := setup(t,
		&lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true, Password: md5Password}}},
		lab.DaemonConfig{Peers: []lab.Peer{tor}})
	lab.Consistently(t, 15*time.Second, 250*time.Millisecond, "no session with a wrong MD5 password", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		if err := w.frr.Established(lab.NodeIPv4); err == nil {
			return fmt.Errorf("FRR is Established with a wrong password")
		}
		if p, err := w.d.Peer("tor"); err == nil && p.State == model.StateEstablished {
			return fmt.Errorf("ovnbgp says established with a wrong password: %+v", p)
		}
		return nil
	})
	fails, err := w.lab.TCPExtCounter(w.lab.Tor, "TCPMD5Failure")
	if err != nil {
		t.Fatal(err)
	}
	if fails == 0 {
		t.Error("TcpExtTCPMD5Failure is 0 in the tor namespace: ovnbgp's SYNs never arrived with a (wrong) signature")
	}
	t.Logf("tor namespace TcpExtTCPMD5Failure = %d after 15 s", fails)
	if p, err := w.d.Peer("tor"); err != nil {
		t.Error(err)
	} else {
		t.Logf("ovnbgp peers: state %s, last error %q", p.State, p.LastError)
	}
	if best, err := w.bestFrom("ipv4", lab.NodeIPv4); err != nil || len(best) != 0 {
		t.Errorf("FRR best paths from %s = %v (%v), want none", lab.NodeIPv4, best, err)
	}
}

// checkNoSecret: the password appears in neither the CLI output nor the log.
func checkNoSecret(t *testing.T, d *lab.Daemon, secret string) {
	t.Helper()
	for _, args := range [][]string{{"peers", "-o", "json"}, {"peers"}, {"config", "show", "--running", "-o", "json"},
		{"--config", d.Config, "config", "show", "-o", "yaml"}, {"--config", d.Config, "config", "validate"}, {"status", "-o", "json"}} {
		out, err := d.CLI(args...)
		if err != nil {
			t.Error(err)
		}
		if strings.Contains(string(out), secret) {
			t.Errorf("ovnbgp %s prints the MD5 password", strings.Join(args, " "))
		}
	}
	if b, err := os.ReadFile(d.Log); err == nil && strings.Contains(string(b), secret) {
		t.Error("the daemon's log contains the MD5 password")
	}
	// Nor does the process show it: not in its arguments, not in its
	// environment (ps and /proc are readable by other users).
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", d.PID(), f))
		if err != nil {
			t.Errorf("read /proc/%d/%s: %v", d.PID(), f, err)
		} else if strings.Contains(string(b), secret) {
			t.Errorf("/proc/%d/%s holds the MD5 password", d.PID(), f)
		}
	}
}

// checkListeners fails the test unless the daemon's TCP listeners are
// exactly want ("*:179" style, from ss): no management port of its own, and
// never gobgp's gRPC API (50051), which would let anyone on the node
// reconfigure BGP.
func checkListeners(t *testing.T, l *lab.Lab, d *lab.Daemon, want ...string) {
	t.Helper()
	out, err := l.Exec(l.Node, "ss", "-Hltnp")
	if err != nil {
		t.Fatalf("ss: %v: %s", err, out)
	}
	var got []string
	pid := fmt.Sprintf("pid=%d,", d.PID())
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(line, pid) {
			continue
		}
		got = append(got, f[3])
		if strings.HasSuffix(f[3], ":50051") {
			t.Errorf("the daemon listens on gobgp's gRPC port: %s", line)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the daemon's TCP listeners are %v, want %v:\n%s", got, want, out)
	}
}

// TestNBOutage: while ovsdb-server is down the session and the routes stay
// (fail static) and the CLI answers; after it restarts with content changed
// offline, and then online, FRR converges.
func TestNBOutage(t *testing.T) {
	t.Parallel()
	w := setup(t, nil, lab.DaemonConfig{})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))

	pid := w.nb.PID()
	if err := w.nb.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ovsdb-server (pid %d) stopped", pid)
	lab.Consistently(t, 5*time.Second, 250*time.Millisecond, "session and routes while NB is down", func() error {
		if err := w.frr.Established(lab.NodeIPv4); err != nil {
			return err
		}
		if err := w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil)(); err != nil {
			return err
		}
		p, err := w.d.Peer("tor")
		if err != nil {
			return fmt.Errorf("ovnbgp peers while NB is down: %w", err)
		}
		if p.State != model.StateEstablished {
			return fmt.Errorf("ovnbgp peers: tor is %s", p.State)
		}
		return nil
	})

	// green is added to the database file while the server is down
	out, err := w.nb.Transact(`{"op":"insert","table":"Logical_Switch","row":{"name":"` + green.Switch() + `",` +
		`"other_config":["map",[["subnet","` + green.Subnet.String() + `"]]],` +
		`"external_ids":["map",[["k8s.ovn.org/network","green"],["k8s.ovn.org/topology","layer3"],["k8s.ovn.org/role","primary"]]]}}`)
	if err != nil {
		t.Fatalf("ovsdb-tool transact: %v: %s", err, out)
	}
	if err := w.nb.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	took := waitRIB(t, generous, restarted, "switch added while NB was down",
		w.rib("ipv4", lab.NodeIPv4, append([]netip.Prefix{green.Subnet}, nodeSubnets4...), nil))
	t.Logf("NB restart -> %s in FRR: %v", green.Subnet, took.Round(time.Millisecond))

	if err := w.nb.Add(red); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	took = waitRIB(t, generous, added, "switch added after NB restart",
		w.rib("ipv4", lab.NodeIPv4, []netip.Prefix{red.Subnet, green.Subnet}, nil))
	t.Logf("after restart: ovn-nbctl ls-add -> %s in FRR: %v", red.Subnet, took.Round(time.Millisecond))
}

// TestCLIMatchesFRR: `ovnbgp peers` and `routes advertised` agree with FRR.
func TestCLIMatchesFRR(t *testing.T) {
	t.Parallel()
	originated := netip.MustParsePrefix("203.0.113.0/24")
	tor := lab.DefaultTor()
	tor.Families = []string{"ipv4"}
	w := setup(t,
		&lab.FRRConfig{
			Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}},
			Originate: []netip.Prefix{originated},
		},
		lab.DaemonConfig{Peers: []lab.Peer{tor}})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))

	var last string
	_, err := lab.Poll(30*time.Second, 200*time.Millisecond, func() error {
		adverts, err := w.d.Advertised()
		if err != nil {
			return err
		}
		var cli []netip.Prefix
		for _, a := range adverts {
			if a.Peer == "tor" {
				cli = append(cli, a.Prefix)
			}
		}
		lab.SortPrefixes(cli)
		frr, err := w.bestFrom("ipv4", lab.NodeIPv4)
		if err != nil {
			return err
		}
		last = fmt.Sprintf("ovnbgp routes advertised (peer tor) = %v, FRR best paths from %s = %v", cli, lab.NodeIPv4, frr)
		if !slices.Equal(cli, frr) {
			return fmt.Errorf("%s", last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(last)

	adverts, err := w.d.Advertised()
	if err != nil {
		t.Fatal(err)
	}
	wantNet := map[netip.Prefix]string{lab.DefaultNode1.Subnet: model.DefaultNetwork, lab.BlueNode1.Subnet: "blue"}
	for _, a := range adverts {
		if want, ok := wantNet[a.Prefix]; ok && (a.Network != want || a.Rule != "pods" || a.Source == "") {
			t.Errorf("advertisement %+v: want network %q, rule pods, a source", a, want)
		}
	}

	var p model.PeerStatus
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "ovnbgp peers shows the session", func() error {
		var err error
		if p, err = w.d.Peer("tor"); err != nil {
			return err
		}
		if p.State != model.StateEstablished {
			return fmt.Errorf("tor is %s", p.State)
		}
		i := slices.IndexFunc(p.Families, func(f model.FamilyCounts) bool { return f.Family == "ipv4" })
		if i < 0 {
			return fmt.Errorf("no ipv4 counts: %+v", p)
		}
		if f := p.Families[i]; f.Advertised != len(nodeSubnets4) || f.Received < 1 {
			return fmt.Errorf("ipv4 counts %+v: want advertised %d, received >= 1 (%s)", f, len(nodeSubnets4), originated)
		}
		return nil
	})
	if p.Address != lab.TorIPv4 || p.ASN != 65001 || p.RouterID != lab.TorIPv4 || p.Since.IsZero() {
		t.Errorf("ovnbgp peers: %+v; want address and router ID %s, AS 65001, since set", p, lab.TorIPv4)
	}
	if p.LocalAddress.IsValid() && p.LocalAddress != lab.NodeIPv4 {
		t.Errorf("ovnbgp peers: local address %s, want %s", p.LocalAddress, lab.NodeIPv4)
	}
	if err := w.frr.Established(lab.NodeIPv4); err != nil {
		t.Error(err)
	}
	t.Logf("ovnbgp peers: %+v", p)
}

// TestSIGTERM: the daemon exits 0 within a few seconds of SIGTERM.
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	w := setup(t, nil, lab.DaemonConfig{})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
	code, took, err := w.d.Stop(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM -> exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if took > stopBound {
		t.Errorf("exit took %v after SIGTERM, want <= %v", took, stopBound)
	}
	if pids, err := w.lab.PIDs(w.lab.Node); err != nil || len(pids) != 0 {
		t.Errorf("processes left in the node namespace after the daemon exited: %v %v", pids, err)
	}
	lab.Eventually(t, 20*time.Second, 100*time.Millisecond, "FRR sees the session end", func() error {
		if err := w.frr.Established(lab.NodeIPv4); err == nil {
			return fmt.Errorf("FRR still Established")
		}
		return nil
	})
}
