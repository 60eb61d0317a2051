package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// IPv4 routes with an IPv6 next hop into OVN (issue 20, item 4): northd
// before OVN 25.03 drops a static route whose prefix and next hop families
// differ, 25.03 and later take it; the daemon reads northd's version from
// NB_Global options:northd_internal_version and writes such a route to
// GR_node1 only when northd takes it.

// Northd versions as ovn-northd writes them into NB_Global.
const (
	northd2409 = "24.09.3-20.37.0-73.1"
	northd2503 = "25.03.0-20.41.0-78.1"
)

// mixedRule imports 10.99.0.0/16 up to /24 from peer tor6 into GR_node1
// and kernel table 100.
const mixedRule = `  - name: tor-routes
    peers: [tor6]
    network: default
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
    targets: {ovn: true, kernel: {table: 100}}`

// setNorthd sets NB_Global options:northd_internal_version, as ovn-northd
// does on start.
func setNorthd(t *testing.T, nb *lab.NB, version string) {
	t.Helper()
	nb.MustNBCtl("set", "NB_Global", ".", `options:northd_internal_version="`+version+`"`)
}

// kernelVia4 is a condition: table 100 of the node holds IPv4 prefix with
// protocol 200 via the IPv6 next hop nh on the tor link (`via inet6 NH dev
// veth-node`).
func kernelVia4(l *lab.Lab, prefix netip.Prefix, nh netip.Addr) func() error {
	return func() error {
		out, err := l.Exec(l.Node, "ip", "-j", "-4", "route", "show", "table", fmt.Sprint(importTable), "proto", "200")
		if err != nil {
			return fmt.Errorf("ip route show table %d: %v: %s", importTable, err, out)
		}
		var rs []kernelRoute
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			return fmt.Errorf("ip -j route: %v: %s", err, out)
		}
		for _, r := range rs {
			if r.Dst != prefix.String() {
				continue
			}
			if r.Via.Family != "inet6" || r.Via.Host != nh.String() || r.Dev != lab.NodeLink {
				return fmt.Errorf("table %d: route to %s is %+v, want via inet6 %s dev %s", importTable, prefix, r, nh, lab.NodeLink)
			}
			return nil
		}
		return fmt.Errorf("table %d proto 200 has no %s: %s", importTable, prefix, out)
	}
}

// TestMixedFamilyOVN: FRR announces an IPv4 prefix over a numbered IPv6
// session with extended next hop (RFC 8950), its global IPv6 address the
// next hop, inside GR_node1's external networks. With northd 24.09 in
// NB_Global the route goes to kernel table 100 only, and `routes learned`
// and `explain` name northd 24.09 as the reason; when NB says 25.03 the
// running daemon writes the static route on GR_node1 too, with ovnbgp's
// markers; back to 24.09 it deletes that row again and keeps the kernel
// route; FRR's withdrawal removes both.
func TestMixedFamilyOVN(t *testing.T) {
	t.Parallel()
	prefix := netip.MustParsePrefix("10.99.1.0/24")
	tor6 := lab.TorIPv6
	l := lab.New(t)
	nb := l.StartNB()
	nb.PopulateOVNK()
	// the external port holds the tor link's IPv6 network: FRR's global
	// address is a next hop inside it
	nb.GatewayRouter("node1", netip.PrefixFrom(lab.NodeIPv4, 31), netip.PrefixFrom(lab.NodeIPv6, 127))
	setNorthd(t, nb, northd2409)
	frr := l.StartFRR(lab.FRRConfig{
		Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv6, ASN: 65010, ExtendedNextHop: true}},
		Originate: []netip.Prefix{prefix}, GracefulRestart: true,
	})
	w := &importWorld{l: l, nb: nb, frr: frr}
	w.d = l.StartDaemon(nb, lab.DaemonConfig{GracefulRestart: true, Import: mixedRule,
		Peers: []lab.Peer{{Name: "tor6", Address: tor6, ASN: 65001, Families: []string{"ipv4", "ipv6"}}}})
	w.waitEstablished(t, "tor6")
	p, err := w.d.Peer("tor6")
	if err != nil {
		t.Fatal(err)
	}
	if !p.ExtendedNextHop {
		t.Fatalf("peers: %+v, want extended next hop agreed", p)
	}

	// FRR advertises the prefix to the node (its vty shows its own path's
	// next hop as "::"; what it sent is checked on the node: routes
	// learned, explain and the kernel route give FRR's global address).
	out, err := frr.VTY("show bgp ipv4 unicast neighbors " + lab.NodeIPv6.String() + " advertised-routes")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FRR: show bgp ipv4 unicast neighbors %s advertised-routes:\n%s", lab.NodeIPv6, out)
	if !strings.Contains(out, prefix.String()) {
		t.Errorf("FRR does not advertise %s to %s:\n%s", prefix, lab.NodeIPv6, out)
	}
	learnedVia := func(want string) func() error {
		return func() error {
			ls, err := w.d.Learned(false)
			if err != nil {
				return err
			}
			for _, lp := range ls {
				if lp.Prefix != prefix {
					continue
				}
				if lp.NextHop != tor6 || !lp.Accepted || !strings.Contains(lp.Reason, want) {
					return fmt.Errorf("routes learned: %s next hop %s accepted %v (%s), want next hop %s, accepted, the reason with %q",
						lp.Prefix, lp.NextHop, lp.Accepted, lp.Reason, tor6, want)
				}
				return nil
			}
			return fmt.Errorf("routes learned has no %s: %+v", prefix, ls)
		}
	}

	// Step 1, northd 24.09: the kernel only, and the reason names 24.09.
	lab.Eventually(t, generous, 100*time.Millisecond, "northd 24.09: the kernel route via FRR's IPv6 address", kernelVia4(l, prefix, tor6))
	lab.Eventually(t, generous, 100*time.Millisecond, "northd 24.09: routes learned names the version", learnedVia("northd 24.09 is before OVN 25.03"))
	if err := w.checkRows(prefix.String()); err != nil {
		t.Errorf("northd 24.09: %v", err)
	}
	e, err := w.d.Explain(prefix.String())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, lp := range e.Learned {
		if lp.Prefix == prefix && strings.Contains(lp.Reason, "northd 24.09 is before OVN 25.03") {
			found = true
		}
	}
	t.Logf("northd 24.09: explain %s: %+v; %s", prefix, e.Learned, strings.Join(e.Summary, "; "))
	if !found || len(e.OVN) != 0 {
		t.Errorf("explain %s: learned %+v, OVN %+v; want the path's reason naming northd 24.09, no OVN route", prefix, e.Learned, e.OVN)
	}
	st, err := w.d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.NB.Northd == nil || st.NB.Northd.Raw != northd2409 {
		t.Errorf("status: northd %+v, want %s", st.NB.Northd, northd2409)
	}

	// Step 2, northd 25.03: the running daemon writes the row.
	setNorthd(t, nb, northd2503)
	lab.Eventually(t, generous, 100*time.Millisecond, "northd 25.03: GR_node1's row via FRR's IPv6 address", func() error {
		return w.checkRows(prefix.String(), tor6.String())
	})
	lab.Eventually(t, generous, 100*time.Millisecond, "northd 25.03: routes learned gives no northd reason", func() error {
		if err := learnedVia("")(); err != nil {
			return err
		}
		ls, err := w.d.Learned(false)
		if err != nil {
			return err
		}
		for _, lp := range ls {
			if lp.Prefix == prefix && strings.Contains(lp.Reason, "northd") {
				return fmt.Errorf("routes learned: %s still says %q", prefix, lp.Reason)
			}
		}
		return nil
	})
	if err := kernelVia4(l, prefix, tor6)(); err != nil {
		t.Errorf("northd 25.03: %v", err)
	}
	imp, err := w.d.Imported()
	if err != nil {
		t.Fatal(err)
	}
	if len(imp.OVN) != 1 || imp.OVN[0].NextHop != tor6 || imp.OVN[0].Router != "GR_node1" {
		t.Errorf("routes imported: OVN %+v, want %s via %s on GR_node1", imp.OVN, prefix, tor6)
	}

	// Step 3, back to 24.09: ovnbgp deletes its row, the kernel route stays.
	setNorthd(t, nb, northd2409)
	lab.Eventually(t, generous, 100*time.Millisecond, "northd 24.09 again: GR_node1's row deleted", func() error {
		return w.checkRows(prefix.String())
	})
	lab.Eventually(t, generous, 100*time.Millisecond, "northd 24.09 again: routes learned names the version", learnedVia("northd 24.09 is before OVN 25.03"))
	if err := kernelVia4(l, prefix, tor6)(); err != nil {
		t.Errorf("northd 24.09 again: %v", err)
	}

	// Step 4: FRR withdraws, both are gone.
	if err := frr.Config("router bgp 65001", "address-family ipv4 unicast", "no network "+prefix.String()); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "withdrawn: nothing installed", w.nothingInstalled)
	if p, err := w.d.Peer("tor6"); err != nil || p.State != model.StateEstablished {
		t.Errorf("peers: tor6 %+v (%v), want still established", p, err)
	}
}
