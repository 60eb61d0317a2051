package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestWeightByEndpointsFRR (issue 21): two nodes, each running its own
// ovnbgp with its own NB (as TestAdvertiseECMP) and node2 on a second
// link to the tor, send one VIP with
// weightByEndpoints and localEndpointsOnly to FRR 8.4 (maximum-paths 2,
// `bgp bestpath bandwidth default-weight-for-missing`), which takes the
// non-transitive link-bandwidth community from its eBGP neighbours. With
// one backend pod on node1 and three on node2, FRR's kernel route for the
// VIP (`ip -j route` in the tor namespace, installed by zebra) has a
// nexthop via each node, weighted 1:3; with three on each, 1:1. A second
// VIP, of a rule without localEndpointsOnly, with its endpoints on node2
// only: node1 sends it without the community (not with bandwidth 0), and
// FRR weighs node1's path 1 against 100. FRR's log
// of received UPDATEs shows each node's new bandwidth as an UPDATE and
// never a withdrawal of the VIP.
func TestWeightByEndpointsFRR(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	// node2 on a link of its own: over one link, zebra's two nexthops
	// would be one in the kernel
	node2Addr := netip.MustParseAddr("192.0.2.20")
	tor2Addr := l.AddTorLink("veth-node2", node2Addr)
	nb1, nb2 := l.StartNB(), l.StartNB()
	nb1.PopulateOVNK()
	nb2.PopulateOVNK()
	nb2.GatewayRouter("node2", netip.MustParsePrefix("172.18.0.3/16"))
	frr := l.StartFRR(lab.FRRConfig{MaximumPaths: 2, BestpathBandwidth: "default-weight-for-missing", UpdateLog: true,
		Neighbors: []lab.FRRNeighbor{
			{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
			{Address: node2Addr, ASN: 65010, Passive: true},
		}})
	rules := `  - {name: web, kind: loadBalancerIP, services: ["ns1/web"], localEndpointsOnly: true, weightByEndpoints: true}
  - {name: all, kind: loadBalancerIP, services: ["ns1/all"], weightByEndpoints: true}`
	tor1, tor2 := lab.DefaultTor(), lab.DefaultTor()
	tor1.Families, tor2.Families = []string{"ipv4"}, []string{"ipv4"}
	tor2.Address, tor2.SourceAddress = tor2Addr, node2Addr
	l.StartDaemon(nb1, lab.DaemonConfig{Advertise: rules, ServiceCIDRs: advServiceCIDRs, Peers: []lab.Peer{tor1}})
	l.StartDaemon(nb2, lab.DaemonConfig{Node: "node2", RouterID: node2Addr, Advertise: rules,
		ServiceCIDRs: advServiceCIDRs, Peers: []lab.Peer{tor2}})

	vip, all := hostPrefix("203.0.113.40"), hostPrefix("203.0.113.41")
	// node1's pods are in 10.128.0.0/24, node2's in 10.128.2.0/23
	backends := func(n1, n2 int) string {
		var bs []string
		for i := range n1 {
			bs = append(bs, fmt.Sprintf("10.128.0.%d:8080", 5+i))
		}
		for i := range n2 {
			bs = append(bs, fmt.Sprintf("10.128.2.%d:8080", 5+i))
		}
		return strings.Join(bs, ",")
	}
	lbs := map[*lab.NB]string{}
	for _, nb := range []*lab.NB{nb1, nb2} {
		lbs[nb] = createServiceLB(t, nb, "", "ns1/web", "tcp", map[string]string{"203.0.113.40:80": backends(1, 3)})
		createServiceLB(t, nb, "", "ns1/all", "tcp", map[string]string{"203.0.113.41:80": backends(0, 3)})
	}
	waitWeights(t, l, frr, "1 endpoint on node1, 3 on node2", vip, map[netip.Addr]int{lab.NodeIPv4: 1, node2Addr: 3})
	// Without localEndpointsOnly node1 sends the VIP of no local
	// endpoint without the community, never with bandwidth 0: FRR's
	// default-weight-for-missing weighs it 1 against 100.
	waitWeights(t, l, frr, "no endpoint on node1 (no localEndpointsOnly), 3 on node2", all, map[netip.Addr]int{lab.NodeIPv4: 1, node2Addr: 100})
	for nb, uuid := range lbs {
		nb.MustNBCtl("set", "Load_Balancer", uuid, vipsArg(map[string]string{"203.0.113.40:80": backends(3, 3)}))
	}
	waitWeights(t, l, frr, "3 endpoints on each node", vip, map[netip.Addr]int{lab.NodeIPv4: 1, node2Addr: 1})

	ups, err := lab.ParseUpdateLog(filepath.Join(frr.Dir, "frr.log"))
	if err != nil {
		t.Fatal(err)
	}
	var node1 []string
	for _, u := range ups {
		if u.Prefix == all && u.Neighbor == lab.NodeIPv4 && strings.Contains(u.Attrs, "LB:") {
			t.Errorf("node1 sent %s, of no local endpoint, with %q: want no link bandwidth", all, u.Attrs)
		}
		if u.Prefix != vip {
			continue
		}
		if u.Withdraw {
			t.Errorf("FRR received a withdrawal of %s from %s at %s: a new weight must be an UPDATE", vip, u.Neighbor, u.At.Format(time.StampMicro))
		}
		if u.Neighbor == lab.NodeIPv4 {
			node1 = append(node1, u.Attrs)
		}
	}
	t.Logf("node1's UPDATEs of %s as FRR logged them: %q", vip, node1)
	if !slices.ContainsFunc(node1, func(a string) bool { return strings.Contains(a, "LB:65010:125000") }) ||
		!strings.Contains(node1[len(node1)-1], "LB:65010:375000") {
		t.Errorf("node1's UPDATEs of %s: %q, want one with LB:65010:125000 and the last with LB:65010:375000", vip, node1)
	}
}

// multipathRoute is a multipath route of `ip -j route` as the weight tests
// read it.
type multipathRoute struct {
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Nexthops []struct {
		Gateway string `json:"gateway"`
		Weight  int    `json:"weight"`
	} `json:"nexthops"`
}

// waitWeights waits until the tor namespace's kernel route for p (FRR's,
// proto bgp) has one nexthop per address of want, their weights in the
// ratio of want's values.
func waitWeights(t *testing.T, l *lab.Lab, frr *lab.FRR, what string, p netip.Prefix, want map[netip.Addr]int) {
	t.Helper()
	lab.Eventually(t, generous, 100*time.Millisecond, what, func() error {
		out, err := l.Exec(l.Tor, "ip", "-j", "-4", "route", "show", p.String(), "proto", "bgp")
		if err != nil {
			return fmt.Errorf("ip route: %v: %s", err, out)
		}
		var rs []multipathRoute
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			return fmt.Errorf("ip -j route: %v: %s", err, out)
		}
		if len(rs) == 1 && len(rs[0].Nexthops) == 0 && rs[0].Gateway != "" {
			// one nexthop: no list
			rs[0].Nexthops = append(rs[0].Nexthops, struct {
				Gateway string `json:"gateway"`
				Weight  int    `json:"weight"`
			}{rs[0].Gateway, 1})
		}
		if len(rs) != 1 || len(rs[0].Nexthops) != len(want) {
			rib, _ := frr.VTY("show ip bgp " + p.String())
			return fmt.Errorf("kernel route for %s: %s, want %d nexthops; FRR: %s", p, out, len(want), rib)
		}
		// weights w_a / w_b == want_a / want_b for every pair, as
		// cross products (FRR scales the weights to its own range)
		type hop struct{ weight, want int }
		var hops []hop
		for _, nh := range rs[0].Nexthops {
			a, err := netip.ParseAddr(nh.Gateway)
			if err != nil || want[a] == 0 {
				return fmt.Errorf("kernel route for %s: nexthop %q is not one of %v: %s", p, nh.Gateway, want, out)
			}
			hops = append(hops, hop{nh.Weight, want[a]})
		}
		for _, a := range hops {
			for _, b := range hops {
				if a.weight*b.want != b.weight*a.want {
					return fmt.Errorf("kernel route for %s: weights %s, want the ratio of %v", p, out, want)
				}
			}
		}
		t.Logf("%s: kernel route %s", what, strings.TrimSpace(out))
		return nil
	})
}
