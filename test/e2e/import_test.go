package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
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
	// exaASN is ExaBGP's AS and the daemon's exa and exa6 peers' (0:
	// 65002).
	exaASN uint32
	// before runs after NB and the links are set up, before the daemon
	// starts.
	before func(w *importWorld)
	cfg    lab.DaemonConfig // Import etc.; peers and listen port are filled in
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
	if o.before != nil {
		o.before(w)
	}
	cfg := o.cfg
	// graceful restart on both sides: peers send End-of-RIB, without which
	// fail static holds every delete for deferralTime after the start
	cfg.GracefulRestart = true
	cfg.ListenPort = 179 // ExaBGP dials
	cfg.Peers = importPeers()
	if o.noFRR {
		cfg.Peers = cfg.Peers[2:]
	}
	for i := range cfg.Peers {
		if strings.HasPrefix(cfg.Peers[i].Name, "exa") && o.exaASN != 0 {
			cfg.Peers[i].ASN = o.exaASN
		}
	}
	w.d = w.l.StartDaemon(w.nb, cfg)
	w.exa = w.l.StartExaBGP(lab.ExaConfig{IPv6: true, GracefulRestart: true, ASN: o.exaASN})
	w.waitEstablished(t, "exa", "exa6")
	if o.noFRR {
		return w
	}
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

// hostileRules: "legit" takes 10.99.0.0/16 up to /24 (at most 2 routes per
// peer) and 2001:db8:99::/48 up to /64; "wide" has accept entries over
// every protected range, so that a protected prefix is rejected as
// protected, not for want of an accept entry, and one that matches the
// default route without allowDefaultRoute.
const hostileRules = `  - name: legit
    peers: [exa, exa6]
    network: default
    maxRoutes: 2
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
      - {prefix: "2001:db8:99::/48", maxLength: 64}
    targets: {ovn: true, kernel: {table: 100}}
  - name: wide
    peers: [exa, exa6]
    network: default
    accept:
      - {prefix: 0.0.0.0/0, maxLength: 1}
      - {prefix: 10.128.0.0/14, maxLength: 32}
      - {prefix: 172.16.0.0/12, maxLength: 32}
      - {prefix: 100.64.0.0/10, maxLength: 32}
      - {prefix: 169.254.0.0/16, maxLength: 32}
      - {prefix: 203.0.113.0/24, maxLength: 32}
      - {prefix: "fd00::/8", maxLength: 128}
    targets: {ovn: true, kernel: {table: 100}}`

// Every protection rule gets a hostile announcement from ExaBGP: nothing of
// it is imported, `routes learned --rejected` gives each its reason, and
// OVN and the kernel end up holding only the legitimate routes. The import
// cap raises the alarm in `peers` and the session stays up.
func TestImportHostile(t *testing.T) {
	t.Parallel()
	w := startImportWorld(t, importOpts{noFRR: true, cfg: lab.DaemonConfig{Import: hostileRules}})
	exa, exa6 := lab.ExaIPv4.String(), lab.ExaIPv6.String()
	// a legitimate route first, installed, so that the cap keeps it
	w.exa.MustSend("announce route 10.99.1.0/24 next-hop " + exa)
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "legitimate route installed", func() error {
		if err := w.checkRowsRule("10.99.1.0/24", "legit", exa); err != nil {
			return err
		}
		return w.checkKernel("10.99.1.0/24", exa)
	})

	cases := []struct {
		prefix, announce, reason string
	}{
		{"10.128.0.0/23", "announce route 10.128.0.0/23 next-hop " + exa, "10.128.0.0/23 is protected: pod subnet"},
		{"10.128.0.128/25", "announce route 10.128.0.128/25 next-hop " + exa, "is inside protected 10.128.0.0/23: pod subnet"},
		// a raw unknown optional transitive attribute changes nothing
		{"10.128.0.64/26", "announce route 10.128.0.64/26 next-hop " + exa + " attribute [ 0xf0 0xc0 0xdeadbeef ]", "is inside protected 10.128.0.0/23: pod subnet"},
		{"172.30.5.0/24", "announce route 172.30.5.0/24 next-hop " + exa, "is inside protected 172.30.0.0/16: cluster.serviceCIDRs"},
		{"100.64.7.0/24", "announce route 100.64.7.0/24 next-hop " + exa, "is inside protected 100.64.0.0/16: join"},
		{"100.88.7.0/24", "announce route 100.88.7.0/24 next-hop " + exa, "is inside protected 100.88.0.0/16: default transit subnet"},
		{"169.254.7.0/24", "announce route 169.254.7.0/24 next-hop " + exa, "is inside protected 169.254.0.0/17: default masquerade subnet"},
		{"203.0.113.3/32", "announce route 203.0.113.3/32 next-hop " + exa, "203.0.113.3/32 is protected: address of peer exa"},
		{"0.0.0.0/0", "announce route 0.0.0.0/0 next-hop " + exa, "is the default route and rule wide does not set allowDefaultRoute"},
		{"192.168.7.0/24", "announce route 192.168.7.0/24 next-hop " + exa, "no accept entry matches 192.168.7.0/24"},
		{"10.99.40.0/28", "announce route 10.99.40.0/28 next-hop " + exa, "no accept entry matches 10.99.40.0/28"},
		{"10.99.11.0/24", "announce route 10.99.11.0/24 next-hop 203.0.113.1", "next hop 203.0.113.1 of 10.99.11.0/24 is local"},
		{"10.99.13.0/24", "announce route 10.99.13.0/24 next-hop 10.128.0.5", "next hop 10.128.0.5 of 10.99.13.0/24 is inside protected 10.128.0.0/23"},
		{"10.99.14.0/24", "announce route 10.99.14.0/24 next-hop 198.18.5.5", "next hop 198.18.5.5 of 10.99.14.0/24 is not on-link through peer exa"},
		{"2001:db8:99:5::/64", "announce route 2001:db8:99:5::/64 next-hop " + exa, "is IPv4 but the prefix 2001:db8:99:5::/64 is IPv6"},
		{"10.99.21.0/24", "announce route 10.99.21.0/24 next-hop " + exa + " as-path [ 65002 0 ]", "malformed: AS 0 in the AS path"},
		{"10.99.22.0/24", "announce route 10.99.22.0/24 next-hop " + exa + " as-path [ 65002 ( 65003 65004 ) ]", "malformed: AS_SET in the AS path"},
		{"10.99.23.0/24", "announce route 10.99.23.0/24 next-hop " + exa + " as-path [ ]", "malformed: empty AS path from an eBGP peer"},
		// the cap: 10.99.1.0/24 installed and 10.99.2.0/24 fill the 2
		{"10.99.3.0/24", "announce route 10.99.3.0/24 next-hop " + exa, "import cap: rule legit accepts at most 2 routes from peer exa (3 offered)"},
	}
	// A loopback next hop never reaches import: gobgp treats the UPDATE as
	// a withdraw (RFC 7606) and logs it; the session stays up.
	cmds := []string{"announce route 10.99.12.0/24 next-hop 127.0.0.1"}
	for _, c := range cases {
		cmds = append(cmds, c.announce)
	}
	cmds = append(cmds, "announce route 10.99.2.0/24 next-hop "+exa)
	w.exa.MustSend(cmds...)
	_ = exa6

	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "every hostile path learned and rejected with its reason", func() error {
		rej, err := w.d.Learned(true)
		if err != nil {
			return err
		}
		byPrefix := map[string]model.LearnedPath{}
		for _, p := range rej {
			byPrefix[p.Prefix.String()] = p
		}
		var missing []string
		for _, c := range cases {
			p, ok := byPrefix[c.prefix]
			switch {
			case !ok:
				missing = append(missing, c.prefix+": not in routes learned --rejected")
			case p.Accepted || !strings.Contains(p.Reason, c.reason):
				missing = append(missing, fmt.Sprintf("%s: accepted %v, reason %q (malformed %q), want %q", c.prefix, p.Accepted, p.Reason, p.Malformed, c.reason))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d:\n%s", len(missing), len(cases), strings.Join(missing, "\n"))
		}
		return nil
	})
	lines, err := w.d.LogLines("the received Update message was treated as withdraw")
	if err != nil || len(lines) == 0 || lines[0]["Error"] != "invalid nexthop address" {
		t.Errorf("the UPDATE with next hop 127.0.0.1 was not treated as withdraw: log %v (%v)", lines, err)
	}
	if all, err := w.d.Learned(false); err != nil {
		t.Error(err)
	} else {
		for _, p := range all {
			if p.NextHop.IsLoopback() {
				t.Errorf("routes learned has a path with a loopback next hop: %+v", p)
			}
		}
	}
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "the second legitimate route installed", func() error {
		if err := w.checkRowsRule("10.99.2.0/24", "legit", exa); err != nil {
			return err
		}
		return w.checkKernel("10.99.2.0/24", exa)
	})
	p, err := w.d.Peer("exa")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != model.StateEstablished || p.ImportAlarm == "" || p.Imported != 2 {
		t.Errorf("peers: exa %s, imported %d, import alarm %q: want established, 2, an alarm", p.State, p.Imported, p.ImportAlarm)
	}
	// OVN and the kernel hold only the legitimate routes
	rows, err := w.ownedRows()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Prefix+" via "+r.NextHop)
	}
	if want := []string{"10.99.1.0/24 via " + exa, "10.99.2.0/24 via " + exa}; !slices.Equal(got, want) {
		t.Errorf("owned rows on GR_node1: %q, want %q", got, want)
	}
	table, err := w.l.KernelRoutes(w.l.Node, importTable, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 2 || !strings.Contains(table[0], "10.99.1.0/24") || !strings.Contains(table[1], "10.99.2.0/24") {
		t.Errorf("table %d: %q, want only 10.99.1.0/24 and 10.99.2.0/24", importTable, table)
	}
}

// checkRowsRule is checkRows for a rule other than tor-routes.
func (w *importWorld) checkRowsRule(prefix, rule string, nextHops ...string) error {
	rows, err := w.ovnRows(prefix)
	if err != nil {
		return err
	}
	var got []string
	for _, r := range rows {
		if r.ExternalID["ovnbgp.io/owner"] != "node1" || r.ExternalID["ovnbgp.io/rule"] != rule || r.OutputPort != "rtoe-GR_node1" {
			return fmt.Errorf("row %+v: want owner node1, rule %s, output_port rtoe-GR_node1", r, rule)
		}
		got = append(got, r.NextHop)
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(nextHops)); !slices.Equal(got, want) {
		return fmt.Errorf("GR_node1 rows for %s have next hops %v, want %v", prefix, got, want)
	}
	return nil
}

// foreignState is what ovnbgp does not own: the rows added with ovn-nbctl
// (every column, as ovsdb-server prints them) and the routes of table 100
// that are not protocol 200.
func (w *importWorld) foreignState(t *testing.T, uuids []string) string {
	t.Helper()
	s, err := foreignText(w.l, w.nb, uuids)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// foreignText is foreignState's text: GR_node1's static route rows of the
// given UUIDs (every column), whether GR_node1 still references each, and
// table 100's routes of other protocols than ovnbgp's 200. The chaos and
// hostile suites compare it before and after.
func foreignText(l *lab.Lab, nb *lab.NB, uuids []string) (string, error) {
	var b strings.Builder
	refs, err := nb.NBCtl("get", "logical_router", "GR_node1", "static_routes")
	if err != nil {
		return "", fmt.Errorf("GR_node1: %w", err)
	}
	for _, u := range uuids {
		row, err := nb.RowJSON("Logical_Router_Static_Route", u)
		if err != nil {
			return "", fmt.Errorf("row %s: %w", u, err)
		}
		b.WriteString(row + "\n")
		if !strings.Contains(refs, u) {
			fmt.Fprintf(&b, "GR_node1 no longer references %s\n", u)
		}
	}
	lines, err := l.KernelRoutes(l.Node, importTable, "")
	if err != nil {
		return "", fmt.Errorf("table %d: %w", importTable, err)
	}
	for _, r := range lines {
		if !strings.Contains(r, " proto 200 ") {
			b.WriteString(r + "\n")
		}
	}
	return b.String(), nil
}

// foreignOrError is foreignText, with an error as the text: a comparison
// with the state before then fails and shows it.
func foreignOrError(l *lab.Lab, nb *lab.NB, uuids []string) string {
	s, err := foreignText(l, nb, uuids)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// Rows and routes ovnbgp does not own are byte-identical before and after
// import, withdraw and a daemon restart: static routes added with
// `ovn-nbctl lr-route-add` on GR_node1 (one with a prefix FRR announces
// too, one with FRR's very prefix and next hop) and foreign routes in table
// 100 (protocols static and boot), two of them on prefixes FRR announces.
func TestImportOwnership(t *testing.T) {
	t.Parallel()
	prefixes := []string{"10.99.1.0/24", "10.99.50.0/24", "10.99.51.0/24", "10.99.60.0/24", "10.99.61.0/24"}
	var originate []netip.Prefix
	for _, p := range prefixes {
		originate = append(originate, netip.MustParsePrefix(p))
	}
	tor, exa := lab.TorIPv4.String(), lab.ExaIPv4.String()
	var uuids []string
	var before string
	w := startImportWorld(t, importOpts{
		frrOriginate: originate,
		cfg:          lab.DaemonConfig{Import: importRule},
		before: func(w *importWorld) {
			w.nb.MustNBCtl("lr-route-add", "GR_node1", "10.99.50.0/24", exa)
			w.nb.MustNBCtl("lr-route-add", "GR_node1", "10.99.51.0/24", tor)
			w.nb.MustNBCtl("lr-route-add", "GR_node1", "10.99.52.0/24", tor, "rtoe-GR_node1")
			rows, err := w.nb.StaticRoutes("GR_node1")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				uuids = append(uuids, r.UUID) // the cluster's own 10.128.0.0/14 too
			}
			for _, c := range [][]string{
				{"ip", "route", "add", "10.99.60.0/24", "via", tor, "table", "100", "proto", "static"},
				{"ip", "route", "add", "10.99.61.0/24", "via", exa, "table", "100", "proto", "boot"},
				{"ip", "route", "add", "10.99.62.0/24", "via", exa, "table", "100", "proto", "static", "metric", "50"},
			} {
				if out, err := w.l.Exec(w.l.Node, c...); err != nil {
					t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
				}
			}
			before = w.foreignState(t, uuids)
			t.Logf("not ovnbgp's:\n%s", before)
		},
	})
	same := func(when string) {
		t.Helper()
		if after := w.foreignState(t, uuids); after != before {
			t.Errorf("%s: what ovnbgp does not own changed:\nbefore:\n%s\nafter:\n%s", when, before, after)
		}
	}
	installed := func(what string) {
		t.Helper()
		w.waitInstalled(t, what, "10.99.1.0/24", tor)
		lab.Eventually(t, 30*time.Second, 100*time.Millisecond, what+": owned rows for the manual rows' prefixes", func() error {
			if err := w.checkRows("10.99.50.0/24", tor); err == nil {
				return fmt.Errorf("10.99.50.0/24: the manual row via %s is counted as owned", exa)
			}
			rows, err := w.ownedRows()
			if err != nil {
				return err
			}
			var got []string
			for _, r := range rows {
				got = append(got, r.Prefix)
			}
			if !slices.Contains(got, "10.99.50.0/24") {
				return fmt.Errorf("owned rows %v lack 10.99.50.0/24", got)
			}
			if slices.Contains(got, "10.99.51.0/24") {
				return fmt.Errorf("owned rows %v duplicate the manual row 10.99.51.0/24 via %s", got, tor)
			}
			return nil
		})
	}
	installed("import")
	same("after import")
	if rows, err := w.ownedRows(); err == nil {
		t.Logf("owned rows after import: %+v", rows)
	}

	// withdraw everything
	cmds := []string{"router bgp 65001", "address-family ipv4 unicast"}
	for _, p := range prefixes {
		cmds = append(cmds, "no network "+p)
	}
	if err := w.frr.Config(cmds...); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "every imported route withdrawn", func() error {
		rows, err := w.ownedRows()
		if err != nil || len(rows) > 0 {
			return fmt.Errorf("owned rows %v (%v)", rows, err)
		}
		lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
		if err != nil || len(lines) > 0 {
			return fmt.Errorf("table %d proto 200: %q (%v)", importTable, lines, err)
		}
		return nil
	})
	same("after withdraw")

	// announce again, restart the daemon
	cmds = cmds[:2]
	for _, p := range prefixes {
		cmds = append(cmds, "network "+p)
	}
	if err := w.frr.Config(cmds...); err != nil {
		t.Fatal(err)
	}
	installed("import again")
	if code, _, err := w.d.Stop(10 * time.Second); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
	same("daemon stopped")
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	w.waitEstablished(t, "tor", "exa")
	installed("after restart")
	same("after restart")
}

// nothingInstalled fails unless GR_node1 has no owned row and table 100 no
// protocol-200 route.
func (w *importWorld) nothingInstalled() error {
	rows, err := w.ownedRows()
	if err != nil || len(rows) > 0 {
		return fmt.Errorf("owned rows on GR_node1: %+v (%v)", rows, err)
	}
	lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
	if err != nil || len(lines) > 0 {
		return fmt.Errorf("table %d proto 200: %q (%v)", importTable, lines, err)
	}
	return nil
}

// Mode manual: nothing is installed until `plan --out F` and `apply F`; a
// plan saved before another change on GR_node1 is refused as stale and
// changes nothing; `plan --config NEW` shows the import changes and session
// resets of a new config, and a reload then does just that.
func TestImportManualPlanApply(t *testing.T) {
	t.Parallel()
	manual := strings.Replace(importRule, "    maxRoutes: 10\n", "    maxRoutes: 10\n    mode: manual\n", 1)
	w := startImportWorld(t, importOpts{
		frrOriginate: []netip.Prefix{netip.MustParsePrefix("10.99.1.0/24"), netip.MustParsePrefix("10.98.1.0/24")},
		cfg:          lab.DaemonConfig{Import: manual},
	})
	tor := lab.TorIPv4.String()
	planFile := func(name string) string { return w.l.Dir + "/" + name }

	// the path is accepted and waits for apply; nothing is installed
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "plan lists the manual add of 10.99.1.0/24", func() error {
		p, err := w.d.Plan()
		if err != nil {
			return err
		}
		if p.Manual.OVNAdd != 1 || len(p.Plan.OVN) != 1 || p.Plan.OVN[0].Route.Prefix.String() != "10.99.1.0/24" {
			return fmt.Errorf("plan: manual %+v, OVN ops %+v", p.Manual, p.Plan.OVN)
		}
		return nil
	})
	if err := w.nothingInstalled(); err != nil {
		t.Fatalf("mode manual installed before apply: %v", err)
	}
	imp, err := w.d.Imported()
	if err != nil {
		t.Fatal(err)
	}
	if len(imp.OVN) != 1 || imp.OVN[0].State != api.ImportMissing {
		t.Errorf("routes imported before apply: %+v, want 10.99.1.0/24 missing (waiting for apply)", imp.OVN)
	}

	// a plan saved, then another change on GR_node1: apply refuses it
	stale := planFile("stale.json")
	if _, err := w.d.Plan("--out", stale); err != nil {
		t.Fatal(err)
	}
	w.nb.MustNBCtl("lr-route-add", "GR_node1", "10.99.70.0/24", tor)
	out, err := w.d.CLI("apply", stale)
	if err == nil {
		t.Fatalf("apply of a stale plan succeeded: %s", out)
	}
	t.Logf("stale apply refused: %v", err)
	if err := w.nothingInstalled(); err != nil {
		t.Fatalf("the refused stale apply changed something: %v", err)
	}

	// a fresh plan applies
	fresh := planFile("fresh.json")
	if _, err := w.d.Plan("--out", fresh); err != nil {
		t.Fatal(err)
	}
	if out, err := w.d.CLI("apply", fresh); err != nil {
		t.Fatalf("apply of a fresh plan: %v: %s", err, out)
	}
	w.waitInstalled(t, "applied", "10.99.1.0/24", tor)

	// plan --config NEW: the new rule's import changes and the session reset
	next := w.d.Cfg
	next.Peers = slices.Clone(next.Peers)
	next.Peers[0].HoldTime, next.Peers[0].KeepaliveTime = 30*time.Second, 10*time.Second
	next.Import = strings.Replace(importRule, "      - {prefix: 10.99.0.0/16, maxLength: 24}\n",
		"      - {prefix: 10.99.0.0/16, maxLength: 24}\n      - {prefix: 10.98.0.0/16, maxLength: 24}\n", 1)
	text, err := next.Render()
	if err != nil {
		t.Fatal(err)
	}
	newPath := planFile("new.yaml")
	if err := lab.WriteFileAtomic(newPath, []byte(text)); err != nil {
		t.Fatal(err)
	}
	pc, err := w.d.Plan("--config", newPath)
	if err != nil {
		t.Fatal(err)
	}
	var resets []string
	for _, r := range pc.SessionResets {
		resets = append(resets, r.Peer)
	}
	var adds []string
	for _, op := range pc.Plan.OVN {
		adds = append(adds, string(op.Op)+" "+op.Route.Prefix.String()+" via "+op.Route.NextHop.String())
	}
	t.Logf("plan --config: resets %v, OVN %v", pc.SessionResets, adds)
	if !slices.Equal(resets, []string{"tor"}) {
		t.Errorf("plan --config resets %v, want [tor] (its hold time changed)", resets)
	}
	if want := []string{"add 10.98.1.0/24 via " + tor}; !slices.Equal(adds, want) {
		t.Errorf("plan --config OVN operations %v, want %v", adds, want)
	}
	if err := w.nothingInstalledFor("10.98.1.0/24"); err != nil {
		t.Errorf("plan --config changed something: %v", err)
	}

	// the reload does what the plan said
	before, err := w.d.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.d.Reload(next); err != nil {
		t.Fatal(err)
	}
	w.waitInstalled(t, "10.98.1.0/24 installed by the reload", "10.98.1.0/24", tor)
	w.waitInstalled(t, "10.99.1.0/24 still installed", "10.99.1.0/24", tor)
	w.waitEstablished(t, "tor", "tor6", "exa", "exa6")
	after, err := w.d.Peers()
	if err != nil {
		t.Fatal(err)
	}
	var reset []string
	for i, p := range after {
		if !p.Since.Equal(before[i].Since) {
			reset = append(reset, p.Name)
		}
	}
	if !slices.Equal(reset, resets) {
		t.Errorf("the reload reset the sessions of %v; plan --config said %v", reset, resets)
	}
}

// nothingInstalledFor fails if prefix has an owned row or a kernel route.
func (w *importWorld) nothingInstalledFor(prefix string) error {
	rows, err := w.ovnRows(prefix)
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		return fmt.Errorf("GR_node1 has rows for %s: %+v", prefix, rows)
	}
	return w.checkKernel(prefix)
}

// Fail static: with routes imported, ovnbgp is SIGKILLed and restarted.
// `ip monitor route` in the node namespace and an NB monitor of
// Logical_Router_Static_Route record no deletion of the unchanged routes;
// a route FRR withdrew while ovnbgp was down is removed after End-of-RIB
// (deferralTime is 10 minutes: only End-of-RIB can remove it).
func TestImportFailStatic(t *testing.T) {
	t.Parallel()
	keep4, keep6, gone := "10.99.1.0/24", "2001:db8:99:1::/64", "10.99.2.0/24"
	w := startImportWorld(t, importOpts{
		frrOriginate: []netip.Prefix{netip.MustParsePrefix(keep4), netip.MustParsePrefix(keep6), netip.MustParsePrefix(gone)},
		cfg:          lab.DaemonConfig{Import: importRule, DeferralTime: 10 * time.Minute},
	})
	tor, tor6, exa := lab.TorIPv4.String(), lab.TorIPv6.String(), lab.ExaIPv4.String()
	w.exa.MustSend("announce route " + keep4 + " next-hop " + exa)
	w.waitInstalled(t, "ECMP route installed", keep4, tor, exa)
	w.waitInstalled(t, "IPv6 route installed", keep6, tor6)
	w.waitInstalled(t, "the route FRR will withdraw installed", gone, tor)

	kmon := w.l.MonitorRoutes(w.l.Node)
	nbmon := w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")

	if err := w.d.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "ovnbgp dead after SIGKILL", func() error {
		if w.d.Exited() == nil {
			return fmt.Errorf("pid %d still running", w.d.PID())
		}
		return nil
	})
	// FRR withdraws one route while ovnbgp is down
	if err := w.frr.Config("router bgp 65001", "address-family ipv4 unicast", "no network "+gone); err != nil {
		t.Fatal(err)
	}
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	w.waitEstablished(t, "tor", "tor6", "exa", "exa6")
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "the route withdrawn while down removed after End-of-RIB", func() error {
		return w.nothingInstalledFor(gone)
	})
	w.waitInstalled(t, "ECMP route kept", keep4, tor, exa)
	w.waitInstalled(t, "IPv6 route kept", keep6, tor6)

	routes, rows := kmon.Stop(), nbmon.Stop()
	for _, line := range strings.Split(routes, "\n") {
		if strings.HasPrefix(line, "Deleted") && (strings.Contains(line, keep4) || strings.Contains(line, keep6)) {
			t.Errorf("ip monitor route saw an unchanged route deleted: %q", line)
		}
	}
	if !strings.Contains(routes, "Deleted "+gone) && !strings.Contains(routes, "Deleted unicast "+gone) {
		t.Errorf("ip monitor route did not see %s deleted:\n%s", gone, routes)
	}
	var deleted []string
	for _, line := range strings.Split(rows, "\n") {
		if strings.Contains(line, ",delete,") {
			deleted = append(deleted, line)
			if strings.Contains(line, keep4) || strings.Contains(line, keep6) {
				t.Errorf("the NB monitor saw an unchanged row deleted: %q", line)
			}
		}
	}
	if len(deleted) != 1 || !strings.Contains(deleted[0], gone) {
		t.Errorf("NB monitor deletions %q, want the one row of %s", deleted, gone)
	}
	t.Logf("ip monitor route:\n%s\nNB monitor:\n%s", routes, rows)
}
