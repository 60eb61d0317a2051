package ovn

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
)

const (
	tableLoadBalancer = "Load_Balancer"
	tableNAT          = "NAT"
)

// lbRow is a Service load balancer (external_ids k8s.ovn.org/kind=Service):
// its VIP keys (protected, advertised) and their backends (advertised).
type lbRow struct {
	UUID    string
	Name    string
	Owner   string   // external_ids:k8s.ovn.org/owner, "<namespace>/<name>"
	Network string   // external_ids:k8s.ovn.org/network, "" on the default network
	VIPs    []string // the keys of vips, sorted: "IP:PORT", "[IPv6]:PORT" or "IP"
	// Backends are the values of vips, in the order of VIPs: "IP:PORT,...",
	// "[IPv6]:PORT,...", "IP,..." or "" (no endpoint).
	Backends []string
}

// natRow is an egress IP SNAT (external_ids k8s.ovn.org/owner-type=EgressIP).
type natRow struct {
	UUID   string
	Router string // name of the Logical_Router holding it, "" if none
	// RouterNetwork is the router's external_ids:k8s.ovn.org/network, ""
	// on the default network.
	RouterNetwork string
	Type          string
	ExternalIP    string
	LogicalIP     string
	Name          string // external_ids:k8s.ovn.org/name
	Controller    string // external_ids:k8s.ovn.org/owner-controller
}

// buildProtectedAddresses returns the addresses NB holds that belong to
// the cluster, each as a host prefix with the row it comes from
// (docs/ovn-nb.md, "Protected addresses"; ARCHITECTURE.md safety rule 2):
//   - every Service load-balancer VIP (vips keys; the port is dropped;
//     template keys such as "^NODEIP_IPv4_0:30080" name node addresses,
//     protected below, and are skipped);
//   - every egress IP: external_ip of the NAT rows OVN-Kubernetes owns as
//     EgressIP, on any node's gateway router and of any network;
//   - every node address NB holds: the networks of every gateway router's
//     external port (rtoe-GR_*), any node's (a central NB has them all);
//   - in interconnect mode, the next hops of the routes towards other
//     nodes (external_ids ic-node): their transit switch addresses. Their
//     ip_prefix (pod subnets, join addresses) is protected in buildNB.
//
// A value that does not parse is left out and said in problems. A repeated
// address is reported once, with its first reason (in row order).
func buildProtectedAddresses(in nbRows) (prot []model.ProtectedPrefix, problems []string) {
	seen := make(map[netip.Addr]bool)
	add := func(a netip.Addr, why func() string) {
		a = a.Unmap()
		if seen[a] {
			return
		}
		seen[a] = true
		prot = append(prot, model.ProtectedPrefix{Prefix: netip.PrefixFrom(a, a.BitLen()), Why: why()})
	}

	for _, lb := range in.LoadBalancers {
		for _, vip := range lb.VIPs {
			if strings.HasPrefix(vip, "^") {
				continue // a template: node addresses, from the gateway routers
			}
			a, ok := parseVIP(vip)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s %s vips key %q: not IP:PORT, [IPv6]:PORT or an address; not protected nor advertised",
					tableLoadBalancer, lb.Name, vip))
				continue
			}
			add(a, func() string {
				return fmt.Sprintf("Service VIP of %s (%s %s vips)", lb.Owner, tableLoadBalancer, lb.Name)
			})
		}
	}

	// The rows come sorted by UUID, which differs on every load: sort
	// by what the reason names, so that a shared address (an egress IP on
	// several pods, a transit address in several networks) always shows
	// the same one.
	nats := slices.Clone(in.NATs)
	slices.SortFunc(nats, func(a, b natRow) int {
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
	return prot, problems
}

// parseVIP reads a vips key of a Load_Balancer: "IP:PORT", "[IPv6]:PORT",
// or an address alone (OVN allows a VIP without a port).
func parseVIP(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := ap.Addr()
		return a, a.Zone() == "" && !a.IsUnspecified()
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil || a.Zone() != "" || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a, true
}
