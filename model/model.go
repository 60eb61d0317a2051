// Package model is ovnbgp's vendor-neutral vocabulary: the networks read from
// OVN, the advertisements planned for peers, and the state of BGP sessions and
// learned paths, and the import side's protected prefixes, OVN rows,
// kernel routes and plan operations. The packages that talk to external
// systems (ovn, bgp, vrf) translate to and from these types, so no gobgp,
// libovsdb or netlink type crosses a package boundary. It also holds the few facts every side must
// agree on: the prefix order (ComparePrefix), community parsing, and the
// special-purpose address space no route may point into either way
// (SpecialPurposeCovering, SpecialPurposeOverlap).
package model

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DefaultNetwork is the name of OVN-Kubernetes' cluster default network.
const DefaultNetwork = "default"

// Network is one OVN-Kubernetes network as seen from this node.
type Network struct {
	// Name is "default" or the value of external_ids:k8s.ovn.org/network
	// (a UDN is "<namespace>_<name>", a CUDN "cluster_udn_<name>").
	Name string `json:"name"`
	// Topology is layer3, layer2 or localnet.
	Topology string `json:"topology"`
	// Role is primary or secondary ("" when OVN does not say).
	Role string `json:"role,omitempty"`
	// Subnets are this node's pod subnets in the network.
	Subnets []Subnet `json:"subnets"`
}

// Subnet is a pod subnet and the OVN object it was read from.
type Subnet struct {
	Prefix netip.Prefix `json:"prefix"`
	// Source names the NB row and column, e.g.
	// "Logical_Switch blue_node1 other_config:subnet".
	Source string `json:"source"`
}

// Snapshot is what the OVN Northbound DB says about this node.
type Snapshot struct {
	Node     string    `json:"node"`
	Networks []Network `json:"networks"`
	// Routers are this node's gateway routers, one per network that has
	// one: the OVN targets of import.
	Routers []GatewayRouter `json:"routers,omitempty"`
	// Protected are the prefixes NB says belong to the cluster: every
	// node's pod subnets (switches and interconnect routes), the join and
	// transit subnets, Service VIPs, egress IPs and node addresses
	// (docs/ovn-nb.md). Import never accepts anything inside them.
	Protected []ProtectedPrefix `json:"protected,omitempty"`
	// OwnedRoutes are the static routes carrying ovnbgp.io/owner=<Node>.
	OwnedRoutes []OVNRoute `json:"ownedRoutes,omitempty"`
	// NodeAddresses are the node addresses NB holds: the networks of every
	// gateway router's external port (rtoe-GR_*), any node's (a central NB
	// has them all, an interconnect NB this node's), sorted. A Service VIP
	// on one of them is a NodePort, never advertised.
	NodeAddresses []netip.Addr `json:"nodeAddresses,omitempty"`
	// EgressIPs are the egress IPs this node holds, sorted by network
	// (default first) and address.
	EgressIPs []EgressIP `json:"egressIPs,omitempty"`
	// ServiceVIPs are the VIPs of every Service load balancer, sorted by
	// network (default first), address and Service. ClusterIPs and
	// node-port VIPs are included: the plan tells them apart.
	ServiceVIPs []ServiceVIP `json:"serviceVIPs,omitempty"`
	// WorkloadIPs are the addresses of the pods and KubeVirt VMs whose
	// logical switch ports are this node's, sorted by network (default
	// first), address and port. Read only while a workloadIP rule asks
	// for them (the NB client's Workloads option); empty otherwise.
	// Pointers, so that one change among 10,000 copies 8 bytes per entry,
	// not the entry (issue 19): the list and the entries are shared
	// between snapshots and read-only (copy an entry to change it).
	WorkloadIPs []*WorkloadIP `json:"workloadIPs,omitempty"`
	// Northd is the version of the ovn-northd that last wrote NB; zero
	// when NB does not say.
	Northd NorthdVersion `json:"northd,omitzero"`
}

// NorthdVersion is the OVN release of ovn-northd, from NB_Global
// options:northd_internal_version ("24.03.2-20.33.0-72.6": the OVN
// version, the Southbound schema version, northd's internal version).
// Major 0 is unknown (no such option, or not of that shape), which import
// takes as the oldest; Raw is the option as NB holds it, "" when absent.
type NorthdVersion struct {
	Major int    `json:"major,omitempty"`
	Minor int    `json:"minor,omitempty"`
	Raw   string `json:"raw,omitempty"`
}

// Known reports whether the release is known.
func (v NorthdVersion) Known() bool { return v.Major > 0 }

// AtLeast reports whether the release is known and major.minor or later.
func (v NorthdVersion) AtLeast(major, minor int) bool {
	return v.Known() && (v.Major > major || v.Major == major && v.Minor >= minor)
}

// MixedFamilyRoutes reports whether this northd takes a static route
// whose prefix and next hop families differ (an IPv4 prefix via an IPv6
// next hop): OVN 25.03 is the first release with commit 559924291
// ("northd: Handle routing for other address families"; OVN's NEWS lists
// it under 24.09.0, but no 24.09 release has it). Before, northd drops
// such a route with "Address family doesn't match". An unknown version
// does not.
func (v NorthdVersion) MixedFamilyRoutes() bool { return v.AtLeast(25, 3) }

// String is the release as OVN names it ("24.09"), or "unknown".
func (v NorthdVersion) String() string {
	if !v.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%d.%02d", v.Major, v.Minor)
}

// PathAttrs are the BGP attributes ovnbgp sets on an advertised prefix,
// parsed: config parses the rule's strings once, and the BGP layer sends
// these values as they are. In JSON, communities read as config writes them
// ("no-export", "65001:100", "64512:1:2").
type PathAttrs struct {
	Communities      []Community      `json:"communities,omitempty"`
	LargeCommunities []LargeCommunity `json:"largeCommunities,omitempty"`
	// LocalPreference is sent to iBGP peers; nil = not set (gobgp's
	// default, 100). A drained iBGP peer gets 0 (RFC 8326).
	LocalPreference *uint32 `json:"localPreference,omitempty"`
	MED             uint32  `json:"med,omitempty"`
	ASPathPrepend   uint8   `json:"asPathPrepend,omitempty"`
	// LinkBandwidth is sent as the link-bandwidth extended community; nil
	// = not sent (a weightByEndpoints rule sets it per Service VIP).
	LinkBandwidth *LinkBandwidth `json:"linkBandwidth,omitempty"`
}

// String is the attributes as `routes advertised` and `explain` print
// them ("" when none is set): communities=65535:0 localpref=0 med=10 ...
func (a PathAttrs) String() string {
	var parts []string
	if len(a.Communities) > 0 {
		parts = append(parts, "communities="+strings.Join(Strings(a.Communities), ","))
	}
	if len(a.LargeCommunities) > 0 {
		parts = append(parts, "large="+strings.Join(Strings(a.LargeCommunities), ","))
	}
	if a.LocalPreference != nil {
		parts = append(parts, "localpref="+strconv.FormatUint(uint64(*a.LocalPreference), 10))
	}
	if a.MED != 0 {
		parts = append(parts, "med="+strconv.FormatUint(uint64(a.MED), 10))
	}
	if a.ASPathPrepend != 0 {
		parts = append(parts, "prepend="+strconv.Itoa(int(a.ASPathPrepend)))
	}
	if a.LinkBandwidth != nil {
		parts = append(parts, "linkbw="+a.LinkBandwidth.String())
	}
	return strings.Join(parts, " ")
}

// Advertisement is one prefix sent to one peer. Rule, Network and Source
// explain why; the BGP layer uses only Peer, Prefix and Attrs.
type Advertisement struct {
	Peer    string       `json:"peer"`
	Prefix  netip.Prefix `json:"prefix"`
	Attrs   PathAttrs    `json:"attrs"`
	Rule    string       `json:"rule,omitempty"`
	Network string       `json:"network,omitempty"`
	Source  string       `json:"source,omitempty"`
	// Members are the addresses behind an aggregate (advertise rules with
	// aggregateLength): the prefix is sent while one of them is selected.
	Members []netip.Prefix `json:"members,omitempty"`
	// Drain says, while the peer is drained (`ovnbgp drain`), what the
	// drain does to the advertisement: plan sets it with the attributes.
	Drain string `json:"drain,omitempty"`
	// State, Reason and Problem are filled by the BGP layer when it
	// reports (bgp.Speaker.Advertised and NotApplied), ignored by Set.
	// State says whether the prefix is really on the wire, Reason why not.
	State  AdvState `json:"state,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// Problem is set when the last change of this advertisement could
	// not be applied: it names the error and says what is in effect.
	Problem string `json:"problem,omitempty"`
}

// AdvState says whether an advertisement is on the wire.
type AdvState string

// The advertisement states.
const (
	// AdvSent: in effect, the session is Established and the prefix's
	// family negotiated: the peer has it.
	AdvSent AdvState = "sent"
	// AdvPending: in effect, but the session is not Established; it is
	// sent when it comes up.
	AdvPending AdvState = "pending"
	// AdvNotSent: in effect, but the session cannot carry it (the peer
	// did not negotiate its family).
	AdvNotSent AdvState = "not sent"
	// AdvNotApplied: asked for, but it could not be applied (see Problem).
	AdvNotApplied AdvState = "not applied"
	// AdvHeldBack: selected, but the peer's export cap (maxAdvertised)
	// keeps it from being sent (see Reason).
	AdvHeldBack AdvState = "held back"
	// AdvDrained: selected, but the peer is drained (`ovnbgp drain`) and
	// its wait is over: withdrawn until `ovnbgp undrain` (see Reason).
	AdvDrained AdvState = "drained"
)

// AdvertDiff is what must change for the advertised set to become the
// desired one: plan computes it, the BGP layer applies exactly it. Change
// holds advertisements whose prefix a peer keeps but whose attributes differ
// (the peer gets an implicit-withdraw UPDATE).
type AdvertDiff struct {
	Announce []Advertisement `json:"announce,omitempty"`
	Change   []Advertisement `json:"change,omitempty"`
	Withdraw []Advertisement `json:"withdraw,omitempty"`
}

// Empty reports whether nothing changes.
func (d AdvertDiff) Empty() bool {
	return len(d.Announce) == 0 && len(d.Change) == 0 && len(d.Withdraw) == 0
}

// Key identifies an advertisement: one prefix to one peer.
type Key struct {
	Peer   string
	Prefix netip.Prefix
}

// Key returns the advertisement's identity.
func (a Advertisement) Key() Key { return Key{Peer: a.Peer, Prefix: a.Prefix} }

// SessionState is a BGP finite-state-machine state (RFC 4271 8.2.2).
type SessionState string

// The BGP session states.
const (
	StateUnknown     SessionState = "unknown"
	StateIdle        SessionState = "idle"
	StateConnect     SessionState = "connect"
	StateActive      SessionState = "active"
	StateOpenSent    SessionState = "opensent"
	StateOpenConfirm SessionState = "openconfirm"
	StateEstablished SessionState = "established"
)

// FamilyCounts counts paths of one address family on a session.
type FamilyCounts struct {
	Family     string `json:"family"`
	Received   int    `json:"received"`
	Accepted   int    `json:"accepted"`
	Advertised int    `json:"advertised"`
	// Negotiated is true while the session is Established with this
	// family negotiated: only then is anything of it sent.
	Negotiated bool `json:"negotiated"`
	// Withheld says why nothing of a negotiated family is sent, "" if it
	// is: IPv4 over an IPv6 session needs the peer's extended next hop
	// capability (RFC 8950).
	Withheld string `json:"withheld,omitempty"`
}

// PeerStatus is the live state of one configured peer.
type PeerStatus struct {
	Name         string         `json:"name"`
	Address      netip.Addr     `json:"address"`
	ASN          uint32         `json:"asn"`
	State        SessionState   `json:"state"`
	Since        time.Time      `json:"since,omitzero"` // entered State
	RouterID     netip.Addr     `json:"routerID,omitzero"`
	LocalAddress netip.Addr     `json:"localAddress,omitzero"`
	Families     []FamilyCounts `json:"families"`
	// Interface is the link of an on-link peer (unnumbered, or given by
	// its link-local address); Address is then the peer's link-local
	// address on it, learned (Learned says how) or configured, and is
	// invalid while none is known.
	Interface string `json:"interface,omitempty"`
	Learned   string `json:"learned,omitempty"`
	// ExtendedNextHop is true while Established when the peer offered
	// the extended next hop capability for IPv4 unicast over IPv6 (RFC
	// 8950): IPv4 prefixes with an IPv6 next hop.
	ExtendedNextHop bool `json:"extendedNextHop,omitempty"`
	// LastError is the last NOTIFICATION (code/subcode and name, sent or
	// received) or transport error, "" if none, or, while Established,
	// the families the peer did not negotiate. It is kept after the
	// session recovers: it is in the past when State is established and
	// LastErrorAt is before Since.
	LastError string `json:"lastError,omitempty"`
	// LastErrorAt is when LastError happened (for "no session for …"
	// errors, since when).
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// EndOfRIB is true once the peer sent End-of-RIB (RFC 4724) for every
	// negotiated family of the current session: its table is complete,
	// and stale imported routes may go.
	EndOfRIB bool `json:"endOfRIB"`
	// Imported counts the peer's paths accepted by import rules;
	// ImportAlarm is set while an import cap holds some back.
	Imported    int    `json:"imported"`
	ImportAlarm string `json:"importAlarm,omitempty"`
	// HeldBack counts the prefixes the peer's export cap (maxAdvertised)
	// keeps from it.
	HeldBack int `json:"heldBack,omitempty"`
	// Drain is where the peer stands in a drain (`ovnbgp drain`): ""
	// not drained, tagged, or withdrawn.
	Drain DrainPhase `json:"drain,omitempty"`
	// BFD is the peer's BFD session (RFC 5880); nil when bfd.enabled is
	// false.
	BFD *BFDStatus `json:"bfd,omitempty"`
}

// BFDState is the state of a BFD session (RFC 5880 6.2), or off.
type BFDState string

// The BFD states. A peer with BFD enabled whose BGP session is not
// Established has no BFD session running: down.
const (
	BFDOff       BFDState = "off"
	BFDDown      BFDState = "down"
	BFDInit      BFDState = "init"
	BFDUp        BFDState = "up"
	BFDAdminDown BFDState = "admindown"
)

// BFDStatus is a peer's BFD session as `peers` shows it.
type BFDStatus struct {
	State BFDState `json:"state"`
	// Since is when State was entered (observed within 100 ms).
	Since time.Time `json:"since,omitzero"`
	// DetectTimeMs is the configured detection time in milliseconds:
	// multiplier × minRx (the peer's slower transmit interval, if any,
	// makes it longer).
	DetectTimeMs int64 `json:"detectTimeMs"`
	// Running is true while the BFD session runs: from shortly after the
	// BGP session is Established until it leaves Established.
	Running bool `json:"running"`
}

// LearnedPath is a path a peer sent us (its Adj-RIB-In), before import policy.
type LearnedPath struct {
	Peer        string       `json:"peer"`
	Prefix      netip.Prefix `json:"prefix"`
	NextHop     netip.Addr   `json:"nextHop"`
	ASPath      []uint32     `json:"asPath"`
	Origin      string       `json:"origin"`
	MED         uint32       `json:"med,omitempty"`
	LocalPref   uint32       `json:"localPreference,omitempty"`
	Communities []string     `json:"communities,omitempty"`
	// LinkBandwidth is the path's link-bandwidth extended community
	// (the first, if it has several), nil if none: the kernel target
	// weighs ECMP next hops by it (issue 21).
	LinkBandwidth *LinkBandwidth `json:"linkBandwidth,omitempty"`
	Age           time.Time      `json:"age,omitzero"`
	// Malformed is set by the BGP layer when the path must never be
	// imported whatever the rules say (AS 0, AS_SET, an empty AS path
	// from an eBGP peer), and says why.
	// A routing loop (our ASN in the AS path, our router ID as
	// ORIGINATOR_ID) starts with RoutingLoop.
	Malformed string `json:"malformed,omitempty"`
	// Stale is true while the path is kept through the peer's graceful
	// restart (RFC 4724) and not yet refreshed.
	Stale bool `json:"stale,omitempty"`
	// Accepted is true when an import rule accepts the path; Rule names
	// the rule that decided, Reason says why it was accepted or not.
	Accepted bool   `json:"accepted"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// SessionRepairs counts the speaker's session-start repairs: a change
// that may have fallen in gobgp's window as a session came up makes the
// speaker send the peer its table again (bgp/sessionup.go). Checks are
// the sessions checked, Repairs those repaired; Last is the latest repair.
type SessionRepairs struct {
	Checks  uint64         `json:"checks"`
	Repairs uint64         `json:"repairs"`
	Last    *SessionRepair `json:"last,omitempty"`
}

// SessionRepair is one session-start repair: the paths put back (selected
// by no peer) so that their withdrawal goes out again, whether the soft
// reset out was sent, and the paths removed again. Error is what failed.
type SessionRepair struct {
	Peer      string    `json:"peer"`
	At        time.Time `json:"at"`
	PutBack   int       `json:"putBack"`
	SoftReset bool      `json:"softReset"`
	Removed   int       `json:"removed"`
	Error     string    `json:"error,omitempty"`
}

// BMPStation is the state of one BMP server (RFC 7854) the speaker streams
// to: Up while connected; Since is when it last connected (Up) or lost its
// connection (down), zero if it never did.
type BMPStation struct {
	Name    string         `json:"name"`
	Station netip.AddrPort `json:"station"`
	Up      bool           `json:"up"`
	Since   time.Time      `json:"since,omitzero"`
}

// RoutingLoop starts LearnedPath.Malformed when the path loops back to
// this speaker: not a malformed UPDATE, but never imported either.
const RoutingLoop = "a routing loop"

// LinkStatus is what neighbour discovery knows of the link of an on-link
// peer (issue 20): the peer's learned link-local address and how, or why
// none is known yet.
type LinkStatus struct {
	Link string `json:"link"`
	// Peer is the learned address (zoned), invalid while none is known;
	// How and Since say how and when it was learned.
	Peer  netip.Addr `json:"peer,omitzero"`
	How   string     `json:"how,omitempty"`
	Since time.Time  `json:"since,omitzero"`
	// Local is the node's own link-local address on the link.
	Local netip.Addr `json:"local,omitzero"`
	// Waiting says why no peer is known yet; Problem is a standing
	// problem with what was heard; LastError the link's last error.
	Waiting   string `json:"waiting,omitempty"`
	Problem   string `json:"problem,omitempty"`
	LastError string `json:"lastError,omitempty"`
}
