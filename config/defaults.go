package config

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Defaults filled in by Load and Parse for keys that are absent.
const (
	DefaultListenPort     = 179
	DefaultRestartTime    = 120 * time.Second
	DefaultPeerPort       = 179
	DefaultHoldTime       = 90 * time.Second
	DefaultConnectRetry   = 5 * time.Second
	DefaultBFDInterval    = 300 * time.Millisecond
	DefaultBFDMultiplier  = 3
	DefaultControlSocket  = "/run/ovnbgp/ovnbgp.sock"
	DefaultStateDir       = "/var/lib/ovnbgp"
	DefaultMetricsAddress = "127.0.0.1:9479"
	// DefaultBMPPort is the BMP station port gobgp and FRR use (RFC 7854
	// assigns none).
	DefaultBMPPort    = 11019
	DefaultLogLevel   = "info"
	DefaultLogFormat  = "json"
	DefaultImportMode = "auto"
	// DefaultMaxRoutes is an import rule's cap per peer when maxRoutes is
	// absent.
	DefaultMaxRoutes = 1000
	// DefaultHandoverHoldTime is how long the node a VM left keeps
	// advertising its address: the target's first UPDATE has this long to
	// reach the router (its own NB event, plan and send take milliseconds).
	DefaultHandoverHoldTime = 5 * time.Second
	// DefaultHandoverLocalPreference is the leaving node's LOCAL_PREF to
	// iBGP peers: below the default 100 the target sends.
	DefaultHandoverLocalPreference = 50
	// DefaultHandoverASPathPrepend is how many more times the leaving node
	// prepends its ASN: a longer AS path for eBGP peers.
	DefaultHandoverASPathPrepend = 2
	// DefaultDeferralTime is how long owned imported routes are kept after
	// start for a peer that sends no End-of-RIB.
	DefaultDeferralTime = 120 * time.Second
	// DefaultStalePathTime is how long a restarted peer's stale routes
	// stay imported without its End-of-RIB (FRR's stalepath-time).
	DefaultStalePathTime = 360 * time.Second
	// DefaultMaxPrefixes is each peer's per-family backstop when
	// maxPrefixes is absent: enough for a full table from a ToR that
	// summarises (ovnbgp imports far fewer), small enough to bound memory
	// (about 1 KB per learned path in gobgp: 100,000 ≈ 100 MB per family
	// and peer, where 500,000 unbounded prefixes took 507 MB).
	DefaultMaxPrefixes = 100000
	// DefaultRouteProtocol marks ovnbgp's kernel routes when
	// kernel.routeProtocol is 0 or absent. It is outside FRR's 186–198,
	// outside iproute2's rt_protos, and not OVN's 84 nor OVN-Kubernetes' 85.
	DefaultRouteProtocol = 200
)

// KubeletNodeEnv is the environment file of OpenShift's kubelet unit (the
// machine-config-operator's templates): where the platform names the node
// otherwise than by its hostname (AWS: aws-kubelet-nodename.service), it
// holds KUBELET_NODE_NAME, which the kubelet gets as --hostname-override.
const KubeletNodeEnv = "/etc/kubernetes/node.env"

// kubeletNodeName reads KUBELET_NODE_NAME=NAME from an environment file
// (the last assignment wins, as systemd reads it; quotes are removed);
// "" when it is absent or empty.
func kubeletNodeName(env []byte) string {
	name := ""
	for line := range strings.SplitSeq(string(env), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.TrimSpace(k) != "KUBELET_NODE_NAME" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		name = strings.TrimSpace(v)
	}
	return name
}

// DefaultServiceCIDRs is cluster.serviceCIDRs when the key is absent or
// empty: OpenShift's default ClusterIP range.
func DefaultServiceCIDRs() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}
}

// InternalSubnet is one of the subnets OVN-Kubernetes uses inside the
// cluster, by default: import protects it when NB holds no live value of
// its kind and family.
type InternalSubnet struct {
	// Kind is "join subnet", "transit subnet" or "masquerade subnet": the
	// start of the Why the ovn package writes for a live value of the same
	// subnet ("join subnet (Logical_Router_Port rtoj-GR_node1)").
	Kind   string
	Prefix netip.Prefix
}

// DefaultInternalSubnets are OVN-Kubernetes' join (100.64.0.0/16,
// fd98::/64), transit (100.88.0.0/16, fd97::/64) and masquerade
// (169.254.0.0/17, fd69::/112: the defaults of OpenShift >= 4.17, which
// contain the older 169.254.169.0/29 and fd69::/125, so clusters installed
// earlier are covered too) subnets. The one list: plan protects them, and
// Warnings checks the peers against them.
func DefaultInternalSubnets() []InternalSubnet {
	return []InternalSubnet{
		{"join subnet", netip.MustParsePrefix("100.64.0.0/16")},
		{"join subnet", netip.MustParsePrefix("fd98::/64")},
		{"transit subnet", netip.MustParsePrefix("100.88.0.0/16")},
		{"transit subnet", netip.MustParsePrefix("fd97::/64")},
		{"masquerade subnet", netip.MustParsePrefix("169.254.0.0/17")},
		{"masquerade subnet", netip.MustParsePrefix("fd69::/112")},
	}
}

// setDefaults fills the defaults that do not depend on other keys or on
// the host; the decoder then overwrites what the file sets.
func (c *Config) setDefaults() {
	c.BGP.ListenPort = DefaultListenPort
	c.BGP.GracefulRestart.RestartTime = DefaultRestartTime
	c.BGP.GracefulRestart.DeferralTime = DefaultDeferralTime
	c.BGP.GracefulRestart.StalePathTime = DefaultStalePathTime
	c.Control.Socket = DefaultControlSocket
	c.StateDir = DefaultStateDir
	c.Metrics.Address = DefaultMetricsAddress
	c.Log.Level = DefaultLogLevel
	c.Log.Format = DefaultLogFormat
}

func (p *Peer) setDefaults() {
	p.Port = DefaultPeerPort
	p.HoldTime = DefaultHoldTime
	p.ConnectRetry = DefaultConnectRetry
	p.MaxPrefixes = DefaultMaxPrefixes
	p.EnforceFirstAS = true
	p.BFD.setDefaults()
}

func (b *BFD) setDefaults() {
	b.MinTx = DefaultBFDInterval
	b.MinRx = DefaultBFDInterval
	b.Multiplier = DefaultBFDMultiplier
}

func (b *BMPServer) setDefaults() {
	b.Port = DefaultBMPPort
	b.RouteMonitoring = BMPAdjRIBIn
}

func (r *AdvertiseRule) setDefaults() {
	r.Handover = DefaultHandover()
}

// DefaultHandover is a workloadIP rule's handover when the file sets none.
func DefaultHandover() Handover {
	return Handover{HoldTime: DefaultHandoverHoldTime, LocalPreference: DefaultHandoverLocalPreference, ASPathPrepend: DefaultHandoverASPathPrepend}
}

func (r *ImportRule) setDefaults() {
	r.Mode = DefaultImportMode
	r.MaxRoutes = DefaultMaxRoutes
	r.Targets.OVN = true
}

// deriveDefaults fills, after decoding, the defaults that depend on other
// keys or on the host. What cannot be derived stays unset for Validate to
// report.
func (c *Config) deriveDefaults(h host) {
	if c.Node.Name == "" && h.kubeletNodeName != nil {
		// OpenShift's kubelet runs with --hostname-override=$KUBELET_NODE_NAME
		// from this file where the platform sets one (on AWS the instance's
		// local-hostname from IMDS, e.g. ip-10-0-1-2.ec2.internal, which
		// need not be the hostname).
		c.Node.Name = strings.ToLower(h.kubeletNodeName())
	}
	if c.Node.Name == "" && h.hostname != nil {
		// What the kubelet names the node otherwise: the whole hostname,
		// lower-cased.
		if name, err := h.hostname(); err == nil {
			c.Node.Name = strings.ToLower(name)
		}
	}
	if !c.BGP.RouterID.IsValid() && h.interfaceAddrs != nil {
		if addrs, err := h.interfaceAddrs(); err == nil {
			c.BGP.RouterID = firstGlobalIPv4(addrs)
		}
	}
	for i := range c.BGP.Peers {
		p := &c.BGP.Peers[i]
		switch a := p.Address; {
		case a.Zone() != "" && p.Interface == "":
			p.Interface = a.Zone()
		case a.Zone() == "" && p.Interface != "" && a.Is6() && a.IsLinkLocalUnicast():
			// So that every link-local peer's address carries its
			// link, as gobgp and the kernel need it.
			p.Address = a.WithZone(p.Interface)
		}
		if len(p.Families) == 0 {
			switch {
			case p.OnLink():
				p.Families = []Family{IPv4, IPv6}
			case p.Address.Is4():
				p.Families = []Family{IPv4}
			case p.Address.Is6():
				p.Families = []Family{IPv6}
			}
		}
		if p.KeepaliveTime == 0 {
			p.KeepaliveTime = (p.HoldTime / 3).Truncate(time.Second)
		}
	}
	if strings.TrimSpace(c.OVN.Northbound) == "" && len(c.OVN.NorthboundSockets) == 0 {
		// ovn.northbound unset: the node's NB socket is looked for, and
		// the effective config says where.
		c.OVN.NorthboundSockets = DefaultNorthboundSockets()
	}
	c.OVN.Workloads = slices.ContainsFunc(c.Advertise, func(r AdvertiseRule) bool { return r.Kind == KindWorkloadIP })
	for i := range c.Advertise {
		// Only workloadIP rules hand addresses over: the others' default
		// handover is not theirs to show (config show).
		if r := &c.Advertise[i]; r.Kind != KindWorkloadIP && r.Handover == DefaultHandover() {
			r.Handover = Handover{}
		}
	}
	if len(c.Cluster.ServiceCIDRs) == 0 {
		c.Cluster.ServiceCIDRs = DefaultServiceCIDRs()
	}
	if c.Kernel.RouteProtocol == 0 {
		c.Kernel.RouteProtocol = DefaultRouteProtocol
	}
}

// firstGlobalIPv4 is the first global unicast IPv4 address in addrs, or the
// zero Addr.
func firstGlobalIPv4(addrs []net.Addr) netip.Addr {
	for _, a := range addrs {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			if addr = addr.Unmap(); addr.Is4() && addr.IsGlobalUnicast() {
				return addr
			}
		}
	}
	return netip.Addr{}
}
