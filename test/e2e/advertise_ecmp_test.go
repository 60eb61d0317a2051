package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestAdvertiseECMP (issue 7): two nodes, each running its own ovnbgp
// with its own NB (interconnect: every zone's NB holds every Service's
// load balancer), advertise one VIP, and FRR with maximum-paths 2 uses
// both paths, one via each node (FRR 8.4's default maximum-paths allows it
// too; the test says it). With localEndpointsOnly only the node
// whose pod backs the Service advertises; moving the backend to the other
// node's pod moves the path, and moving it back moves it back. The VIP of
// the rule without localEndpointsOnly keeps its two paths throughout.
//
// Both daemons run in the node namespace: node1 on the link address,
// node2 on a second address (on the node's loopback, routed by the tor),
// from which it dials FRR and which it sends as its next hop.
func TestAdvertiseECMP(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	node2Addr := netip.MustParseAddr("192.0.2.10")
	l.AddNodeAddress(node2Addr)
	nb1, nb2 := l.StartNB(), l.StartNB()
	nb1.PopulateOVNK()
	nb2.PopulateOVNK()
	nb2.GatewayRouter("node2", netip.MustParsePrefix("172.18.0.3/16"))
	frr := l.StartFRR(lab.FRRConfig{MaximumPaths: 2, Neighbors: []lab.FRRNeighbor{
		{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
		// Not on a connected subnet of FRR's, though one link away.
		{Address: node2Addr, ASN: 65010, Passive: true, DisableConnectedCheck: true},
	}})
	rules := `  - {name: web, kind: loadBalancerIP, services: ["ns1/web"]}
  - {name: local, kind: loadBalancerIP, services: ["ns1/local"], localEndpointsOnly: true}`
	tor1, tor2 := lab.DefaultTor(), lab.DefaultTor()
	tor1.Families, tor2.Families = []string{"ipv4"}, []string{"ipv4"}
	tor2.SourceAddress = node2Addr
	l.StartDaemon(nb1, lab.DaemonConfig{Advertise: rules, ServiceCIDRs: advServiceCIDRs, Peers: []lab.Peer{tor1}})
	l.StartDaemon(nb2, lab.DaemonConfig{Node: "node2", RouterID: node2Addr, Advertise: rules,
		ServiceCIDRs: advServiceCIDRs, Peers: []lab.Peer{tor2}})

	web, local := hostPrefix("203.0.113.40"), hostPrefix("203.0.113.41")
	localLB := map[*lab.NB]string{}
	for _, nb := range []*lab.NB{nb1, nb2} {
		createServiceLB(t, nb, "", "ns1/web", "tcp", map[string]string{"203.0.113.40:80": "10.128.0.5:8080,10.128.2.5:8080"})
		localLB[nb] = createServiceLB(t, nb, "", "ns1/local", "tcp", map[string]string{"203.0.113.41:80": "10.128.0.5:8080"})
	}
	waitNextHops(t, frr, "a VIP every node advertises: ECMP over both", web, lab.NodeIPv4, node2Addr)
	waitNextHops(t, frr, "localEndpointsOnly: only node1 holds the backend", local, lab.NodeIPv4)

	moveTo := func(backend string) {
		for nb, uuid := range localLB {
			nb.MustNBCtl("set", "Load_Balancer", uuid, vipsArg(map[string]string{"203.0.113.41:80": backend}))
		}
	}
	moveTo("10.128.2.5:8080")
	waitNextHops(t, frr, "the backend moved to node2's pod: so did the path", local, node2Addr)
	moveTo("10.128.0.5:8080")
	waitNextHops(t, frr, "the backend back on node1's pod", local, lab.NodeIPv4)
	waitNextHops(t, frr, "the VIP without localEndpointsOnly kept both paths", web, lab.NodeIPv4, node2Addr)
}

// waitNextHops waits until FRR holds exactly one valid path for p per next
// hop of nhs, every one of them used (best, or multipath with the best).
func waitNextHops(t *testing.T, frr *lab.FRR, what string, p netip.Prefix, nhs ...netip.Addr) {
	t.Helper()
	want := slices.Clone(nhs)
	slices.SortFunc(want, netip.Addr.Compare)
	lab.Eventually(t, generous, 100*time.Millisecond, what, func() error {
		rib, err := frr.RIB("ipv4")
		if err != nil {
			return err
		}
		var got []netip.Addr
		var unused []string
		for _, path := range rib[p] {
			if !path.Valid {
				unused = append(unused, "invalid via "+path.NextHop.String())
				continue
			}
			got = append(got, path.NextHop)
			if len(nhs) > 1 && !path.Best && !path.Multipath {
				unused = append(unused, "not multipath via "+path.NextHop.String())
			}
		}
		slices.SortFunc(got, netip.Addr.Compare)
		if !slices.Equal(got, want) || len(unused) > 0 {
			return fmt.Errorf("FRR's paths for %s: via %v (%v), want via %v, all used", p, got, unused, want)
		}
		return nil
	})
}

// TestAdvertisePerPeerAttrs (issue 7, selectors and per-peer choice): one
// daemon, two sessions to FRR (peer tor from the link address, peer tor-b
// to FRR's second address from the node's second address). Rule gold
// selects Service ns1/gold for tor only, with community 65001:100 and MED
// 10; rule all selects every Service for both, with community 65001:200.
// FRR's JSON shows, per session, the attributes of the first rule that
// selects the VIP for that peer: gold's towards tor, all's towards tor-b;
// another Service's VIP carries all's on both.
func TestAdvertisePerPeerAttrs(t *testing.T) {
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
	b := lab.Peer{Name: "tor-b", Address: torB, ASN: 65001, SourceAddress: src, Families: []string{"ipv4"}}
	l.StartDaemon(nb, lab.DaemonConfig{ServiceCIDRs: advServiceCIDRs, Peers: []lab.Peer{tor, b},
		Advertise: `  - {name: gold, kind: loadBalancerIP, services: ["ns1/gold"], peers: [tor], communities: ["65001:100"], med: 10}
  - {name: all, kind: loadBalancerIP, communities: ["65001:200"]}`})
	createServiceLB(t, nb, "", "ns1/gold", "tcp", map[string]string{"203.0.113.60:80": "10.128.0.5:8080"})
	createServiceLB(t, nb, "", "ns1/plain", "tcp", map[string]string{"203.0.113.61:80": "10.128.0.5:8080"})

	type attrs struct {
		comms string
		med   uint32
	}
	want := map[string]map[string]attrs{
		"203.0.113.60/32": {lab.NodeIPv4.String(): {"65001:100", 10}, src.String(): {"65001:200", 0}},
		"203.0.113.61/32": {lab.NodeIPv4.String(): {"65001:200", 0}, src.String(): {"65001:200", 0}},
	}
	for prefix, bySession := range want {
		lab.Eventually(t, generous, 100*time.Millisecond, "FRR's paths for "+prefix+" carry each session's attributes", func() error {
			raw, err := frr.VTY("show bgp ipv4 unicast " + prefix + " json")
			if err != nil {
				return err
			}
			var p frrPrefix
			if err := json.Unmarshal([]byte(raw), &p); err != nil {
				return err
			}
			got := map[string]attrs{}
			for _, path := range p.Paths {
				var a attrs
				if path.Community != nil {
					a.comms = strings.Join(path.Community.List, ",")
				}
				if path.MED != nil {
					a.med = *path.MED
				}
				got[path.Peer.PeerID] = a
			}
			if fmt.Sprint(got) != fmt.Sprint(bySession) {
				return fmt.Errorf("by session (node address): %v, want %v", got, bySession)
			}
			return nil
		})
	}
}
