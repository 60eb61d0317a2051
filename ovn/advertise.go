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

// OVN-Kubernetes' masquerade subnets (config.Gateway.V4MasqueradeSubnet,
// V6MasqueradeSubnet): defaults 169.254.169.0/29 and fd69::/125 upstream,
// 169.254.0.0/17 and fd69::/112 in OpenShift. A VIP key there (the
// ETP=Local node-port VIP 169.254.169.3 on node_switch rows) is internal,
// and a backend there (169.254.169.2, fd69::2: a host-network endpoint on
// the node, on node_router rows) stands for a node address the other rows
// hold as it is. Neither is advertised nor counted.
var (
	masqueradeV4 = netip.MustParsePrefix("169.254.0.0/16")
	masqueradeV6 = netip.MustParsePrefix("fd69::/112")
)

// isMasquerade says whether a is in OVN-Kubernetes' masquerade subnets.
func isMasquerade(a netip.Addr) bool {
	return masqueradeV4.Contains(a) || masqueradeV6.Contains(a)
}

// maxSourceNames is how many row names a Source lists before "+N more":
// a central NB holds per-node rows of every node.
const maxSourceNames = 3

// sourceNames joins names, the first maxSourceNames of them.
func sourceNames(names []string) string {
	if len(names) <= maxSourceNames {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s +%d more", strings.Join(names[:maxSourceNames], ", "), len(names)-maxSourceNames)
}

// networkName is the model's name of a network read from external_ids.
func networkName(n string) string {
	if n == "" {
		return model.DefaultNetwork
	}
	return n
}

// compareNetworks orders networks with the default network first.
func compareNetworks(a, b string) int {
	da, db := a == model.DefaultNetwork, b == model.DefaultNetwork
	switch {
	case da && !db:
		return -1
	case db && !da:
		return 1
	}
	return cmp.Compare(a, b)
}

// buildEgressIPs returns the egress IPs node holds (docs/ovn-nb.md,
// "Advertise: egress IPs and Service VIPs"): the external_ip of the
// EgressIP SNAT rows on node's gateway router of each network,
// GR_<prefix><node>, one entry per (address, network). Rows on other
// routers (other nodes') are not node's. A row whose external_ip does not
// parse is left out; buildProtectedAddresses reports it. A k8s.ovn.org/name
// not of the form <egressip>_<namespace>/<pod> is a problem; the address is
// still listed, with no namespace.
func buildEgressIPs(nats []natRow, node string) (out []model.EgressIP, problems []string) {
	if node == "" {
		return nil, nil
	}
	type key struct {
		network string
		ip      netip.Addr
	}
	type acc struct {
		router     string
		names      []string // k8s.ovn.org/name of each row
		eips       []string // EgressIP objects
		namespaces []string
	}
	byKey := map[key]*acc{}
	var keys []key
	for _, n := range nats {
		network := networkName(n.RouterNetwork)
		if n.Router == "" || n.Router != gatewayRouterName(network, node) {
			continue
		}
		a, err := netip.ParseAddr(n.ExternalIP)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			continue
		}
		a = a.Unmap()
		k := key{network, a}
		e := byKey[k]
		if e == nil {
			e = &acc{router: n.Router}
			byKey[k] = e
			keys = append(keys, k)
		}
		e.names = append(e.names, n.Name)
		eip, rest, ok1 := strings.Cut(n.Name, "_")
		ns, pod, ok2 := strings.Cut(rest, "/")
		if !ok1 || !ok2 || eip == "" || ns == "" || pod == "" {
			problems = append(problems, fmt.Sprintf("%s on %s (%s=%s) %s %q: not <egressip>_<namespace>/<pod>; egress IP %s listed without a namespace (row %s)",
				tableNAT, n.Router, ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDName, n.Name, a, n.UUID))
			e.eips = append(e.eips, n.Name)
			continue
		}
		e.eips = append(e.eips, eip)
		e.namespaces = append(e.namespaces, ns)
	}
	out = make([]model.EgressIP, 0, len(keys))
	for _, k := range keys {
		e := byKey[k]
		slices.Sort(e.names)
		slices.Sort(e.eips)
		slices.Sort(e.namespaces)
		names := slices.Compact(e.names)
		out = append(out, model.EgressIP{
			IP: k.ip, Network: k.network, Router: e.router, Name: e.eips[0],
			Namespaces: append([]string{}, slices.Compact(e.namespaces)...),
			Source: fmt.Sprintf("%s external_ip on %s (%s=%s; %s)", tableNAT, e.router,
				ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, sourceNames(names)),
		})
	}
	slices.SortFunc(out, func(a, b model.EgressIP) int {
		return cmp.Or(compareNetworks(a.Network, b.Network), a.IP.Compare(b.IP))
	})
	return out, problems
}

// buildServiceVIPs returns every VIP address of every Service load balancer,
// one entry per (address, network, Service) with the backends of every
// port, protocol and row merged (docs/ovn-nb.md, "Advertise: egress IPs and
// Service VIPs"). Template keys (^NODEIP...) and keys in the masquerade
// subnets are skipped; a key that does not parse is left out
// (buildProtectedAddresses reports it). A backend that does not parse is
// left out and reported; the VIP keeps its other backends.
func buildServiceVIPs(lbs []lbRow) (out []model.ServiceVIP, problems []string) {
	type key struct {
		network, service string
		vip              netip.Addr
	}
	type acc struct {
		rows     []string
		backends []netip.Addr
	}
	byKey := make(map[key]*acc, len(lbs))
	var keys []key
	for _, lb := range lbs {
		network := networkName(lb.Network)
		for i, vk := range lb.VIPs {
			if strings.HasPrefix(vk, "^") {
				continue // a template: node addresses
			}
			vip, ok := parseVIP(vk)
			if !ok {
				continue
			}
			vip = vip.Unmap()
			if isMasquerade(vip) {
				continue
			}
			k := key{network: network, service: lb.Owner, vip: vip}
			e := byKey[k]
			if e == nil {
				e = &acc{}
				byKey[k] = e
				keys = append(keys, k)
			}
			if n := len(e.rows); n == 0 || e.rows[n-1] != lb.Name {
				e.rows = append(e.rows, lb.Name)
			}
			var bs string
			if i < len(lb.Backends) {
				bs = lb.Backends[i]
			}
			for b := range strings.SplitSeq(bs, ",") {
				b = strings.TrimSpace(b)
				if b == "" {
					continue
				}
				a, ok := parseVIP(b)
				if !ok {
					problems = append(problems, fmt.Sprintf("%s %s vips[%q] backend %q: not IP:PORT, [IPv6]:PORT or an address; left out",
						tableLoadBalancer, lb.Name, vk, b))
					continue
				}
				if a = a.Unmap(); !isMasquerade(a) {
					e.backends = append(e.backends, a)
				}
			}
		}
	}
	out = make([]model.ServiceVIP, 0, len(keys))
	for _, k := range keys {
		e := byKey[k]
		slices.SortFunc(e.backends, netip.Addr.Compare)
		slices.Sort(e.rows)
		out = append(out, model.ServiceVIP{
			Service: k.service, Network: k.network, VIP: k.vip,
			Backends: append([]netip.Addr{}, slices.Compact(e.backends)...),
			Source:   fmt.Sprintf("%s %s vips", tableLoadBalancer, sourceNames(slices.Compact(e.rows))),
		})
	}
	slices.SortFunc(out, func(a, b model.ServiceVIP) int {
		return cmp.Or(compareNetworks(a.Network, b.Network), a.VIP.Compare(b.VIP), cmp.Compare(a.Service, b.Service))
	})
	return out, problems
}
