package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Unnumbered BGP (issue 20): sessions over a link that has only IPv6
// link-local addresses, both families over one session (RFC 8950: IPv4
// prefixes with an IPv6 next hop), against FRR's `neighbor IF interface`
// and BIRD 2's `extended next hop on`.

// Prefixes the routers announce over the unnumbered link.
var (
	unPrefix4 = netip.MustParsePrefix("198.51.100.0/24")
	unPrefix6 = netip.MustParsePrefix("2001:db8:f::/48")
)

// unImportRule imports both from peer "un" into kernel table 100.
const unImportRule = `  - name: un-routes
    peers: [un]
    network: default
    accept:
      - {prefix: 198.51.100.0/24}
      - {prefix: 2001:db8:f::/48}
    targets: {kernel: {table: 100}}`

// unWorld is the node with NB and an unnumbered link to a router namespace.
type unWorld struct {
	lab  *lab.Lab
	nb   *lab.NB
	link lab.LinkLocalNamespace
	d    *lab.Daemon
}

// startUnnumbered starts NB and a link-local-only link to namespace "un";
// the router in it is the caller's.
func startUnnumbered(t *testing.T) *unWorld {
	t.Helper()
	w := &unWorld{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	w.link = w.lab.AddLinkLocalNamespace("un")
	return w
}

// kernelRoute is one route of `ip -j route` as the tests read it.
type kernelRoute struct {
	Dst     string `json:"dst"`
	Dev     string `json:"dev"`
	Gateway string `json:"gateway"`
	Via     struct {
		Family string `json:"family"`
		Host   string `json:"host"`
	} `json:"via"`
	Protocol string `json:"protocol"`
}

// routes are namespace ns's routes of table (0: main) and protocol.
func (w *unWorld) routes(ns string, family string, table int, proto string) (map[string]kernelRoute, error) {
	args := []string{"-j", family, "route", "show"}
	if table != 0 {
		args = append(args, "table", fmt.Sprint(table))
	}
	if proto != "" {
		args = append(args, "proto", proto)
	}
	out, err := w.lab.Exec(ns, append([]string{"ip"}, args...)...)
	if err != nil {
		if strings.Contains(out, "does not exist") {
			return map[string]kernelRoute{}, nil
		}
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	var rs []kernelRoute
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	m := map[string]kernelRoute{}
	for _, r := range rs {
		m[r.Dst] = r
	}
	return m, nil
}

// viaLL is a condition: namespace ns holds prefix (main table for table
// 0) through the link-local next hop ll on dev: `via inet6 ll dev dev`
// for IPv4, `via ll dev dev` for IPv6.
func (w *unWorld) viaLL(ns string, table int, proto string, prefix netip.Prefix, ll netip.Addr, dev string) func() error {
	fam := "-4"
	if prefix.Addr().Is6() {
		fam = "-6"
	}
	return func() error {
		if w.d != nil {
			if err := w.d.Exited(); err != nil {
				return err
			}
		}
		rs, err := w.routes(ns, fam, table, proto)
		if err != nil {
			return err
		}
		r, ok := rs[prefix.String()]
		if !ok {
			return fmt.Errorf("%s has no route to %s (proto %s): %v", ns, prefix, proto, rs)
		}
		nh := r.Gateway
		if prefix.Addr().Is4() {
			if r.Via.Family != "inet6" {
				return fmt.Errorf("%s: route to %s is %+v, want via inet6 %s", ns, prefix, r, ll.WithZone(""))
			}
			nh = r.Via.Host
		}
		if nh != ll.WithZone("").String() || r.Dev != dev {
			return fmt.Errorf("%s: route to %s via %s dev %s, want via %s dev %s", ns, prefix, nh, r.Dev, ll.WithZone(""), dev)
		}
		return nil
	}
}

// gone is a condition: namespace ns has no route to prefix any more.
func (w *unWorld) gone(ns string, table int, proto string, prefix netip.Prefix) func() error {
	fam := "-4"
	if prefix.Addr().Is6() {
		fam = "-6"
	}
	return func() error {
		rs, err := w.routes(ns, fam, table, proto)
		if err != nil {
			return err
		}
		if r, ok := rs[prefix.String()]; ok {
			return fmt.Errorf("%s still routes %s: %+v", ns, prefix, r)
		}
		return nil
	}
}

// TestUnnumberedFRR: FRR's `neighbor IF interface` on a link with only
// link-local addresses. ovnbgp learns FRR's address from its router
// advertisements, FRR learns ovnbgp's from ovnbgp's, and one session
// carries both families: FRR installs the node's IPv4 pod subnet via
// ovnbgp's link-local address, the node installs FRR's IPv4 prefix via
// FRR's, and `peers` says so. A withdrawal on either side goes through.
func TestUnnumberedFRR(t *testing.T) {
	t.Parallel()
	w := startUnnumbered(t)
	frr := w.lab.StartFRRIn(w.link.NS, lab.FRRConfig{
		Neighbors: []lab.FRRNeighbor{{Interface: w.link.PeerLink, ASN: 65010}},
		Originate: []netip.Prefix{unPrefix4, unPrefix6},
	})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{ListenPort: 179, Import: unImportRule,
		Peers: []lab.Peer{{Name: "un", Interface: w.link.NodeLink, ASN: 65001}}})

	lab.Eventually(t, generous, 100*time.Millisecond, "FRR installs node1's IPv4 subnet via the node's link-local",
		w.viaLL(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet, w.link.NodeLL, w.link.PeerLink))
	lab.Eventually(t, generous, 100*time.Millisecond, "FRR installs node1's IPv6 subnet via the node's link-local",
		w.viaLL(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet6, w.link.NodeLL, w.link.PeerLink))
	lab.Eventually(t, generous, 100*time.Millisecond, "the node installs FRR's IPv4 prefix via FRR's link-local",
		w.viaLL(w.lab.Node, 100, "200", unPrefix4, w.link.PeerLL, w.link.NodeLink))
	lab.Eventually(t, generous, 100*time.Millisecond, "the node installs FRR's IPv6 prefix via FRR's link-local",
		w.viaLL(w.lab.Node, 100, "200", unPrefix6, w.link.PeerLL, w.link.NodeLink))

	p, err := w.d.Peer("un")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != model.StateEstablished || p.Interface != w.link.NodeLink || p.Address != w.link.PeerLL.WithZone(w.link.NodeLink) ||
		!p.ExtendedNextHop || p.Learned == "" {
		t.Errorf("peers: %+v; want Established on %s with FRR's address %s learned, extended next hop agreed", p, w.link.NodeLink, w.link.PeerLL)
	}
	for _, f := range p.Families {
		if !f.Negotiated || f.Withheld != "" {
			t.Errorf("peers: family %+v, want negotiated and sent", f)
		}
	}
	out, err := w.d.CLI("peers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), w.link.PeerLL.WithZone(w.link.NodeLink).String()) {
		t.Errorf("ovnbgp peers does not show the learned address %s:\n%s", w.link.PeerLL, out)
	}
	// routes learned names the next hop with its link.
	learned, err := w.d.Learned(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range learned {
		if lp.Prefix == unPrefix4 && (lp.NextHop != w.link.PeerLL.WithZone(w.link.NodeLink) || !lp.Accepted) {
			t.Errorf("routes learned: %s next hop %s accepted %v (%s), want FRR's link-local on %s, accepted", lp.Prefix, lp.NextHop, lp.Accepted, lp.Reason, w.link.NodeLink)
		}
	}

	// Withdrawals, both ways.
	if err := frr.Config("router bgp 65001", "address-family ipv4 unicast", "no network "+unPrefix4.String()); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "the node loses FRR's withdrawn IPv4 prefix", w.gone(w.lab.Node, 100, "200", unPrefix4))
	if err := w.nb.Delete(lab.DefaultNode1); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "FRR loses node1's IPv4 subnet", w.gone(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet))
}

// birdUnnumbered is BIRD 2's config for a session with the node's
// link-local address on PeerLink; ipv4 carried over it with extended
// next hop on or off.
func birdUnnumbered(l lab.LinkLocalNamespace, enh bool) func(dir string) string {
	onOff := "off"
	if enh {
		onOff = "on"
	}
	return func(dir string) string {
		return fmt.Sprintf(`log "%s/bird.log" all;
router id 10.255.0.4;
protocol device { }
protocol static s4 { ipv4; route %s blackhole; }
protocol static s6 { ipv6; route %s blackhole; }
protocol kernel k4 { ipv4 { import none; export where source = RTS_BGP; }; }
protocol kernel k6 { ipv6 { import none; export where source = RTS_BGP; }; }
protocol bgp %s {
  local as 65004;
  neighbor %s as 65010;
  interface "%s";
  hold time 9; keepalive time 3; connect retry time 2;
  error wait time 1, 5;
  ipv4 { import all; export where source = RTS_STATIC; extended next hop %s; };
  ipv6 { import all; export where source = RTS_STATIC; };
}
`, dir, unPrefix4, unPrefix6, lab.BIRDProtocol, l.NodeLL.WithZone(""), l.PeerLink, onOff)
	}
}

// TestUnnumberedBIRD: BIRD 2 has no router advertisements of its own, so
// the node is given BIRD's link-local address (fe80::…%dev). With
// `extended next hop on` both families flow over the one session; BIRD
// sends its IPv4 prefix with next hop "::" and its link-local (RFC 2545
// without a global address), and the node installs it via BIRD's
// link-local.
func TestUnnumberedBIRD(t *testing.T) {
	t.Parallel()
	w := startUnnumbered(t)
	w.lab.StartBIRD(w.link.NS, lab.BIRDConfig{Text: birdUnnumbered(w.link, true)})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{Import: unImportRule,
		Peers: []lab.Peer{{Name: "un", Address: w.link.PeerLL.WithZone(w.link.NodeLink), ASN: 65004}}})
	lab.Eventually(t, generous, 100*time.Millisecond, "BIRD installs node1's IPv4 subnet via the node's link-local",
		w.viaLL(w.link.NS, 0, "bird", lab.DefaultNode1.Subnet, w.link.NodeLL, w.link.PeerLink))
	lab.Eventually(t, generous, 100*time.Millisecond, "the node installs BIRD's IPv4 prefix via BIRD's link-local",
		w.viaLL(w.lab.Node, 100, "200", unPrefix4, w.link.PeerLL, w.link.NodeLink))
	lab.Eventually(t, generous, 100*time.Millisecond, "the node installs BIRD's IPv6 prefix via BIRD's link-local",
		w.viaLL(w.lab.Node, 100, "200", unPrefix6, w.link.PeerLL, w.link.NodeLink))
}

// TestUnnumberedNoExtendedNextHop: BIRD with `extended next hop off` on
// its ipv4 channel. IPv4 prefixes would carry an IPv6 next hop it treats
// as withdrawn, so the node withholds IPv4 from it and `peers` says why;
// IPv6 still flows.
func TestUnnumberedNoExtendedNextHop(t *testing.T) {
	t.Parallel()
	w := startUnnumbered(t)
	w.lab.StartBIRD(w.link.NS, lab.BIRDConfig{Text: birdUnnumbered(w.link, false)})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{
		Peers: []lab.Peer{{Name: "un", Address: w.link.PeerLL.WithZone(w.link.NodeLink), ASN: 65004}}})
	lab.Eventually(t, generous, 100*time.Millisecond, "BIRD installs node1's IPv6 subnet",
		w.viaLL(w.link.NS, 0, "bird", lab.DefaultNode1.Subnet6, w.link.NodeLL, w.link.PeerLink))
	lab.Eventually(t, generous, 100*time.Millisecond, "peers says IPv4 is withheld", func() error {
		p, err := w.d.Peer("un")
		if err != nil {
			return err
		}
		i := slices.IndexFunc(p.Families, func(f model.FamilyCounts) bool { return f.Family == "ipv4" })
		if p.State != model.StateEstablished || p.ExtendedNextHop || i < 0 || !strings.Contains(p.Families[i].Withheld, "extended next hop") ||
			!strings.Contains(p.LastError, "extended next hop") {
			return fmt.Errorf("peers: %+v", p)
		}
		if p.Families[i].Advertised != 0 {
			return fmt.Errorf("peers: %d IPv4 prefixes advertised to a peer without extended next hop", p.Families[i].Advertised)
		}
		return nil
	})
	// Nothing IPv4 reached BIRD's table, not even treated as withdrawn.
	out4, err := w.lab.Exec(w.link.NS, "ip", "-4", "route", "show", "proto", "bird")
	if err != nil || strings.TrimSpace(out4) != "" {
		t.Errorf("BIRD's kernel has IPv4 routes from the node: %q %v", out4, err)
	}
}

// TestUnnumberedDialsBothWays: the unnumbered session comes up whichever
// side dials, with TCP MD5 on it: ovnbgp dials FRR's learned link-local
// address (FRR passive), and FRR dials ovnbgp once it has learned the
// node's from its router advertisement (ovnbgp passive, listening).
func TestUnnumberedDialsBothWays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		nodeDials bool
	}{{"node dials", true}, {"FRR dials", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := startUnnumbered(t)
			frr := w.lab.StartFRRIn(w.link.NS, lab.FRRConfig{
				Neighbors: []lab.FRRNeighbor{{Interface: w.link.PeerLink, ASN: 65010, Passive: tc.nodeDials, Password: md5Password}},
			})
			dc := lab.DaemonConfig{Peers: []lab.Peer{{Name: "un", Interface: w.link.NodeLink, ASN: 65001, Password: md5Password,
				Passive: !tc.nodeDials}}}
			if !tc.nodeDials {
				dc.ListenPort = 179
			}
			w.d = w.lab.StartDaemon(w.nb, dc)
			lab.Eventually(t, generous, 100*time.Millisecond, "FRR installs node1's IPv4 subnet over the MD5 session",
				w.viaLL(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet, w.link.NodeLL, w.link.PeerLink))
			ns, err := frr.Neighbors()
			if err != nil {
				t.Fatal(err)
			}
			n, ok := ns[w.link.PeerLink]
			if !ok || n.State != "Established" {
				t.Fatalf("FRR's neighbor %s: %+v (all: %v)", w.link.PeerLink, n, ns)
			}
			if dialer := n.PortLocal == 179; dialer != tc.nodeDials {
				t.Errorf("FRR's session: local port %d, foreign port %d; want the node to have dialed: %v", n.PortLocal, n.PortForeign, tc.nodeDials)
			}
			checkNoSecret(t, w.d, md5Password)
		})
	}
}

// TestUnnumberedBFDAndGTSM: BFD (RFC 5881) runs on the unnumbered
// session, between the two link-local addresses, and comes up with FRR's
// bfdd; the session itself runs with GTSM (RFC 5082) on both sides.
func TestUnnumberedBFDAndGTSM(t *testing.T) {
	t.Parallel()
	w := startUnnumbered(t)
	w.lab.StartFRRIn(w.link.NS, lab.FRRConfig{
		Neighbors: []lab.FRRNeighbor{{Interface: w.link.PeerLink, ASN: 65010, BFD: true, TTLSecurityHops: 1}},
	})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{
		Peers: []lab.Peer{{Name: "un", Interface: w.link.NodeLink, ASN: 65001, BFD: true, TTLSecurity: true}}})
	lab.Eventually(t, generous, 100*time.Millisecond, "BFD up on the unnumbered session", func() error {
		p, err := w.d.Peer("un")
		if err != nil {
			return err
		}
		if p.State != model.StateEstablished || p.BFD == nil || p.BFD.State != model.BFDUp {
			return fmt.Errorf("peers: %+v (bfd %+v)", p, p.BFD)
		}
		return nil
	})
}

// TestUnnumberedReloadAddsIPv6: an unnumbered session that carries IPv4
// only gets IPv6 added by a reload: `plan --config` predicts the reset
// the new OPEN needs, and FRR then has node1's IPv6 subnet too.
func TestUnnumberedReloadAddsIPv6(t *testing.T) {
	t.Parallel()
	w := startUnnumbered(t)
	w.lab.StartFRRIn(w.link.NS, lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Interface: w.link.PeerLink, ASN: 65010}}})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{
		Peers: []lab.Peer{{Name: "un", Interface: w.link.NodeLink, ASN: 65001, Families: []string{"ipv4"}}}})
	lab.Eventually(t, generous, 100*time.Millisecond, "FRR installs node1's IPv4 subnet",
		w.viaLL(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet, w.link.NodeLL, w.link.PeerLink))
	if err := w.gone(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet6)(); err != nil {
		t.Fatalf("IPv6 before the reload: %v", err)
	}
	next := w.d.Cfg
	next.Peers = slices.Clone(next.Peers)
	next.Peers[0].Families = []string{"ipv4", "ipv6"}
	text, err := next.Render()
	if err != nil {
		t.Fatal(err)
	}
	path := w.lab.Mkdir("plan") + "/new.yaml"
	if err := lab.WriteFileAtomic(path, []byte(text)); err != nil {
		t.Fatal(err)
	}
	pc, err := w.d.Plan("--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.SessionResets) != 1 || pc.SessionResets[0].Peer != "un" || !strings.Contains(pc.SessionResets[0].Why, "families") {
		t.Fatalf("plan --config adding ipv6 predicts resets %+v, want un's, for families", pc.SessionResets)
	}
	res, err := w.d.ReloadCLI(next)
	if err != nil || !res.Applied {
		t.Fatalf("reload: %+v %v", res, err)
	}
	if len(res.SessionResets) != 1 || res.SessionResets[0].Peer != "un" {
		t.Errorf("reload reset %+v, want un (as predicted)", res.SessionResets)
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "FRR installs node1's IPv6 subnet after the reload",
		w.viaLL(w.link.NS, 0, "bgp", lab.DefaultNode1.Subnet6, w.link.NodeLL, w.link.PeerLink))
}
