package config

import (
	"net/netip"
	"time"
)

// Config is the whole of /etc/ovnbgp/config.yaml, typed. The YAML keys are
// the contract of ARCHITECTURE.md ("Config contract"); Load fills defaults and
// Validate reports every problem with its key path.
type Config struct {
	Node              Node            `yaml:"node"`
	BGP               BGP             `yaml:"bgp"`
	OVN               OVN             `yaml:"ovn"`
	Advertise         []AdvertiseRule `yaml:"advertise"`
	Import            []ImportRule    `yaml:"import"`
	ProtectedPrefixes []netip.Prefix  `yaml:"protectedPrefixes"`
	Kernel            Kernel          `yaml:"kernel"`
	Control           Control         `yaml:"control"`
	Metrics           Metrics         `yaml:"metrics"`
	Log               Log             `yaml:"log"`
}

// Node names the OVN-Kubernetes node this daemon runs on.
type Node struct {
	// Name is the OVN-Kubernetes node name; default: the hostname.
	Name string `yaml:"name"`
}

// BGP is the local speaker and its peers.
type BGP struct {
	// ASN is the local autonomous system number (4-byte allowed).
	ASN uint32 `yaml:"asn"`
	// RouterID defaults to the node's first global IPv4 address.
	RouterID netip.Addr `yaml:"routerID"`
	// ListenPort is the TCP port for incoming sessions; -1 = never listen.
	ListenPort int `yaml:"listenPort"`
	// GracefulRestart (RFC 4724): peers keep our routes while we restart.
	GracefulRestart GracefulRestart `yaml:"gracefulRestart"`
	Peers           []Peer          `yaml:"peers"`
}

// GracefulRestart configures RFC 4724 graceful restart.
type GracefulRestart struct {
	Enabled     bool          `yaml:"enabled"`
	RestartTime time.Duration `yaml:"restartTime"`
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
	Name    string     `yaml:"name"`
	Address netip.Addr `yaml:"address"`
	ASN     uint32     `yaml:"asn"`
	// Port is the peer's TCP port (default 179).
	Port int `yaml:"port"`
	// SourceAddress is the local address to dial from (optional).
	SourceAddress netip.Addr `yaml:"sourceAddress"`
	// Interface binds the session to a device (optional).
	Interface string `yaml:"interface"`
	// Passive: never dial, only accept.
	Passive bool `yaml:"passive"`
	// EBGPMultihop is the TTL for non-directly-connected eBGP; 0 = off.
	EBGPMultihop uint8 `yaml:"ebgpMultihop"`
	// TTLSecurity enables GTSM (RFC 5082).
	TTLSecurity bool `yaml:"ttlSecurity"`
	// PasswordFile holds the TCP MD5 secret. Password is read from it by
	// Load and is never printed.
	PasswordFile  string        `yaml:"passwordFile"`
	Password      string        `yaml:"-"`
	HoldTime      time.Duration `yaml:"holdTime"`
	KeepaliveTime time.Duration `yaml:"keepaliveTime"`
	ConnectRetry  time.Duration `yaml:"connectRetry"`
	BFD           BFD           `yaml:"bfd"`
	Families      []Family      `yaml:"families"`
	// MaxPrefixes is the per-family session backstop (the session resets
	// above it); 0 = no limit.
	MaxPrefixes uint32 `yaml:"maxPrefixes"`
}

// BFD configures RFC 5880 fast failure detection for a peer.
type BFD struct {
	Enabled    bool          `yaml:"enabled"`
	MinTx      time.Duration `yaml:"minTx"`
	MinRx      time.Duration `yaml:"minRx"`
	Multiplier uint8         `yaml:"multiplier"`
}

// OVN is how to reach the OVN Northbound database.
type OVN struct {
	// Northbound is unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT; several may
	// be given separated by commas (clustered NB).
	Northbound string `yaml:"northbound"`
	TLS        TLS    `yaml:"tls"`
}

// TLS files for ssl: NB connections.
type TLS struct {
	CAFile   string `yaml:"caFile"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// AdvertiseKind says what an advertise rule selects.
type AdvertiseKind string

// The kinds of advertise rules.
const (
	KindPodNetwork     AdvertiseKind = "podNetwork"
	KindEgressIP       AdvertiseKind = "egressIP"
	KindLoadBalancerIP AdvertiseKind = "loadBalancerIP"
)

// AdvertiseRule selects what this node advertises, and to which peers.
type AdvertiseRule struct {
	Name string        `yaml:"name"`
	Kind AdvertiseKind `yaml:"kind"`
	// Networks are OVN network name globs ("default" = cluster default).
	Networks           []string `yaml:"networks"`
	Namespaces         []string `yaml:"namespaces"`
	Services           []string `yaml:"services"`
	LocalEndpointsOnly bool     `yaml:"localEndpointsOnly"`
	// Peers are peer names; empty = all peers.
	Peers            []string `yaml:"peers"`
	Communities      []string `yaml:"communities"`
	LargeCommunities []string `yaml:"largeCommunities"`
	LocalPreference  uint32   `yaml:"localPreference"`
	MED              uint32   `yaml:"med"`
	ASPathPrepend    uint8    `yaml:"asPathPrepend"`
}

// ImportRule accepts routes learned from peers into OVN and the host.
type ImportRule struct {
	Name              string        `yaml:"name"`
	Peers             []string      `yaml:"peers"`
	Network           string        `yaml:"network"`
	Accept            []PrefixMatch `yaml:"accept"`
	AllowDefaultRoute bool          `yaml:"allowDefaultRoute"`
	MaxRoutes         int           `yaml:"maxRoutes"`
	Mode              string        `yaml:"mode"`
	Targets           ImportTargets `yaml:"targets"`
}

// PrefixMatch matches prefixes inside Prefix whose length is in
// [MinLength, MaxLength].
type PrefixMatch struct {
	Prefix    netip.Prefix `yaml:"prefix"`
	MinLength int          `yaml:"minLength"`
	MaxLength int          `yaml:"maxLength"`
}

// ImportTargets says where imported routes are programmed.
type ImportTargets struct {
	OVN    bool         `yaml:"ovn"`
	Kernel KernelTarget `yaml:"kernel"`
}

// KernelTarget is a host routing table and/or VRF; 0/"" = none.
type KernelTarget struct {
	Table int    `yaml:"table"`
	VRF   string `yaml:"vrf"`
}

// Kernel settings for routes ovnbgp programs in the host.
type Kernel struct {
	// RouteProtocol marks our kernel routes (rtnetlink protocol number).
	RouteProtocol int `yaml:"routeProtocol"`
}

// Control is the CLI's unix socket.
type Control struct {
	Socket string `yaml:"socket"`
}

// Metrics is the Prometheus endpoint.
type Metrics struct {
	// Address is host:port for /metrics; "" = off.
	Address string `yaml:"address"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // json | console
}
