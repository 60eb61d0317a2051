package ovn

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
)

// TestProtectedPartsMerged: the protected addresses built per kind of row
// (each part sorted on its own, then merged: protectedFrom) are exactly
// those of the one-pass builder they replaced (refProtectedAddresses,
// sorted), problems and node addresses included, on rows whose addresses
// collide within and across kinds; and with the memo, an egress IP's
// change does not build the Service VIPs' part again, nor the other way
// round (one change sorted every protected address again).
func TestProtectedPartsMerged(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	addr := func() string {
		if rng.IntN(4) == 0 {
			return fmt.Sprintf("fd00::%x", rng.IntN(6))
		}
		return fmt.Sprintf("10.0.0.%d", rng.IntN(12))
	}
	hostport := func(a string) string {
		if strings.Contains(a, ":") {
			return "[" + a + "]:80"
		}
		return a + ":80"
	}
	rows := func() nbRows {
		var in nbRows
		for i := range rng.IntN(6) {
			lb := lbIn{UUID: fmt.Sprintf("l%d", i), Name: fmt.Sprintf("Service_ns/s%d_TCP_cluster", rng.IntN(3)), Owner: "ns/s"}
			for range 1 + rng.IntN(3) {
				switch rng.IntN(8) {
				case 0:
					lb.VIPs = append(lb.VIPs, "^NODEIP_IPv4_0:30080")
				case 1:
					lb.VIPs = append(lb.VIPs, "10.0.0.300:80")
				default:
					lb.VIPs = append(lb.VIPs, hostport(addr()))
				}
			}
			lb.Backends = make([]string, len(lb.VIPs))
			in.LoadBalancers = append(in.LoadBalancers, lb.row())
		}
		for i := range rng.IntN(6) {
			ip := addr()
			if rng.IntN(8) == 0 {
				ip = "bogus"
			}
			in.NATs = append(in.NATs, natRow{UUID: fmt.Sprintf("n%d", rng.IntN(9)), Router: fmt.Sprintf("GR_node%d", rng.IntN(3)),
				ExternalIP: ip, Name: fmt.Sprintf("eip%d_ns/p%d", rng.IntN(3), i), Controller: "c"})
		}
		for i := range rng.IntN(4) {
			p := routerPortRow{UUID: fmt.Sprintf("p%d", i), Name: fmt.Sprintf("%s%snode%d", ovnk.GatewayRouterToExtSwitch, ovnk.GatewayRouterPrefix, i)}
			if rng.IntN(5) == 0 {
				p.Name = fmt.Sprintf("rtos-node%d", i)
			}
			for range 1 + rng.IntN(2) {
				n := addr() + "/24"
				if strings.Contains(n, ":") {
					n = strings.TrimSuffix(n, "/24") + "/64"
				}
				if rng.IntN(8) == 0 {
					n = "junk"
				}
				p.Networks = append(p.Networks, n)
			}
			in.Ports = append(in.Ports, p)
		}
		for i := range rng.IntN(4) {
			in.Routes = append(in.Routes, routeRow{UUID: fmt.Sprintf("r%d", i), Router: "ovn_cluster_router",
				IPPrefix: "10.128.2.0/23", Nexthop: addr(), ICNode: fmt.Sprintf("node%d", rng.IntN(3))})
		}
		return in
	}
	for round := range 500 {
		in := rows()
		wantProt, wantNode, wantProblems := refProtectedAddresses(in)
		got, gotNode, gotProblems := protectedFrom(in, &buildMemo{})
		if want := sortProtected(wantProt); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
			t.Fatalf("round %d: protected\n got %v\nwant %v", round, got, want)
		}
		if !slices.Equal(gotNode, wantNode) {
			t.Fatalf("round %d: node addresses %v, want %v", round, gotNode, wantNode)
		}
		if !slices.Equal(gotProblems, wantProblems) {
			t.Fatalf("round %d: problems %q, want %q", round, gotProblems, wantProblems)
		}
	}

	// The memo: a part is built again only when its rows are other rows.
	in := nbRows{
		LoadBalancers: lbRows([]lbIn{{UUID: "l1", Name: "Service_ns/web_TCP_cluster", Owner: "ns/web", VIPs: []string{"192.0.2.50:80"}, Backends: []string{""}}}),
		NATs:          []natRow{{UUID: "n1", Router: "GR_node1", ExternalIP: "172.18.0.100", Name: "eip1_ns/p1"}},
	}
	memo := &buildMemo{}
	first, _, _ := protectedFrom(in, memo)
	lbPart, natPart := memo.lbProt.prot, memo.natProt.prot
	in.NATs = slices.Clone(in.NATs)
	in.NATs[0].ExternalIP = "172.18.0.101"
	second, _, _ := protectedFrom(in, memo)
	if &memo.lbProt.prot[0] != &lbPart[0] {
		t.Errorf("a NAT change built the load balancers' part again")
	}
	if &memo.natProt.prot[0] == &natPart[0] {
		t.Errorf("a NAT change did not build the NATs' part again")
	}
	natPart = memo.natProt.prot
	in.LoadBalancers = slices.Clone(in.LoadBalancers)
	third, _, _ := protectedFrom(in, memo)
	if &memo.natProt.prot[0] != &natPart[0] {
		t.Errorf("a load balancer change built the NATs' part again")
	}
	if &memo.lbProt.prot[0] == &lbPart[0] {
		t.Errorf("a load balancer change did not build the load balancers' part again")
	}
	if len(first) != 2 || len(second) != 2 || len(third) != 2 || second[1].Prefix != netip.MustParsePrefix("192.0.2.50/32") {
		t.Errorf("protected %v, %v, %v: want two addresses each", first, second, third)
	}
}

// refProtectedAddresses is the one-pass builder protectedFrom replaced,
// kept as the reference it must agree with.
func refProtectedAddresses(in nbRows) (prot []model.ProtectedPrefix, nodeAddrs []netip.Addr, problems []string) {
	// Sized once: a big cluster has tens of thousands of VIPs.
	n := len(in.NATs) + len(in.Routes)
	for _, lb := range in.LoadBalancers {
		n += len(lb.VIPs)
	}
	for _, p := range in.Ports {
		n += len(p.Networks)
	}
	seen := make(map[netip.Addr]bool, n)
	prot = make([]model.ProtectedPrefix, 0, n)
	addWhy := func(a netip.Addr, why string) {
		a = a.Unmap()
		if seen[a] {
			return
		}
		seen[a] = true
		prot = append(prot, model.ProtectedPrefix{Prefix: netip.PrefixFrom(a, a.BitLen()), Why: why})
	}
	add := func(a netip.Addr, why func() string) {
		if !seen[a.Unmap()] {
			addWhy(a, why())
		}
	}

	for _, lb := range in.LoadBalancers {
		for _, vip := range lb.VIPs {
			if vip.template() {
				continue // a template: node addresses, from the gateway routers
			}
			a := vip.Addr
			if !a.IsValid() {
				problems = append(problems, fmt.Sprintf("%s %s vips key %q: not IP:PORT, [IPv6]:PORT or an address; not protected nor advertised",
					tableLoadBalancer, lb.Name, vip.Key))
				continue
			}
			// Made once per row version: one per Service, 10,000 on a
			// big cluster, on every pass.
			addWhy(a, lb.protectWhy())
		}
	}

	// The rows come sorted by UUID, which differs on every load: sort
	// by what the reason names, so that a shared address (an egress IP on
	// several pods, a transit address in several networks) always shows
	// the same one.
	// Pointers are sorted: a row is eight strings.
	nats := make([]*natRow, len(in.NATs))
	for i := range in.NATs {
		nats[i] = &in.NATs[i]
	}
	slices.SortFunc(nats, func(a, b *natRow) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Router, b.Router), cmp.Compare(a.UUID, b.UUID))
	})
	for _, n := range nats {
		a, err := netip.ParseAddr(n.ExternalIP)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			problems = append(problems, fmt.Sprintf("%s %s (%s=%s, %s=%s) external_ip %q: not an address; not protected nor advertised",
				tableNAT, n.UUID, ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDName, n.Name, n.ExternalIP))
			continue
		}
		add(a, func() string {
			router := n.Router
			if router == "" {
				router = "no router"
			}
			return fmt.Sprintf("egress IP %s (%s on %s external_ip, %s=%s, %s=%s)", n.Name, tableNAT, router,
				ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDOwnerController, n.Controller)
		})
	}

	for _, p := range in.Ports {
		if !strings.HasPrefix(p.Name, ovnk.GatewayRouterToExtSwitch+ovnk.GatewayRouterPrefix) {
			continue
		}
		for _, s := range p.Networks {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() || pfx.Addr().IsUnspecified() {
				problems = append(problems, fmt.Sprintf("%s %s networks %q: not an address/length; not protected", tableRouterPort, p.Name, s))
				continue
			}
			nodeAddrs = append(nodeAddrs, pfx.Addr().Unmap())
			add(pfx.Addr(), func() string {
				return fmt.Sprintf("node address (%s %s networks)", tableRouterPort, p.Name)
			})
		}
	}

	var ic []routeRow
	for _, rt := range in.Routes {
		if rt.ICNode != "" {
			ic = append(ic, rt)
		}
	}
	slices.SortFunc(ic, func(a, b routeRow) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), cmp.Compare(a.ICNode, b.ICNode), cmp.Compare(a.Nexthop, b.Nexthop), cmp.Compare(a.UUID, b.UUID))
	})
	for _, rt := range ic {
		a, err := netip.ParseAddr(rt.Nexthop)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			// ip_prefix is what matters; buildNB reports a bad one.
			continue
		}
		add(a, func() string {
			return fmt.Sprintf("interconnect next hop to node %s (%s on %s nexthop, %s=%s)",
				rt.ICNode, tableStaticRoute, rt.Router, ovnk.ExtIDICNode, rt.ICNode)
		})
	}
	slices.Sort(problems)
	return prot, nodeAddrs, problems
}
