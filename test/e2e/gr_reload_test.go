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
	"github.com/ovnbgp/ovnbgp/model"
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

var _ = api.ReloadResult{}
var _ = model.StateEstablished
var _ = strings.Contains
var _ = syscall.SIGKILL
