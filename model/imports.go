package model

import "net/netip"

// This file is the vocabulary of route import: what protects the cluster,
// where imported routes go (OVN gateway routers, host tables and VRFs), and
// the operations a Plan holds. plan computes them, ovn and vrf apply them,
// the CLI shows them.

// ProtectedPrefix is a prefix that is never imported, nor anything inside
// it (docs/architecture.md, "Safety rules", rule 2).
type ProtectedPrefix struct {
	Prefix netip.Prefix `json:"prefix"`
	// Why names where it comes from, e.g. "pod subnet of default on node2
	// (Logical_Switch node2 other_config:subnet)", "cluster.serviceCIDRs",
	// "join subnet (Logical_Router_Port rtoj-GR_node1)", "address of peer
	// tor-a", "protectedPrefixes".
	Why string `json:"why"`
}

// GatewayRouter is the gateway router of one network on this node
// (GR_<p><node>), the OVN target of import rules for that network.
type GatewayRouter struct {
	Network string `json:"network"`
	Name    string `json:"name"`
	UUID    string `json:"uuid"`
	// ExternalPort is the router's external port (rtoe-GR_<p><node>), the
	// output_port of imported routes; "" if NB has none.
	ExternalPort string `json:"externalPort,omitempty"`
	// ExternalNetworks are the external port's networks: a next hop is
	// on-link for OVN only inside one of them.
	ExternalNetworks []netip.Prefix `json:"externalNetworks,omitempty"`
	// StaticRoutes are the UUIDs of every static route the router
	// references (owned or not), sorted: a manual plan waits on them.
	StaticRoutes []string `json:"staticRoutes,omitempty"`
	// ForeignRoutes are the static routes the router holds that are not
	// ovnbgp's (an operator's, OVN-Kubernetes'): import adds no duplicate
	// of one; sorted.
	ForeignRoutes []OVNRouteKey `json:"foreignRoutes,omitempty"`
	// ForeignImport is set when OVN-Kubernetes' own route import manages
	// this router (rows tagged k8s.ovn.org/owner-controller=RouteImport):
	// ovnbgp then refuses to import here, and this says why.
	ForeignImport string `json:"foreignImport,omitempty"`
}

// OVNRoute is a Logical_Router_Static_Route that ovnbgp owns (observed,
// with its UUID) or wants (desired). One row per next hop: several rows with
// the same prefix on one router are ECMP.
type OVNRoute struct {
	UUID       string       `json:"uuid,omitempty"`
	Router     string       `json:"router"`
	Prefix     netip.Prefix `json:"prefix"`
	NextHop    netip.Addr   `json:"nextHop"`
	OutputPort string       `json:"outputPort,omitempty"`
	// Rule is the import rule (external_ids ovnbgp.io/rule).
	Rule string `json:"rule,omitempty"`
	// Network is the OVN network of Router (not stored in the row).
	Network string `json:"network,omitempty"`
}

// OVNRouteKey identifies a static route: router, prefix and next hop.
type OVNRouteKey struct {
	Router  string       `json:"router"`
	Prefix  netip.Prefix `json:"prefix"`
	NextHop netip.Addr   `json:"nextHop"`
}

// Key returns the route's identity.
func (r OVNRoute) Key() OVNRouteKey {
	return OVNRouteKey{Router: r.Router, Prefix: r.Prefix, NextHop: r.NextHop}
}

// OpKind is what an operation of a Plan does.
type OpKind string

// The operation kinds. Add creates what is not there, Replace changes what
// is ours, Delete removes what is ours.
const (
	OpAdd     OpKind = "add"
	OpReplace OpKind = "replace"
	OpDelete  OpKind = "delete"
)

// OVNOp adds or deletes one owned static route. A delete carries the row as
// it was read (UUID and columns): a manual apply waits on it being unchanged.
type OVNOp struct {
	Op    OpKind   `json:"op"`
	Route OVNRoute `json:"route"`
}

// OVNGuard is what a manual plan read of one gateway router: applying it
// first checks (OVSDB wait) that the router still references exactly these
// static routes, so a stale plan changes nothing.
type OVNGuard struct {
	Router       string   `json:"router"`
	RouterUUID   string   `json:"routerUUID"`
	StaticRoutes []string `json:"staticRoutes"`
}

// NextHop is a kernel next hop: a gateway on-link through Dev.
type NextHop struct {
	Addr netip.Addr `json:"addr"`
	Dev  string     `json:"dev,omitempty"`
	// Weight is the next hop's share of a multipath route, 1..256 (the
	// kernel's rtnexthop hops + 1), from the link bandwidth its path
	// carries (issue 21); 0 is equal cost. A route's next hops are
	// either all 0 or all weighted, in the form CanonicalWeights gives.
	Weight int `json:"weight,omitempty"`
}

// MaxWeight is the largest kernel next-hop weight (rtnh_hops is 8 bits).
const MaxWeight = 256

// CanonicalWeights puts the weights of one route's next hops in the one
// form plan and vrf compare: all 0 when they are all equal (a weight 0
// counting as the kernel's default 1) or the route has a single next hop,
// else every one at least 1. nhs is changed in place.
func CanonicalWeights(nhs []NextHop) {
	eff := func(w int) int { return max(w, 1) }
	equal := true
	for _, nh := range nhs[min(1, len(nhs)):] {
		if eff(nh.Weight) != eff(nhs[0].Weight) {
			equal = false
			break
		}
	}
	for i := range nhs {
		if equal {
			nhs[i].Weight = 0
		} else {
			nhs[i].Weight = eff(nhs[i].Weight)
		}
	}
}

// KernelRoute is a route in a host table carrying ovnbgp's route protocol
// (observed) or wanted there (desired). Several next hops make a multipath
// (ECMP) route. Table is the table id; for a VRF target VRF names the
// device and Table is its table.
type KernelRoute struct {
	Table    uint32       `json:"table"`
	VRF      string       `json:"vrf,omitempty"`
	Prefix   netip.Prefix `json:"prefix"`
	NextHops []NextHop    `json:"nextHops"`
	Protocol int          `json:"protocol"`
	// Metric is the route's metric (RTA_PRIORITY; import[].accept[].metric,
	// issue 21); 0 is the kernel's default (0 for IPv4, 1024 for IPv6).
	Metric uint32 `json:"metric,omitempty"`
	// Rule is the import rule behind a desired route; the kernel keeps
	// no such marker, so observed routes have none.
	Rule string `json:"rule,omitempty"`
}

// KernelRouteKey identifies a kernel route of ovnbgp's: table and prefix.
// ovnbgp keeps one route per table and prefix; the kernel's key adds the
// metric (KernelRoute.Metric), which ovnbgp sets per route.
type KernelRouteKey struct {
	Table  uint32
	Prefix netip.Prefix
}

// Key returns the route's identity.
func (r KernelRoute) Key() KernelRouteKey { return KernelRouteKey{Table: r.Table, Prefix: r.Prefix} }

// VRFDevice is a Linux VRF device and its table.
type VRFDevice struct {
	Name  string `json:"name"`
	Table uint32 `json:"table"`
}

// KernelRule is a policy-routing rule (ip rule) ovnbgp owns: traffic from
// Src looks up Table. It carries ovnbgp's protocol (FRA_PROTOCOL).
type KernelRule struct {
	Priority int          `json:"priority"`
	Src      netip.Prefix `json:"src"`
	Table    uint32       `json:"table"`
	Protocol int          `json:"protocol"`
	Rule     string       `json:"rule,omitempty"`
}

// KernelOp is one change in the host. Exactly one of Route, VRF and
// PolicyRule is set: a route add, replace or delete; a VRF device to create
// (only when an import rule asks for it; ovnbgp never deletes a VRF); an
// ip rule to add or delete.
type KernelOp struct {
	Op         OpKind       `json:"op"`
	Route      *KernelRoute `json:"route,omitempty"`
	VRF        *VRFDevice   `json:"vrf,omitempty"`
	PolicyRule *KernelRule  `json:"policyRule,omitempty"`
}

// Link is a host network device as import's next-hop checks see it.
type Link struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Up    bool   `json:"up"`
	// Addrs are the device's addresses with their prefix lengths: the
	// connected prefixes through which a next hop is on-link.
	Addrs []netip.Prefix `json:"addrs,omitempty"`
	// Master is the VRF the device is enslaved to, "" if none.
	Master string `json:"master,omitempty"`
}

// Host is what the kernel holds that import cares about: the links (for
// on-link and local checks), the VRFs, and ovnbgp's own routes and rules.
type Host struct {
	Links  []Link        `json:"links"`
	VRFs   []VRFDevice   `json:"vrfs,omitempty"`
	Routes []KernelRoute `json:"routes,omitempty"`
	Rules  []KernelRule  `json:"rules,omitempty"`
	// Foreign are the keys held by routes that are not ovnbgp's, in every
	// table but local, main and default: import never plans a route
	// onto them (the kernel writer would refuse it on every pass).
	Foreign []KernelRouteKey `json:"foreign,omitempty"`
}

// LearnedDelta is what peers sent since the speaker's previous TakeLearned:
// the daemon keeps the learned table up to date from it instead of walking
// every peer's table on each change.
type LearnedDelta struct {
	// Paths are the present state of every (peer, prefix) that was
	// announced or replaced since: its latest state, one per key.
	Paths []LearnedPath
	// Gone are the (peer, prefix) whose path was withdrawn or dropped
	// (withdraw, session down, graceful-restart expiry) and not announced
	// again since.
	Gone []Key
	// Resync names the peers whose whole table must be read again
	// (EachLearned): their session changed state, they sent End-of-RIB, or
	// events may have been missed. Their Paths and Gone are included too,
	// and the walk, being newer, wins over them.
	Resync []string
}

// Empty reports whether nothing changed.
func (d LearnedDelta) Empty() bool {
	return len(d.Paths) == 0 && len(d.Gone) == 0 && len(d.Resync) == 0
}

// HostChanges is what changed in the kernel since the host's previous
// TakeChanges.
type HostChanges struct {
	// Links: links, addresses or VRF devices changed, so the next-hop
	// checks must be redone.
	Links bool
	// Routes are the keys (table, prefix) where a route changed, ovnbgp's
	// or not, in a table ovnbgp watches; each key once. The host's own
	// writes (its Apply) are not among them: the caller knows those.
	Routes []KernelRouteKey
	// All: events may have been missed (a subscription was renewed, a
	// socket overflowed): everything must be read again with Snapshot.
	All bool
}
