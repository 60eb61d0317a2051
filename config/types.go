package config

import (
	"net/netip"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// Config is the whole of /etc/ovnbgp/config.yaml, typed. The YAML keys are
// the contract of docs/architecture.md ("Config keys"); Load fills defaults and
// Validate reports every problem with its key path.
//
// The json tags repeat the YAML keys so that `-o json` and `-o yaml` print the
// same names. Durations marshal as Go duration strings ("90s") and netip
// values as text in both encodings; a password is never marshalled.
type Config struct {
	Node Node `yaml:"node" json:"node"`
	BGP  BGP  `yaml:"bgp" json:"bgp"`
	OVN  OVN  `yaml:"ovn" json:"ovn"`
	// Advertise rules select what this node advertises; nothing is
	// advertised unless a rule selects it.
	Advertise []AdvertiseRule `yaml:"advertise" json:"advertise"`
	// Import rules accept learned routes; nothing is imported unless a
	// rule accepts it (RFC 8212).
	Import []ImportRule `yaml:"import" json:"import"`
	// ProtectedPrefixes are never imported, nor anything inside them, on
	// top of the prefixes ovnbgp discovers.
	ProtectedPrefixes []netip.Prefix `yaml:"protectedPrefixes" json:"protectedPrefixes"`
	// Cluster holds cluster-wide facts NB does not carry.
	Cluster Cluster `yaml:"cluster" json:"cluster"`
	Kernel  Kernel  `yaml:"kernel" json:"kernel"`
	Control Control `yaml:"control" json:"control"`
	Metrics Metrics `yaml:"metrics" json:"metrics"`
	// BMP streams the BGP state to monitoring stations (RFC 7854).
	BMP BMP `yaml:"bmp" json:"bmp"`
	Log Log `yaml:"log" json:"log"`
	// StateDir is the absolute path of the directory holding what must
	// survive a restart: the drain state (drain.json, `ovnbgp drain`).
	// A reload keeps the running value.
	StateDir string `yaml:"stateDir" json:"stateDir"`
}

// Node names the OVN-Kubernetes node this daemon runs on.
type Node struct {
	// Name is the OVN-Kubernetes node name; default: as the kubelet names
	// the node, KUBELET_NODE_NAME of KubeletNodeEnv, else the hostname,
	// lower-cased.
	Name string `yaml:"name" json:"name"`
}

// BGP is the local speaker and its peers.
type BGP struct {
	// ASN is the local autonomous system number (4-byte allowed).
	ASN uint32 `yaml:"asn" json:"asn"`
	// RouterID defaults to the node's first global IPv4 address.
	RouterID netip.Addr `yaml:"routerID" json:"routerID"`
	// ListenPort is the TCP port for incoming sessions (default 179);
	// -1 = never listen.
	ListenPort int `yaml:"listenPort" json:"listenPort"`
	// GracefulRestart (RFC 4724): peers keep our routes while we restart.
	GracefulRestart GracefulRestart `yaml:"gracefulRestart" json:"gracefulRestart"`
	// Peers are the BGP neighbours; at least one is required.
	Peers []Peer `yaml:"peers" json:"peers"`
}

// GracefulRestart configures RFC 4724 graceful restart.
type GracefulRestart struct {
	// Enabled advertises the graceful restart capability (default false).
	Enabled bool `yaml:"enabled" json:"enabled"`
	// RestartTime is how long peers keep our routes (default 120s, 1s..4095s).
	RestartTime time.Duration `yaml:"restartTime" json:"restartTime"`
	// DeferralTime is how long, after ovnbgp starts, owned imported routes
	// are kept for a peer that sends no End-of-RIB (default 120s,
	// 1s..3600s): until then they are adopted, not deleted (fail static).
	// It applies whether or not Enabled is set.
	DeferralTime time.Duration `yaml:"deferralTime" json:"deferralTime"`
	// StalePathTime is how long routes a peer's graceful restart kept
	// stale stay imported once its session is back, if it sends no
	// End-of-RIB (default 360s, FRR's stalepath-time; 1s..3600s). The
	// restart time the peer advertised bounds the wait while it is down.
	StalePathTime time.Duration `yaml:"stalePathTime" json:"stalePathTime"`
}

// Cluster holds cluster-wide facts that the node's NB does not carry.
type Cluster struct {
	// ServiceCIDRs are the ClusterIP ranges (default DefaultServiceCIDRs,
	// OpenShift's 172.30.0.0/16): never imported, nor anything inside.
	ServiceCIDRs []netip.Prefix `yaml:"serviceCIDRs" json:"serviceCIDRs"`
}

// Family is an address family of a BGP session.
type Family string

// The address families ovnbgp speaks.
const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
)

// Peer is one BGP neighbour.
type Peer struct {
	// Name is unique and used everywhere else (rules, CLI, metrics).
	Name string `yaml:"name" json:"name"`
	// Address is the peer's IPv4 or IPv6 address; an IPv6 link-local one
	// with its link as zone (fe80::1%eth1), which Load adds from
	// Interface when the file leaves it out. Unset (the zero Addr) with
	// Interface set, the peer is unnumbered (Unnumbered).
	Address netip.Addr `yaml:"address" json:"address"`
	// ASN is the peer's AS; equal to bgp.asn makes an iBGP session.
	ASN uint32 `yaml:"asn" json:"asn"`
	// Port is the peer's TCP port (default 179).
	Port int `yaml:"port" json:"port"`
	// SourceAddress is the local address to dial from (optional).
	SourceAddress netip.Addr `yaml:"sourceAddress" json:"sourceAddress"`
	// Interface binds the session to a device (optional); alone, without
	// Address, it makes the peer unnumbered. Load sets it from the zone
	// of a link-local Address.
	Interface string `yaml:"interface" json:"interface"`
	// Passive: never dial, only accept.
	Passive bool `yaml:"passive" json:"passive"`
	// EBGPMultihop is the TTL for non-directly-connected eBGP; 0 = off.
	EBGPMultihop uint8 `yaml:"ebgpMultihop" json:"ebgpMultihop"`
	// TTLSecurity enables GTSM (RFC 5082).
	TTLSecurity bool `yaml:"ttlSecurity" json:"ttlSecurity"`
	// PasswordFile holds the TCP MD5 secret ("credential:NAME" reads
	// $CREDENTIALS_DIRECTORY/NAME). Password is read from it by Load and
	// is never printed nor marshalled.
	PasswordFile string `yaml:"passwordFile" json:"passwordFile"`
	// Password is the TCP MD5 secret read from PasswordFile.
	Password string `yaml:"-" json:"-"`
	// PasswordRedacted is set by Redacted on peers whose Password it
	// cleared; marshalled output then shows `password: (redacted)`.
	PasswordRedacted bool `yaml:"-" json:"-"`
	// HoldTime (default 90s) is 3s..65535s. 0 (no keepalives) is refused:
	// gobgp would silently use 90s instead.
	HoldTime time.Duration `yaml:"holdTime" json:"holdTime"`
	// KeepaliveTime defaults to HoldTime/3.
	KeepaliveTime time.Duration `yaml:"keepaliveTime" json:"keepaliveTime"`
	// ConnectRetry is the wait between dial attempts (default 5s).
	ConnectRetry time.Duration `yaml:"connectRetry" json:"connectRetry"`
	// BFD is fast failure detection (RFC 5880, single-hop RFC 5881).
	BFD BFD `yaml:"bfd" json:"bfd"`
	// Families default to [ipv4, ipv6] for an on-link peer (OnLink), to
	// the address family of Address otherwise. Both are valid over IPv6
	// (IPv4 with an IPv6 next hop, RFC 8950), not IPv6 over IPv4.
	Families []Family `yaml:"families" json:"families"`
	// MaxPrefixes is the per-family session backstop (the session resets
	// above it); default DefaultMaxPrefixes, 0 = no limit.
	MaxPrefixes uint32 `yaml:"maxPrefixes" json:"maxPrefixes"`
	// MaxAdvertised is the export cap: never send this peer more prefixes
	// than this (an AWS VPC Route Server takes 100); 0 = none.
	MaxAdvertised int `yaml:"maxAdvertised" json:"maxAdvertised"`
	// EnforceFirstAS (default true; Load sets it) refuses to import a path
	// from this eBGP peer whose AS path does not start with the peer's
	// ASN (RFC 4271 6.3, FRR's enforce-first-as). false for a route
	// server that leaves its own AS out of the paths it passes on (RFC
	// 7947). Read by the import decision only: a change resets no session.
	EnforceFirstAS bool `yaml:"enforceFirstAS" json:"enforceFirstAS"`
}

// BFD configures RFC 5880 fast failure detection for a peer.
type BFD struct {
	// Enabled runs a BFD session with the peer while the BGP session is
	// Established; BFD going down resets the BGP session.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// MinTx is the desired minimum transmit interval (default 300ms).
	MinTx time.Duration `yaml:"minTx" json:"minTx"`
	// MinRx is the required minimum receive interval (default 300ms).
	MinRx time.Duration `yaml:"minRx" json:"minRx"`
	// Multiplier is the detection multiplier (default 3).
	Multiplier uint8 `yaml:"multiplier" json:"multiplier"`
}

// OVN is how to reach the OVN Northbound database.
type OVN struct {
	// Northbound is unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT; several may
	// be given separated by commas (clustered NB). Unset (""), the node's
	// NB socket is looked for among NorthboundSockets (Target).
	Northbound string `yaml:"northbound" json:"northbound"`
	// NorthboundSockets are the unix sockets looked for, in order, while
	// Northbound is unset (default DefaultNorthboundSockets: OpenShift's
	// /var/run/ovn-ic first). Absolute paths; only without Northbound.
	NorthboundSockets []string `yaml:"northboundSockets" json:"northboundSockets,omitempty"`
	// TLS files are required with, and only with, an ssl: endpoint.
	TLS TLS `yaml:"tls" json:"tls"`
	// Workloads is set, not read from the file, when an advertise rule is
	// of kind workloadIP: only then does the NB client read the logical
	// switch ports (one per pod), and a reload that changes it dials NB
	// again.
	Workloads bool `yaml:"-" json:"-"`
}

// TLS files for ssl: NB connections.
type TLS struct {
	// CAFile verifies the NB server's certificate.
	CAFile string `yaml:"caFile" json:"caFile"`
	// CertFile is our client certificate.
	CertFile string `yaml:"certFile" json:"certFile"`
	// KeyFile is the private key of CertFile.
	KeyFile string `yaml:"keyFile" json:"keyFile"`
}

// AdvertiseKind says what an advertise rule selects.
type AdvertiseKind string

// The kinds of advertise rules.
const (
	KindPodNetwork     AdvertiseKind = "podNetwork"
	KindEgressIP       AdvertiseKind = "egressIP"
	KindLoadBalancerIP AdvertiseKind = "loadBalancerIP"
	KindWorkloadIP     AdvertiseKind = "workloadIP"
	// KindClusterIP is known only to be refused with its reason
	// (validate.go, clusterIPRefused).
	KindClusterIP AdvertiseKind = "clusterIP"
)

// AdvertiseRule selects what this node advertises, and to which peers.
type AdvertiseRule struct {
	// Name is unique among advertise rules.
	Name string `yaml:"name" json:"name"`
	// Kind is podNetwork, egressIP, loadBalancerIP or workloadIP.
	Kind AdvertiseKind `yaml:"kind" json:"kind"`
	// Networks are OVN network name globs ("default" = cluster default);
	// required for podNetwork and workloadIP, empty = all for the other
	// kinds.
	Networks []Glob `yaml:"networks" json:"networks"`
	// Namespaces are namespace globs (egressIP, loadBalancerIP,
	// workloadIP); empty = all.
	Namespaces []Glob `yaml:"namespaces" json:"namespaces"`
	// Services are "namespace/name" globs (loadBalancerIP), matched against
	// the whole "namespace/name"; empty = all.
	Services []Glob `yaml:"services" json:"services"`
	// Pods are "namespace/name" globs (workloadIP), matched against the
	// pod's "namespace/name" and, for a KubeVirt VM, the VM's; empty = all.
	Pods []Glob `yaml:"pods" json:"pods"`
	// Handover is what the node a VM leaves in a live migration sends
	// while the address is handed over (workloadIP).
	Handover Handover `yaml:"handover,omitempty" json:"handover,omitzero"`
	// LocalEndpointsOnly advertises a service only if a backend runs on
	// this node (loadBalancerIP).
	LocalEndpointsOnly bool `yaml:"localEndpointsOnly" json:"localEndpointsOnly"`
	// WeightByEndpoints sends each Service VIP with the link-bandwidth
	// extended community, its value the number of the Service's ready
	// endpoints on this node (model.EndpointsBandwidth; loadBalancerIP,
	// without aggregation; issue 21).
	WeightByEndpoints bool `yaml:"weightByEndpoints" json:"weightByEndpoints"`
	// AggregateLength sends, instead of each selected IPv4 address, its
	// covering prefix of this length, while one member is there
	// (egressIP, loadBalancerIP; 0 = none); AggregateLengthV6 the same
	// for IPv6.
	AggregateLength   int `yaml:"aggregateLength" json:"aggregateLength"`
	AggregateLengthV6 int `yaml:"aggregateLengthV6" json:"aggregateLengthV6"`
	// Peers are peer names; empty = all peers.
	Peers []string `yaml:"peers" json:"peers"`
	// Communities are "ASN:VALUE" (16 bits each) or well-known names,
	// parsed (model.ParseCommunity).
	Communities []model.Community `yaml:"communities" json:"communities"`
	// LargeCommunities are "A:B:C" (32 bits each, RFC 8092), parsed.
	LargeCommunities []model.LargeCommunity `yaml:"largeCommunities" json:"largeCommunities"`
	// LocalPreference is sent to iBGP peers only; 0 = not set.
	LocalPreference uint32 `yaml:"localPreference" json:"localPreference"`
	// MED is the multi-exit discriminator; 0 = not set.
	MED uint32 `yaml:"med" json:"med"`
	// ASPathPrepend repeats the local ASN this many extra times (0..10).
	ASPathPrepend uint8 `yaml:"asPathPrepend" json:"asPathPrepend"`
}

// Handover is how a workloadIP rule hands a VM's address from the node a
// live migration leaves to the node it goes to (docs/config.md, "Live
// migration"): the leaving node keeps advertising it, less preferred, until
// HoldTime after NB shows the VM active elsewhere, so that some node
// advertises it at every moment and the router prefers the target.
type Handover struct {
	// HoldTime is how long the node the VM left keeps advertising its
	// address (default DefaultHandoverHoldTime).
	HoldTime time.Duration `yaml:"holdTime" json:"holdTime"`
	// LocalPreference is the leaving node's LOCAL_PREF to iBGP peers,
	// lower than the rule's (or 100) (default DefaultHandoverLocalPreference).
	LocalPreference uint32 `yaml:"localPreference" json:"localPreference"`
	// ASPathPrepend is how many more times the leaving node prepends its
	// ASN, on top of the rule's (default DefaultHandoverASPathPrepend).
	ASPathPrepend uint8 `yaml:"asPathPrepend" json:"asPathPrepend"`
	// MED, when set, is the leaving node's MED, higher than the rule's
	// (0: the rule's).
	MED uint32 `yaml:"med" json:"med"`
}

// ImportRule accepts routes learned from peers into OVN and the host.
type ImportRule struct {
	// Name is unique among import rules.
	Name string `yaml:"name" json:"name"`
	// Peers are the peer names whose routes this rule considers.
	Peers []string `yaml:"peers" json:"peers"`
	// Network is the OVN network whose gateway router receives the routes.
	Network string `yaml:"network" json:"network"`
	// Accept lists the prefixes accepted; anything else is rejected.
	Accept []PrefixMatch `yaml:"accept" json:"accept"`
	// AllowDefaultRoute lets 0.0.0.0/0 and ::/0 through.
	AllowDefaultRoute bool `yaml:"allowDefaultRoute" json:"allowDefaultRoute"`
	// MaxRoutes is the import cap per peer: above it nothing new is
	// imported from that peer by this rule (default DefaultMaxRoutes).
	MaxRoutes int `yaml:"maxRoutes" json:"maxRoutes"`
	// Mode is auto (default) or manual (plan only).
	Mode string `yaml:"mode" json:"mode"`
	// Targets say where imported routes are programmed.
	Targets ImportTargets `yaml:"targets" json:"targets"`
	// RejectCommunities are standard or large communities: a path
	// carrying any of them is rejected by this rule, whatever its accept
	// entries say (issue 21).
	RejectCommunities []AnyCommunity `yaml:"rejectCommunities" json:"rejectCommunities"`
}

// AnyCommunity is a standard community (model.ParseCommunity) or, written
// with three parts, a large one (model.ParseLargeCommunity).
type AnyCommunity struct {
	// Large says which of the two is set.
	Large          bool
	Community      model.Community
	LargeCommunity model.LargeCommunity
}

// UnmarshalText reads "A:B:C" as a large community, anything else as a
// standard one.
func (a *AnyCommunity) UnmarshalText(b []byte) error {
	if strings.Count(string(b), ":") == 2 {
		l, err := model.ParseLargeCommunity(string(b))
		if err != nil {
			return err
		}
		*a = AnyCommunity{Large: true, LargeCommunity: l}
		return nil
	}
	c, err := model.ParseCommunity(string(b))
	if err != nil {
		return err
	}
	*a = AnyCommunity{Community: c}
	return nil
}

// String is the community as LearnedPath.Communities writes it.
func (a AnyCommunity) String() string {
	if a.Large {
		return a.LargeCommunity.String()
	}
	return a.Community.String()
}

// MarshalText writes String.
func (a AnyCommunity) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// PrefixMatch matches prefixes inside Prefix whose length is in
// [MinLength, MaxLength].
type PrefixMatch struct {
	// Prefix is the covering prefix.
	Prefix netip.Prefix `yaml:"prefix" json:"prefix"`
	// MinLength is the shortest accepted length (0 = Prefix's own length).
	MinLength int `yaml:"minLength" json:"minLength"`
	// MaxLength is the longest accepted length (0 = Prefix's own length).
	MaxLength int `yaml:"maxLength" json:"maxLength"`
	// Communities, when set, require one of them on the path (issue 21).
	Communities []model.Community `yaml:"communities" json:"communities"`
	// LargeCommunities, when set, require one of them on the path.
	LargeCommunities []model.LargeCommunity `yaml:"largeCommunities" json:"largeCommunities"`
	// ASPathContains, when set, requires one of these ASNs in the AS path.
	ASPathContains []uint32 `yaml:"asPathContains" json:"asPathContains"`
	// OriginAS, when set, requires the AS path's last AS to be it.
	OriginAS uint32 `yaml:"originAS" json:"originAS"`
	// Metric is the kernel route metric of the paths this entry accepts
	// (0 = the kernel's default); OVN static routes have none.
	Metric uint32 `yaml:"metric" json:"metric"`
}

// ImportTargets says where imported routes are programmed.
type ImportTargets struct {
	// OVN adds static routes on the network's gateway router (default true).
	OVN bool `yaml:"ovn" json:"ovn"`
	// Kernel is a host table and/or VRF.
	Kernel KernelTarget `yaml:"kernel" json:"kernel"`
}

// KernelTarget is a host routing table and/or VRF; 0/"" = none.
type KernelTarget struct {
	// Table is a host routing table id; 0 = none.
	Table int `yaml:"table" json:"table"`
	// VRF is a VRF device name; "" = none. Routes go into its table.
	VRF string `yaml:"vrf" json:"vrf"`
	// CreateVRF creates VRF (with Table) when it is missing; an existing
	// VRF is adopted and never deleted.
	CreateVRF bool `yaml:"createVRF" json:"createVRF"`
}

// Kernel settings for routes ovnbgp programs in the host.
type Kernel struct {
	// RouteProtocol marks our kernel routes (rtnetlink protocol number);
	// 0 = DefaultRouteProtocol, which Load fills in.
	RouteProtocol int `yaml:"routeProtocol" json:"routeProtocol"`
}

// Control is the CLI's unix socket.
type Control struct {
	// Socket is the absolute path of the control socket.
	Socket string `yaml:"socket" json:"socket"`
}

// Metrics is the Prometheus endpoint.
type Metrics struct {
	// Address is host:port for /metrics; "" = off.
	Address string `yaml:"address" json:"address"`
}

// BMP is the BGP Monitoring Protocol (RFC 7854): ovnbgp dials each server
// and streams peer up/down events, the routes peers send (Adj-RIB-In,
// before ovnbgp's import rules) and, optionally, statistics.
type BMP struct {
	// Servers are the BMP stations (collectors) to stream to; none by
	// default.
	Servers []BMPServer `yaml:"servers" json:"servers"`
}

// BMPMonitoring says which routes a BMP server is sent.
type BMPMonitoring string

// The route monitoring choices.
const (
	// BMPAdjRIBIn is every route each peer sent, before ovnbgp's import
	// rules (RFC 7854 pre-policy Adj-RIB-In).
	BMPAdjRIBIn BMPMonitoring = "adjRibIn"
	// BMPLocRIB is this node's own table (RFC 9069 Loc-RIB): what
	// ovnbgp originates.
	BMPLocRIB BMPMonitoring = "locRib"
	// BMPAll is both, and the post-policy view of gobgp's table.
	BMPAll BMPMonitoring = "all"
)

// BMPServer is one BMP station.
type BMPServer struct {
	// Name is unique and names the server in status and metrics.
	Name string `yaml:"name" json:"name"`
	// Address is the station's IP address (not a host name).
	Address netip.Addr `yaml:"address" json:"address"`
	// Port is the station's TCP port (default 11019).
	Port int `yaml:"port" json:"port"`
	// RouteMonitoring is adjRibIn (default), locRib or all.
	RouteMonitoring BMPMonitoring `yaml:"routeMonitoring" json:"routeMonitoring"`
	// StatisticsInterval is how often per-peer Statistics Reports are
	// sent, in whole seconds; 0 = never (default).
	StatisticsInterval time.Duration `yaml:"statisticsInterval" json:"statisticsInterval"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level" json:"level"`
	// Format is json (default) or console.
	Format string `yaml:"format" json:"format"`
}

// Unnumbered reports whether the peer is given by its interface alone
// (interface set, no address): the session runs between the link-local
// addresses of that link, the peer's learned at run time.
func (p Peer) Unnumbered() bool { return p.Interface != "" && !p.Address.IsValid() }

// OnLink reports whether the session runs over IPv6 link-local addresses:
// the peer is unnumbered, or its address is an IPv6 link-local one
// (fe80::/10; Load gives it the zone of Interface). An IPv4 link-local
// peer (169.254.0.0/16) is an ordinary IPv4 peer.
func (p Peer) OnLink() bool {
	return p.Unnumbered() || p.Address.Is6() && p.Address.IsLinkLocalUnicast()
}

// Link is the device the session is bound to: Interface, which for an
// on-link peer is also the zone of its link-local address.
func (p Peer) Link() string { return p.Interface }

// TransportIs6 reports whether the session's TCP connection is IPv6: the
// peer is unnumbered or its address is IPv6. Such a session carries both
// families (IPv4 with an IPv6 next hop, RFC 8950).
func (p Peer) TransportIs6() bool { return p.Unnumbered() || p.Address.Is6() }
