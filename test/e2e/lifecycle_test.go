package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The daemon's lifecycle seen from FRR: graceful restart, SIGHUP reloads,
// a dead peer, an OVN Northbound that is not there yet.

const (
	// withdrawBound: without graceful restart FRR must drop our routes on
	// the NOTIFICATION, well before its 9 s hold timer could.
	withdrawBound = 3 * time.Second
	// staleHold is how long FRR must keep our routes while we are down.
	staleHold = 5 * time.Second
)

// neighbor is FRR's view of its session with the node.
func (w *world) neighbor(t *testing.T) lab.Neighbor {
	t.Helper()
	ns, err := w.frr.Neighbors()
	if err != nil {
		t.Fatal(err)
	}
	n, ok := ns[lab.NodeIPv4.String()]
	if !ok {
		t.Fatalf("FRR has no neighbor %s: %+v", lab.NodeIPv4, ns)
	}
	return n
}

// paths returns FRR's best path for each of prefixes learned from the node,
// or an error naming the first one missing.
func (w *world) paths(prefixes []netip.Prefix) (map[netip.Prefix]lab.Path, error) {
	best, err := w.frr.BestPaths("ipv4")
	if err != nil {
		return nil, err
	}
	res := map[netip.Prefix]lab.Path{}
	for _, p := range prefixes {
		b, ok := best[p]
		if !ok || b.PeerID != lab.NodeIPv4.String() {
			return nil, fmt.Errorf("FRR has no best path for %s from %s (best paths: %v)", p, lab.NodeIPv4, best)
		}
		res[p] = b
	}
	return res, nil
}

// staleness is a condition on FRR's paths for prefixes: present, and all
// stale (want true) or all fresh.
func (w *world) staleness(prefixes []netip.Prefix, stale bool) func() error {
	return func() error {
		ps, err := w.paths(prefixes)
		if err != nil {
			return err
		}
		for p, path := range ps {
			if path.Stale != stale {
				return fmt.Errorf("FRR path for %s: stale=%v, want %v", p, path.Stale, stale)
			}
		}
		return nil
	}
}

// deletedRoutes lists the lines of `ip monitor route` output that delete a
// route to one of prefixes.
func deletedRoutes(monitor string, prefixes []netip.Prefix) []string {
	var res []string
	for _, line := range strings.Split(monitor, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Deleted" {
			continue
		}
		for _, p := range prefixes {
			if slices.Contains(f, p.String()) {
				res = append(res, line)
			}
		}
	}
	return res
}

// TestGracefulRestart: with graceful restart on both sides, SIGTERM sends no
// NOTIFICATION, FRR keeps the node's routes (stale) while the daemon is
// down, and when it starts again they are refreshed: FRR never withdraws
// them, not from BGP and not from its kernel.
func TestGracefulRestart(t *testing.T) {
	t.Parallel()
	w := setup(t,
		&lab.FRRConfig{GracefulRestart: true, Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}},
		lab.DaemonConfig{GracefulRestart: true, RestartTime: 120 * time.Second})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs))
	lab.Eventually(t, generous, 100*time.Millisecond, "fresh paths and graceful restart negotiated", func() error {
		if err := w.staleness(nodeSubnets4, false)(); err != nil {
			return err
		}
		n := w.neighbor(t)
		if c := n.GRCapability(); c != "advertisedAndReceived" {
			return fmt.Errorf("FRR neighbor %s: graceful restart capability %q, want advertisedAndReceived", lab.NodeIPv4, c)
		}
		return kernelHas(w.lab, nodeSubnets4)
	})
	before := w.neighbor(t)
	// Every change of the kernel routes zebra installs in the tor namespace,
	// from now until the routes are fresh again.
	mon := w.lab.MonitorRoutes(w.lab.Tor)

	code, took, err := w.d.Stop(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("SIGTERM -> exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	if took > stopBound {
		t.Errorf("exit took %v after SIGTERM, want <= %v", took, stopBound)
	}

	lab.Eventually(t, generous, 20*time.Millisecond, "FRR marks the node's routes stale", func() error {
		if err := w.frr.Established(lab.NodeIPv4); err == nil {
			return fmt.Errorf("FRR still Established")
		}
		return w.staleness(nodeSubnets4, true)()
	})
	t.Logf("daemon exit -> FRR paths stale: %v", time.Since(stopped).Round(time.Millisecond))
	lab.Consistently(t, staleHold, 100*time.Millisecond, "FRR keeps the node's routes (stale) while the daemon is down", func() error {
		if err := w.staleness(nodeSubnets4, true)(); err != nil {
			return err
		}
		if slices.ContainsFunc(notOurs, func(p netip.Prefix) bool { _, err := w.paths([]netip.Prefix{p}); return err == nil }) {
			return fmt.Errorf("FRR has a path the node never advertised")
		}
		return nil
	})
	down := w.neighbor(t)
	t.Logf("FRR while the daemon is down (%v after exit): state %s, last reset %q, restart timer %d ms, notifications received %d",
		time.Since(stopped).Round(time.Millisecond), down.State, down.LastReset, down.GracefulRestartInfo.RestartTimerMsecs, down.Messages.NotificationsRecv)
	if down.Messages.NotificationsRecv != before.Messages.NotificationsRecv {
		t.Errorf("FRR received %d NOTIFICATION(s) on SIGTERM with graceful restart, want none",
			down.Messages.NotificationsRecv-before.Messages.NotificationsRecv)
	}
	if down.GracefulRestartInfo.RestartTimerMsecs <= 0 {
		t.Errorf("FRR runs no graceful restart timer for %s (last reset %q)", lab.NodeIPv4, down.LastReset)
	}

	// Same config, same binary: the routes are refreshed and never go away.
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := w.d.Started
	var fresh time.Duration
	_, err = lab.Poll(generous, 20*time.Millisecond, func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		ps, err := w.paths(nodeSubnets4)
		if err != nil {
			// not retried: a missing path is a withdrawal
			t.Fatalf("%v after the restart: %v", time.Since(restarted).Round(time.Millisecond), err)
		}
		for p, path := range ps {
			if path.Stale {
				return fmt.Errorf("FRR path for %s still stale", p)
			}
		}
		fresh = time.Since(restarted)
		return w.frr.Established(lab.NodeIPv4)
	})
	if err != nil {
		t.Fatalf("routes not refreshed %v after the restart: %v", time.Since(restarted).Round(time.Millisecond), err)
	}
	t.Logf("daemon restart -> FRR Established with fresh paths: %v (down for %v)",
		fresh.Round(time.Millisecond), restarted.Sub(stopped).Round(time.Millisecond))
	lab.Consistently(t, 3*time.Second, 100*time.Millisecond, "fresh routes after the restart", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		return w.staleness(nodeSubnets4, false)()
	})

	after := w.neighbor(t)
	if after.ConnectionsEstablished != before.ConnectionsEstablished+1 {
		t.Errorf("FRR connections established %d -> %d, want one more (the restarted daemon's)",
			before.ConnectionsEstablished, after.ConnectionsEstablished)
	}
	if after.Messages.NotificationsRecv != before.Messages.NotificationsRecv {
		t.Errorf("FRR received %d NOTIFICATION(s) across the restart, want none",
			after.Messages.NotificationsRecv-before.Messages.NotificationsRecv)
	}
	out := mon.Stop()
	if del := deletedRoutes(out, nodeSubnets4); len(del) > 0 {
		t.Errorf("FRR removed the node's routes from the tor's kernel during the restart:\n%s", strings.Join(del, "\n"))
	}
	if err := kernelHas(w.lab, nodeSubnets4); err != nil {
		t.Error(err)
	}
	t.Logf("tor kernel route changes from SIGTERM to fresh paths (ip monitor route): %q", strings.TrimSpace(out))
}

// kernelHas checks that zebra installed BGP routes for prefixes in the tor
// namespace's kernel.
func kernelHas(l *lab.Lab, prefixes []netip.Prefix) error {
	out, err := l.Exec(l.Tor, "ip", "-4", "route", "show", "proto", "bgp")
	if err != nil {
		return fmt.Errorf("ip route show proto bgp: %v: %s", err, out)
	}
	for _, p := range prefixes {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, p.String()+" ") }) {
			return fmt.Errorf("tor kernel has no BGP route for %s: %q", p, out)
		}
	}
	return nil
}

// TestNoGracefulRestart is TestGracefulRestart's counter-test: FRR can do
// graceful restart but the daemon has it off, so SIGTERM sends a Cease
// NOTIFICATION and FRR withdraws the routes at once, not after its hold
// time.
func TestNoGracefulRestart(t *testing.T) {
	t.Parallel()
	w := setup(t,
		&lab.FRRConfig{GracefulRestart: true, Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}},
		lab.DaemonConfig{})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
	lab.Eventually(t, generous, 100*time.Millisecond, "routes in the tor's kernel", func() error { return kernelHas(w.lab, nodeSubnets4) })
	before := w.neighbor(t)
	if c := before.GRCapability(); c != "advertised" {
		t.Errorf("FRR neighbor %s: graceful restart capability %q, want advertised (by FRR only)", lab.NodeIPv4, c)
	}
	// The positive control of TestGracefulRestart's route monitor.
	mon := w.lab.MonitorRoutes(w.lab.Tor)

	code, took, err := w.d.Stop(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	stopped := time.Now()
	gone, err := lab.Poll(generous, 20*time.Millisecond, w.frrRIB("ipv4", lab.NodeIPv4, nil, nodeSubnets4))
	if err != nil {
		t.Fatal(err)
	}
	gone += took
	t.Logf("SIGTERM -> exit %d after %v; SIGTERM -> FRR withdrew %v: %v", code, took.Round(time.Millisecond), nodeSubnets4, gone.Round(time.Millisecond))
	if gone > withdrawBound {
		t.Errorf("FRR withdrew the routes %v after SIGTERM, want <= %v (hold time is 9 s)", gone.Round(time.Millisecond), withdrawBound)
	}
	n := w.neighbor(t)
	t.Logf("FRR after the exit (%v): state %s, last reset %q (%q), notifications received %d (before %d), restart timer %d ms",
		time.Since(stopped).Round(time.Millisecond), n.State, n.LastReset, n.LastNotification,
		n.Messages.NotificationsRecv, before.Messages.NotificationsRecv, n.GracefulRestartInfo.RestartTimerMsecs)
	if n.Messages.NotificationsRecv <= before.Messages.NotificationsRecv {
		t.Errorf("FRR received no NOTIFICATION on SIGTERM, want a Cease")
	}
	if !strings.Contains(strings.ToLower(n.LastReset), "notification received") || !strings.HasPrefix(n.LastNotification, "Cease") {
		t.Errorf("FRR's last reset for %s: %q (%q), want a Cease NOTIFICATION received", lab.NodeIPv4, n.LastReset, n.LastNotification)
	}
	if n.GracefulRestartInfo.RestartTimerMsecs != 0 {
		t.Errorf("FRR runs a graceful restart timer (%d ms) for a neighbor that did not negotiate it", n.GracefulRestartInfo.RestartTimerMsecs)
	}
	lab.Eventually(t, generous, 20*time.Millisecond, "routes gone from the tor's kernel", func() error {
		if err := kernelHas(w.lab, nodeSubnets4[:1]); err == nil {
			return fmt.Errorf("tor kernel still has %s", nodeSubnets4[0])
		}
		return nil
	})
	if del := deletedRoutes(mon.Stop(), nodeSubnets4); len(del) != len(nodeSubnets4) {
		t.Errorf("ip monitor route in the tor namespace saw %d deletions of %v, want %d: %q", len(del), nodeSubnets4, len(nodeSubnets4), del)
	}
	if best, err := w.frr.BestPaths("ipv4"); err != nil {
		t.Error(err)
	} else {
		for _, p := range nodeSubnets4 {
			if path, ok := best[p]; ok {
				t.Errorf("FRR still has %+v", path)
			}
		}
	}
}

// TestSIGHUPReload: (a) a config that does not validate is refused, the
// running one kept: session and routes stay, `ovnbgp status` names the bad
// key; (b) a valid one that narrows the advertise rule to the default network
// withdraws the UDN's subnet without resetting the session.
func TestSIGHUPReload(t *testing.T) {
	t.Parallel()
	w := setup(t, nil, lab.DaemonConfig{})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
	lab.Eventually(t, generous, 100*time.Millisecond, "ovnbgp peers: tor established", func() error {
		p, err := w.d.Peer("tor")
		if err == nil && p.State != model.StateEstablished {
			err = fmt.Errorf("tor is %s", p.State)
		}
		return err
	})
	before := w.neighbor(t)
	good, err := w.d.Cfg.Render()
	if err != nil {
		t.Fatal(err)
	}

	// (a) a broken config
	bad := strings.Replace(good, `address: "`+lab.TorIPv4.String()+`"`, `address: "192.0.2.300"`, 1)
	if bad == good {
		t.Fatalf("peer address not found in the config:\n%s", good)
	}
	if err := w.d.ReloadText(bad); err != nil {
		t.Fatal(err)
	}
	hup := time.Now()
	const badKey = "bgp.peers[0].address"
	lab.Eventually(t, generous, 100*time.Millisecond, "ovnbgp status shows the config error", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		st, err := w.d.Status()
		if err != nil {
			return err
		}
		if !strings.Contains(st.ConfigError, badKey) {
			return fmt.Errorf("status configError = %q, want it to name %s", st.ConfigError, badKey)
		}
		t.Logf("SIGHUP (bad config) -> status configError %q: %v", st.ConfigError, time.Since(hup).Round(time.Millisecond))
		return nil
	})
	lab.Consistently(t, 3*time.Second, 200*time.Millisecond, "session and routes after a refused reload", func() error {
		if err := w.frr.Established(lab.NodeIPv4); err != nil {
			return err
		}
		if err := w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil)(); err != nil {
			return err
		}
		p, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		if p.State != model.StateEstablished || p.Address != lab.TorIPv4 {
			return fmt.Errorf("ovnbgp peers: %+v", p)
		}
		return nil
	})
	if lines, err := w.d.LogLines("reload failed; keeping the running config"); err != nil || len(lines) != 1 {
		t.Errorf("daemon log: %d 'reload failed' lines (%v), want 1", len(lines), err)
	}
	checkSameSession(t, before, w.neighbor(t), "refused reload")

	// (b) the advertise rule narrowed from "*" to the default network
	cfg := w.d.Cfg
	cfg.Advertise = `  - {name: pods, kind: podNetwork, networks: ["default"]}`
	if err := w.d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	hup = time.Now()
	only := []netip.Prefix{lab.DefaultNode1.Subnet}
	took := waitRIB(t, generous, hup, "UDN subnet withdrawn after the reload",
		w.rib("ipv4", lab.NodeIPv4, only, []netip.Prefix{lab.BlueNode1.Subnet}))
	t.Logf("SIGHUP (advertise default only) -> FRR withdrew %s: %v", lab.BlueNode1.Subnet, took.Round(time.Millisecond))
	lab.Consistently(t, 3*time.Second, 200*time.Millisecond, "only the default network's subnet", func() error {
		got, err := w.bestFrom("ipv4", lab.NodeIPv4)
		if err != nil {
			return err
		}
		if !slices.Equal(got, only) {
			return fmt.Errorf("FRR best paths from %s = %v, want %v", lab.NodeIPv4, got, only)
		}
		return w.frr.Established(lab.NodeIPv4)
	})
	st, err := w.d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.ConfigError != "" {
		t.Errorf("status configError = %q after a valid reload, want none", st.ConfigError)
	}
	adverts, err := w.d.Advertised()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range adverts {
		if a.Prefix == lab.BlueNode1.Subnet {
			t.Errorf("ovnbgp routes advertised still lists %+v", a)
		}
	}
	if lines, err := w.d.LogLines("config reloaded"); err != nil || len(lines) != 1 {
		t.Errorf("daemon log: %d 'config reloaded' lines (%v), want 1", len(lines), err)
	}
	checkSameSession(t, before, w.neighbor(t), "reload of the advertise rule")
}

// checkSameSession fails the test if FRR's session with the node was reset
// between before and after.
func checkSameSession(t *testing.T, before, after lab.Neighbor, what string) {
	t.Helper()
	// FRR computes the epoch as now - uptime: it may move by a second.
	if after.State != "Established" || after.ConnectionsEstablished != before.ConnectionsEstablished ||
		after.ConnectionsDropped != before.ConnectionsDropped || after.UpSince < before.UpSince-1 || after.UpSince > before.UpSince+1 {
		t.Errorf("%s reset the session: FRR neighbor %s was %s, established %d times, dropped %d, up since %d; now %s, %d, %d, %d (last reset %q)",
			what, lab.NodeIPv4, before.State, before.ConnectionsEstablished, before.ConnectionsDropped, before.UpSince,
			after.State, after.ConnectionsEstablished, after.ConnectionsDropped, after.UpSince, after.LastReset)
	}
}

// TestPeerDown: a second peer at an address of the tor's where nothing
// listens does not keep the daemon from advertising to FRR, shows as not
// established, and the daemon keeps running (and dialing it).
func TestPeerDown(t *testing.T) {
	t.Parallel()
	deadAddr := netip.MustParseAddr("198.51.100.1")
	dead := lab.Peer{Name: "dead", Address: deadAddr, ASN: 65002, Port: 1790}
	w := &world{lab: lab.New(t)}
	w.lab.AddTorAddress(deadAddr)
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}})
	rsts0, err := w.lab.TCPCounter(w.lab.Tor, "OutRsts")
	if err != nil {
		t.Fatal(err)
	}
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{Peers: []lab.Peer{lab.DefaultTor(), dead}})
	took := waitRIB(t, firstAdvertBound, w.d.Started, "node1 subnets in FRR with a dead second peer",
		w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs))
	t.Logf("daemon start -> FRR best paths: %v", took.Round(time.Millisecond))
	lab.Eventually(t, generous, 100*time.Millisecond, "ovnbgp peers: tor established", func() error {
		p, err := w.d.Peer("tor")
		if err == nil && p.State != model.StateEstablished {
			err = fmt.Errorf("tor is %s", p.State)
		}
		return err
	})
	before := w.neighbor(t)

	const hold = 15 * time.Second
	var deadSeen model.PeerStatus
	lab.Consistently(t, hold, 250*time.Millisecond, "daemon, session and routes with a dead peer", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		if err := w.frr.Established(lab.NodeIPv4); err != nil {
			return err
		}
		if err := w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil)(); err != nil {
			return err
		}
		peers, err := w.d.Peers()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(peers, func(p model.PeerStatus) bool { return p.Name == "dead" })
		j := slices.IndexFunc(peers, func(p model.PeerStatus) bool { return p.Name == "tor" })
		if i < 0 || j < 0 {
			return fmt.Errorf("ovnbgp peers lacks tor or dead: %+v", peers)
		}
		if peers[i].State == model.StateEstablished || peers[i].Address != deadAddr {
			return fmt.Errorf("ovnbgp peers: dead peer %+v", peers[i])
		}
		if peers[j].State != model.StateEstablished {
			return fmt.Errorf("ovnbgp peers: tor %+v", peers[j])
		}
		deadSeen = peers[i]
		return nil
	})
	checkSameSession(t, before, w.neighbor(t), "the dead peer")
	t.Logf("ovnbgp peers after %v: dead = state %s, last error %q", hold, deadSeen.State, deadSeen.LastError)
	// The daemon kept dialing: the tor's kernel refused each SYN with a RST.
	rsts, err := w.lab.TCPCounter(w.lab.Tor, "OutRsts")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tor namespace Tcp OutRsts: %d after %v (connect retry 2 s)", rsts-rsts0, time.Since(w.d.Started).Round(time.Second))
	if rsts-rsts0 < 2 {
		t.Errorf("tor namespace sent %d RSTs: the daemon did not keep dialing %s:1790", rsts-rsts0, deadAddr)
	}
	if adverts, err := w.d.Advertised(); err != nil {
		t.Error(err)
	} else {
		t.Logf("ovnbgp routes advertised: %d entries", len(adverts))
	}
}

// TestNBUnreachableAtStart: the daemon starts while nothing listens on the
// NB socket: its control socket answers, status says NB is not connected and
// why, the BGP session comes up advertising nothing; when ovsdb-server starts
// with the topology, the routes appear. The daemon logs the disconnect once,
// not once per retry.
func TestNBUnreachableAtStart(t *testing.T) {
	t.Parallel()
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.NewNB() // created, not started: nothing at w.nb.Sock
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{})

	lab.Eventually(t, generous, 100*time.Millisecond, "status: northbound not connected, with an error", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		st, err := w.d.Status()
		if err != nil {
			return err
		}
		if st.NB.Connected || st.NB.Synced || st.NB.LastError == "" {
			return fmt.Errorf("status northbound %+v: want not connected, not synced, an error", st.NB)
		}
		t.Logf("%v after start: status northbound: endpoint %s, connected %v, error %q, attempts %d",
			time.Since(w.d.Started).Round(time.Millisecond), st.NB.Endpoint, st.NB.Connected, st.NB.LastError, st.NB.Attempts)
		return nil
	})
	lab.Eventually(t, generous, 100*time.Millisecond, "BGP session without NB", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		return w.frr.Established(lab.NodeIPv4)
	})
	t.Logf("daemon start -> FRR Established without NB: %v", time.Since(w.d.Started).Round(time.Millisecond))
	lab.Consistently(t, 5*time.Second, 200*time.Millisecond, "nothing advertised without NB", func() error {
		if err := w.frr.Established(lab.NodeIPv4); err != nil {
			return err
		}
		got, err := w.bestFrom("ipv4", lab.NodeIPv4)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("FRR best paths from %s = %v without NB", lab.NodeIPv4, got)
		}
		return nil
	})
	st, err := w.d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.NB.Attempts < 3 {
		t.Errorf("status northbound attempts = %d after %v, want several retries", st.NB.Attempts, time.Since(w.d.Started).Round(time.Second))
	}

	if err := w.nb.Start(); err != nil {
		t.Fatal(err)
	}
	nbUp := time.Now()
	if err := w.nb.Init(); err != nil {
		t.Fatal(err)
	}
	w.nb.PopulateOVNK()
	populated := time.Now()
	took := waitRIB(t, generous, nbUp, "routes after NB came up", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs))
	t.Logf("ovsdb-server up -> FRR best paths: %v (topology written %v after it came up; NB attempts before: %d, down %v)",
		took.Round(time.Millisecond), populated.Sub(nbUp).Round(time.Millisecond), st.NB.Attempts, nbUp.Sub(w.d.Started).Round(time.Millisecond))
	lab.Eventually(t, generous, 100*time.Millisecond, "status: northbound connected", func() error {
		st, err := w.d.Status()
		if err != nil {
			return err
		}
		if !st.NB.Connected || !st.NB.Synced {
			return fmt.Errorf("status northbound %+v", st.NB)
		}
		return nil
	})

	disc, err := w.d.LogLines("nb disconnected")
	if err != nil {
		t.Fatal(err)
	}
	failed, _ := w.d.LogLines("nb connect failed")
	conn, _ := w.d.LogLines("nb connected")
	t.Logf("daemon log: %d 'nb disconnected', %d 'nb connect failed' (debug), %d 'nb connected'", len(disc), len(failed), len(conn))
	if len(disc) == 0 || len(disc) > 2 {
		t.Errorf("daemon log has %d 'nb disconnected' lines, want 1 or 2 (logged once, not per retry): %v", len(disc), disc)
	}
	if len(failed) < 2 {
		t.Errorf("daemon log has %d 'nb connect failed' lines: the daemon did not retry?", len(failed))
	}
	if len(conn) != 1 {
		t.Errorf("daemon log has %d 'nb connected' lines, want 1", len(conn))
	}
}

// TestGracefulRestartNBDown: the daemon restarts (graceful restart) while
// OVN NB is unreachable. Until its first plan it must not open sessions (an
// empty table and End-of-RIB would tell FRR to drop the stale routes), so
// FRR keeps the node's routes stale; when NB is back they are refreshed,
// never withdrawn.
func TestGracefulRestartNBDown(t *testing.T) {
	t.Parallel()
	w := setup(t,
		&lab.FRRConfig{GracefulRestart: true, Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}},
		lab.DaemonConfig{GracefulRestart: true, RestartTime: 120 * time.Second})
	waitRIB(t, generous, w.d.Started, "initial convergence", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs))
	lab.Eventually(t, generous, 100*time.Millisecond, "fresh paths, graceful restart negotiated", func() error {
		if c := w.neighbor(t).GRCapability(); c != "advertisedAndReceived" {
			return fmt.Errorf("graceful restart capability %q", c)
		}
		return w.staleness(nodeSubnets4, false)()
	})
	if code, _, err := w.d.Stop(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit %d, %v", code, err)
	}
	lab.Eventually(t, generous, 20*time.Millisecond, "FRR marks the node's routes stale", w.staleness(nodeSubnets4, true))
	if err := w.nb.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := w.d.Started
	// The daemon waits up to 15 s for NB before it opens sessions anyway.
	const nbAway = 8 * time.Second
	lab.Consistently(t, nbAway, 50*time.Millisecond, "FRR keeps the stale routes while the restarted daemon has no NB", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		return w.staleness(nodeSubnets4, true)()
	})
	if err := w.nb.Start(); err != nil {
		t.Fatal(err)
	}
	nbUp := time.Now()
	_, err := lab.Poll(generous, 20*time.Millisecond, func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		if err := w.staleness(nodeSubnets4, false)(); err != nil {
			if _, err2 := w.paths(nodeSubnets4); err2 != nil {
				t.Fatalf("withdrawn %v after NB came back: %v", time.Since(nbUp).Round(time.Millisecond), err2)
			}
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon restart -> NB up %v later -> fresh paths after %v", nbUp.Sub(restarted).Round(time.Millisecond), time.Since(nbUp).Round(time.Millisecond))
}
