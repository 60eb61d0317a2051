package plan

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// Advertisements returns every (peer, prefix) this node should advertise,
// by rule kind (docs/config.md, "advertise[]"):
//   - podNetwork: the node's pod subnets of the networks the rule's globs
//     match;
//   - egressIP: the egress IPs this node holds (host prefixes), of the
//     networks and namespaces the rule's globs match (none listed: all);
//   - loadBalancerIP: the external VIPs of Services (LoadBalancer ingress
//     IPs and externalIPs, host prefixes) of the networks, namespaces and
//     services the rule's globs match, never a ClusterIP (inside
//     cluster.serviceCIDRs) or a NodePort (a node address), and only while
//     the Service has an endpoint (with localEndpointsOnly, one on this
//     node). Every node that selects a VIP advertises it: the peer sees
//     ECMP across nodes;
//   - workloadIP: the addresses of the pods and KubeVirt VMs whose ports
//     are this node's (host prefixes), of the networks, namespaces and pods
//     the rule's globs match, as a live migration hands each over
//     (workloadIPSkip): the node a VM leaves sends it with the rule's
//     handover attributes (handoverAttrs) until the hold is over at now.
//
// Each goes to the rule's peers (all peers when it names none) that speak
// its address family. When several rules select the same prefix for the
// same peer, the first rule in config order wins, as in a route-map, so the
// attributes a peer sees never depend on map order. The result is sorted by
// peer, then prefix.
func Advertisements(cfg *config.Config, snap model.Snapshot, now time.Time) []model.Advertisement {
	sent, _ := CappedAdvertisements(cfg, snap, now)
	return sent
}

// CappedAdvertisements is Advertisements with what the peers' export caps
// (maxAdvertised) hold back: sent are the advertisements to make, held the
// ones a cap keeps from a peer (State AdvHeldBack, Reason why), both
// sorted by peer, then prefix. A peer over its cap is sent, in this order
// and up to the cap, first aggregates and pod subnets (any prefix that is
// not a single address), then /32s and /128s, each in prefix order: what a
// peer gets depends only on what is selected, never on timing, and a /32
// never pushes out a subnet. now decides the handover holds of workload
// addresses (HandoverEnds says when the next one is over).
func CappedAdvertisements(cfg *config.Config, snap model.Snapshot, now time.Time) (sent, held []model.Advertisement) {
	all := selectAdvertisements(cfg, snap, now)
	caps := map[string]int{}
	for _, p := range cfg.BGP.Peers {
		if p.MaxAdvertised > 0 {
			caps[p.Name] = p.MaxAdvertised
		}
	}
	if len(caps) == 0 {
		return all, nil
	}
	byPeer := map[string][]int{}
	for i, a := range all {
		if _, ok := caps[a.Peer]; ok {
			byPeer[a.Peer] = append(byPeer[a.Peer], i)
		}
	}
	over := false
	for peer, idx := range byPeer {
		over = over || len(idx) > caps[peer]
	}
	if !over {
		return all, nil
	}
	drop := map[int]bool{}
	for peer, idx := range byPeer {
		max := caps[peer]
		if len(idx) <= max {
			continue
		}
		slices.SortFunc(idx, func(x, y int) int {
			a, b := all[x].Prefix, all[y].Prefix
			return cmp.Or(cmp.Compare(boolInt(a.IsSingleIP()), boolInt(b.IsSingleIP())), model.ComparePrefix(a, b))
		})
		reason := capReason(peer, max)
		for _, i := range idx[max:] {
			drop[i] = true
			a := all[i]
			a.State, a.Reason = model.AdvHeldBack, reason
			held = append(held, a)
		}
	}
	sent = make([]model.Advertisement, 0, len(all)-len(drop))
	for i, a := range all {
		if !drop[i] {
			sent = append(sent, a)
		}
	}
	SortAdvertisements(held)
	return sent, held
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// selectAdvertisements is what the rules select, before export caps.
func selectAdvertisements(cfg *config.Config, snap model.Snapshot, now time.Time) []model.Advertisement {
	// At most one advertisement per selectable item and peer, of the
	// kinds the rules name.
	size := 0
	for _, k := range []config.AdvertiseKind{config.KindPodNetwork, config.KindEgressIP, config.KindLoadBalancerIP, config.KindWorkloadIP} {
		if !slices.ContainsFunc(cfg.Advertise, func(r config.AdvertiseRule) bool { return r.Kind == k }) {
			continue
		}
		switch k {
		case config.KindPodNetwork:
			for _, nw := range snap.Networks {
				size += len(nw.Subnets)
			}
		case config.KindEgressIP:
			size += len(snap.EgressIPs)
		case config.KindLoadBalancerIP:
			size += len(snap.ServiceVIPs)
		case config.KindWorkloadIP:
			size += len(snap.WorkloadIPs)
		}
	}
	size *= max(1, len(cfg.BGP.Peers))
	seen := make(map[model.Key]bool, size)
	out := make([]model.Advertisement, 0, size)
	// emit sends prefix to peers with the rule's attributes, or its
	// handover attributes.
	emit := func(rule *config.AdvertiseRule, peers []config.Peer, prefix netip.Prefix, network, source string, members []netip.Prefix, handover bool) {
		for _, p := range peers {
			if !speaks(p, prefix) {
				continue
			}
			at := attrs(rule)
			if handover {
				at = handoverAttrs(cfg, rule, p)
			}
			a := model.Advertisement{Peer: p.Name, Prefix: prefix, Attrs: at, Rule: rule.Name, Network: network, Source: source, Members: members}
			if seen[a.Key()] {
				continue
			}
			seen[a.Key()] = true
			out = append(out, a)
		}
	}
	var local *localAddrs
	var foreign *aggregateConflicts
	for i := range cfg.Advertise {
		rule := &cfg.Advertise[i]
		peers := selectPeers(cfg.BGP.Peers, rule.Peers)
		if foreign == nil && (rule.AggregateLength > 0 || rule.AggregateLengthV6 > 0) {
			foreign = newAggregateConflicts(cfg, snap)
		}
		switch rule.Kind {
		case config.KindPodNetwork:
			for _, nw := range snap.Networks {
				if !MatchAny(rule.Networks, nw.Name) {
					continue
				}
				for _, sn := range nw.Subnets {
					emit(rule, peers, sn.Prefix.Masked(), nw.Name, sn.Source, nil, false)
				}
			}
		case config.KindEgressIP:
			agg := newAggregator(rule, len(snap.EgressIPs), foreign)
			for _, e := range snap.EgressIPs {
				if egressIPSkip(rule, e) == "" {
					agg.add(e.IP, e.Network, e.Source, false)
				}
			}
			agg.each(func(prefix netip.Prefix, network, source string, members []netip.Prefix, handover bool) {
				emit(rule, peers, prefix, network, source, members, handover)
			})
		case config.KindLoadBalancerIP:
			if local == nil {
				local = newLocalAddrs(snap)
			}
			if rule.WeightByEndpoints {
				// Each VIP as itself (config refuses aggregation), with
				// its own count of local endpoints: the first entry of
				// an address selected wins, as in the aggregator.
				for i := range snap.ServiceVIPs {
					v := &snap.ServiceVIPs[i]
					if serviceVIPSkip(cfg, snap, rule, *v, local).skipped() {
						continue
					}
					at := vipAttrs(cfg, rule, v, local)
					for _, p := range peers {
						a := model.Advertisement{Peer: p.Name, Prefix: hostPrefix(v.VIP), Attrs: at, Rule: rule.Name, Network: v.Network, Source: v.Source}
						if !speaks(p, a.Prefix) || seen[a.Key()] {
							continue
						}
						seen[a.Key()] = true
						out = append(out, a)
					}
				}
				continue
			}
			agg := newAggregator(rule, min(len(snap.ServiceVIPs), 1024), foreign) // most are ClusterIPs on a big cluster
			for _, v := range snap.ServiceVIPs {
				if !serviceVIPSkip(cfg, snap, rule, v, local).skipped() {
					agg.add(v.VIP, v.Network, v.Source, false)
				}
			}
			agg.each(func(prefix netip.Prefix, network, source string, members []netip.Prefix, handover bool) {
				emit(rule, peers, prefix, network, source, members, handover)
			})
		case config.KindWorkloadIP:
			// An aggregate sends the rule's attributes; an address not
			// aggregated, those of its handover.
			agg := newAggregator(rule, len(snap.WorkloadIPs), foreign)
			for _, w := range snap.WorkloadIPs {
				sk := workloadIPSkip(rule, w, now)
				switch {
				case sk.skipped():
				case ruleAggregates(rule, family(w.IP)):
					agg.add(w.IP, w.Network, workloadSource(rule, w), sk.handover)
				default:
					emit(rule, peers, hostPrefix(w.IP), w.Network, workloadSource(rule, w), nil, sk.handover)
				}
			}
			agg.each(func(prefix netip.Prefix, network, source string, members []netip.Prefix, handover bool) {
				emit(rule, peers, prefix, network, source, members, handover)
			})
		}
	}
	SortAdvertisements(out)
	return out
}

// aggregator collects the addresses one egressIP, loadBalancerIP or
// workloadIP rule selects: each as its host prefix, or, with the rule's
// aggregateLength (IPv4) or aggregateLengthV6 (IPv6), as the covering
// prefix of that length with the addresses behind it (its members).
type aggregator struct {
	rule *config.AdvertiseRule
	// index is the position of each prefix in aggs, which are in the
	// order first added (positions: no allocation per prefix, on every
	// pass over every egress IP and VIP).
	index map[netip.Prefix]int
	aggs  []aggregate
	// foreign says whether an aggregate would cover an address or subnet
	// that is not this node's to draw traffic for (aggregateConflicts).
	foreign *aggregateConflicts
}

func newAggregator(rule *config.AdvertiseRule, size int, foreign *aggregateConflicts) *aggregator {
	return &aggregator{rule: rule, index: make(map[netip.Prefix]int, size), aggs: make([]aggregate, 0, size), foreign: foreign}
}

type aggregate struct {
	prefix          netip.Prefix
	network, source string
	// handover: a host prefix (no members) of a workload address handed
	// over.
	handover bool
	members  []member
	networks int
}

// member is one address behind an aggregate, with its own network and
// source (sent as itself when the aggregate cannot be), and whether it is
// a workload address handed over (then sent as itself with the rule's
// handover attributes).
type member struct {
	prefix          netip.Prefix
	network, source string
	handover        bool
}

func (g *aggregator) add(a netip.Addr, network, source string, handover bool) {
	host := netip.PrefixFrom(a, a.BitLen())
	length := g.rule.AggregateLength
	if a.Is6() {
		length = g.rule.AggregateLengthV6
	}
	prefix := host
	if length > 0 && length < a.BitLen() {
		prefix = netip.PrefixFrom(a, length).Masked()
	}
	if g.index == nil {
		g.index = map[netip.Prefix]int{}
	}
	i, ok := g.index[prefix]
	if !ok {
		i = len(g.aggs)
		g.index[prefix] = i
		g.aggs = append(g.aggs, aggregate{prefix: prefix, network: network, source: source, handover: handover, networks: 1})
	} else if g.aggs[i].network != network {
		g.aggs[i].networks++
	}
	if prefix != host {
		g.aggs[i].members = append(g.aggs[i].members, member{host, network, source, handover}) // made unique in each
	}
}

// each calls fn with every prefix in the order first added; an
// aggregate's source names its members (at most eight; Members has them
// all). handover says a host prefix is a workload address handed over:
// an aggregate is sent with the rule's attributes, whatever its members.
func (g *aggregator) each(fn func(prefix netip.Prefix, network, source string, members []netip.Prefix, handover bool)) {
	for i := range g.aggs {
		ag := &g.aggs[i]
		prefix := ag.prefix
		if len(ag.members) == 0 {
			fn(prefix, ag.network, ag.source, nil, ag.handover)
			continue
		}
		slices.SortStableFunc(ag.members, func(a, b member) int { return model.ComparePrefix(a.prefix, b.prefix) })
		ag.members = slices.CompactFunc(ag.members, func(a, b member) bool { return a.prefix == b.prefix })
		if why, bad := g.foreign.covered(prefix); bad {
			// Each member as itself: the aggregate would draw traffic
			// that is not this node's.
			for _, m := range ag.members {
				fn(m.prefix, m.network, fmt.Sprintf("%s; not aggregated: %s would cover %s: choose a longer aggregateLength", m.source, prefix, why), nil, m.handover)
			}
			continue
		}
		members := make([]netip.Prefix, len(ag.members))
		var names []string
		for i, m := range ag.members {
			members[i] = m.prefix
			if i == 8 {
				names = append(names, fmt.Sprintf("and %d more", len(ag.members)-8))
			} else if i < 8 {
				names = append(names, m.prefix.String())
			}
		}
		network := ag.network
		if ag.networks > 1 {
			network += " and other networks"
		}
		fn(prefix, network, fmt.Sprintf("aggregate of %d selected by rule %s: %s", len(members), g.rule.Name, strings.Join(names, ", ")), members, false)
	}
}

// aggregateConflicts are the prefixes an aggregate must not cover
// (besides special-purpose address space, model.SpecialPurposeOverlap): those
// import protects (Protected: every node's pod subnets and addresses,
// egress IPs, cluster.serviceCIDRs, join, transit and masquerade subnets,
// protectedPrefixes), except what the node may draw traffic for: its own
// pod subnets, the egress IPs it holds and Service VIPs (every node
// advertises them), and the peers' addresses.
type aggregateConflicts struct {
	prot []model.ProtectedPrefix
}

func newAggregateConflicts(cfg *config.Config, snap model.Snapshot) *aggregateConflicts {
	mine := map[netip.Prefix]bool{}
	for _, nw := range snap.Networks {
		for _, sn := range nw.Subnets {
			mine[sn.Prefix.Masked()] = true
		}
	}
	for _, e := range snap.EgressIPs {
		mine[hostPrefix(e.IP)] = true
	}
	for _, v := range snap.ServiceVIPs {
		mine[hostPrefix(v.VIP)] = true
	}
	c := &aggregateConflicts{}
	for _, pp := range Protected(cfg, snap, model.Host{}) {
		// A peer's own address is connected at the peer, never routed
		// by what we send it.
		if !mine[pp.Prefix] && !strings.HasPrefix(pp.Why, whyPeer) {
			c.prot = append(c.prot, pp)
		}
	}
	for _, a := range snap.NodeAddresses {
		c.prot = append(c.prot, model.ProtectedPrefix{Prefix: hostPrefix(a), Why: "a node address"})
	}
	return c
}

// covered says what prefix would cover that it must not, if anything:
// a protected prefix, or special-purpose address space (RFC 6890), which
// no advertisement may overlap.
func (c *aggregateConflicts) covered(prefix netip.Prefix) (string, bool) {
	if c == nil {
		return "", false
	}
	if sp, ok := model.SpecialPurposeOverlap(prefix); ok {
		return fmt.Sprintf("%s (%s)", sp.Prefix, sp.Why), true
	}
	for _, pp := range c.prot {
		if covers(prefix, pp.Prefix) {
			return fmt.Sprintf("%s (%s)", pp.Prefix, pp.Why), true
		}
	}
	return "", false
}

// egressIPSkip says why rule (kind egressIP) does not select e, or "".
func egressIPSkip(rule *config.AdvertiseRule, e model.EgressIP) string {
	switch {
	case len(rule.Networks) > 0 && !MatchAny(rule.Networks, e.Network):
		return "network " + e.Network + " is not in the rule's networks"
	case len(rule.Namespaces) > 0 && !slices.ContainsFunc(e.Namespaces, func(ns string) bool { return MatchAny(rule.Namespaces, ns) }):
		if len(e.Namespaces) == 0 {
			return "its pods' namespace is unknown and the rule lists namespaces"
		}
		return "no namespace of its pods (" + strings.Join(e.Namespaces, ", ") + ") is in the rule's namespaces"
	}
	return ""
}

// serviceVIPSkip says why rule (kind loadBalancerIP) does not select v on
// the node of snap (local: its addresses); the zero vipSkip when it does.
func serviceVIPSkip(cfg *config.Config, snap model.Snapshot, rule *config.AdvertiseRule, v model.ServiceVIP, local *localAddrs) vipSkip {
	ns, _, _ := strings.Cut(v.Service, "/")
	switch {
	case len(rule.Networks) > 0 && !MatchAny(rule.Networks, v.Network):
		return vipSkip{kind: skipNetwork, name: v.Network}
	case len(rule.Namespaces) > 0 && !MatchAny(rule.Namespaces, ns):
		return vipSkip{kind: skipNamespace, name: ns}
	case len(rule.Services) > 0 && !MatchAny(rule.Services, v.Service):
		return vipSkip{kind: skipService, name: v.Service}
	}
	for _, c := range cfg.Cluster.ServiceCIDRs {
		if c.Contains(v.VIP) {
			return vipSkip{kind: skipClusterIP, cidr: c}
		}
	}
	if _, ok := slices.BinarySearchFunc(snap.NodeAddresses, v.VIP, netip.Addr.Compare); ok {
		return vipSkip{kind: skipNodeAddress}
	}
	if len(v.Backends) == 0 {
		return vipSkip{kind: skipNoEndpoint}
	}
	if rule.LocalEndpointsOnly && !slices.ContainsFunc(v.Backends, func(b netip.Addr) bool { return local.has(v.Network, b) }) {
		return vipSkip{kind: skipNotLocal}
	}
	return vipSkip{}
}

// vipSkip is why a loadBalancerIP rule does not select a Service VIP; the
// zero value: it selects it. The text is made only when asked for
// (explain): selection asks about every VIP on every pass, and on a big
// cluster 10,000 ClusterIPs are each skipped, which cost a string each.
type vipSkip struct {
	kind skipKind
	name string       // the network, namespace or service not selected
	cidr netip.Prefix // the service CIDR holding a ClusterIP
}

type skipKind uint8

const (
	skipNone skipKind = iota
	skipNetwork
	skipNamespace
	skipService
	skipClusterIP
	skipNodeAddress
	skipNoEndpoint
	skipNotLocal
)

// skipped says whether the rule does not select the VIP.
func (s vipSkip) skipped() bool { return s.kind != skipNone }

// String says why, or "" when the rule selects the VIP.
func (s vipSkip) String() string {
	switch s.kind {
	case skipNetwork:
		return "network " + s.name + " is not in the rule's networks"
	case skipNamespace:
		return "namespace " + s.name + " is not in the rule's namespaces"
	case skipService:
		return "service " + s.name + " is not in the rule's services"
	case skipClusterIP:
		return "a ClusterIP (inside cluster.serviceCIDRs " + s.cidr.String() + "): never advertised"
	case skipNodeAddress:
		return "a node address (a NodePort VIP): never advertised"
	case skipNoEndpoint:
		return "the service has no endpoint"
	case skipNotLocal:
		return "localEndpointsOnly: no endpoint of the service runs on this node"
	}
	return ""
}

// vipAttrs are the attributes rule (kind loadBalancerIP) sends VIP entry v
// with: the rule's, and with weightByEndpoints the link-bandwidth
// community of v's endpoints on this node (issue 21), none when no
// endpoint is local (never bandwidth 0: docs/config.md).
func vipAttrs(cfg *config.Config, rule *config.AdvertiseRule, v *model.ServiceVIP, local *localAddrs) model.PathAttrs {
	a := attrs(rule)
	if !rule.WeightByEndpoints {
		return a
	}
	n := 0
	for _, b := range v.Backends {
		if local.has(v.Network, b) {
			n++
		}
	}
	if n > 0 {
		a.LinkBandwidth = new(model.EndpointsBandwidth(cfg.BGP.ASN, n))
	}
	return a
}

// localAddrs are the addresses of this node, per network: its pod subnets
// and its own addresses (a host-network endpoint is one of those).
type localAddrs struct {
	subnets map[string][]netip.Prefix
	node    []netip.Prefix
}

func newLocalAddrs(snap model.Snapshot) *localAddrs {
	l := &localAddrs{subnets: map[string][]netip.Prefix{}}
	for _, nw := range snap.Networks {
		for _, sn := range nw.Subnets {
			l.subnets[nw.Name] = append(l.subnets[nw.Name], sn.Prefix.Masked())
		}
	}
	for _, gr := range snap.Routers {
		for _, p := range gr.ExternalNetworks {
			a := p.Addr().Unmap()
			l.node = append(l.node, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return l
}

// has says whether backend b of a Service of network runs on this node.
func (l *localAddrs) has(network string, b netip.Addr) bool {
	in := func(ps []netip.Prefix) bool {
		return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(b) })
	}
	return in(l.subnets[network]) || in(l.node)
}

// SortAdvertisements orders advertisements by peer, then prefix. A long
// list is sorted by index and then put in order once: an Advertisement is
// ~200 bytes, and moving them at every swap was most of the cost at 10,000
// Service VIPs.
func SortAdvertisements(advs []model.Advertisement) {
	cmpAdv := func(a, b *model.Advertisement) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
	}
	// Most lists come sorted (a pass's changes are taken in key order):
	// checked in one walk, they are not copied twice over.
	inOrder := true
	for i := 1; i < len(advs) && inOrder; i++ {
		inOrder = cmpAdv(&advs[i-1], &advs[i]) <= 0
	}
	if inOrder {
		return
	}
	if len(advs) < 64 {
		slices.SortFunc(advs, func(a, b model.Advertisement) int { return cmpAdv(&a, &b) })
		return
	}
	idx := make([]int32, len(advs))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return cmpAdv(&advs[a], &advs[b]) })
	sorted := make([]model.Advertisement, len(advs))
	for i, j := range idx {
		sorted[i] = advs[j]
	}
	copy(advs, sorted)
}

// MatchAny reports whether name matches one of the globs, which config
// compiled when it loaded the file (config.Glob: "*" matches any run of
// characters, "/" included, so ["*"] selects every network).
func MatchAny(globs []config.Glob, name string) bool {
	return config.MatchAny(globs, name)
}

// selectPeers returns the configured peers a rule names, in config order;
// no names means every peer.
func selectPeers(all []config.Peer, names []string) []config.Peer {
	if len(names) == 0 {
		return all
	}
	var out []config.Peer
	for _, p := range all {
		if slices.Contains(names, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// speaks reports whether the session with p carries prefix's family.
func speaks(p config.Peer, prefix netip.Prefix) bool {
	fam := config.IPv4
	if prefix.Addr().Is6() {
		fam = config.IPv6
	}
	return slices.Contains(p.Families, fam)
}

// attrs are the rule's attributes. They share its community lists
// (clipped: an append copies) and its local preference: one backing for
// every advertisement of the rule, not one each (issue 18, item 5). Nobody
// writes through them (a drain's tagging copies).
func attrs(r *config.AdvertiseRule) model.PathAttrs {
	a := model.PathAttrs{
		Communities:      slices.Clip(r.Communities),
		LargeCommunities: slices.Clip(r.LargeCommunities),
		MED:              r.MED,
		ASPathPrepend:    r.ASPathPrepend,
	}
	if r.LocalPreference > 0 {
		a.LocalPreference = &r.LocalPreference
	}
	return a
}
