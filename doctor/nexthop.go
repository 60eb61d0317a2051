package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/ovnbgp/ovnbgp/plan"
)

// checkPeerNextHops: a peer an import rule lists whose own address the
// next-hop check refuses (inside a protected prefix as NB makes it, such
// as OVN-Kubernetes' default join subnet 100.64.0.0/16 while NB holds no
// live one, or link-local) gets every route it sends with itself as next
// hop rejected. Import fails closed, so this is a warning, not a failure:
// routes with another next hop still work.
func checkPeerNextHops(ctx context.Context, s *state) []Result {
	const id = "peer-next-hop"
	if s.cfg == nil {
		return needConfig(id)
	}
	c := s.cfg
	rules := map[string][]string{} // peer -> the import rules listing it
	for _, r := range c.Import {
		for _, p := range r.Peers {
			rules[p] = append(rules[p], r.Name)
		}
	}
	if len(rules) == 0 {
		return []Result{skip(id, "no import rule lists a peer: nothing is imported, no next hop is checked")}
	}
	view, err := s.northbound(ctx)
	if err != nil {
		// The config alone still names what it protects.
		var out []Result
		for _, w := range c.Warnings() {
			if strings.HasSuffix(w.Path, ".address") {
				out = append(out, warn(id, "check ovn.northbound ("+c.OVN.Northbound+") and run doctor again: NB's live subnets may replace the defaults",
					"NB not reachable; from the config alone: %s", w.Error()))
			}
		}
		if len(out) == 0 {
			out = append(out, skip(id, "needs NB (see check nb): the protected prefixes come from it"))
		}
		return out
	}
	conflicts := plan.PeerNextHopConflicts(c, view.Snapshot)
	var out []Result
	for _, cf := range conflicts {
		out = append(out, warn(id, peerNextHopFix(cf),
			"peer %s (%s, import rule %s): every route it sends with itself as next hop is refused: %q",
			cf.Peer, cf.Address, strings.Join(rules[cf.Peer], ", "), cf.Reason))
	}
	if len(out) == 0 {
		n := 0
		for _, p := range c.BGP.Peers {
			if len(rules[p.Name]) > 0 {
				n++
			}
		}
		out = append(out, pass(id, "%d peer(s) of import rules: no address is inside a protected prefix, each may be the next hop of its routes", n))
	}
	return out
}

// peerNextHopFix says how to get a peer's routes imported, by what holds
// its address.
func peerNextHopFix(cf plan.PeerConflict) string {
	elsewhere := fmt.Sprintf("peer with the router on an address outside %s", cf.Protected.Prefix)
	why := cf.Protected.Why
	switch {
	case !cf.Protected.Prefix.IsValid():
		return "peer with the router on a global unicast address: a next hop that is " +
			strings.TrimPrefix(cf.Reason, "next hop "+cf.Address.String()+" is ") + " is never imported"
	case strings.HasPrefix(why, "protectedPrefixes"):
		return fmt.Sprintf("narrow or remove the protectedPrefixes entry %s, or %s", cf.Protected.Prefix, elsewhere)
	case strings.HasPrefix(why, "cluster.serviceCIDRs"):
		return "fix cluster.serviceCIDRs if " + cf.Protected.Prefix.String() + " is not the cluster's ClusterIP range, or " + elsewhere
	case strings.HasPrefix(why, "default "):
		kind := strings.TrimSuffix(strings.TrimPrefix(why, "default "), " of OVN-Kubernetes (NB has no live value)")
		return fmt.Sprintf("NB has no live %s, so the default %s is protected: %s, or make sure NB holds the cluster's %s (this node's gateway router ports)",
			kind, cf.Protected.Prefix, elsewhere, kind)
	}
	return elsewhere + " (" + why + ")"
}
