package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Route import end to end: FRR and ExaBGP announce, the real daemon writes
// OVN NB (a real ovsdb-server) and kernel table 100 of the node namespace.

const importTable = 100

// importWorld is the world of the import tests: NB with the OVN-Kubernetes
// topology and GR_node1's external port on the tor link, FRR (peers tor and
// tor6) and ExaBGP (peer exa, passive on our side) in the tor namespace.
type importWorld struct {
	l   *lab.Lab
	nb  *lab.NB
	frr *lab.FRR
	exa *lab.ExaBGP
	d   *lab.Daemon
}

type importOpts struct {
	frrOriginate []netip.Prefix
	noFRR        bool
	cfg          lab.DaemonConfig // Import etc.; peers and listen port are filled in
}

// importPeers are the daemon's peers of the import tests.
func importPeers() []lab.Peer {
	return []lab.Peer{
		{Name: "tor", Address: lab.TorIPv4, ASN: 65001, Families: []string{"ipv4"}},
		{Name: "tor6", Address: lab.TorIPv6, ASN: 65001, Families: []string{"ipv6"}},
		{Name: "exa", Address: lab.ExaIPv4, ASN: 65002, Passive: true, Families: []string{"ipv4"}},
		{Name: "exa6", Address: lab.ExaIPv6, ASN: 65002, Passive: true, Families: []string{"ipv6"}},
	}
}

func startImportWorld(t *testing.T, o importOpts) *importWorld {
	w := &importWorld{l: lab.New(t)}
	w.l.AddImportLink()
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	w.nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	if !o.noFRR {
		w.frr = w.l.StartFRR(lab.FRRConfig{
			Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010}, {Address: lab.NodeIPv6, ASN: 65010}},
			Originate: o.frrOriginate, GracefulRestart: true,
		})
	}
	cfg := o.cfg
	// graceful restart on both sides: peers send End-of-RIB, without which
	// fail static holds every delete for deferralTime after the start
	cfg.GracefulRestart = true
	cfg.ListenPort = 179 // ExaBGP dials
	cfg.Peers = importPeers()
	w.d = w.l.StartDaemon(w.nb, cfg)
	w.exa = w.l.StartExaBGP(lab.ExaConfig{IPv6: true, GracefulRestart: true})
	w.waitEstablished(t, "exa", "exa6")
	if !o.noFRR {
		w.waitEstablished(t, "tor", "tor6")
	}
	return w
}

func (w *importWorld) waitEstablished(t *testing.T, peers ...string) {
	t.Helper()
	for _, name := range peers {
		lab.Eventually(t, 45*time.Second, 100*time.Millisecond, "peer "+name+" established with End-of-RIB", func() error {
			p, err := w.d.Peer(name)
			if err != nil {
				return err
			}
			if p.State != model.StateEstablished || !p.EndOfRIB {
				return fmt.Errorf("state %s (%s), End-of-RIB %v", p.State, p.LastError, p.EndOfRIB)
			}
			return nil
		})
	}
}

// importRule accepts 10.99.0.0/16 and 2001:db8:99::/48 up to /24 and /64
// from every peer, into GR_node1 and kernel table 100.
const importRule = `  - name: tor-routes
    peers: [tor, tor6, exa, exa6]
    network: default
    maxRoutes: 10
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
      - {prefix: "2001:db8:99::/48", maxLength: 64}
    targets: {ovn: true, kernel: {table: 100}}`

// ovnRows returns GR_node1's static routes for prefix.
func (w *importWorld) ovnRows(prefix string) ([]lab.StaticRoute, error) {
	rows, err := w.nb.StaticRoutes("GR_node1")
	if err != nil {
		return nil, err
	}
	var res []lab.StaticRoute
	for _, r := range rows {
		if r.Prefix == prefix {
			res = append(res, r)
		}
	}
	return res, nil
}

// ownedRows are GR_node1's rows that ovnbgp owns.
func (w *importWorld) ownedRows() ([]lab.StaticRoute, error) {
	rows, err := w.nb.StaticRoutes("GR_node1")
	if err != nil {
		return nil, err
	}
	var res []lab.StaticRoute
	for _, r := range rows {
		if r.ExternalID["ovnbgp.io/owner"] != "" {
			res = append(res, r)
		}
	}
	return res, nil
}

// checkRows checks that prefix has exactly one owned row per next hop in
// nextHops, with ovnbgp's markers and no OVN-Kubernetes key.
func (w *importWorld) checkRows(prefix string, nextHops ...string) error {
	rows, err := w.ovnRows(prefix)
	if err != nil {
		return err
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.NextHop)
		if r.ExternalID["ovnbgp.io/owner"] != "node1" || r.ExternalID["ovnbgp.io/rule"] != "tor-routes" || r.OutputPort != "rtoe-GR_node1" {
			return fmt.Errorf("row %+v: want owner node1, rule tor-routes, output_port rtoe-GR_node1", r)
		}
		for k := range r.ExternalID {
			if strings.HasPrefix(k, "k8s.ovn.org/") {
				return fmt.Errorf("row %+v carries OVN-Kubernetes key %s", r, k)
			}
		}
	}
	slices.Sort(got)
	want := slices.Clone(nextHops)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("GR_node1 rows for %s have next hops %v, want %v", prefix, got, want)
	}
	return nil
}

// checkKernel checks that table 100 holds prefix with protocol 200 through
// exactly nextHops (none: no route).
func (w *importWorld) checkKernel(prefix string, nextHops ...string) error {
	lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
	if err != nil {
		return err
	}
	var line string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && (f[0] == prefix || f[1] == prefix) {
			line = l
		}
	}
	if len(nextHops) == 0 {
		if line != "" {
			return fmt.Errorf("table %d still has %q", importTable, line)
		}
		return nil
	}
	if line == "" {
		return fmt.Errorf("table %d proto 200 has no %s: %q", importTable, prefix, lines)
	}
	if n := strings.Count(line, " via "); n != len(nextHops) {
		return fmt.Errorf("route %q has %d next hops, want %v", line, n, nextHops)
	}
	for _, nh := range nextHops {
		if !strings.Contains(line, "via "+nh+" dev "+lab.NodeLink) {
			return fmt.Errorf("route %q lacks next hop %s dev %s", line, nh, lab.NodeLink)
		}
	}
	return nil
}

func (w *importWorld) waitInstalled(t *testing.T, what, prefix string, nextHops ...string) {
	t.Helper()
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, what, func() error {
		if err := w.checkRows(prefix, nextHops...); err != nil {
			return err
		}
		return w.checkKernel(prefix, nextHops...)
	})
}

// checkCLI checks that `routes imported`, `routes learned --rejected`,
// `explain` and `peers` agree with what is installed for prefix.
func (w *importWorld) checkCLI(prefix string, nextHops []string, imported map[string]int) error {
	imp, err := w.d.Imported()
	if err != nil {
		return err
	}
	var ovnHops []string
	for _, r := range imp.OVN {
		if r.Prefix.String() == prefix {
			if r.State != api.ImportInstalled || r.Router != "GR_node1" || r.Rule != "tor-routes" {
				return fmt.Errorf("routes imported: %+v", r)
			}
			ovnHops = append(ovnHops, r.NextHop.String())
		}
	}
	slices.Sort(ovnHops)
	want := slices.Sorted(slices.Values(nextHops))
	if !slices.Equal(ovnHops, want) {
		return fmt.Errorf("routes imported lists OVN next hops %v for %s, want %v", ovnHops, prefix, want)
	}
	var kHops []string
	for _, r := range imp.Kernel {
		if r.Prefix.String() == prefix {
			if r.State != api.ImportInstalled || r.Table != importTable {
				return fmt.Errorf("routes imported: %+v", r)
			}
			for _, nh := range r.NextHops {
				kHops = append(kHops, nh.Addr.String())
			}
		}
	}
	slices.Sort(kHops)
	if !slices.Equal(kHops, want) {
		return fmt.Errorf("routes imported lists kernel next hops %v for %s, want %v", kHops, prefix, want)
	}
	rej, err := w.d.Learned(true)
	if err != nil {
		return err
	}
	for _, p := range rej {
		if p.Prefix.String() == prefix {
			return fmt.Errorf("routes learned --rejected lists %+v", p)
		}
	}
	e, err := w.d.Explain(prefix)
	if err != nil {
		return err
	}
	var eHops []string
	for _, r := range e.OVN {
		eHops = append(eHops, r.NextHop.String())
	}
	slices.Sort(eHops)
	if !slices.Equal(eHops, want) {
		return fmt.Errorf("explain %s: OVN next hops %v, want %v: %s", prefix, eHops, want, strings.Join(e.Summary, "; "))
	}
	for _, lp := range e.Learned {
		if lp.Prefix.String() == prefix && !lp.Accepted {
			return fmt.Errorf("explain %s: path not accepted: %+v", prefix, lp)
		}
	}
	peers, err := w.d.Peers()
	if err != nil {
		return err
	}
	for _, p := range peers {
		if want, ok := imported[p.Name]; ok && p.Imported != want {
			return fmt.Errorf("peers: %s imported %d, want %d", p.Name, p.Imported, want)
		}
	}
	return nil
}

// Accepted routes land in OVN (rows on GR_node1 with ovnbgp's markers) and
// in kernel table 100 (protocol 200); the same prefix from two peers is ECMP
// (two rows, one multipath route); withdraws remove them; the CLI agrees.
func TestImportFRR(t *testing.T) {
	t.Parallel()
	v4, v6 := "10.99.1.0/24", "2001:db8:99:1::/64"
	w := startImportWorld(t, importOpts{
		frrOriginate: []netip.Prefix{netip.MustParsePrefix(v4), netip.MustParsePrefix(v6)},
		cfg:          lab.DaemonConfig{Import: importRule},
	})
	torV4, torV6 := lab.TorIPv4.String(), lab.TorIPv6.String()
	exaV4, exaV6 := lab.ExaIPv4.String(), lab.ExaIPv6.String()

	// FRR alone
	w.waitInstalled(t, "FRR's IPv4 route installed", v4, torV4)
	w.waitInstalled(t, "FRR's IPv6 route installed", v6, torV6)
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "CLI agrees (FRR alone)", func() error {
		if err := w.checkCLI(v4, []string{torV4}, map[string]int{"tor": 1, "tor6": 1, "exa": 0, "exa6": 0}); err != nil {
			return err
		}
		return w.checkCLI(v6, []string{torV6}, nil)
	})

	// ECMP: ExaBGP announces the same prefixes with its own next hops
	w.exa.MustSend("announce route "+v4+" next-hop "+exaV4, "announce route "+v6+" next-hop "+exaV6)
	w.waitInstalled(t, "IPv4 ECMP from tor and exa", v4, torV4, exaV4)
	w.waitInstalled(t, "IPv6 ECMP from tor6 and exa", v6, torV6, exaV6)
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "CLI agrees (ECMP)", func() error {
		if err := w.checkCLI(v4, []string{torV4, exaV4}, map[string]int{"tor": 1, "tor6": 1, "exa": 1, "exa6": 1}); err != nil {
			return err
		}
		return w.checkCLI(v6, []string{torV6, exaV6}, nil)
	})

	// FRR withdraws: exa's next hops stay
	if err := w.frr.Config("router bgp 65001", "address-family ipv4 unicast", "no network "+v4,
		"exit-address-family", "address-family ipv6 unicast", "no network "+v6); err != nil {
		t.Fatal(err)
	}
	w.waitInstalled(t, "IPv4 route via exa only after FRR's withdraw", v4, exaV4)
	w.waitInstalled(t, "IPv6 route via exa only after FRR's withdraw", v6, exaV6)
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "CLI agrees (exa only)", func() error {
		if err := w.checkCLI(v4, []string{exaV4}, map[string]int{"tor": 0, "tor6": 0, "exa": 1, "exa6": 1}); err != nil {
			return err
		}
		return w.checkCLI(v6, []string{exaV6}, nil)
	})

	// ExaBGP withdraws too: nothing left
	w.exa.MustSend("withdraw route "+v4+" next-hop "+exaV4, "withdraw route "+v6+" next-hop "+exaV6)
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "every imported route removed", func() error {
		if rows, err := w.ownedRows(); err != nil || len(rows) > 0 {
			return fmt.Errorf("owned rows left: %+v (%v)", rows, err)
		}
		if err := w.checkKernel(v4); err != nil {
			return err
		}
		return w.checkKernel(v6)
	})
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "CLI agrees (nothing imported)", func() error {
		imp, err := w.d.Imported()
		if err != nil {
			return err
		}
		if len(imp.OVN)+len(imp.Kernel) > 0 {
			return fmt.Errorf("routes imported still lists %+v", imp)
		}
		return w.checkCLI(v4, nil, map[string]int{"tor": 0, "tor6": 0, "exa": 0, "exa6": 0})
	})
}
