package ovn

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ovnbgp/ovnbgp/model"
)

// specialPurpose says how p overlaps special-purpose address space
// (model.SpecialPurposeOverlap): "is B, WHY", "is inside B, WHY" or
// "covers B, WHY"; "" when it does not. Such a prefix or address read from
// NB is never advertised (docs/ovn-nb.md, "What is refused").
func specialPurpose(p netip.Prefix) string {
	b, ok := model.SpecialPurposeOverlap(p)
	if !ok {
		return ""
	}
	verb := "covers"
	switch {
	case b.Prefix == p.Masked():
		verb = "is"
	case b.Prefix.Bits() < p.Bits():
		verb = "is inside"
	}
	return fmt.Sprintf("%s %s, %s", verb, b.Prefix, b.Why)
}

// advertisable is subnets without the ones this node must never
// advertise, each said through problem: special-purpose address space,
// and a subnet holding a node address (nodeAddrs, sorted: the networks of
// the gateway routers' external ports), such as the node's own /32. Those
// stay in Cluster (protected from import) as every pod subnet NB holds.
func advertisable(subnets []model.Subnet, nodeAddrs []netip.Addr, problem func(format string, args ...any)) []model.Subnet {
	out := make([]model.Subnet, 0, len(subnets))
	for _, sn := range subnets {
		if why := specialPurpose(sn.Prefix); why != "" {
			problem("pod subnet %s (%s) %s: never advertised", sn.Prefix, sn.Source, why)
			continue
		}
		i, _ := slices.BinarySearchFunc(nodeAddrs, sn.Prefix.Masked().Addr(), netip.Addr.Compare)
		if i < len(nodeAddrs) && sn.Prefix.Contains(nodeAddrs[i]) {
			problem("pod subnet %s (%s) holds node address %s (a network of a gateway router's external port rtoe-GR_*): never advertised",
				sn.Prefix, sn.Source, nodeAddrs[i])
			continue
		}
		out = append(out, sn)
	}
	return out
}
