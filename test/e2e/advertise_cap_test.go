package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Issue 7: aggregation (advertise[].aggregateLength, aggregateLengthV6) and
// the per-peer export cap (bgp.peers[].maxAdvertised), checked against
// FRR's RIB and the daemon's `routes advertised` and `peers`.

// exactFrom returns a check that FRR's best paths of family from peer are
// exactly want (nothing more, nothing less).
func (w *world) exactFrom(family string, peer netip.Addr, want []netip.Prefix) func() error {
	want = slices.Clone(want)
	lab.SortPrefixes(want)
	return func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		got, err := w.frr.BestFrom(family, peer)
		if err != nil {
			return err
		}
		got = slices.Clone(got)
		lab.SortPrefixes(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("FRR best paths from %s = %v, want exactly %v", peer, got, want)
		}
		return nil
	}
}

// aggregateOf returns the daemon's advertisement of prefix p to peer, or an
// error if there is not exactly one.
func aggregateOf(d *lab.Daemon, peer string, p netip.Prefix) (model.Advertisement, error) {
	advs, err := d.Advertised()
	if err != nil {
		return model.Advertisement{}, err
	}
	var out []model.Advertisement
	for _, a := range advs {
		if a.Prefix == p && a.Peer == peer {
			out = append(out, a)
		}
	}
	if len(out) != 1 {
		return model.Advertisement{}, fmt.Errorf("routes advertised has %d entries for %s to %s (%+v), want 1", len(out), p, peer, out)
	}
	return out[0], nil
}

// membersAre checks that the daemon advertises aggregate p to peer by rule
// with exactly the members want (JSON members), each named in its source.
func membersAre(d *lab.Daemon, peer, rule string, p netip.Prefix, want []netip.Prefix) error {
	a, err := aggregateOf(d, peer, p)
	if err != nil {
		return err
	}
	got := slices.Clone(a.Members)
	lab.SortPrefixes(got)
	want = slices.Clone(want)
	lab.SortPrefixes(want)
	if a.Rule != rule || !slices.Equal(got, want) {
		return fmt.Errorf("routes advertised for %s to %s: rule %q members %v, want rule %q members %v", p, peer, a.Rule, got, rule, want)
	}
	for _, m := range want {
		if !strings.Contains(a.Source, m.Addr().String()) {
			return fmt.Errorf("routes advertised for %s: source %q does not name member %s", p, a.Source, m.Addr())
		}
	}
	return nil
}

// TestAdvertiseAggregate: three Service VIPs in 203.0.113.0/24 under a rule
// with aggregateLength 24 reach FRR as exactly that /24, never as /32s;
// `routes advertised` lists the three as its members; deleting two rows
// keeps the /24 (one member left), deleting the last withdraws it. The
// same with aggregateLengthV6 64 for two IPv6 VIPs over the IPv6 session,
// and with aggregateLength 24 for an egress IP. An egress IP whose /24
// would cover node1's address (172.18.0.2) is sent as its /32, saying why.
func TestAdvertiseAggregate(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: vips, kind: loadBalancerIP, aggregateLength: 24, aggregateLengthV6: 64}
  - {name: eips, kind: egressIP, aggregateLength: 24}`)
	agg4, agg6, aggEIP := netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:f00::/64"), netip.MustParsePrefix("172.18.5.0/24")
	vips4 := []string{"203.0.113.10", "203.0.113.11", "203.0.113.12"}
	vips6 := []string{"2001:db8:f00::10", "2001:db8:f00::11"}
	var hosts4, hosts6 []netip.Prefix
	var lbs4, lbs6 []string
	for i, v := range vips4 {
		hosts4 = append(hosts4, hostPrefix(v))
		lbs4 = append(lbs4, a.addServiceLB(fmt.Sprintf("ns1/web-%d", i), "tcp", map[string]string{v + ":80": "10.128.0.5:8080"}))
	}
	for i, v := range vips6 {
		hosts6 = append(hosts6, hostPrefix(v))
		lbs6 = append(lbs6, a.addServiceLB(fmt.Sprintf("ns1/web6-%d", i), "tcp", map[string]string{"[" + v + "]:80": "[fd00:10:128:1::5]:8080"}))
	}
	eip := a.addEgressIP("GR_node1", "eip1", "ns1", "pod1", "172.18.5.100", "10.128.0.5")
	node4 := []netip.Prefix{lab.DefaultNode1.Subnet, agg4, aggEIP}
	node6 := []netip.Prefix{lab.DefaultNode1.Subnet6, agg6}
	exact := func(what string, v4, v6 []netip.Prefix) {
		t.Helper()
		c4, c6 := a.exactFrom("ipv4", lab.NodeIPv4, v4), a.exactFrom("ipv6", lab.NodeIPv6, v6)
		lab.Eventually(t, generous, 100*time.Millisecond, what, func() error {
			if err := c4(); err != nil {
				return err
			}
			return c6()
		})
	}
	exact("FRR holds the aggregates, not the addresses", node4, node6)
	a.noFRR("the aggregates' member host prefixes", append(append(slices.Clone(hosts4), hosts6...), hostPrefix("172.18.5.100")))
	for _, c := range []struct {
		peer, rule string
		p          netip.Prefix
		members    []netip.Prefix
	}{{"tor", "vips", agg4, hosts4}, {"tor6", "vips", agg6, hosts6}, {"tor", "eips", aggEIP, []netip.Prefix{hostPrefix("172.18.5.100")}}} {
		if err := membersAre(a.d, c.peer, c.rule, c.p, c.members); err != nil {
			t.Error(err)
		}
	}

	// an egress IP next to node1's address: its /24 would draw the node's
	// traffic, so it goes as itself
	near := hostPrefix("172.18.0.100")
	nearNAT := a.addEgressIP("GR_node1", "eip2", "ns1", "pod2", "172.18.0.100", "10.128.0.6")
	exact("an egress IP whose aggregate would cover a node address goes as its /32", append(slices.Clone(node4), near), node6)
	if advs := a.advertised(near); len(advs) != 1 || !strings.Contains(advs[0].Source, "not aggregated: 172.18.0.0/24 would cover 172.18.0.2/32") {
		t.Errorf("routes advertised for %s = %+v, want it sent as itself, saying why", near, advs)
	}
	a.noFRR("the /24 that would cover node1's address", []netip.Prefix{netip.MustParsePrefix("172.18.0.0/24")})
	a.deleteNAT("GR_node1", nearNAT)
	exact("the near egress IP withdrawn with its row", node4, node6)

	// two of the three IPv4 VIPs go: the /24 stays, with one member
	a.deleteLB(lbs4[0])
	a.deleteLB(lbs4[1])
	lab.Eventually(t, generous, 100*time.Millisecond, "routes advertised: the /24 has one member left", func() error {
		return membersAre(a.d, "tor", "vips", agg4, hosts4[2:])
	})
	exact("FRR still holds the /24 with one member left", node4, node6)

	// the last one goes: the /24 is withdrawn
	a.deleteLB(lbs4[2])
	exact("the /24 withdrawn with its last member", []netip.Prefix{lab.DefaultNode1.Subnet, aggEIP}, node6)
	a.noFRR("the /24 and its members after the last row went", append([]netip.Prefix{agg4}, hosts4...))

	// IPv6: one of two goes (the /64 stays), then the other (withdrawn)
	a.deleteLB(lbs6[0])
	lab.Eventually(t, generous, 100*time.Millisecond, "routes advertised: the /64 has one member left", func() error {
		return membersAre(a.d, "tor6", "vips", agg6, hosts6[1:])
	})
	exact("FRR still holds the /64 with one member left", []netip.Prefix{lab.DefaultNode1.Subnet, aggEIP}, node6)
	a.deleteLB(lbs6[1])
	exact("the /64 withdrawn with its last member", []netip.Prefix{lab.DefaultNode1.Subnet, aggEIP}, []netip.Prefix{lab.DefaultNode1.Subnet6})

	// the egress IP's NAT row goes: its aggregate is withdrawn
	a.deleteNAT("GR_node1", eip)
	exact("the egress IP's aggregate withdrawn with its NAT row", []netip.Prefix{lab.DefaultNode1.Subnet}, []netip.Prefix{lab.DefaultNode1.Subnet6})
	a.noFRR("every aggregate after every row went", []netip.Prefix{agg4, agg6, aggEIP})
}

// capVIPs are the Service VIPs of TestAdvertiseExportCap, in the order the
// test adds them (not prefix order).
var capVIPs = []string{"203.0.113.15", "203.0.113.13", "203.0.113.11", "203.0.113.14", "203.0.113.12"}

// TestAdvertiseExportCap: peer tor has maxAdvertised 3 and the rules select
// node1's pod subnet plus up to five Service VIPs. FRR never holds more
// than 3 prefixes from the node (its log of received UPDATEs, replayed,
// says so for every moment, not just for the polls): after each
// row is added, FRR holds exactly the subnet and the lowest VIPs up to the
// cap, the others are `held back` in `routes advertised` and counted by
// `peers`; deleting rows lets held-back VIPs in, in prefix order. The
// session is never reset. Twice: with tor the only peer (a VIP let in or
// held back is a path added to or deleted from gobgp's RIB), and with a
// second, uncapped peer that selects every prefix too (passive, it never
// connects): every path stays in the RIB and the cap works through tor's
// export policy alone.
func TestAdvertiseExportCap(t *testing.T) {
	t.Parallel()
	for _, other := range []bool{false, true} {
		name := "tor-only"
		if other {
			name = "path-kept-for-another-peer"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testExportCap(t, other)
		})
	}
}

func testExportCap(t *testing.T, otherPeer bool) {
	const maxAdv = 3
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}})
	// FRR logs every UPDATE it receives (debug bgp updates in): replayed,
	// the log tells the most prefixes FRR ever held from the node, not
	// just what the polls below see. (FRR's own maximum-prefix is no
	// proof: it counts a withdrawn path until its work queue has reaped
	// it, so a withdrawal followed at once by an announcement trips it.)
	frrLog := filepath.Join(w.frr.Dir, "frr.log")
	if err := w.frr.Config("log file "+frrLog+" debugging", "debug bgp updates in"); err != nil {
		t.Fatal(err)
	}
	tor := lab.DefaultTor()
	tor.Families = []string{"ipv4"}
	tor.MaxAdvertised = maxAdv
	peers, listen := []lab.Peer{tor}, 0
	if otherPeer {
		// passive (the daemon listens in the node namespace, where
		// nothing connects from 198.51.100.1): no packet is ever sent to
		// it, but the daemon selects every prefix for it
		peers = append(peers, lab.Peer{Name: "other", Address: netip.MustParseAddr("198.51.100.1"), ASN: 65002, Passive: true, Families: []string{"ipv4"}})
		listen = 179
	}
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{
		Peers:      peers,
		ListenPort: listen,
		Advertise: `  - {name: pods, kind: podNetwork, networks: [default]}
  - {name: lbs, kind: loadBalancerIP}`,
		ServiceCIDRs: advServiceCIDRs,
	})
	a := &advWorld{world: w, t: t}

	// neverOver fails the test at once if FRR ever held more than maxAdv
	// prefixes from the node (by its UPDATE log) or reset the session.
	neverOver := func(what string) {
		t.Helper()
		most, when, err := mostHeld(frrLog, lab.NodeIPv4)
		if err != nil {
			t.Fatal(err)
		}
		if most > maxAdv {
			t.Fatalf("%s: FRR held %d prefixes from the node after %q, more than maxAdvertised %d", what, most, when, maxAdv)
		}
		nbs, err := w.frr.Neighbors()
		if err != nil {
			t.Fatal(err)
		}
		n := nbs[lab.NodeIPv4.String()]
		if n.ConnectionsDropped != 0 || n.Messages.NotificationsSent != 0 {
			t.Fatalf("%s: FRR's session with the node was dropped %d times, %d NOTIFICATIONs sent (last %q, reset: %q)",
				what, n.ConnectionsDropped, n.Messages.NotificationsSent, n.LastNotification, n.LastReset)
		}
	}
	// check waits until FRR holds exactly the subnet and the lowest of
	// present up to the cap (the subnet takes one place), and the daemon
	// reports the rest held back; every poll also checks that FRR holds
	// no more than maxAdv prefixes from the node, now and ever, and
	// never reset the session.
	check := func(what string, present []string) {
		t.Helper()
		var hosts []netip.Prefix
		for _, v := range present {
			hosts = append(hosts, hostPrefix(v))
		}
		lab.SortPrefixes(hosts)
		n := min(len(hosts), maxAdv-1)
		sent := append([]netip.Prefix{lab.DefaultNode1.Subnet}, hosts[:n]...)
		held := hosts[n:]
		exact := a.exactFrom("ipv4", lab.NodeIPv4, sent)
		lab.Eventually(t, generous, 100*time.Millisecond, what, func() error {
			neverOver(what)
			got, err := w.frr.BestFrom("ipv4", lab.NodeIPv4)
			if err != nil {
				return err
			}
			if len(got) > maxAdv {
				t.Fatalf("%s: FRR holds %d prefixes from the node (%v), more than maxAdvertised %d", what, len(got), got, maxAdv)
			}
			if err := exact(); err != nil {
				return err
			}
			advs, err := w.d.Advertised()
			if err != nil {
				return err
			}
			var gotSent, gotHeld []netip.Prefix
			var other []netip.Prefix
			for _, adv := range advs {
				if adv.Peer == "other" {
					other = append(other, adv.Prefix)
					continue
				}
				switch adv.State {
				case model.AdvSent:
					gotSent = append(gotSent, adv.Prefix)
				case model.AdvHeldBack:
					if !strings.Contains(adv.Reason, "maxAdvertised") {
						return fmt.Errorf("routes advertised: %s held back, reason %q does not name maxAdvertised", adv.Prefix, adv.Reason)
					}
					gotHeld = append(gotHeld, adv.Prefix)
				default:
					return fmt.Errorf("routes advertised: %s to %s is %q (%s)", adv.Prefix, adv.Peer, adv.State, adv.Reason)
				}
			}
			lab.SortPrefixes(gotSent)
			lab.SortPrefixes(gotHeld)
			if !slices.Equal(gotSent, sent) || !slices.Equal(gotHeld, held) {
				return fmt.Errorf("routes advertised: sent %v held back %v, want sent %v held back %v", gotSent, gotHeld, sent, held)
			}
			if all := append(slices.Clone(sent), held...); otherPeer {
				lab.SortPrefixes(all)
				lab.SortPrefixes(other)
				if !slices.Equal(other, all) {
					return fmt.Errorf("routes advertised to the uncapped peer other: %v, want every selected prefix %v", other, all)
				}
			}
			p, err := w.d.Peer("tor")
			if err != nil {
				return err
			}
			if p.HeldBack != len(held) {
				return fmt.Errorf("peers: tor heldBack %d, want %d", p.HeldBack, len(held))
			}
			return nil
		})
	}

	check("only the subnet before any VIP", nil)
	lbs := map[string]string{}
	for i, v := range capVIPs {
		lbs[v] = a.addServiceLB(fmt.Sprintf("ns1/svc-%d", i), "tcp", map[string]string{v + ":80": "10.128.0.5:8080"})
		check(fmt.Sprintf("after adding VIP %s (%d of %d)", v, i+1, len(capVIPs)), capVIPs[:i+1])
	}
	// delete the sent VIPs, lowest first: the held-back ones come in, in
	// prefix order (.13 then .14 then .15)
	present := slices.Clone(capVIPs)
	for _, v := range []string{"203.0.113.11", "203.0.113.12", "203.0.113.13"} {
		a.deleteLB(lbs[v])
		present = slices.DeleteFunc(present, func(s string) bool { return s == v })
		check(fmt.Sprintf("after deleting VIP %s", v), present)
	}
	// a lower VIP comes back: it displaces .15, which is held back again
	a.addServiceLB("ns1/svc-again", "tcp", map[string]string{"203.0.113.11:80": "10.128.0.5:8080"})
	present = append(present, "203.0.113.11")
	check("after adding VIP 203.0.113.11 again", present)

	neverOver("at the end")
	// the replay is no proof if it saw nothing: FRR did hold 3
	if most, _, err := mostHeld(frrLog, lab.NodeIPv4); err != nil || most != maxAdv {
		t.Errorf("FRR's UPDATE log replayed: at most %d prefixes held from the node (%v), want %d: is `debug bgp updates in` logged?", most, err, maxAdv)
	}
	if err := w.frr.Established(lab.NodeIPv4); err != nil {
		t.Errorf("at the end: %v", err)
	}
}

// rcvdRE matches FRR 8.4's `debug bgp updates in` lines about one prefix:
// "N(host) rcvd P IPv4 unicast[...duplicate ignored]" (announced) and
// "N(host) rcvd UPDATE about P IPv4 unicast -- withdrawn" (or "-- DENIED
// due to: ...", not taken).
var rcvdRE = regexp.MustCompile(`\] (\S+)\(\S*\) rcvd (?:UPDATE about )?(\S+/\d+) IPv(?:4|6) unicast(.*)$`)

// mostHeld replays FRR's log of received UPDATEs from neighbor and returns
// the most prefixes FRR held from it at any moment, and the log line after
// which it first held that many.
func mostHeld(logFile string, neighbor netip.Addr) (int, string, error) {
	text, err := os.ReadFile(logFile)
	if err != nil {
		return 0, "", err
	}
	held := map[netip.Prefix]bool{}
	most, when := 0, ""
	for _, line := range strings.Split(string(text), "\n") {
		m := rcvdRE.FindStringSubmatch(line)
		if m == nil || m[1] != neighbor.String() {
			continue
		}
		p, err := netip.ParsePrefix(m[2])
		if err != nil {
			return 0, "", fmt.Errorf("FRR log line %q: %w", line, err)
		}
		switch {
		case strings.Contains(m[3], "withdrawn"):
			delete(held, p)
		case strings.Contains(m[3], "DENIED"):
		default:
			held[p] = true
		}
		if len(held) > most {
			most, when = len(held), line
		}
	}
	return most, when, nil
}
