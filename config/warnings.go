package config

import (
	"fmt"
	"net/netip"
	"slices"
)

// Warnings lists what is valid but will not work as the file probably
// means, each with its key path (no file or line: a Config does not keep
// them). `ovnbgp config validate` prints them and the daemon logs them at
// load and reload; none makes the config invalid.
//
// Today: a peer that an import rule lists whose address (an unnumbered
// peer's link-local one, learned: any in fe80::/64) is inside a
// prefix import protects and the config alone can name
// (DefaultInternalSubnets, cluster.serviceCIDRs, protectedPrefixes). Every
// route from it whose next hop is its own address, the usual case, is
// then refused as "next hop inside protected": import fails closed. NB's
// live subnets (`ovnbgp doctor` reads them) may replace the defaults, so a
// warning about a default may not apply, and NB's other protected
// prefixes (every node's pod subnets) are not known here.
func (c *Config) Warnings() Errors {
	var out Errors
	for i, p := range c.BGP.Peers {
		if !p.Address.IsValid() && !p.Unnumbered() || !slices.ContainsFunc(c.Import, func(r ImportRule) bool { return slices.Contains(r.Peers, p.Name) }) {
			continue
		}
		// A zoned address is in no prefix (netip): compare it without.
		// An unnumbered peer's address is learned; fe80:: stands for it,
		// in fe80::/64 as every link-local address.
		at, path, what := p.Address.WithZone(""), "address", p.Address.String()
		if p.Unnumbered() {
			at, path, what = netip.MustParseAddr("fe80::"), "interface", "its link-local address on "+p.Interface
		}
		inside, fix := c.protectedHolding(at)
		if inside == "" {
			continue
		}
		out = append(out, FieldError{Path: key(index("bgp.peers", i), path), Msg: fmt.Sprintf(
			"warning: %s is inside %s: every route from peer %s whose next hop is its own address is refused as \"next hop inside protected\" (routes learned --rejected); %s",
			what, inside, p.Name, fix)})
	}
	return out
}

// protectedHolding names the first prefix of the config's protected set
// holding a, and how to fix a peer there; "" if none.
func (c *Config) protectedHolding(a netip.Addr) (inside, fix string) {
	const other = "peer with the router on another address"
	for i, p := range c.ProtectedPrefixes {
		if p.Contains(a) {
			return fmt.Sprintf("%s, protectedPrefixes[%d]", p, i), fmt.Sprintf("narrow or remove protectedPrefixes[%d], or %s", i, other)
		}
	}
	for i, p := range c.Cluster.ServiceCIDRs {
		if p.Contains(a) {
			return fmt.Sprintf("%s, cluster.serviceCIDRs[%d] (ClusterIPs)", p, i), "fix cluster.serviceCIDRs if it is not the cluster's ClusterIP range, or " + other
		}
	}
	for _, d := range DefaultInternalSubnets() {
		if d.Prefix.Contains(a) {
			return fmt.Sprintf("%s, OVN-Kubernetes' default %s (protected while NB holds no live %s of this family)", d.Prefix, d.Kind, d.Kind),
				fmt.Sprintf("%s outside it; if the cluster's %s is elsewhere, NB's live value replaces the default: `ovnbgp doctor` on the node reads it and says whether this peer is affected", other, d.Kind)
		}
	}
	return "", ""
}
