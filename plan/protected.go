package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// Why prefixes of the host and peer entries of the protected set: import
// never accepts them as destinations, but they do not count for next hops
// (nextHopProtected): a peer's own entry would refuse its usual next hop,
// itself, and a local next hop has its own reason. A peer address inside
// any other protected prefix (the default join subnet 100.64.0.0/16) is
// still refused as a next hop: PeerNextHopConflicts finds such peers.
const (
	whyPeer = "address of peer "
	whyHost = "address of host link "
)

// Protected returns every prefix import never accepts, nor anything inside
// (docs/architecture.md, "Safety rules", rule 2), each with where it comes from:
// Snapshot.Protected (every node's pod subnets, join and transit subnets as
// NB has them), this node's pod subnets, cluster.serviceCIDRs, the default
// join, transit and masquerade subnets of each family NB has no live value
// for (an entry of Snapshot.Protected whose Why starts with "join subnet",
// "transit subnet" or "masquerade subnet" is one), the host's addresses and
// the peers' addresses as host prefixes, and protectedPrefixes. Entries are
// in that order, an equal (prefix, why) only once, and this node's pod
// subnets only when Snapshot.Protected does not already list them.
func Protected(cfg *config.Config, snap model.Snapshot, host model.Host) []model.ProtectedPrefix {
	internal := config.DefaultInternalSubnets()
	n := len(snap.Protected) + len(snap.Networks)*2 + len(cfg.Cluster.ServiceCIDRs) + len(internal) +
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
	for _, d := range internal {
		live := slices.ContainsFunc(snap.Protected, func(p model.ProtectedPrefix) bool {
			return strings.HasPrefix(p.Why, d.Kind) && p.Prefix.Addr().Is4() == d.Prefix.Addr().Is4()
		})
		if !live {
			add(d.Prefix, "default "+d.Kind+" of OVN-Kubernetes (NB has no live value)")
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

// nextHopProtected is the part of the protected set prot that a next hop
// may not be inside: all but the host and peer entries.
func nextHopProtected(prot []model.ProtectedPrefix) []model.ProtectedPrefix {
	var out []model.ProtectedPrefix
	for _, pp := range prot {
		if !strings.HasPrefix(pp.Why, whyPeer) && !strings.HasPrefix(pp.Why, whyHost) {
			out = append(out, pp)
		}
	}
	return out
}

// PeerConflict is a peer whose own address the import decision refuses
// as a next hop: every route it sends with itself as next hop (the usual
// case) is rejected, whatever the accept entries say.
type PeerConflict struct {
	Peer    string     `json:"peer"`
	Address netip.Addr `json:"address"`
	// Reason is the verdict such a route gets, as `routes learned` shows
	// it without the prefix ("next hop 100.64.0.1 is inside protected
	// 100.64.0.0/16: default join subnet of OVN-Kubernetes (NB has no
	// live value)"); Protected the prefix holding the address, when that
	// is the reason.
	Reason    string                `json:"reason"`
	Protected model.ProtectedPrefix `json:"protected,omitzero"`
}

// PeerNextHopConflicts returns, in config order, the peers an import rule
// lists whose own address the next-hop check refuses for reasons that do
// not depend on the host's links: an address class no next hop may have
// (loopback, link-local unless on the peer's own link, multicast...), or a
// protected prefix of the set Protected(cfg, snap) makes (with NB's live
// values where snap has them, the defaults otherwise). `ovnbgp doctor` reports them; config.Warnings
// checks what the config alone can tell.
func PeerNextHopConflicts(cfg *config.Config, snap model.Snapshot) []PeerConflict {
	nhProt := nextHopProtected(Protected(cfg, snap, model.Host{}))
	var out []PeerConflict
	for _, p := range cfg.BGP.Peers {
		if !p.Address.IsValid() || !slices.ContainsFunc(cfg.Import, func(r config.ImportRule) bool { return slices.Contains(r.Peers, p.Name) }) {
			continue
		}
		if c := addrClass(p.Address); c != "" && !linkLocalOnLink(p) {
			out = append(out, PeerConflict{Peer: p.Name, Address: p.Address, Reason: fmt.Sprintf("next hop %s is %s", p.Address, c)})
			continue
		}
		if pp, ok := protectedCovering(nhProt, hostPrefix(p.Address)); ok {
			out = append(out, PeerConflict{Peer: p.Name, Address: p.Address, Protected: pp,
				Reason: fmt.Sprintf("next hop %s is inside protected %s: %s", p.Address, pp.Prefix, pp.Why)})
		}
	}
	return out
}

// linkLocalOnLink reports whether peer p's address is an IPv6 link-local
// one on the peer's own link, not multihop: a next hop the import decision
// accepts (issue 20).
func linkLocalOnLink(p config.Peer) bool {
	a := p.Address
	return a.Is6() && a.IsLinkLocalUnicast() && a.Zone() != "" && a.Zone() == p.Link() && p.EBGPMultihop == 0
}

// protIndex finds, in a protected set, the first entry equal to or
// covering a prefix, as protectedCovering does, in a map lookup per
// distinct entry length rather than a scan of every entry: NB puts every
// Service VIP's and NAT address's host prefix in the set, and each learned
// path is checked against it (100k paths and 5,000 VIPs: 6 s a scan).
type protIndex struct {
	list []model.ProtectedPrefix
	// first is, by masked prefix, the index of its first entry in list;
	// lens4 and lens6 the lengths of its keys per family, ascending. nil
	// for a short list, scanned.
	first        map[netip.Prefix]int
	lens4, lens6 []int
}

// protScanMax is the longest protected set scanned rather than indexed.
const protScanMax = 16

func newProtIndex(list []model.ProtectedPrefix) protIndex {
	x := protIndex{list: list}
	if len(list) <= protScanMax {
		return x
	}
	x.first = make(map[netip.Prefix]int, len(list))
	for i, pp := range list {
		p := pp.Prefix.Masked()
		if !p.IsValid() {
			continue
		}
		if _, ok := x.first[p]; ok {
			continue
		}
		x.first[p] = i
		lens := &x.lens6
		if p.Addr().Is4() {
			lens = &x.lens4
		}
		if !slices.Contains(*lens, p.Bits()) {
			*lens = append(*lens, p.Bits())
		}
	}
	slices.Sort(x.lens4)
	slices.Sort(x.lens6)
	return x
}

// covering is protectedCovering(x.list, p).
func (x *protIndex) covering(p netip.Prefix) (model.ProtectedPrefix, bool) {
	if x.first == nil {
		return protectedCovering(x.list, p)
	}
	if !p.IsValid() {
		return model.ProtectedPrefix{}, false
	}
	lens := x.lens6
	if p.Addr().Is4() {
		lens = x.lens4
	}
	best := -1
	for _, l := range lens {
		if l > p.Bits() {
			break
		}
		q, _ := p.Addr().Prefix(l)
		if i, ok := x.first[q]; ok && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return model.ProtectedPrefix{}, false
	}
	return x.list[best], true
}
