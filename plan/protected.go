package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// The subnets OVN-Kubernetes uses inside the cluster when NB does not say
// otherwise: join (100.64.0.0/16, fd98::/64), transit (100.88.0.0/16,
// fd97::/64) and masquerade (169.254.0.0/17, fd69::/112: the defaults of
// OpenShift >= 4.17, which contain the older 169.254.169.0/29 and
// fd69::/125, so clusters installed earlier are covered too).
var defaultInternal = []struct {
	// kind is the start of a Why the ovn package writes for a live value of
	// the same subnet ("join subnet (Logical_Router_Port rtoj-GR_node1)").
	kind   string
	prefix netip.Prefix
}{
	{"join subnet", netip.MustParsePrefix("100.64.0.0/16")},
	{"join subnet", netip.MustParsePrefix("fd98::/64")},
	{"transit subnet", netip.MustParsePrefix("100.88.0.0/16")},
	{"transit subnet", netip.MustParsePrefix("fd97::/64")},
	{"masquerade subnet", netip.MustParsePrefix("169.254.0.0/17")},
	{"masquerade subnet", netip.MustParsePrefix("fd69::/112")},
}

// Why prefixes of the host and peer entries of the protected set: import
// never accepts them as destinations, but a next hop may be a peer's
// address (its own, the usual case), and a local next hop has its own
// reason.
const (
	whyPeer = "address of peer "
	whyHost = "address of host link "
)

// Protected returns every prefix import never accepts, nor anything inside
// (ARCHITECTURE.md, safety rule 2), each with where it comes from:
// Snapshot.Protected (every node's pod subnets, join and transit subnets as
// NB has them), this node's pod subnets, cluster.serviceCIDRs, the default
// join, transit and masquerade subnets of each family NB has no live value
// for (an entry of Snapshot.Protected whose Why starts with "join subnet",
// "transit subnet" or "masquerade subnet" is one), the host's addresses and
// the peers' addresses as host prefixes, and protectedPrefixes. Entries are
// in that order, an equal (prefix, why) only once, and this node's pod
// subnets only when Snapshot.Protected does not already list them.
func Protected(cfg *config.Config, snap model.Snapshot, host model.Host) []model.ProtectedPrefix {
	n := len(snap.Protected) + len(snap.Networks)*2 + len(cfg.Cluster.ServiceCIDRs) + len(defaultInternal) +
		len(host.Links)*2 + len(cfg.BGP.Peers) + len(cfg.ProtectedPrefixes)
	out := make([]model.ProtectedPrefix, 0, n)
	seen := make(map[model.ProtectedPrefix]bool, n) // sized once: thousands of VIPs on a big cluster
	add := func(p netip.Prefix, why string) {
		pp := model.ProtectedPrefix{Prefix: p.Masked(), Why: why}
		if p.IsValid() && !seen[pp] {
			seen[pp] = true
			out = append(out, pp)
		}
	}
	fromNB := make(map[netip.Prefix]bool, len(snap.Protected))
	for _, p := range snap.Protected {
		add(p.Prefix, p.Why)
		fromNB[p.Prefix.Masked()] = true
	}
	for _, nw := range snap.Networks {
		for _, sn := range nw.Subnets {
			if !fromNB[sn.Prefix.Masked()] { // listed once, not once per source
				add(sn.Prefix, fmt.Sprintf("pod subnet of %s on node %s (%s)", nw.Name, snap.Node, sn.Source))
			}
		}
	}
	for _, p := range cfg.Cluster.ServiceCIDRs {
		add(p, "cluster.serviceCIDRs")
	}
	for _, d := range defaultInternal {
		live := slices.ContainsFunc(snap.Protected, func(p model.ProtectedPrefix) bool {
			return strings.HasPrefix(p.Why, d.kind) && p.Prefix.Addr().Is4() == d.prefix.Addr().Is4()
		})
		if !live {
			add(d.prefix, "default "+d.kind+" of OVN-Kubernetes (NB has no live value)")
		}
	}
	for _, l := range host.Links {
		for _, a := range l.Addrs {
			add(hostPrefix(a.Addr()), whyHost+l.Name)
		}
	}
	for _, p := range cfg.BGP.Peers {
		add(hostPrefix(p.Address), whyPeer+p.Name)
	}
	for _, p := range cfg.ProtectedPrefixes {
		add(p, "protectedPrefixes")
	}
	return out
}

// hostPrefix is a as a /32 or /128.
func hostPrefix(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, a.BitLen())
}

// protectedCovering returns the first protected entry equal to or
// covering p, if any.
func protectedCovering(prot []model.ProtectedPrefix, p netip.Prefix) (model.ProtectedPrefix, bool) {
	for _, pp := range prot {
		if covers(pp.Prefix, p) {
			return pp, true
		}
	}
	return model.ProtectedPrefix{}, false
}

// covers reports whether outer is equal to or covers inner (same family).
func covers(outer, inner netip.Prefix) bool {
	return outer.IsValid() && inner.IsValid() && outer.Addr().Is4() == inner.Addr().Is4() &&
		outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// martianCovering returns the special-purpose address space (RFC 6890)
// equal to or covering p, if any (model.SpecialPurposeCovering): no route
// from a peer may point into it, whatever the accept entries say, since it
// would capture the host's own loopback, link-local or multicast traffic.
// Aggregates that cover it (0.0.0.0/1) are not martians.
func martianCovering(p netip.Prefix) (model.ProtectedPrefix, bool) {
	return model.SpecialPurposeCovering(p)
}
