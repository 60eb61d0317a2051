package doctor

import (
	"context"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// checkNB connects to NB (ovn.northbound, ovn.tls) and checks this node's
// gateway routers: one for the default network and one for every network
// an import rule targets in OVN, none managed by OVN-Kubernetes' own route
// import.
func checkNB(ctx context.Context, s *state) []Result {
	const (
		idNB      = "nb"
		idRouters = "gateway-routers"
		idImport  = "ovnk-route-import"
	)
	if s.cfg == nil {
		return slices.Concat(needConfig(idNB), needConfig(idRouters), needConfig(idImport))
	}
	c := s.cfg
	view, err := s.northbound(ctx)
	target, terr := c.OVN.Target()
	if err != nil {
		fix := "check ovn.northbound (" + c.OVN.Northbound + ")"
		if strings.Contains(c.OVN.Northbound, "ssl:") {
			fix += " and ovn.tls (caFile, certFile, keyFile)"
		}
		fix += "; on OpenShift 4.14 and later the node's NB is unix:/var/run/ovn-ic/ovnnb_db.sock: leave ovn.northbound unset to find it"
		where := c.OVN.Northbound
		if terr == nil && target.Source == config.NBDiscovered {
			fix = "start OVN-Kubernetes on this node (ovnkube-node creates the socket; on OpenShift 4.14 and later at /var/run/ovn-ic/ovnnb_db.sock), " +
				"or set ovn.northbound to this node's NB"
			where = "(" + target.String() + ")"
		}
		return []Result{
			fail(idNB, fix, "OVN Northbound at %s not reachable within %v: %s", where, s.in.Timeout, oneLine(err.Error())),
			skip(idRouters, "needs NB (see check nb)"),
			skip(idImport, "needs NB (see check nb)"),
		}
	}
	snap := view.Snapshot
	how := "configured: ovn.northbound"
	if view.Source == config.NBDiscovered {
		tried := make([]string, len(view.Tried))
		for i, t := range view.Tried {
			tried[i] = t.String()
		}
		how = "discovered: ovn.northbound unset; looked at " + strings.Join(tried, ", ")
	}
	northd := "northd " + snap.Northd.String()
	if !snap.Northd.Known() {
		northd = "northd version unknown"
	}
	out := []Result{pass(idNB, "OVN Northbound answers at %s (%s; %d networks with subnets on node %s; %s)", view.Endpoint, how, len(snap.Networks), c.Node.Name, northd)}
	out = append(out, routerResults(idRouters, c.Node.Name, snap, ovnNetworks(s))...)
	out = append(out, routeImportResults(idImport, snap, ovnNetworks(s))...)
	return out
}

// ovnNetworks are the networks import rules target in OVN, sorted.
func ovnNetworks(s *state) []string {
	var nets []string
	for _, r := range s.cfg.Import {
		if r.Targets.OVN && !slices.Contains(nets, r.Network) {
			nets = append(nets, r.Network)
		}
	}
	slices.Sort(nets)
	return nets
}

// routerResults checks node's gateway routers: the default network's
// always, and the one of every network an import rule targets in OVN.
func routerResults(id, node string, snap model.Snapshot, imported []string) []Result {
	have := map[string]model.GatewayRouter{}
	var names []string
	for _, r := range snap.Routers {
		have[r.Network] = r
		names = append(names, r.Name)
	}
	want := []string{model.DefaultNetwork}
	for _, n := range imported {
		if !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	fix := "node.name must be the OVN-Kubernetes node name (`oc get nodes`; NB's gateway routers are GR_<node>: `ovn-nbctl lr-list`)"
	var out []Result
	for _, n := range want {
		r, ok := have[n]
		switch {
		case !ok && n == model.DefaultNetwork:
			out = append(out, fail(id, fix, "no gateway router GR_%s for node.name %q in NB (this node's gateway routers: %s)", node, node, list(names)))
		case !ok:
			out = append(out, fail(id, "create network "+n+" on this node, or fix import rules' network (and "+fix+")",
				"network %s (an import rule's OVN target) has no gateway router on node %s in NB (this node's: %s)", n, node, list(names)))
		case r.ExternalPort == "" && slices.Contains(imported, n):
			out = append(out, fail(id, "check OVN-Kubernetes' gateway on this node (rtoe-"+r.Name+")",
				"gateway router %s has no external port rtoe-%s: imported routes have no output port", r.Name, r.Name))
		default:
			out = append(out, pass(id, "gateway router %s of network %s present", r.Name, n))
		}
	}
	return out
}

// routeImportResults: OVN-Kubernetes' route import (its RouteImport
// controller) must not manage a gateway router ovnbgp imports into: two
// writers on one router. On routers ovnbgp does not import into it is
// worth knowing, not a failure.
func routeImportResults(id string, snap model.Snapshot, imported []string) []Result {
	var out []Result
	for _, r := range snap.Routers {
		if r.ForeignImport == "" {
			continue
		}
		if slices.Contains(imported, r.Network) {
			out = append(out, fail(id, "turn OVN-Kubernetes' route advertisements/import off for network "+r.Network+
				", or set targets.ovn: false in its import rules", "two writers on %s: %s", r.Name, r.ForeignImport))
			continue
		}
		out = append(out, warn(id, "no action needed unless you add an import rule for network "+r.Network,
			"OVN-Kubernetes' route import manages %s (no import rule of ovnbgp targets it)", r.Name))
	}
	if len(out) == 0 {
		out = append(out, pass(id, "no OVN-Kubernetes route import rows on this node's gateway routers (%d checked)", len(snap.Routers)))
	}
	return out
}

// list renders names for a finding.
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
