package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// Validate checks the configuration and returns Errors listing every
// problem with its key path, or nil. It does not fill defaults (Load and
// Parse do, before validating); a passwordFile whose Password was not read
// yet is checked for being readable and non-empty.
func (c *Config) Validate() error {
	errs := c.validate(systemHost())
	if len(errs) == 0 {
		return nil
	}
	errs.sort()
	return errs
}

// validator holds what the checks need while they collect problems.
type validator struct {
	report
	c *Config
	h host
}

func (c *Config) validate(h host) Errors {
	v := &validator{c: c, h: h}
	v.node()
	v.bgp()
	v.ovn()
	v.advertise()
	v.imports()
	v.cluster()
	v.kernel()
	v.control()
	v.stateDir()
	v.metrics()
	v.bmp()
	v.log()
	return v.errs
}

func (v *validator) node() {
	if v.c.Node.Name == "" {
		v.add("node.name", "required: the hostname could not be read, set node.name to the OVN-Kubernetes node name")
	}
}

func (v *validator) bgp() {
	b := &v.c.BGP
	v.asn("bgp.asn", b.ASN)
	switch id := b.RouterID; {
	case !id.IsValid():
		v.add("bgp.routerID", "not set and this node has no global unicast IPv4 address: set bgp.routerID")
	case !id.Is4():
		v.add("bgp.routerID", "%s is not an IPv4 address (a BGP identifier is 32 bits)", id)
	case id.IsUnspecified():
		v.add("bgp.routerID", "0.0.0.0 is not a valid BGP identifier")
	}
	switch p := b.ListenPort; {
	case p == 0:
		v.add("bgp.listenPort", "0 is not a port: use -1 to never listen")
	case p != -1 && (p < 1 || p > 65535):
		v.add("bgp.listenPort", "%d is out of range (1..65535, or -1 to never listen)", p)
	}
	if rt := b.GracefulRestart.RestartTime; rt < time.Second || rt > 4095*time.Second {
		v.add("bgp.gracefulRestart.restartTime", "%s is out of range (1s..4095s, RFC 4724's 12-bit field)", rt)
	} else {
		v.wholeSeconds("bgp.gracefulRestart.restartTime", rt)
	}
	if st := b.GracefulRestart.StalePathTime; st < time.Second || st > time.Hour {
		v.add("bgp.gracefulRestart.stalePathTime", "%s is out of range (1s..3600s): how long a restarted peer's stale routes stay imported without its End-of-RIB", st)
	}
	if dt := b.GracefulRestart.DeferralTime; dt < time.Second || dt > time.Hour {
		v.add("bgp.gracefulRestart.deferralTime", "%s is out of range (1s..3600s): how long imported routes are kept after start for a peer that sends no End-of-RIB", dt)
	}
	if len(b.Peers) == 0 {
		v.add("bgp.peers", "at least one peer is required")
	}
	names := map[string]int{}
	addrs := map[netip.Addr]int{}
	unnumbered := map[string]int{}    // interface -> its unnumbered peer
	linkLocal := map[netip.Addr]int{} // link-local address, no zone -> first peer
	for i := range b.Peers {
		v.peer(index("bgp.peers", i), &b.Peers[i])
		p := &b.Peers[i]
		if p.Unnumbered() {
			if j, dup := unnumbered[p.Interface]; dup {
				v.add(key(index("bgp.peers", i), "interface"), "%s is also the interface of unnumbered peer bgp.peers[%d]: one unnumbered peer per link (as FRR's `neighbor %s interface`); give this one its address, fe80::…%%%s", p.Interface, j, p.Interface, p.Interface)
			} else {
				unnumbered[p.Interface] = i
			}
		}
		if a := p.Address; a.Is6() && a.IsLinkLocalUnicast() {
			// Linux keys TCP MD5 by address (and VRF), not by device: one
			// key serves fe80::1 on every link.
			if j, seen := linkLocal[a.WithZone("")]; !seen {
				linkLocal[a.WithZone("")] = i
			} else if q := b.Peers[j]; q.Address != a && !samePassword(q, *p) {
				v.add(key(index("bgp.peers", i), "passwordFile"), "%s has the same link-local address as bgp.peers[%d] (%s) but another password: Linux keys TCP MD5 by address, not by interface, so one key would serve both links and one session would fail: give both the same password, or none", a, j, q.Address)
			}
		}
		if j, dup := names[p.Name]; dup && p.Name != "" {
			v.add(key(index("bgp.peers", i), "name"), "%q is also the name of bgp.peers[%d]", p.Name, j)
		} else {
			names[p.Name] = i
		}
		if j, dup := addrs[p.Address]; dup && p.Address.IsValid() {
			v.add(key(index("bgp.peers", i), "address"), "%s is also the address of bgp.peers[%d]", p.Address, j)
		} else {
			addrs[p.Address] = i
		}
	}
}

// asn checks an AS number: 1..4294967294, not AS_TRANS.
func (v *validator) asn(path string, asn uint32) {
	switch asn {
	case 0:
		v.add(path, "required (1..4294967294)")
	case 23456:
		v.add(path, "23456 is AS_TRANS (RFC 6793), not a real AS number")
	case 4294967295:
		v.add(path, "4294967295 is reserved (RFC 7300)")
	}
}

// wholeSeconds checks a timer BGP carries in seconds.
func (v *validator) wholeSeconds(path string, d time.Duration) {
	if d%time.Second != 0 {
		v.add(path, "%s is not a whole number of seconds", d)
	}
}

func (v *validator) peer(p string, peer *Peer) {
	if peer.Name == "" {
		v.add(key(p, "name"), "required")
	} else if !isName(peer.Name) {
		v.add(key(p, "name"), "%q is not a valid name: use lower-case letters, digits, '-', '_' and '.', starting and ending with a letter or digit", peer.Name)
	}
	a := peer.Address
	switch {
	case !a.IsValid() && peer.Interface == "":
		v.add(key(p, "address"), "required: the peer's address, or interface alone for an unnumbered peer (over IPv6 link-local addresses)")
	case !a.IsValid():
		// Unnumbered: the peer's link-local address is learned on the link.
	case a.IsUnspecified() || a.IsMulticast():
		v.add(key(p, "address"), "%s is not a unicast address", a)
	case a.Zone() != "" && !a.IsLinkLocalUnicast():
		v.add(key(p, "address"), "%s: only a link-local address (fe80::/10) has a zone: write %s and interface: %s to bind the session to that device", a, a.WithZone(""), a.Zone())
	case a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == "" && peer.Interface == "":
		v.add(key(p, "address"), "%s is link-local: which link? write %s%%DEV or set interface (e.g. %s%%eth1)", a, a, a)
	case isIndex(a.Zone()):
		v.add(key(p, "address"), "%s: write the interface's name, not its index, as the zone (e.g. %s%%eth1)", a, a.WithZone(""))
	case a.Zone() != "" && peer.Interface != "" && a.Zone() != peer.Interface:
		v.add(key(p, "interface"), "%s, but address %s is on %s: name the same link in both, or leave interface out", peer.Interface, a, a.Zone())
	}
	if peer.OnLink() {
		link := peer.Link()
		if link == "" {
			link = "its link"
		}
		if peer.EBGPMultihop > 0 {
			v.add(key(p, "ebgpMultihop"), "%d, but a link-local session is one hop (the peer is on %s): remove ebgpMultihop", peer.EBGPMultihop, link)
		}
		if s := peer.SourceAddress; s.IsValid() {
			v.add(key(p, "sourceAddress"), "%s: the session runs on %s, and %s's own link-local address is used: remove sourceAddress", s, link, link)
		}
	}
	v.asn(key(p, "asn"), peer.ASN)
	if peer.Port < 1 || peer.Port > 65535 {
		v.add(key(p, "port"), "%d is out of range (1..65535)", peer.Port)
	}
	if s := peer.SourceAddress; s.IsValid() && a.IsValid() && !peer.OnLink() && s.Is4() != a.Is4() {
		v.add(key(p, "sourceAddress"), "%s is not of the same address family as address %s", s, a)
	}
	if n := peer.Interface; n != "" && (len(n) > 15 || strings.ContainsAny(n, "/ \t\n:")) {
		v.add(key(p, "interface"), "%q is not a valid interface name (at most 15 characters, no '/', ':' or spaces)", n)
	}
	if peer.Passive && v.c.BGP.ListenPort == -1 {
		v.add(key(p, "passive"), "a passive peer waits for the peer to connect, but bgp.listenPort is -1 (never listen): set bgp.listenPort (e.g. 179) or passive: false")
	}
	if peer.MaxAdvertised < 0 {
		v.add(key(p, "maxAdvertised"), "%d is negative: the most prefixes this peer is sent, 0 = no cap", peer.MaxAdvertised)
	}
	if peer.EBGPMultihop > 0 && peer.TTLSecurity {
		v.add(key(p, "ttlSecurity"), "cannot be combined with ebgpMultihop (FRR rejects this combination too): GTSM expects a directly connected peer")
	}
	if peer.PasswordFile != "" && peer.Password == "" && !v.h.skipSecrets {
		if _, err := readSecret(v.h, peer.PasswordFile); err != nil {
			v.add(key(p, "passwordFile"), "%v", err)
		}
	}
	v.timers(p, peer)
	v.bfd(key(p, "bfd"), peer)
	seen := map[Family]bool{}
	for j, f := range peer.Families {
		fp := index(key(p, "families"), j)
		switch {
		case f != IPv4 && f != IPv6:
			v.add(fp, "unknown family %q (ipv4 or ipv6)", f)
		case seen[f]:
			v.add(fp, "%s is listed twice", f)
		case f == IPv6 && a.IsValid() && !peer.TransportIs6():
			v.add(fp, "%s", ipv6OverIPv4)
		}
		seen[f] = true
	}
	if len(peer.Families) == 0 && (a.IsValid() || peer.Interface != "") {
		v.add(key(p, "families"), "at least one family is required (ipv4, ipv6)")
	}
}

// ipv6OverIPv4 is why an IPv4 session does not carry IPv6, as measured
// with FRR 8.4.4 and BIRD 2.0.12 (issue 20): gobgp sends the IPv6 routes
// with an IPv4-mapped next hop, which neither installs. The other way, IPv4
// over IPv6 with an IPv6 next hop, is RFC 8950 and works.
const ipv6OverIPv4 = "ipv6 over an IPv4 session is refused: its IPv6 routes would carry an IPv4-mapped next hop (::ffff:a.b.c.d, this node's IPv4 address), " +
	"which FRR 8.4's zebra does not install and BIRD 2.0.12 rejects (\"mismatched address family\"); peer with the router's IPv6 address (or interface alone, unnumbered) instead: " +
	"one IPv6 session carries both families (RFC 8950)"

// isIndex reports whether zone is a number: an interface index, where
// gobgp and the kernel's connections name the interface.
func isIndex(zone string) bool {
	if zone == "" {
		return false
	}
	for i := range len(zone) {
		if zone[i] < '0' || zone[i] > '9' {
			return false
		}
	}
	return true
}

// samePassword reports whether two peers may share one TCP MD5 key: both
// have none, or both the same password. Two passwordFiles not read yet
// (LoadOptions.SkipSecrets) cannot be compared and pass.
func samePassword(a, b Peer) bool {
	hasA, hasB := a.PasswordFile != "" || a.Password != "", b.PasswordFile != "" || b.Password != ""
	switch {
	case hasA != hasB:
		return false
	case a.Password != "" && b.Password != "":
		return a.Password == b.Password
	}
	return true
}

// timers checks hold, keepalive and connect-retry timers.
func (v *validator) timers(p string, peer *Peer) {
	hold, keep := peer.HoldTime, peer.KeepaliveTime
	holdOK := hold >= 3*time.Second && hold <= 65535*time.Second
	switch {
	case hold == 0:
		// RFC 4271 allows 0 (no keepalives, no hold timer), but gobgp
		// replaces a configured 0 with 90s: refuse it rather than run
		// something else than what the file says.
		v.add(key(p, "holdTime"), "0 (no keepalives) is not supported: the BGP library would negotiate 90s instead; use 3s..65535s (a long hold time such as 65535s comes closest)")
	case !holdOK:
		v.add(key(p, "holdTime"), "%s is out of range (3s..65535s)", hold)
	default:
		v.wholeSeconds(key(p, "holdTime"), hold)
	}
	switch {
	case keep < 0:
		v.add(key(p, "keepaliveTime"), "%s is negative", keep)
	case holdOK && keep >= hold:
		v.add(key(p, "keepaliveTime"), "%s must be shorter than holdTime %s (usually holdTime/3)", keep, hold)
	default:
		v.wholeSeconds(key(p, "keepaliveTime"), keep)
	}
	if r := peer.ConnectRetry; r < time.Second {
		v.add(key(p, "connectRetry"), "%s is too short (at least 1s)", r)
	} else {
		v.wholeSeconds(key(p, "connectRetry"), r)
	}
}

// bfd checks a peer's BFD settings against what gobgp's BFD (RFC 5880,
// single-hop RFC 5881) and FRR's bfdd accept: intervals 10ms..60s in
// whole microseconds (the unit of the packet's fields), multiplier 2..255.
func (v *validator) bfd(p string, peer *Peer) {
	b := &peer.BFD
	if b.Enabled && peer.EBGPMultihop > 0 {
		v.add(key(p, "enabled"), "BFD is single-hop only (RFC 5881: the BFD library sends with TTL 255 to a directly connected peer), but ebgpMultihop is %d: set ebgpMultihop: 0 for a directly connected peer, or bfd.enabled: false", peer.EBGPMultihop)
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{{"minTx", b.MinTx}, {"minRx", b.MinRx}} {
		switch {
		case t.d < 10*time.Millisecond || t.d > 60*time.Second:
			v.add(key(p, t.key), "%s is out of range (10ms..60s, as FRR's bfdd)", t.d)
		case t.d%time.Microsecond != 0:
			v.add(key(p, t.key), "%s is not a whole number of microseconds (BFD's unit)", t.d)
		}
	}
	if b.Multiplier < 2 {
		v.add(key(p, "multiplier"), "%d is out of range (2..255, as FRR's bfdd): the session goes down after this many missed packets", b.Multiplier)
	}
}

// isName reports whether s is a DNS-label-like name:
// [a-z0-9]([-a-z0-9_.]*[a-z0-9])?, at most 63 characters.
func isName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func (v *validator) ovn() {
	o := &v.c.OVN
	var eps Endpoints
	if strings.TrimSpace(o.Northbound) != "" {
		var errs []error
		eps, errs = parseNorthbound(o.Northbound)
		for _, err := range errs {
			v.add("ovn.northbound", "%v", err)
		}
		if len(o.NorthboundSockets) > 0 {
			v.add("ovn.northboundSockets", "only used while ovn.northbound is unset (ovn.northbound is %q): remove one of the two", o.Northbound)
		}
	}
	seen := map[string]bool{}
	for i, s := range o.NorthboundSockets {
		p := fmt.Sprintf("ovn.northboundSockets[%d]", i)
		switch {
		case !strings.HasPrefix(s, "/"):
			v.add(p, "%q is not an absolute path (e.g. /var/run/ovn-ic/ovnnb_db.sock)", s)
		case seen[s]:
			v.add(p, "%q is listed twice", s)
		}
		seen[s] = true
	}
	ssl := eps.NeedTLS()
	files := []struct{ key, file string }{
		{"caFile", o.TLS.CAFile}, {"certFile", o.TLS.CertFile}, {"keyFile", o.TLS.KeyFile},
	}
	for _, f := range files {
		p := key("ovn.tls", f.key)
		switch {
		case !ssl && f.file != "":
			v.add(p, "only used with an ssl: northbound endpoint, and ovn.northbound has none")
		case ssl && f.file == "":
			v.add(p, "required with an ssl: northbound endpoint")
		case ssl:
			v.regularFile(p, f.file)
		}
	}
}

// regularFile checks that file exists and is a regular file.
func (v *validator) regularFile(p, file string) {
	fi, err := v.h.stat(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		v.add(p, "%q: %v", file, err)
		return
	}
	if !fi.Mode().IsRegular() {
		v.add(p, "%q is not a regular file", file)
	}
}

// checkHostPort checks "HOST:PORT" (IPv6 hosts in brackets); an empty host
// is allowed only if emptyHost.
func checkHostPort(hp string, emptyHost bool) error {
	_, _, err := splitHostPort(hp, emptyHost)
	return err
}

func (v *validator) advertise() {
	names := map[string]int{}
	for i := range v.c.Advertise {
		p := index("advertise", i)
		r := &v.c.Advertise[i]
		v.uniqueName(names, "advertise", i, r.Name)
		v.kind(key(p, "kind"), r.Kind)
		if (r.Kind == KindPodNetwork || r.Kind == KindWorkloadIP) && len(r.Networks) == 0 {
			v.add(key(p, "networks"), `list the networks to advertise, e.g. [default] or ["*"]`)
		}
		v.globs(key(p, "networks"), r.Networks)
		v.globs(key(p, "namespaces"), r.Namespaces)
		v.globs(key(p, "services"), r.Services)
		v.globs(key(p, "pods"), r.Pods)
		if r.Kind == KindPodNetwork && len(r.Namespaces) > 0 {
			v.add(key(p, "namespaces"), "only for kind egressIP/loadBalancerIP/workloadIP")
		}
		v.workload(p, r)
		if r.Kind == KindPodNetwork {
			if r.AggregateLength != 0 {
				v.add(key(p, "aggregateLength"), "only for kind egressIP/loadBalancerIP/workloadIP (pod subnets are advertised as they are)")
			}
			if r.AggregateLengthV6 != 0 {
				v.add(key(p, "aggregateLengthV6"), "only for kind egressIP/loadBalancerIP/workloadIP (pod subnets are advertised as they are)")
			}
		}
		if r.AggregateLength < 0 || r.AggregateLength > 32 {
			v.add(key(p, "aggregateLength"), "%d is out of range: an IPv4 prefix length, 1..32 (0 = no aggregation)", r.AggregateLength)
		}
		if r.AggregateLengthV6 < 0 || r.AggregateLengthV6 > 128 {
			v.add(key(p, "aggregateLengthV6"), "%d is out of range: an IPv6 prefix length, 1..128 (0 = no aggregation)", r.AggregateLengthV6)
		}
		if r.Kind != KindLoadBalancerIP {
			if len(r.Services) > 0 {
				v.add(key(p, "services"), "only for kind loadBalancerIP")
			}
			if r.LocalEndpointsOnly {
				v.add(key(p, "localEndpointsOnly"), "only for kind loadBalancerIP")
			}
			if r.WeightByEndpoints {
				v.add(key(p, "weightByEndpoints"), "only for kind loadBalancerIP: the weight is a count of a Service's endpoints on this node")
			}
		} else if r.WeightByEndpoints && (r.AggregateLength != 0 || r.AggregateLengthV6 != 0) {
			v.add(key(p, "weightByEndpoints"), "not with aggregateLength/aggregateLengthV6: an aggregate stands for several Services, and one weight cannot say how many endpoints each has here")
		}
		for j, g := range r.Services {
			ns, name, ok := strings.Cut(g.String(), "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				v.add(index(key(p, "services"), j), "%q is not NAMESPACE/NAME (globs allowed, e.g. \"web/*\")", g)
			}
		}
		v.peerNames(key(p, "peers"), r.Peers)
		for j, c := range r.Communities {
			if c == model.CommunityLLGRStale {
				v.add(index(key(p, "communities"), j), "llgr-stale marks a stale route during long-lived graceful restart (RFC 9494): speakers do not advertise such a route to a peer without that capability, so the prefixes would be withdrawn; remove it")
			}
		}
		if r.LocalPreference != 0 {
			if ebgp, ok := v.firstEBGP(r.Peers); ok {
				v.add(key(p, "localPreference"), "only meaningful for iBGP, but the rule selects eBGP peer %q (asn %d, bgp.asn %d): remove it or list only iBGP peers", ebgp.Name, ebgp.ASN, v.c.BGP.ASN)
			}
		}
		if r.ASPathPrepend > 10 {
			v.add(key(p, "asPathPrepend"), "%d is out of range (0..10)", r.ASPathPrepend)
		}
	}
}

// clusterIPRefused is why kind clusterIP is refused: what OVN-Kubernetes
// builds does not load-balance a ClusterIP that arrives from outside
// (docs/ovn-nb.md, "ClusterIPs from outside").
const clusterIPRefused = "kind clusterIP is refused: a packet for a ClusterIP that arrives from outside reaches the node's host, not OVN: " +
	"br-ex hands what is sent to the node's MAC to the host, and OVN-Kubernetes steers the Service CIDR into GR_<node> only for traffic the host itself sends " +
	"(go-controller/pkg/node/bridgeconfig/bridgeflows.go, commonFlows and flowsForDefaultBridge), so a router sending it here would draw traffic into a blackhole " +
	"(docs/ovn-nb.md, \"ClusterIPs from outside\"); give the Service a LoadBalancer IP or externalIPs and advertise them with kind loadBalancerIP"

func (v *validator) kind(p string, k AdvertiseKind) {
	kinds := []AdvertiseKind{KindPodNetwork, KindEgressIP, KindLoadBalancerIP, KindWorkloadIP}
	switch k {
	case KindPodNetwork, KindEgressIP, KindLoadBalancerIP, KindWorkloadIP:
	case KindClusterIP:
		v.add(p, "%s", clusterIPRefused)
	case "":
		v.add(p, "required (podNetwork, egressIP, loadBalancerIP or workloadIP)")
	default:
		for _, known := range append(kinds, KindClusterIP) {
			if strings.EqualFold(string(k), string(known)) {
				v.add(p, "unknown kind %q (did you mean %q?)", k, known)
				return
			}
		}
		v.add(p, "unknown kind %q (podNetwork, egressIP, loadBalancerIP or workloadIP)", k)
	}
}

// workload checks the keys of kind workloadIP: pods and handover, which
// no other kind takes.
func (v *validator) workload(p string, r *AdvertiseRule) {
	if r.Kind != KindWorkloadIP {
		if len(r.Pods) > 0 {
			v.add(key(p, "pods"), "only for kind workloadIP")
		}
		if r.Handover != (Handover{}) && r.Handover != DefaultHandover() {
			v.add(key(p, "handover"), "only for kind workloadIP (the handover of a VM's address in a live migration)")
		}
		return
	}
	for j, g := range r.Pods {
		ns, name, ok := strings.Cut(g.String(), "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			v.add(index(key(p, "pods"), j), "%q is not NAMESPACE/NAME (globs allowed, e.g. \"prod/db-*\")", g)
		}
	}
	h := r.Handover
	hp := key(p, "handover")
	if h.HoldTime < time.Second || h.HoldTime > 5*time.Minute {
		v.add(key(hp, "holdTime"), "%v is out of range (1s..5m): how long the node a VM left keeps advertising its address, so that the target's advertisement reaches the router first", h.HoldTime)
	}
	lp := r.LocalPreference
	if lp == 0 {
		lp = 100
	}
	if h.LocalPreference >= lp {
		v.add(key(hp, "localPreference"), "%d is not below the LOCAL_PREF the target sends (%d, the rule's localPreference or 100): iBGP routers would not prefer the target", h.LocalPreference, lp)
	}
	if int(h.ASPathPrepend)+int(r.ASPathPrepend) > 10 {
		v.add(key(hp, "asPathPrepend"), "%d on top of the rule's asPathPrepend %d is over 10", h.ASPathPrepend, r.ASPathPrepend)
	}
	if h.MED != 0 && h.MED <= r.MED {
		v.add(key(hp, "med"), "%d is not above the rule's med %d: routers comparing MED would not prefer the target", h.MED, r.MED)
	}
}

// globs checks that each glob was compiled (a Glob built in Go without
// ParseGlob matches nothing).
func (v *validator) globs(p string, globs []Glob) {
	for j, g := range globs {
		if g.re == nil {
			v.add(index(p, j), "empty pattern")
		}
	}
}

// peerNames checks that every name is a configured peer, once.
func (v *validator) peerNames(p string, names []string) {
	seen := map[string]bool{}
	for j, n := range names {
		if _, ok := v.c.Peer(n); !ok {
			v.add(index(p, j), "no peer is named %q in bgp.peers", n)
		} else if seen[n] {
			v.add(index(p, j), "%q is listed twice", n)
		}
		seen[n] = true
	}
}

// firstEBGP is the first peer selected by names (empty = all) whose AS
// differs from ours.
func (v *validator) firstEBGP(names []string) (Peer, bool) {
	for _, p := range v.c.BGP.Peers {
		if (len(names) == 0 || slices.Contains(names, p.Name)) && p.ASN != v.c.BGP.ASN {
			return p, true
		}
	}
	return Peer{}, false
}

// imports checks the import rules and the prefixes import never accepts.
func (v *validator) imports() {
	v.protectedList("protectedPrefixes", v.c.ProtectedPrefixes, "protects every %[2]s prefix, so nothing could ever be imported: list the ranges to protect")
	names := map[string]int{}
	for i := range v.c.Import {
		p := index("import", i)
		r := &v.c.Import[i]
		v.uniqueName(names, "import", i, r.Name)
		if len(r.Peers) == 0 {
			v.add(key(p, "peers"), "list the peers whose routes this rule imports")
		}
		v.peerNames(key(p, "peers"), r.Peers)
		for j, n := range r.Peers {
			if peer, ok := v.c.Peer(n); ok && peer.EBGPMultihop > 0 && peer.Interface == "" {
				v.add(index(key(p, "peers"), j), "%s is multihop (ebgpMultihop %d) and names no interface, so its next hops cannot be checked on-link and nothing it sends would be imported: set bgp.peers[].interface to the link its next hops are on", n, peer.EBGPMultihop)
			}
		}
		if r.Network == "" {
			v.add(key(p, "network"), "required (the OVN network, e.g. default)")
		}
		if len(r.Accept) == 0 {
			v.add(key(p, "accept"), "list the prefixes to accept (nothing is imported otherwise)")
		}
		for j, m := range r.Accept {
			v.prefixMatch(index(key(p, "accept"), j), m, r.AllowDefaultRoute)
			v.attrMatch(index(key(p, "accept"), j), m)
		}
		v.rejectCommunities(p, r)
		v.acceptFamilies(p, r)
		if r.AllowDefaultRoute && !slices.ContainsFunc(r.Accept, func(m PrefixMatch) bool {
			return m.Matches(netip.PrefixFrom(netip.IPv4Unspecified(), 0)) || m.Matches(netip.PrefixFrom(netip.IPv6Unspecified(), 0))
		}) {
			v.add(key(p, "allowDefaultRoute"), "no accept entry matches the default route: add {prefix: 0.0.0.0/0} (or ::/0), or remove allowDefaultRoute")
		}
		switch {
		case r.MaxRoutes < 0:
			v.add(key(p, "maxRoutes"), "%d is negative", r.MaxRoutes)
		case r.MaxRoutes == 0:
			v.add(key(p, "maxRoutes"), "0 imports nothing: remove the key for the default %d, or set the most routes a peer may feed this rule", DefaultMaxRoutes)
		}
		if r.Mode != "auto" && r.Mode != "manual" {
			v.add(key(p, "mode"), "%q is not auto or manual", r.Mode)
		}
		v.kernelTarget(p, r)
	}
	v.sharedTables()
}

// protectedList checks a list of prefixes that import never accepts; zero
// is the message for a /0 (%[1]s the prefix, %[2]s its family).
func (v *validator) protectedList(p string, list []netip.Prefix, zero string) {
	seen := map[netip.Prefix]bool{}
	for j, pfx := range list {
		switch {
		case !pfx.IsValid():
		case seen[pfx]:
			v.add(index(p, j), "%s is listed twice", pfx)
		case pfx.Bits() == 0:
			v.add(index(p, j), "%[1]s "+zero, pfx, familyName(pfx.Addr()))
		}
		seen[pfx] = true
	}
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// acceptFamilies checks that the rule's peers speak the families of its
// accept entries.
func (v *validator) acceptFamilies(p string, r *ImportRule) {
	spoken := map[Family]bool{}
	var says []string
	for _, n := range r.Peers {
		if peer, ok := v.c.Peer(n); ok {
			var fams []string
			for _, f := range peer.Families {
				spoken[f] = true
				fams = append(fams, string(f))
			}
			says = append(says, n+": "+strings.Join(fams, ", "))
		}
	}
	if len(says) == 0 {
		return // unknown peers are reported already
	}
	var wanted []string
	for _, m := range r.Accept {
		if f := m.Family(); m.Prefix.IsValid() && !slices.Contains(wanted, string(f)) {
			if spoken[f] {
				return
			}
			wanted = append(wanted, string(f))
		}
	}
	if len(wanted) > 0 {
		v.add(key(p, "accept"), "no peer of this rule (%s) speaks %s, so the rule can never accept anything: list a peer of that family in peers, or accept its family's prefixes", strings.Join(says, "; "), strings.Join(wanted, ", "))
	}
}

// kernelTarget checks one rule's targets.
func (v *validator) kernelTarget(p string, r *ImportRule) {
	k := r.Targets.Kernel
	switch t := k.Table; {
	case t < 0 || int64(t) > 0xFFFFFFFF:
		v.add(key(p, "targets.kernel.table"), "%d is out of range (1..4294967295, 0 = none)", t)
	case t >= 253 && t <= 255:
		v.add(key(p, "targets.kernel.table"), "%d is a table of the kernel (default, main, local): pick a table of its own, e.g. 100", t)
	}
	switch {
	case len(k.VRF) > 15 || strings.ContainsAny(k.VRF, "/ \t\n:"):
		v.add(key(p, "targets.kernel.vrf"), "%q is not a valid device name (at most 15 characters, no '/', ':' or spaces)", k.VRF)
	case k.VRF == "default":
		v.add(key(p, "targets.kernel.vrf"), `"default" names the main routing table, not a VRF device: use targets.kernel.table, or the name of a VRF device`)
	}
	if k.CreateVRF {
		if k.VRF == "" {
			v.add(key(p, "targets.kernel.createVRF"), "needs targets.kernel.vrf: name the VRF device to create")
		}
		if k.Table == 0 {
			v.add(key(p, "targets.kernel.createVRF"), "needs targets.kernel.table: a VRF device is created with a table (pick one no other VRF uses, e.g. 100)")
		}
	}
	if !r.Targets.OVN && k.Table == 0 && k.VRF == "" {
		v.add(key(p, "targets"), "no target: set ovn: true and/or a kernel table or vrf")
	}
}

// sharedTables checks what several rules share: a VRF is one table, a
// table is one VRF, and a table's or a VRF's routes are all auto or all
// manual (a kernel route records no rule, so its mode comes from its
// table); so are the rules importing into one OVN network's gateway router
// (an auto rule's changes would make every manual plan guarding the router
// stale).
func (v *validator) sharedTables() {
	vrfTable := map[string]int{} // VRF -> first rule giving it a table
	tableVRF := map[int]int{}    // table -> first rule naming a VRF for it
	tableMode := map[int]int{}   // table -> first rule targeting it
	vrfMode := map[string]int{}  // VRF -> first rule targeting it
	ovnMode := map[string]int{}  // OVN network -> first rule importing into it
	for i, r := range v.c.Import {
		p := index("import", i)
		k := r.Targets.Kernel
		if k.VRF != "" && k.Table != 0 {
			if j, ok := vrfTable[k.VRF]; ok && v.c.Import[j].Targets.Kernel.Table != k.Table {
				v.add(key(p, "targets.kernel.table"), "%d, but import[%d] puts VRF %s in table %d: one VRF has one table, use the same", k.Table, j, k.VRF, v.c.Import[j].Targets.Kernel.Table)
			} else if !ok {
				vrfTable[k.VRF] = i
			}
			if j, ok := tableVRF[k.Table]; ok && v.c.Import[j].Targets.Kernel.VRF != k.VRF {
				v.add(key(p, "targets.kernel.vrf"), "%s, but table %d is also the table of VRF %s (import[%d]): give each VRF a table of its own", k.VRF, k.Table, v.c.Import[j].Targets.Kernel.VRF, j)
			} else if !ok {
				tableVRF[k.Table] = i
			}
		}
		if k.VRF != "" {
			if j, ok := vrfMode[k.VRF]; ok && v.c.Import[j].Mode != r.Mode {
				v.add(key(p, "mode"), "%s, but import[%d] (%s) also targets VRF %s: the rules of one VRF share a mode, set the same", r.Mode, j, v.c.Import[j].Mode, k.VRF)
			} else if !ok {
				vrfMode[k.VRF] = i
			}
		}
		if r.Targets.OVN && r.Network != "" {
			if j, ok := ovnMode[r.Network]; ok && v.c.Import[j].Mode != r.Mode {
				o := v.c.Import[j]
				v.add(key(p, "mode"), "%s, but rule %s (import[%d], %s) also imports into OVN network %s's gateway router: the rules of one OVN network share a mode, set mode: %s on rule %s or mode: %s on rule %s",
					r.Mode, o.Name, j, o.Mode, r.Network, o.Mode, r.Name, r.Mode, o.Name)
			} else if !ok {
				ovnMode[r.Network] = i
			}
		}
		if k.Table != 0 {
			if j, ok := tableMode[k.Table]; ok && v.c.Import[j].Mode != r.Mode {
				v.add(key(p, "mode"), "%s, but import[%d] (%s) also targets table %d: the rules of one table share a mode, set the same", r.Mode, j, v.c.Import[j].Mode, k.Table)
			} else if !ok {
				tableMode[k.Table] = i
			}
		}
	}
}

// attrMatch checks an accept entry's attribute matches (issue 21).
func (v *validator) attrMatch(p string, m PrefixMatch) {
	if j, ok := firstDup(m.Communities); ok {
		v.add(index(key(p, "communities"), j), "%s is listed twice", m.Communities[j])
	}
	if j, ok := firstDup(m.LargeCommunities); ok {
		v.add(index(key(p, "largeCommunities"), j), "%s is listed twice", m.LargeCommunities[j])
	}
	for j, a := range m.ASPathContains {
		if a == 0 {
			v.add(index(key(p, "asPathContains"), j), "AS 0 is never in an imported path (RFC 7607): list the ASNs to look for")
		}
	}
	if j, ok := firstDup(m.ASPathContains); ok {
		v.add(index(key(p, "asPathContains"), j), "%d is listed twice", m.ASPathContains[j])
	}
}

// rejectCommunities checks a rule's rejectCommunities and that no accept
// entry requires one of them (it could never accept anything).
func (v *validator) rejectCommunities(p string, r *ImportRule) {
	if j, ok := firstDup(r.RejectCommunities); ok {
		v.add(index(key(p, "rejectCommunities"), j), "%s is listed twice", r.RejectCommunities[j])
	}
	for j, m := range r.Accept {
		for _, rc := range r.RejectCommunities {
			if !rc.Large && len(m.Communities) > 0 && !slices.ContainsFunc(m.Communities, func(c model.Community) bool { return c != rc.Community }) ||
				rc.Large && len(m.LargeCommunities) > 0 && !slices.ContainsFunc(m.LargeCommunities, func(c model.LargeCommunity) bool { return c != rc.LargeCommunity }) {
				v.add(index(key(p, "accept"), j), "requires only %s, which rejectCommunities rejects, so it can never accept anything: remove one of them", rc)
				break
			}
		}
	}
}

// firstDup is the index of the first value listed a second time.
func firstDup[T comparable](xs []T) (int, bool) {
	seen := make(map[T]bool, len(xs))
	for j, x := range xs {
		if seen[x] {
			return j, true
		}
		seen[x] = true
	}
	return 0, false
}

func (v *validator) prefixMatch(p string, m PrefixMatch, allowDefault bool) {
	if !m.Prefix.IsValid() {
		v.add(key(p, "prefix"), "required")
		return
	}
	bits, maxBits := m.Prefix.Bits(), m.Prefix.Addr().BitLen()
	lo, hi := m.Lengths()
	if lo < bits || lo > maxBits {
		v.add(key(p, "minLength"), "%d is out of range (%d..%d)", m.MinLength, bits, maxBits)
		return
	}
	switch {
	case hi < lo && m.MaxLength != 0:
		v.add(key(p, "maxLength"), "%d is shorter than minLength %d: swap them", hi, lo)
		return
	case hi < lo || hi > maxBits:
		v.add(key(p, "maxLength"), "%d is out of range (%d..%d)", m.MaxLength, lo, maxBits)
		return
	}
	if hi == 0 && !allowDefault {
		v.add(p, "%s matches only the default route, which is refused without allowDefaultRoute: set allowDefaultRoute: true, or a maxLength (e.g. maxLength: 24)", m)
	}
	for _, pr := range []struct {
		key  string
		list []netip.Prefix
	}{{"protectedPrefixes", v.c.ProtectedPrefixes}, {"cluster.serviceCIDRs", v.c.Cluster.ServiceCIDRs}} {
		for _, q := range pr.list {
			if q.IsValid() && q.Bits() > 0 && q.Bits() <= bits && q.Contains(m.Prefix.Addr()) {
				v.add(p, "%s is inside %s %s, so nothing it matches could ever be imported: accept another prefix, or narrow %s", m.Prefix, pr.key, q, pr.key)
			}
		}
	}
}

func (v *validator) cluster() {
	v.protectedList("cluster.serviceCIDRs", v.c.Cluster.ServiceCIDRs, "covers every %[2]s address: write the ClusterIP range (e.g. 172.30.0.0/16)")
}

func (v *validator) kernel() {
	n := v.c.Kernel.RouteProtocol
	if n == 0 {
		return // DefaultRouteProtocol
	}
	if n < 0 || n > 255 {
		v.add("kernel.routeProtocol", "%d is out of range (1..255; 0 = ovnbgp's default %d)", n, DefaultRouteProtocol)
		return
	}
	if owner := routeProtocolOwner(n); owner != "" {
		v.add("kernel.routeProtocol", "%d belongs to %s: pick another number (default %d)", n, owner, DefaultRouteProtocol)
	}
}

// routeProtocolOwner names who uses rtnetlink protocol n, or "".
func routeProtocolOwner(n int) string {
	switch {
	case n <= 4:
		return "the kernel (reserved: unspec, redirect, kernel, boot, static)"
	case n == 84:
		return "OVN"
	case n == 85:
		return "OVN-Kubernetes"
	case n >= 186 && n <= 198:
		return "FRR (/etc/iproute2/rt_protos.d/frr.conf)"
	}
	switch n {
	case 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 42, 99:
		return "another routing daemon (/etc/iproute2/rt_protos)"
	}
	return ""
}

func (v *validator) control() {
	s := v.c.Control.Socket
	switch {
	case s == "":
		v.add("control.socket", "required (default %s)", DefaultControlSocket)
	case !filepath.IsAbs(s):
		v.add("control.socket", "%q is not an absolute path", s)
	}
}

func (v *validator) stateDir() {
	s := v.c.StateDir
	switch {
	case s == "":
		v.add("stateDir", "required (default %s)", DefaultStateDir)
	case !filepath.IsAbs(s):
		v.add("stateDir", "%q is not an absolute path (default %s)", s, DefaultStateDir)
	case filepath.Clean(s) != s:
		v.add("stateDir", "%q is not a clean path: write %q", s, filepath.Clean(s))
	}
}

func (v *validator) metrics() {
	if a := v.c.Metrics.Address; a != "" {
		if err := checkHostPort(a, true); err != nil {
			v.add("metrics.address", "%v (write HOST:PORT, e.g. %s, or \"\" to turn metrics off)", err, DefaultMetricsAddress)
		}
	}
}

// maxBMPServers bounds bmp.servers: each one is a goroutine and a copy of
// every update.
const maxBMPServers = 8

func (v *validator) bmp() {
	servers := v.c.BMP.Servers
	if len(servers) > maxBMPServers {
		v.add("bmp.servers", "%d servers, at most %d: each one receives a copy of every update", len(servers), maxBMPServers)
	}
	names := map[string]int{}
	stations := map[netip.AddrPort]int{}
	for i := range servers {
		s := &servers[i]
		p := index("bmp.servers", i)
		v.uniqueName(names, "bmp.servers", i, s.Name)
		switch a := s.Address; {
		case !a.IsValid():
			v.add(key(p, "address"), "required: the BMP station's IP address")
		case a.IsUnspecified() || a.IsMulticast():
			v.add(key(p, "address"), "%s is not a station's address", a)
		case a.Zone() != "":
			v.add(key(p, "address"), "%s: a zone is not supported; use a global address", a)
		}
		if s.Port < 1 || s.Port > 65535 {
			v.add(key(p, "port"), "%d is not a TCP port (1..65535, default %d)", s.Port, DefaultBMPPort)
		}
		if s.Address.IsValid() && s.Port >= 1 && s.Port <= 65535 {
			ap := netip.AddrPortFrom(s.Address.Unmap(), uint16(s.Port))
			if j, dup := stations[ap]; dup {
				v.add(key(p, "address"), "%s is also bmp.servers[%d]: one connection per station", ap, j)
			} else {
				stations[ap] = i
			}
		}
		switch m := s.RouteMonitoring; m {
		case BMPAdjRIBIn, BMPLocRIB, BMPAll:
		default:
			v.add(key(p, "routeMonitoring"), "%q is not adjRibIn, locRib or all", m)
		}
		if d := s.StatisticsInterval; d < 0 || d > 65535*time.Second {
			v.add(key(p, "statisticsInterval"), "%s is out of range (0 = off, up to 65535s)", d)
		} else {
			v.wholeSeconds(key(p, "statisticsInterval"), d)
		}
	}
}

func (v *validator) log() {
	switch v.c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%q is not debug, info, warn or error", v.c.Log.Level)
	}
	switch v.c.Log.Format {
	case "json", "console":
	default:
		v.add("log.format", "%q is not json or console", v.c.Log.Format)
	}
}

// familyOf is the address family of a.
func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// uniqueName checks that the name of list[i] is set and not used by an
// earlier entry; names maps the names seen so far to their index.
func (v *validator) uniqueName(names map[string]int, list string, i int, name string) {
	path := key(index(list, i), "name")
	switch j, dup := names[name]; {
	case name == "":
		v.add(path, "required")
	case dup:
		v.add(path, "%q is also the name of %s[%d]", name, list, j)
	default:
		names[name] = i
	}
}
