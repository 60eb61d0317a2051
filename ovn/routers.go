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

// ovnbgp's ownership markers on the rows it writes (docs/architecture.md,
// "Ownership markers"). ovnbgp reads, diffs, changes and deletes only rows
// carrying extIDOwner=<node>, and never writes k8s.ovn.org/* keys.
const (
	extIDOwner = "ovnbgp.io/owner"
	extIDRule  = "ovnbgp.io/rule"

	tableRouter = "Logical_Router"
)

// keepPort says whether readRows keeps a router port: the ports joining a
// router to a node or layer2 switch (their networks are pod subnets), to
// the join or transit switch (protected subnets), and gateway routers'
// external ports (the output port of imported routes).
func keepPort(name string) bool {
	return strings.HasPrefix(name, ovnk.RouterToSwitch) ||
		strings.HasPrefix(name, ovnk.TransitRouterToSwitch) ||
		strings.HasPrefix(name, ovnk.GatewayRouterToExtSwitch) ||
		isJoinPort(name) || isTransitPort(name)
}

// isJoinPort: rtoj-GR_<p><node> and rtoj-<p>ovn_cluster_router.
func isJoinPort(name string) bool {
	return strings.HasPrefix(name, ovnk.GatewayRouterToJoinSwitch)
}

// isTransitPort: a cluster router's port on the interconnect transit
// switch, <p>rtots-<node> (the network prefix ends in '_').
func isTransitPort(name string) bool {
	return strings.HasPrefix(name, ovnk.RouterToTransitSwitch) || strings.Contains(name, "_"+ovnk.RouterToTransitSwitch)
}

// ownerController is the controller that owns a row by its external_ids:
// k8s.ovn.org/owner-controller, with the first releases' route import
// marker (controller=routeimport) read as RouteImport.
func ownerController(ids map[string]string) string {
	if c := ids[ovnk.ExtIDOwnerController]; c != "" {
		return c
	}
	if ids[ovnk.ExtIDLegacyController] == ovnk.LegacyRouteImportController {
		return ovnk.RouteImportController
	}
	return ""
}

// importResult is what the rows say about import on one node.
type importResult struct {
	Routers   []model.GatewayRouter
	Owned     []model.OVNRoute
	Protected []model.ProtectedPrefix
	Problems  []string
}

// gatewayRouterName is the name of node's gateway router of network:
// GR_<p><node> (util.GetNetworkScopedGWRouterName).
func gatewayRouterName(network, node string) string {
	return ovnk.GatewayRouterPrefix + ovnk.NetworkPrefix(network) + node
}

// buildImport reads node's gateway routers, the static routes ovnbgp owns
// on them, and the join and transit subnets (docs/ovn-nb.md, "Import").
//
// A gateway router of node is a Logical_Router named GR_<p><node>, where
// <p> is the prefix of the network in its external_ids (none: the default
// network). Its external port is the router port rtoe-GR_<p><node>.
//
// An owned route is a static route with ovnbgp.io/owner=node on one of
// those routers. One owned by node on any other router, or whose ip_prefix
// or nexthop does not parse, is left out and said in Problems: ovnbgp
// neither uses nor deletes it.
func buildImport(in nbRows, node string) importResult {
	var res importResult
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }

	ports := make(map[string]routerPortRow, len(in.Ports))
	for _, p := range in.Ports {
		ports[p.Name] = p
	}
	routes := make(map[string]routeRow, len(in.Routes))
	for _, rt := range in.Routes {
		routes[rt.UUID] = rt
	}

	// Join and transit subnets, live from the router ports.
	for _, p := range in.Ports {
		var what string
		switch {
		case isJoinPort(p.Name):
			what = "join subnet"
		case isTransitPort(p.Name):
			what = "transit subnet"
		default:
			continue
		}
		for _, n := range p.Networks {
			pfx, err := netip.ParsePrefix(n)
			if err != nil || pfx.Bits() == 0 || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() {
				problem("%s %s networks %q: not an address/length; not protected", tableRouterPort, p.Name, n)
				continue
			}
			res.Protected = append(res.Protected, model.ProtectedPrefix{Prefix: pfx.Masked(),
				Why: fmt.Sprintf("%s (%s %s networks)", what, tableRouterPort, p.Name)})
		}
	}

	if node == "" {
		return res
	}

	names := map[string]int{}
	for _, r := range in.Routers {
		names[r.Name]++
	}
	mine := map[string]model.GatewayRouter{} // by name
	for _, r := range in.Routers {
		network := r.Network
		if network == "" {
			network = model.DefaultNetwork
		}
		if r.Name != gatewayRouterName(network, node) {
			continue // another node's gateway router, or not a gateway router
		}
		if names[r.Name] > 1 {
			if r.UUID == firstRouterUUID(in.Routers, r.Name) {
				problem("%s %s: %d rows have this name; all skipped, nothing is imported there", tableRouter, r.Name, names[r.Name])
			}
			continue
		}
		gr := model.GatewayRouter{Network: network, Name: r.Name, UUID: r.UUID, StaticRoutes: slices.Clone(r.StaticRoutes)}
		if p, ok := ports[ovnk.GatewayRouterToExtSwitch+r.Name]; ok {
			gr.ExternalPort = p.Name
			for _, n := range p.Networks {
				pfx, err := netip.ParsePrefix(n)
				if err != nil || pfx.Bits() == 0 || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() {
					problem("%s %s networks %q: not an address/length; ignored", tableRouterPort, p.Name, n)
					continue
				}
				gr.ExternalNetworks = append(gr.ExternalNetworks, pfx)
			}
			slices.SortFunc(gr.ExternalNetworks, model.ComparePrefix)
		}
		var foreign []routeRow
		for _, id := range r.StaticRoutes {
			rt, ok := routes[id]
			if !ok {
				continue
			}
			if rt.OwnerController == ovnk.RouteImportController {
				foreign = append(foreign, rt)
			}
			if rt.Owner != node {
				pfx, perr := netip.ParsePrefix(rt.IPPrefix)
				nh, nerr := netip.ParseAddr(rt.Nexthop)
				if perr == nil && nerr == nil {
					gr.ForeignRoutes = append(gr.ForeignRoutes, model.OVNRouteKey{Router: r.Name, Prefix: pfx.Masked(), NextHop: nh})
				}
			}
		}
		slices.SortFunc(gr.ForeignRoutes, func(a, b model.OVNRouteKey) int {
			return cmp.Or(model.ComparePrefix(a.Prefix, b.Prefix), a.NextHop.Compare(b.NextHop))
		})
		gr.ForeignRoutes = slices.Compact(gr.ForeignRoutes)
		if len(foreign) > 0 {
			gr.ForeignImport = fmt.Sprintf("OVN-Kubernetes' route import manages %s: %d of its static routes carry "+
				"external_ids:%s=%s or its older marker %s=%s (e.g. %s via %s); ovnbgp does not import into a router another importer manages: "+
				"turn OVN-Kubernetes' route import off for network %s, or set targets.ovn: false in the import rules of that network",
				r.Name, len(foreign), ovnk.ExtIDOwnerController, ovnk.RouteImportController,
				ovnk.ExtIDLegacyController, ovnk.LegacyRouteImportController, foreign[0].IPPrefix, foreign[0].Nexthop, network)
		}
		mine[r.Name] = gr
		res.Routers = append(res.Routers, gr)
	}
	slices.SortFunc(res.Routers, func(a, b model.GatewayRouter) int {
		da, db := a.Network == model.DefaultNetwork, b.Network == model.DefaultNetwork
		if da != db {
			if da {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Network, b.Network)
	})

	for _, rt := range in.Routes {
		if rt.Owner != node {
			continue // not ours: another node's, or OVN-Kubernetes'
		}
		gr, ok := mine[rt.Router]
		if !ok {
			problem("%s %s (%s=%s) is on router %q, not a gateway router of this node; left alone",
				tableStaticRoute, rt.UUID, extIDOwner, node, rt.Router)
			continue
		}
		pfx, err := netip.ParsePrefix(rt.IPPrefix)
		if err != nil || pfx.Masked() != pfx {
			problem("%s %s on %s (%s=%s): ip_prefix %q is not a network prefix; left alone", tableStaticRoute, rt.UUID, rt.Router, extIDOwner, node, rt.IPPrefix)
			continue
		}
		nh, err := netip.ParseAddr(rt.Nexthop)
		if err != nil {
			problem("%s %s on %s (%s=%s): nexthop %q is not an address; left alone", tableStaticRoute, rt.UUID, rt.Router, extIDOwner, node, rt.Nexthop)
			continue
		}
		res.Owned = append(res.Owned, model.OVNRoute{UUID: rt.UUID, Router: gr.Name, Prefix: pfx, NextHop: nh,
			OutputPort: rt.OutputPort, Rule: rt.Rule, Network: gr.Network})
	}
	slices.SortFunc(res.Owned, func(a, b model.OVNRoute) int {
		return cmp.Or(cmp.Compare(a.Router, b.Router), model.ComparePrefix(a.Prefix, b.Prefix), a.NextHop.Compare(b.NextHop), cmp.Compare(a.UUID, b.UUID))
	})
	return res
}

// sortProtected sorts by prefix (IPv4 first) and drops repeated prefixes,
// keeping the first reason.
//
// The first of equal prefixes is kept, as a stable sort would keep it: the
// sort is pdqsort on (prefix, position), since a stable sort (insertion
// sort and in-place merges) of the 20,000 entries of a big cluster took
// longer than the rest of the snapshot's protected addresses together.
func sortProtected(p []model.ProtectedPrefix) []model.ProtectedPrefix {
	type entry struct {
		pos int
		p   model.ProtectedPrefix
	}
	es := make([]entry, len(p))
	for i, x := range p {
		es[i] = entry{i, x}
	}
	slices.SortFunc(es, func(a, b entry) int {
		return cmp.Or(model.ComparePrefix(a.p.Prefix, b.p.Prefix), cmp.Compare(a.pos, b.pos))
	})
	out := make([]model.ProtectedPrefix, 0, len(es))
	for i, e := range es {
		if i > 0 && es[i-1].p.Prefix == e.p.Prefix {
			continue
		}
		out = append(out, e.p)
	}
	return out
}

func firstRouterUUID(rows []routerRow, name string) string {
	for _, r := range rows {
		if r.Name == name {
			return r.UUID
		}
	}
	return ""
}
