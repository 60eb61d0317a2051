package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Graceful restart and reload, end to end (issue 8 item 5).

// TestReloadPrediction: for each config change of a table, `ovnbgp plan
// --config NEW -o json` (the CLI sends the file's text) predicts the
// sessions a reload resets; `ovnbgp reload` then applies it and says which
// it reset; FRR's neighbor counters (connections established and dropped)
// say which were really reset. Prediction, the reload's answer and FRR
// agree per peer, exactly, and match the table.
func TestReloadPrediction(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	src, torB := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.21")
	l.AddNodeAddress(src)
	l.AddTorAddress(torB)
	nb := l.StartNB()
	nb.PopulateOVNK()
	frr := l.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{
		{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
		{Address: src, ASN: 65010, Passive: true, DisableConnectedCheck: true},
	}})
	tor := lab.DefaultTor()
	tor.Families = []string{"ipv4"}
	torb := lab.Peer{Name: "tor-b", Address: torB, ASN: 65001, SourceAddress: src, Families: []string{"ipv4"}}
	vips := `  - {name: pods, kind: podNetwork, networks: ["*"]}
  - {name: vips, kind: loadBalancerIP}`
	d := l.StartDaemon(nb, lab.DaemonConfig{ServiceCIDRs: advServiceCIDRs, Peers: []lab.Peer{tor, torb}, Advertise: vips})
	// FRR's neighbor of each of our peers: the session's address on our side.
	frrNeighbor := map[string]string{"tor": lab.NodeIPv4.String(), "tor-b": src.String()}

	// marker announces a new VIP and waits until FRR has it from every
	// peer in peers: one TCP stream per session, so a reset sent before
	// it (a NOTIFICATION, a closed connection) has reached FRR by then.
	n := 0
	marker := func(what string, peers []string) {
		t.Helper()
		n++
		vip := fmt.Sprintf("203.0.113.%d", 100+n)
		createServiceLB(t, nb, "", fmt.Sprintf("ns1/marker%d", n), "tcp", map[string]string{vip + ":80": "10.128.0.5:8080"})
		want := netip.MustParsePrefix(vip + "/32")
		for _, p := range peers {
			lab.Eventually(t, generous, 100*time.Millisecond, what+": FRR has "+vip+" from "+p, func() error {
				if err := d.Exited(); err != nil {
					return err
				}
				// Any valid path: FRR picks one best of the two sessions.
				rib, err := frr.RIB("ipv4")
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(rib[want], func(x lab.Path) bool { return x.Valid && x.PeerID == frrNeighbor[p] }) {
					return fmt.Errorf("FRR's paths for %s: %+v", want, rib[want])
				}
				return nil
			})
		}
	}
	neighbors := func() map[string]lab.Neighbor {
		t.Helper()
		ns, err := frr.Neighbors()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]lab.Neighbor{}
		for peer, addr := range frrNeighbor {
			out[peer] = ns[addr]
		}
		return out
	}
	configured := func(cfg lab.DaemonConfig) []string {
		var names []string
		for _, p := range cfg.Peers {
			names = append(names, p.Name)
		}
		return names
	}
	marker("start", []string{"tor", "tor-b"})

	base := d.Cfg
	withPeers := func(edit func(tor, torb *lab.Peer) []lab.Peer) lab.DaemonConfig {
		c := base
		a, b := tor, torb
		c.Peers = edit(&a, &b)
		return c
	}
	both := func(a, b *lab.Peer) []lab.Peer { return []lab.Peer{*a, *b} }
	steps := []struct {
		name string
		cfg  lab.DaemonConfig
		// reset are the peers whose session must be reset: the table's
		// own expectation, which the prediction must match too.
		reset []string
	}{
		{"advertise rule changed", func() lab.DaemonConfig {
			c := withPeers(both)
			c.Advertise = `  - {name: pods, kind: podNetwork, networks: ["default"]}
  - {name: vips, kind: loadBalancerIP, communities: ["65001:300"]}`
			return c
		}(), nil},
		{"tor holdTime (in the OPEN)", withPeers(func(a, b *lab.Peer) []lab.Peer {
			a.HoldTime, a.KeepaliveTime = 30*time.Second, 10*time.Second
			return []lab.Peer{*a, *b}
		}), []string{"tor"}},
		{"tor-b connectRetry and maxPrefixes (not in the OPEN)", withPeers(func(a, b *lab.Peer) []lab.Peer {
			a.HoldTime, a.KeepaliveTime = 30*time.Second, 10*time.Second
			b.ConnectRetry, b.MaxPrefixes = 3*time.Second, 5000
			return []lab.Peer{*a, *b}
		}), nil},
		{"tor-b removed", withPeers(func(a, b *lab.Peer) []lab.Peer {
			a.HoldTime, a.KeepaliveTime = 30*time.Second, 10*time.Second
			return []lab.Peer{*a}
		}), []string{"tor-b"}},
		{"tor-b added", withPeers(func(a, b *lab.Peer) []lab.Peer {
			a.HoldTime, a.KeepaliveTime = 30*time.Second, 10*time.Second
			return []lab.Peer{*a, *b}
		}), nil},
		{"bgp.routerID (the speaker restarts)", func() lab.DaemonConfig {
			c := withPeers(func(a, b *lab.Peer) []lab.Peer {
				a.HoldTime, a.KeepaliveTime = 30*time.Second, 10*time.Second
				return []lab.Peer{*a, *b}
			})
			c.RouterID = src
			return c
		}(), []string{"tor", "tor-b"}},
	}
	for i, s := range steps {
		old := configured(d.Cfg)
		text, err := s.cfg.Render()
		if err != nil {
			t.Fatal(err)
		}
		// The new file where only the CLI reads it: the daemon gets its
		// text (a sandboxed daemon does not see the caller's /tmp).
		newPath := filepath.Join(l.Mkdir(fmt.Sprintf("plan%d", i)), "new.yaml")
		if err := os.WriteFile(newPath, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		pc, err := d.Plan("--config", newPath)
		if err != nil {
			t.Fatalf("%s: plan --config: %v", s.name, err)
		}
		predicted := resetPeers(pc.SessionResets)
		before := neighbors()

		res, err := d.ReloadCLI(s.cfg)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !res.Applied {
			t.Fatalf("%s: reload refused: %s", s.name, res.Error)
		}
		answered := resetPeers(res.SessionResets)

		// Wait for the event that proves each session's fate: the marker
		// on every peer still configured; a removed peer's session down.
		now := configured(s.cfg)
		marker(s.name, now)
		for _, p := range old {
			if slices.Contains(now, p) {
				continue
			}
			lab.Eventually(t, generous, 100*time.Millisecond, s.name+": FRR sees "+p+"'s session end", func() error {
				if st := neighbors()[p].State; st == "Established" {
					return fmt.Errorf("%s still Established", p)
				}
				return nil
			})
		}
		after := neighbors()
		var actual []string
		for _, p := range old {
			b, a := before[p], after[p]
			if !slices.Contains(now, p) || a.ConnectionsDropped != b.ConnectionsDropped || a.ConnectionsEstablished != b.ConnectionsEstablished {
				actual = append(actual, p)
			}
		}
		slices.Sort(actual)
		t.Logf("%s: predicted %v, reload answered %v, FRR saw %v reset (added %v)", s.name, pc.SessionResets, res.SessionResets, actual, res.Added)
		if !slices.Equal(predicted, actual) || !slices.Equal(answered, actual) || !slices.Equal(actual, s.reset) {
			t.Errorf("%s: plan --config predicted resets %v, reload answered %v, FRR saw %v; want %v",
				s.name, predicted, answered, actual, s.reset)
		}
		for _, p := range now {
			if !slices.Contains(old, p) && !slices.Contains(res.Added, p) {
				t.Errorf("%s: reload did not report %s added: %v", s.name, p, res.Added)
			}
		}
	}
}

// resetPeers are the peers of resets, sorted.
func resetPeers(resets []config.SessionReset) []string {
	var out []string
	for _, r := range resets {
		out = append(out, r.Peer)
	}
	slices.Sort(out)
	return out
}

// TestGracefulRestartImport: graceful restart on both sides, and import
// rules putting FRR's (and ExaBGP's, ECMP) routes into GR_node1 and kernel
// table 100. From the moment they are imported, `ip monitor route` in the
// node namespace and an NB monitor of Logical_Router_Static_Route record
// every change. ovnbgp is restarted twice, after SIGTERM and after
// SIGKILL: each time FRR keeps the node's pod subnets stale while it is
// down and has them fresh after (never withdrawn), and afterwards the
// imports are exactly the desired set; over both restarts the monitors
// saw no deletion, insertion or modification of an imported row or
// kernel route. (Fail static: stop or crash leaves the imports in place,
// and the restarted daemon re-adopts them and deletes nothing before End-of-RIB.)
func TestGracefulRestartImport(t *testing.T) {
	t.Parallel()
	v4a, v4b, v6 := "10.99.1.0/24", "10.99.2.0/24", "2001:db8:99:1::/64"
	w := startImportWorld(t, importOpts{
		frrOriginate: []netip.Prefix{netip.MustParsePrefix(v4a), netip.MustParsePrefix(v4b), netip.MustParsePrefix(v6)},
		cfg:          lab.DaemonConfig{Import: importRule, DeferralTime: 10 * time.Minute, RestartTime: 120 * time.Second},
	})
	tor, tor6, exa := lab.TorIPv4.String(), lab.TorIPv6.String(), lab.ExaIPv4.String()
	w.exa.MustSend("announce route " + v4a + " next-hop " + exa)
	desired := map[string][]string{v4a: {tor, exa}, v4b: {tor}, v6: {tor6}}
	imported := []string{v4a, v4b, v6}
	importsAreDesired := func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		for prefix, nhs := range desired {
			if err := w.checkRows(prefix, nhs...); err != nil {
				return err
			}
			if err := w.checkKernel(prefix, nhs...); err != nil {
				return err
			}
		}
		rows, err := w.ownedRows()
		if err != nil {
			return err
		}
		if len(rows) != 4 {
			return fmt.Errorf("GR_node1 has %d owned rows, want 4: %+v", len(rows), rows)
		}
		imp, err := w.d.Imported()
		if err != nil {
			return err
		}
		for _, r := range imp.OVN {
			if r.State != api.ImportInstalled {
				return fmt.Errorf("routes imported: %+v", r)
			}
		}
		for _, r := range imp.Kernel {
			if r.State != api.ImportInstalled {
				return fmt.Errorf("routes imported: %+v", r)
			}
		}
		return nil
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "imports installed", importsAreDesired)

	// FRR's view of the pod subnets the node advertises.
	ours := nodeSubnets4
	fromNode := func(stale bool) func() error {
		return func() error {
			best, err := w.frr.BestPaths("ipv4")
			if err != nil {
				return err
			}
			for _, p := range ours {
				b, ok := best[p]
				if !ok || b.PeerID != lab.NodeIPv4.String() {
					return fmt.Errorf("FRR has no path for %s from %s: %+v", p, lab.NodeIPv4, b)
				}
				if b.Stale != stale {
					return fmt.Errorf("FRR's path for %s: stale %v, want %v", p, b.Stale, stale)
				}
			}
			return nil
		}
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "FRR has the node's subnets, fresh, graceful restart negotiated", func() error {
		if err := fromNode(false)(); err != nil {
			return err
		}
		ns, err := w.frr.Neighbors()
		if err != nil {
			return err
		}
		if c := ns[lab.NodeIPv4.String()].GRCapability(); c != "advertisedAndReceived" {
			return fmt.Errorf("graceful restart capability %q, want advertisedAndReceived", c)
		}
		return nil
	})

	kmon := w.l.MonitorRoutes(w.l.Node)
	nbmon := w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if sig == syscall.SIGTERM {
			code, took, err := w.d.Stop(15 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code != 0 {
				t.Fatalf("exit code %d after SIGTERM, want 0", code)
			}
			t.Logf("SIGTERM -> exit after %v", took.Round(time.Millisecond))
		} else {
			if err := w.d.Signal(sig); err != nil {
				t.Fatal(err)
			}
			lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "ovnbgp dead after SIGKILL", func() error {
				if w.d.Exited() == nil {
					return fmt.Errorf("pid %d still running", w.d.PID())
				}
				return nil
			})
		}
		lab.Eventually(t, generous, 20*time.Millisecond, sig.String()+": FRR keeps the node's subnets, stale", func() error {
			if err := w.frr.Established(lab.NodeIPv4); err == nil {
				return fmt.Errorf("FRR still Established with %s", lab.NodeIPv4)
			}
			return fromNode(true)()
		})
		if err := w.d.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted := w.d.Started
		// Until fresh, a missing path is a withdrawal: fail at once.
		if _, err := lab.Poll(generous, 20*time.Millisecond, func() error {
			if err := w.d.Exited(); err != nil {
				return err
			}
			if err := fromNode(true)(); err == nil {
				return fmt.Errorf("still stale")
			}
			if err := fromNode(false)(); err != nil && !strings.Contains(err.Error(), "stale") {
				t.Fatalf("%s: %v after the restart: %v", sig, time.Since(restarted).Round(time.Millisecond), err)
			} else if err != nil {
				return err
			}
			return w.frr.Established(lab.NodeIPv4)
		}); err != nil {
			t.Fatalf("%s: the node's subnets not refreshed %v after the restart: %v", sig, time.Since(restarted).Round(time.Millisecond), err)
		}
		t.Logf("%s: restart -> FRR has fresh paths after %v", sig, time.Since(restarted).Round(time.Millisecond))
		w.waitEstablished(t, "tor", "tor6", "exa", "exa6")
		lab.Eventually(t, generous, 100*time.Millisecond, sig.String()+": imports are the desired set after the restart", importsAreDesired)
		st, err := w.d.Status()
		if err != nil {
			t.Fatal(err)
		}
		if st.Import == nil || st.Import.Held != 0 {
			t.Errorf("%s: status import %+v after End-of-RIB, want nothing held", sig, st.Import)
		}
	}

	// The route monitor is alive: it sees a canary route come and go
	// (an empty log must mean "no change", not "no monitor").
	canary := "198.51.100.99"
	if out, err := w.l.Exec(w.l.Node, "ip", "route", "add", canary+"/32", "dev", "lo", "table", "250"); err != nil {
		t.Fatalf("canary route: %v: %s", err, out)
	}
	if out, err := w.l.Exec(w.l.Node, "ip", "route", "del", canary+"/32", "dev", "lo", "table", "250"); err != nil {
		t.Fatalf("canary route: %v: %s", err, out)
	}
	lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "ip monitor route saw the canary deleted", func() error {
		if !strings.Contains(kmon.Output(), "Deleted "+canary) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	routes, rows := kmon.Stop(), nbmon.Stop()
	t.Logf("ip monitor route (node namespace) over both restarts:\n%s\nNB monitor of Logical_Router_Static_Route:\n%s", routes, rows)
	for _, line := range strings.Split(routes, "\n") {
		f := strings.Fields(line)
		for _, p := range imported {
			if slices.Contains(f, p) {
				t.Errorf("ip monitor route saw an imported route change across the restarts: %q", line)
			}
		}
	}
	for _, line := range strings.Split(rows, "\n") {
		for _, p := range imported {
			if strings.Contains(line, p) && !strings.Contains(line, ",initial,") {
				t.Errorf("the NB monitor saw an imported row change across the restarts: %q", line)
			}
		}
	}
	if n := strings.Count(rows, ",initial,"); n < 4 {
		t.Errorf("the NB monitor printed %d initial rows, want the 4 imported ones at least:\n%s", n, rows)
	}
}
