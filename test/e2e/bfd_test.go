package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// bfdPrefixes are what FRR announces in the BFD tests.
var bfdPrefixes = []string{"10.99.1.0/24", "10.99.2.0/24", "10.99.3.0/24"}

// bfdImportRule imports FRR's routes into GR_node1 and kernel table 100.
const bfdImportRule = `  - name: tor-routes
    peers: [tor]
    network: default
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
    targets: {ovn: true, kernel: {table: 100}}`

// startBFDWorld starts NB, FRR (with bfdd when frrBFD) announcing
// bfdPrefixes and ovnbgp with one peer, tor, with BFD at 300 ms x 3, and
// waits for the session and the imported routes.
func startBFDWorld(t *testing.T, frrBFD bool) *importWorld {
	t.Helper()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables is needed to cut the link without taking it down: %v (scripts/test-deps.sh installs it)", err)
	}
	w := &importWorld{l: lab.New(t)}
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	w.nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	var orig []netip.Prefix
	for _, p := range bfdPrefixes {
		orig = append(orig, netip.MustParsePrefix(p))
	}
	w.frr = w.l.StartFRR(lab.FRRConfig{
		Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, BFD: frrBFD}},
		Originate: orig, GracefulRestart: true,
	})
	w.d = w.l.StartDaemon(w.nb, lab.DaemonConfig{
		GracefulRestart: true, ListenPort: 179, Import: bfdImportRule,
		Peers: []lab.Peer{{Name: "tor", Address: lab.TorIPv4, ASN: 65001, Families: []string{"ipv4"}, BFD: true}},
	})
	w.waitEstablished(t, "tor")
	for _, p := range bfdPrefixes {
		w.waitInstalled(t, "FRR's route "+p+" imported into OVN and the kernel", p, lab.TorIPv4.String())
	}
	return w
}

// bfdUp waits until both ends say the BFD session is up.
func (w *importWorld) bfdUp(t *testing.T, what string) {
	t.Helper()
	lab.Eventually(t, 30*time.Second, 50*time.Millisecond, what, func() error {
		p, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		if p.BFD == nil || p.BFD.State != model.BFDUp {
			return fmt.Errorf("ovnbgp: bfd %+v (session %s)", p.BFD, p.State)
		}
		n, err := w.frrNeighbor()
		if err != nil {
			return err
		}
		if n.BFD.Status != "Up" {
			return fmt.Errorf("FRR: bfd %q", n.BFD.Status)
		}
		return nil
	})
}

func (w *importWorld) frrNeighbor() (lab.Neighbor, error) {
	ns, err := w.frr.Neighbors()
	if err != nil {
		return lab.Neighbor{}, err
	}
	n, ok := ns[lab.NodeIPv4.String()]
	if !ok {
		return n, fmt.Errorf("FRR has no neighbor %s: %v", lab.NodeIPv4, ns)
	}
	return n, nil
}

// cut drops everything on the tor's end of the link, both ways, with the
// interfaces up (taking them down would make the kernel drop the routes by
// itself); heal undoes it.
func (w *importWorld) cut(t *testing.T, on bool) {
	t.Helper()
	op := "-A"
	if !on {
		op = "-D"
	}
	for _, rule := range [][]string{{"INPUT", "-i"}, {"OUTPUT", "-o"}} {
		if out, err := w.l.Exec(w.l.Tor, "iptables", "-w", op, rule[0], rule[1], lab.TorLink, "-j", "DROP"); err != nil {
			t.Fatalf("iptables %s %s: %v: %s", op, rule[0], err, out)
		}
	}
}

// sessionStable checks, for a while after BFD came up (or would have),
// that the session never flapped: FRR counts one connection established and
// ovnbgp's session is the one it was.
func (w *importWorld) sessionStable(t *testing.T, since time.Time, conns int) {
	t.Helper()
	// Nothing to wait on for "no flap": watch it for 3 s (BFD at
	// 300 ms x 3 detects in 0.9 s; the flap came within 2 s of BFD up).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		p, err := w.d.Peer("tor")
		if err != nil {
			t.Fatal(err)
		}
		if p.State != model.StateEstablished || !p.Since.Equal(since) {
			t.Fatalf("the session flapped: state %s since %v (was established since %v), last error %q", p.State, p.Since, since, p.LastError)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n, err := w.frrNeighbor()
	if err != nil {
		t.Fatal(err)
	}
	if n.ConnectionsEstablished != conns {
		t.Fatalf("FRR counts %d connections established, want %d (last reset: %s)", n.ConnectionsEstablished, conns, n.LastReset)
	}
}

// gone waits until none of bfdPrefixes is in OVN (NB) or in the kernel and
// returns how long each took from start.
func (w *importWorld) gone(t *testing.T, start time.Time) (ovn, kernel time.Duration) {
	t.Helper()
	lab.Eventually(t, 30*time.Second, 10*time.Millisecond, "learned routes gone from OVN and the kernel", func() error {
		if ovn == 0 {
			rows, err := w.ownedRows()
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				ovn = time.Since(start)
			}
		}
		if kernel == 0 {
			lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
			if err != nil {
				return err
			}
			if len(lines) == 0 {
				kernel = time.Since(start)
			}
		}
		if ovn == 0 || kernel == 0 {
			return fmt.Errorf("still imported (ovn gone after %v, kernel after %v)", ovn, kernel)
		}
		return nil
	})
	return ovn, kernel
}

// BFD at 300 ms x 3 against FRR's bfdd: its first bring-up does not flap
// the session; a cut link (interfaces up, every packet dropped) takes the
// learned routes out of OVN and the kernel within the BFD detection time,
// well before the 9 s hold timer (whose expiry, with graceful restart,
// would even keep them stale for 120 s), and `peers` says BFD did it;
// the healed link brings the session, BFD and the routes back, again
// without a flap.
func TestBFD(t *testing.T) {
	t.Parallel()
	w := startBFDWorld(t, true)
	w.bfdUp(t, "BFD up at both ends")
	p, err := w.d.Peer("tor")
	if err != nil {
		t.Fatal(err)
	}
	if p.BFD.DetectTimeMs != 900 || !p.BFD.Running {
		t.Fatalf("peers bfd = %+v, want running with a detection time of 900 ms", p.BFD)
	}
	w.sessionStable(t, p.Since, 1)
	out, err := w.d.CLI("peers")
	if err != nil || !strings.Contains(out2s(out), "BFD") || !strings.Contains(out2s(out), " up ") {
		t.Fatalf("ovnbgp peers shows no BFD column with up: %v\n%s", err, out)
	}

	start := time.Now()
	w.cut(t, true)
	ovn, kernel := w.gone(t, start)
	t.Logf("BFD failover: cut -> last learned route gone from OVN NB in %v, from the kernel in %v (300 ms x 3)", ovn.Round(time.Millisecond), kernel.Round(time.Millisecond))
	p, err = w.d.Peer("tor")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.LastError, "BFD down") || p.BFD == nil || p.BFD.State == model.BFDUp {
		t.Fatalf("peers does not say BFD took the session down: state %s, bfd %+v, last error %q", p.State, p.BFD, p.LastError)
	}
	if hold := 9 * time.Second; max(ovn, kernel) >= hold {
		t.Fatalf("routes went after %v, %v: not before the %v hold timer", ovn, kernel, hold)
	}

	healed := time.Now()
	w.cut(t, false)
	w.waitEstablished(t, "tor")
	for _, pfx := range bfdPrefixes {
		w.waitInstalled(t, "route "+pfx+" imported again after the link healed", pfx, lab.TorIPv4.String())
	}
	t.Logf("healed link: session and imports back in %v", time.Since(healed).Round(time.Millisecond))
	w.bfdUp(t, "BFD up again after the link healed")
	p, err = w.d.Peer("tor")
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.frrNeighbor()
	if err != nil {
		t.Fatal(err)
	}
	before := n.ConnectionsEstablished
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) { // the reconnect's BFD bring-up: no flap either
		q, err := w.d.Peer("tor")
		if err != nil {
			t.Fatal(err)
		}
		if q.State != model.StateEstablished || !q.Since.Equal(p.Since) {
			t.Fatalf("the session flapped after the reconnect: %s since %v, last error %q", q.State, q.Since, q.LastError)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n, err = w.frrNeighbor(); err != nil || n.ConnectionsEstablished != before {
		t.Fatalf("FRR counts %d connections established, was %d (%v)", n.ConnectionsEstablished, before, err)
	}
}

// BFD on our side only (FRR has no bfd for us, bfdd does not run): BFD
// never comes up, and a BFD that never came up never resets the session.
func TestBFDOneSided(t *testing.T) {
	t.Parallel()
	w := startBFDWorld(t, false)
	var since time.Time
	lab.Eventually(t, 30*time.Second, 50*time.Millisecond, "our BFD running", func() error {
		p, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		if p.BFD == nil || !p.BFD.Running {
			return fmt.Errorf("bfd %+v", p.BFD)
		}
		since = p.Since
		return nil
	})
	w.sessionStable(t, since, 1)
	p, err := w.d.Peer("tor")
	if err != nil {
		t.Fatal(err)
	}
	if p.BFD.State == model.BFDUp {
		t.Fatalf("BFD up without a BFD peer: %+v", p.BFD)
	}
	for _, pfx := range bfdPrefixes {
		if err := w.checkKernel(pfx, lab.TorIPv4.String()); err != nil {
			t.Fatal(err)
		}
	}
}

func out2s(b []byte) string { return string(b) }

// The peer's BFD goes AdminDown (FRR: `shutdown` in its BFD profile): RFC
// 5882 3.2 says the BGP session must not be taken down, though gobgp's BFD
// resets it on AdminDown; ovnbgp keeps it, shows BFD down and says the peer
// signalled it. BFD comes back up when the peer enables it again, still
// without a session reset.
func TestBFDAdminDown(t *testing.T) {
	t.Parallel()
	w := startBFDWorld(t, true)
	w.bfdUp(t, "BFD up at both ends")
	p, err := w.d.Peer("tor")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.frr.ConfigDaemon("bfdd", "bfd", "profile lab", "shutdown"); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 15*time.Second, 50*time.Millisecond, "ovnbgp sees the peer's BFD AdminDown", func() error {
		q, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		if q.BFD == nil || q.BFD.State == model.BFDUp || !strings.Contains(q.LastError, "AdminDown") {
			return fmt.Errorf("bfd %+v, last error %q, session %s", q.BFD, q.LastError, q.State)
		}
		return nil
	})
	w.sessionStable(t, p.Since, 1)
	for _, pfx := range bfdPrefixes {
		if err := w.checkKernel(pfx, lab.TorIPv4.String()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.frr.ConfigDaemon("bfdd", "bfd", "profile lab", "no shutdown"); err != nil {
		t.Fatal(err)
	}
	w.bfdUp(t, "BFD up again once the peer enables it")
	w.sessionStable(t, p.Since, 1)

	// Reload with BFD off, then on: `plan --config` predicts what happens.
	conns := 1
	for _, on := range []bool{false, true} {
		next := w.d.Cfg
		next.Peers = slices.Clone(next.Peers)
		next.Peers[0].BFD = on
		text, err := next.Render()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(w.d.Dir, fmt.Sprintf("bfd-%v.yaml", on))
		if err := lab.WriteFileAtomic(path, []byte(text)); err != nil {
			t.Fatal(err)
		}
		pc, err := w.d.Plan("--config", path)
		if err != nil {
			t.Fatal(err)
		}
		if on && len(pc.SessionResets) != 0 {
			t.Fatalf("plan --config with bfd on predicts resets %+v, want none", pc.SessionResets)
		}
		if !on && (len(pc.SessionResets) != 1 || !strings.Contains(pc.SessionResets[0].Why, "a peer still running BFD for this node resets it")) {
			t.Fatalf("plan --config with bfd off predicts resets %+v, want tor's, by the peer's BFD", pc.SessionResets)
		}
		if err := w.d.Reload(next); err != nil {
			t.Fatal(err)
		}
		if on {
			w.bfdUp(t, "BFD up after a reload turned it on")
			w.sessionStable(t, p.Since, conns)
			continue
		}
		// FRR still runs BFD for us: it sees BFD Down (gobgp stops
		// without AdminDown) and resets the session, as predicted.
		lab.Eventually(t, 15*time.Second, 50*time.Millisecond, "FRR resets the session when our BFD stops", func() error {
			q, err := w.d.Peer("tor")
			if err != nil {
				return err
			}
			if q.BFD != nil || !strings.Contains(q.LastError, "received NOTIFICATION 6/10 Cease / BFD Down") || q.Since.Equal(p.Since) {
				return fmt.Errorf("bfd %+v, last error %q, session %s since %v", q.BFD, q.LastError, q.State, q.Since)
			}
			return nil
		})
		w.waitEstablished(t, "tor")
		p, err = w.d.Peer("tor")
		if err != nil {
			t.Fatal(err)
		}
		n, err := w.frrNeighbor()
		if err != nil {
			t.Fatal(err)
		}
		conns = n.ConnectionsEstablished
	}
	n, err := w.frrNeighbor()
	if err != nil || n.ConnectionsEstablished != conns {
		t.Fatalf("FRR counts %d connections established, want %d (%v)", n.ConnectionsEstablished, conns, err)
	}
}
