package plan

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// importFixture is node n1 with an uplink eth0 (192.0.2.10/24,
// 2001:db8::10/64) and a second link eth1 (198.51.100.10/24); peers tor-a
// (192.0.2.1) and tor-b (192.0.2.2) on eth0, tor-c (198.51.100.1) on eth1,
// tor-6 (2001:db8::1); the default network's pod subnet 10.128.0.0/23, NB
// protecting the cluster's 10.128.0.0/14; GR_n1 on 192.0.2.0/24 and
// 2001:db8::/64. Rule "up" imports 10.0.0.0/8 (8..24), 0.0.0.0/0 and
// 2001:db8:100::/40 (40..64) from tor-a, tor-b and tor-6 into OVN and
// table 100.
func importFixture() ImportInput {
	cfg := &config.Config{
		Node: config.Node{Name: "n1"},
		BGP: config.BGP{ASN: 64512, Peers: []config.Peer{
			{Name: "tor-a", Address: addr("192.0.2.1"), ASN: 65001, Families: []config.Family{config.IPv4}},
			{Name: "tor-b", Address: addr("192.0.2.2"), ASN: 65001, Families: []config.Family{config.IPv4}},
			{Name: "tor-c", Address: addr("198.51.100.1"), ASN: 65002, Families: []config.Family{config.IPv4}},
			{Name: "tor-6", Address: addr("2001:db8::1"), ASN: 65001, Families: []config.Family{config.IPv6}},
		}},
		Import: []config.ImportRule{{
			Name: "up", Peers: []string{"tor-a", "tor-b", "tor-6"}, Network: "default",
			Accept: []config.PrefixMatch{
				{Prefix: pfx("10.0.0.0/8"), MinLength: 8, MaxLength: 24},
				{Prefix: pfx("0.0.0.0/0")},
				{Prefix: pfx("2001:db8:100::/40"), MaxLength: 64},
				{Prefix: pfx("172.16.0.0/12"), MaxLength: 32},
				{Prefix: pfx("100.64.0.0/10"), MaxLength: 32},
			},
			MaxRoutes: 1000, Mode: "auto",
			Targets: config.ImportTargets{OVN: true, Kernel: config.KernelTarget{Table: 100}},
		}},
		ProtectedPrefixes: []netip.Prefix{pfx("10.66.0.0/16")},
		Cluster:           config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}},
		Kernel:            config.Kernel{RouteProtocol: 200},
	}
	return ImportInput{
		Config: cfg,
		Snapshot: model.Snapshot{
			Node: "n1",
			Networks: []model.Network{{Name: "default", Topology: "layer3", Subnets: []model.Subnet{
				{Prefix: pfx("10.128.0.0/23"), Source: "Logical_Switch n1 other_config:subnet"}}}},
			Routers: []model.GatewayRouter{{Network: "default", Name: "GR_n1", UUID: "gr-uuid",
				ExternalPort: "rtoe-GR_n1", ExternalNetworks: []netip.Prefix{pfx("192.0.2.10/24"), pfx("2001:db8::10/64")}}},
			Protected: []model.ProtectedPrefix{
				{Prefix: pfx("10.128.0.0/14"), Why: "cluster subnet (ovn_cluster_router static routes)"},
				{Prefix: pfx("100.64.0.0/16"), Why: "join subnet (Logical_Router_Port rtoj-GR_n1)"},
			},
		},
		Host: model.Host{Links: []model.Link{
			{Name: "lo", Index: 1, Up: true, Addrs: []netip.Prefix{pfx("127.0.0.1/8"), pfx("::1/128")}},
			{Name: "eth0", Index: 2, Up: true, Addrs: []netip.Prefix{pfx("192.0.2.10/24"), pfx("2001:db8::10/64"), pfx("fe80::10/64")}},
			{Name: "eth1", Index: 3, Up: true, Addrs: []netip.Prefix{pfx("198.51.100.10/24")}},
		}},
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func path(peer, prefix, nh string) model.LearnedPath {
	p := model.LearnedPath{Peer: peer, Prefix: pfx(prefix), ASPath: []uint32{65001}, Origin: "igp"}
	if nh != "" {
		p.NextHop = netip.MustParseAddr(nh)
	}
	return p
}

// TestImportReasons tries one path per check, hostile ones first: each is
// accepted or rejected with a reason naming the value and what decided.
func TestImportReasons(t *testing.T) {
	malformed := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	malformed.Malformed = "AS 0 in the AS path (RFC 7607)"
	asSet := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	asSet.Malformed = "AS_SET in the AS path (RFC 9774)"
	loopASN := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	loopASN.Malformed = model.RoutingLoop + ": the AS path holds our own ASN 64512 (RFC 4271 9.1.2)"
	loopID := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	loopID.Malformed = model.RoutingLoop + ": ORIGINATOR_ID is our router ID 192.0.2.10 (RFC 4456 8)"
	stale := path("tor-a", "10.3.0.0/16", "192.0.2.1")
	stale.Stale = true
	tests := []struct {
		name     string
		path     model.LearnedPath
		accepted bool
		rule     string
		reason   string
	}{
		{"accepted", path("tor-a", "10.1.0.0/16", "192.0.2.1"), true, "up", "accepted by rule up (10.0.0.0/8 length 8..24)"},
		{"accepted IPv6", path("tor-6", "2001:db8:100::/48", "2001:db8::1"), true, "up", "accepted by rule up (2001:db8:100::/40 length 40..64)"},
		{"stale still accepted", stale, true, "up", "accepted by rule up"},
		{"malformed AS 0 beats everything", malformed, false, "", "malformed: AS 0 in the AS path (RFC 7607); such a path is never imported"},
		{"malformed AS_SET", asSet, false, "", "malformed: AS_SET in the AS path (RFC 9774)"},
		{"prefix with host bits", model.LearnedPath{Peer: "tor-a", Prefix: netip.MustParsePrefix("10.1.0.1/16"), NextHop: addr("192.0.2.1")}, false, "", "prefix 10.1.0.1/16 is invalid or has host bits set; such a path is never imported"},
		{"no prefix", model.LearnedPath{Peer: "tor-a", NextHop: addr("192.0.2.1")}, false, "", "prefix invalid Prefix is invalid"},
		{"peer in no rule", path("tor-c", "10.1.0.0/16", "198.51.100.1"), false, "", "no import rule lists peer tor-c: rejected by default (RFC 8212)"},
		{"unknown peer", path("ghost", "10.1.0.0/16", "192.0.2.1"), false, "", "no import rule lists peer ghost"},
		{"too long", path("tor-a", "10.1.2.0/25", "192.0.2.1"), false, "", "no accept entry matches 10.1.2.0/25 from peer tor-a (rule up accepts 10.0.0.0/8 length 8..24, 0.0.0.0/0 length 0,"},
		{"outside", path("tor-a", "203.0.113.0/24", "192.0.2.1"), false, "", "no accept entry matches 203.0.113.0/24"},
		{"default route without opt-in", path("tor-a", "0.0.0.0/0", "192.0.2.1"), false, "up", "0.0.0.0/0 is the default route and rule up does not set allowDefaultRoute"},
		{"own pod subnet", path("tor-a", "10.128.0.0/23", "192.0.2.1"), false, "up", "10.128.0.0/23 is inside protected 10.128.0.0/14: cluster subnet (ovn_cluster_router static routes) (rule up)"},
		{"more specific of a pod subnet", path("tor-a", "10.128.0.0/24", "192.0.2.1"), false, "up", "10.128.0.0/24 is inside protected 10.128.0.0/14"},
		{"protectedPrefixes itself", path("tor-a", "10.66.0.0/16", "192.0.2.1"), false, "up", "10.66.0.0/16 is protected: protectedPrefixes (rule up)"},
		{"inside protectedPrefixes", path("tor-a", "10.66.7.0/24", "192.0.2.1"), false, "up", "10.66.7.0/24 is inside protected 10.66.0.0/16: protectedPrefixes"},
		{"service CIDR", path("tor-a", "172.30.5.0/24", "192.0.2.1"), false, "up", "inside protected 172.30.0.0/16: cluster.serviceCIDRs"},
		{"live join subnet", path("tor-a", "100.64.0.0/24", "192.0.2.1"), false, "up", "inside protected 100.64.0.0/16: join subnet (Logical_Router_Port rtoj-GR_n1)"},
		{"default transit subnet", path("tor-a", "100.88.0.0/16", "192.0.2.1"), false, "up", "100.88.0.0/16 is protected: default transit subnet of OVN-Kubernetes (NB has no live value) (rule up)"},
		{"no default join subnet when NB has one", path("tor-a", "100.65.0.0/16", "192.0.2.1"), true, "up", "accepted by rule up (100.64.0.0/10 length 10..32)"},
		{"another entry", path("tor-a", "172.16.0.0/12", "192.0.2.1"), true, "up", "accepted by rule up (172.16.0.0/12 length 12..32)"},
		{"a /24", path("tor-a", "10.200.0.0/24", "192.0.2.1"), true, "up", "accepted"},
		{"next hop missing", path("tor-a", "10.1.0.0/16", ""), false, "up", "the next hop of 10.1.0.0/16 is missing or invalid (rule up)"},
		{"next hop wrong family", path("tor-6", "2001:db8:100::/48", "192.0.2.1"), false, "up", "next hop 192.0.2.1 is IPv4 but the prefix 2001:db8:100::/48 is IPv6 (rule up)"},
		{"next hop mapped", path("tor-6", "2001:db8:100::/48", "::ffff:192.0.2.1"), false, "up", "IPv4-mapped"},
		{"next hop unspecified", path("tor-a", "10.1.0.0/16", "0.0.0.0"), false, "up", "next hop 0.0.0.0 of 10.1.0.0/16 is the unspecified address"},
		{"next hop loopback", path("tor-a", "10.1.0.0/16", "127.0.0.1"), false, "up", "next hop 127.0.0.1 of 10.1.0.0/16 is a loopback address"},
		{"next hop multicast", path("tor-a", "10.1.0.0/16", "224.0.0.5"), false, "up", "is a multicast address"},
		{"next hop broadcast", path("tor-a", "10.1.0.0/16", "255.255.255.255"), false, "up", "is the broadcast address"},
		{"next hop link-local", path("tor-6", "2001:db8:100::/48", "fe80::1"), false, "up", "next hop fe80::1 of 2001:db8:100::/48 is a link-local address"},
		{"next hop self", path("tor-a", "10.1.0.0/16", "192.0.2.10"), false, "up", "next hop 192.0.2.10 of 10.1.0.0/16 is local (an address of host link eth0)"},
		{"next hop in a pod subnet", path("tor-a", "10.1.0.0/16", "10.128.0.5"), false, "up", "next hop 10.128.0.5 of 10.1.0.0/16 is inside protected 10.128.0.0/14"},
		{"next hop in serviceCIDRs", path("tor-a", "10.1.0.0/16", "172.30.0.10"), false, "up", "inside protected 172.30.0.0/16: cluster.serviceCIDRs"},
		{"next hop not on-link", path("tor-a", "10.1.0.0/16", "198.51.100.7"), false, "up", "next hop 198.51.100.7 of 10.1.0.0/16 is not on-link through peer tor-a's link eth0 (192.0.2.10/24, 2001:db8::10/64, fe80::10/64) (rule up)"},
		{"next hop network address of the link", path("tor-a", "10.1.0.0/16", "192.0.2.0"), false, "up", "next hop 192.0.2.0 of 10.1.0.0/16 is the network address of on-link prefix 192.0.2.0/24 (link eth0) (rule up)"},
		{"next hop broadcast address of the link", path("tor-a", "10.1.0.0/16", "192.0.2.255"), false, "up", "next hop 192.0.2.255 of 10.1.0.0/16 is the broadcast address of on-link prefix 192.0.2.0/24 (link eth0) (rule up)"},
		{"next hop another peer on the link", path("tor-a", "10.1.0.0/16", "192.0.2.2"), true, "up", "accepted"},
		{"next hop another address on the link", path("tor-6", "2001:db8:100::/48", "2001:db8::1:0:0:1"), true, "up", "accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := importFixture()
			in.Learned = []model.LearnedPath{tt.path}
			res := Import(in)
			if len(res.Paths) != 1 {
				t.Fatalf("Paths = %d, want 1", len(res.Paths))
			}
			got := res.Paths[0]
			if got.Accepted != tt.accepted || got.Rule != tt.rule || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("got accepted=%v rule=%q reason %q\nwant accepted=%v rule=%q reason containing %q",
					got.Accepted, got.Rule, got.Reason, tt.accepted, tt.rule, tt.reason)
			}
			if !tt.accepted && (len(res.OVN) != 0 || len(res.Kernel) != 0) {
				t.Errorf("a rejected path is installed: OVN %v, kernel %v", res.OVN, res.Kernel)
			}
			if tt.accepted && (len(res.OVN) != 1 || len(res.Kernel) != 1) {
				t.Errorf("an accepted path is not installed once in each target: OVN %v, kernel %v", res.OVN, res.Kernel)
			}
		})
	}
	// A loop (our ASN in the AS path, our router ID as ORIGINATOR_ID, set
	// in Malformed by bgp) reads as a loop, not "malformed: ...loop".
	for _, p := range []model.LearnedPath{loopASN, loopID} {
		in := importFixture()
		in.Learned = []model.LearnedPath{p}
		res := Import(in)
		want := p.Malformed + "; such a path is never imported"
		if got := res.Paths[0]; got.Accepted || got.Reason != want || len(res.OVN)+len(res.Kernel) != 0 {
			t.Errorf("loop: got accepted=%v %q (OVN %v, kernel %v), want rejected %q", got.Accepted, got.Reason, res.OVN, res.Kernel, want)
		}
	}
}

// TestImportNextHopChecks covers the checks that need another fixture: a
// peer whose address is on no link, a peer's configured interface, the
// GR's external networks.
func TestImportNextHopChecks(t *testing.T) {
	t.Run("peer on no link", func(t *testing.T) {
		in := importFixture()
		in.Config.BGP.Peers[0].Address = addr("203.0.113.1")
		in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
		want := "cannot be checked on-link: peer tor-a's address 203.0.113.1 is inside no connected prefix of a host link"
		if got := Import(in).Paths[0]; got.Accepted || !strings.Contains(got.Reason, want) {
			t.Errorf("got %v %q, want rejected: %q", got.Accepted, got.Reason, want)
		}
	})
	t.Run("interface decides the link", func(t *testing.T) {
		in := importFixture()
		in.Config.BGP.Peers[0].Interface = "eth1"
		in.Snapshot.Routers[0].ExternalNetworks = append(in.Snapshot.Routers[0].ExternalNetworks, pfx("198.51.100.0/24"))
		in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "198.51.100.1"), path("tor-a", "10.2.0.0/16", "192.0.2.1")}
		res := Import(in)
		if !res.Paths[0].Accepted || res.Paths[1].Accepted || !strings.Contains(res.Paths[1].Reason, "not on-link through peer tor-a's link eth1") {
			t.Errorf("got %+v", res.Paths)
		}
		if len(res.Kernel) != 1 || res.Kernel[0].NextHops[0].Dev != "eth1" {
			t.Errorf("kernel = %+v, want one route through eth1", res.Kernel)
		}
		in.Config.BGP.Peers[0].Interface = "eth9"
		if got := Import(in).Paths[0]; got.Accepted || !strings.Contains(got.Reason, "peer tor-a's interface eth9 is not a link of this host") {
			t.Errorf("missing interface: got %v %q", got.Accepted, got.Reason)
		}
	})
	t.Run("outside the GR's external networks", func(t *testing.T) {
		in := importFixture()
		in.Snapshot.Routers[0].ExternalNetworks = []netip.Prefix{pfx("192.0.2.0/28")}
		in.Config.Import[0].Targets.Kernel = config.KernelTarget{} // with one, see TestImportAcceptedWhere
		in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.20")}
		want := "next hop 192.0.2.20 of 10.1.0.0/16 is outside the external networks 192.0.2.0/28 of gateway router GR_n1 (rule up, network default)"
		if got := Import(in).Paths[0]; got.Accepted || got.Reason != want {
			t.Errorf("got %v %q, want %q", got.Accepted, got.Reason, want)
		}
	})
	t.Run("the gateway router's own address", func(t *testing.T) {
		in := importFixture()
		in.Snapshot.Routers[0].ExternalNetworks = []netip.Prefix{pfx("192.0.2.20/24"), pfx("2001:db8::20/64")}
		in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.20"), path("tor-6", "2001:db8:100::/48", "2001:db8::20")}
		for _, kernelOnly := range []bool{false, true} {
			if kernelOnly { // any target: the kernel would send it to the GR's port too
				in.Config.Import[0].Targets.OVN = false
			}
			res := Import(in)
			for i, nh := range []string{"192.0.2.20", "2001:db8::20"} {
				want := fmt.Sprintf("next hop %s of %s is the own address of gateway router GR_n1 on its external port rtoe-GR_n1 (rule up)", nh, in.Learned[i].Prefix)
				if got := res.Paths[i]; got.Accepted || got.Reason != want {
					t.Errorf("ovn=%v: got %v %q, want %q", !kernelOnly, got.Accepted, got.Reason, want)
				}
			}
		}
	})
	t.Run("a /31 has no network nor broadcast address", func(t *testing.T) {
		in := importFixture()
		in.Host.Links[2].Addrs = []netip.Prefix{pfx("198.51.100.0/31")}
		in.Config.BGP.Peers[2].Address = addr("198.51.100.1")
		in.Config.Import[0].Peers = append(in.Config.Import[0].Peers, "tor-c")
		in.Config.Import[0].Targets.OVN = false
		in.Learned = []model.LearnedPath{path("tor-c", "10.1.0.0/16", "198.51.100.1")}
		if got := Import(in).Paths[0]; !got.Accepted {
			t.Errorf("next hop on a /31: %q", got.Reason)
		}
	})
	t.Run("default route with opt-in", func(t *testing.T) {
		in := importFixture()
		in.Config.Import[0].AllowDefaultRoute = true
		in.Learned = []model.LearnedPath{path("tor-a", "0.0.0.0/0", "192.0.2.1")}
		if got := Import(in).Paths[0]; !got.Accepted {
			t.Errorf("default route with allowDefaultRoute: %q", got.Reason)
		}
	})
}

// TestProtected lists the protected set: NB's, this node's pod subnets,
// serviceCIDRs, defaults NB has no live value for, host and peer
// addresses, protectedPrefixes.
func TestProtected(t *testing.T) {
	in := importFixture()
	got := Protected(in.Config, in.Snapshot, in.Host)
	var lines []string
	for _, p := range got {
		lines = append(lines, p.Prefix.String()+" "+p.Why)
	}
	want := []string{
		"10.128.0.0/14 cluster subnet (ovn_cluster_router static routes)",
		"100.64.0.0/16 join subnet (Logical_Router_Port rtoj-GR_n1)",
		"10.128.0.0/23 pod subnet of default on node n1 (Logical_Switch n1 other_config:subnet)",
		"172.30.0.0/16 cluster.serviceCIDRs",
		// no default IPv4 join subnet: NB has a live one
		"fd98::/64 default join subnet of OVN-Kubernetes (NB has no live value)",
		"100.88.0.0/16 default transit subnet of OVN-Kubernetes (NB has no live value)",
		"fd97::/64 default transit subnet of OVN-Kubernetes (NB has no live value)",
		"169.254.0.0/17 default masquerade subnet of OVN-Kubernetes (NB has no live value)",
		"fd69::/112 default masquerade subnet of OVN-Kubernetes (NB has no live value)",
		"127.0.0.1/32 address of host link lo",
		"::1/128 address of host link lo",
		"192.0.2.10/32 address of host link eth0",
		"2001:db8::10/128 address of host link eth0",
		"fe80::10/128 address of host link eth0",
		"198.51.100.10/32 address of host link eth1",
		"192.0.2.1/32 address of peer tor-a",
		"192.0.2.2/32 address of peer tor-b",
		"198.51.100.1/32 address of peer tor-c",
		"2001:db8::1/128 address of peer tor-6",
		"10.66.0.0/16 protectedPrefixes",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("Protected (-want +got):\n%s", d)
	}
	// Host and peer addresses are protected as destinations.
	in.Config.Import[0].Accept = append(in.Config.Import[0].Accept, config.PrefixMatch{Prefix: pfx("192.0.2.0/24"), MaxLength: 32},
		config.PrefixMatch{Prefix: pfx("198.51.100.0/24"), MaxLength: 32})
	in.Learned = []model.LearnedPath{path("tor-a", "192.0.2.2/32", "192.0.2.1"), path("tor-a", "192.0.2.10/32", "192.0.2.1"),
		path("tor-a", "169.254.169.0/30", "192.0.2.1")}
	res := Import(in)
	for i, w := range []string{"192.0.2.2/32 is protected: address of peer tor-b", "192.0.2.10/32 is protected: address of host link eth0", "no accept entry"} {
		if got := res.Paths[i]; got.Accepted || !strings.Contains(got.Reason, w) {
			t.Errorf("path %d: %v %q, want rejected: %q", i, got.Accepted, got.Reason, w)
		}
	}
}

// TestImportECMP: one prefix from two peers gives one OVN row per next hop
// and one multipath kernel route, each next hop through its peer's link.
func TestImportECMP(t *testing.T) {
	in := importFixture()
	in.Learned = []model.LearnedPath{
		path("tor-b", "10.1.0.0/16", "192.0.2.2"),
		path("tor-a", "10.1.0.0/16", "192.0.2.1"),
		path("tor-6", "2001:db8:100::/48", "2001:db8::1"),
	}
	res := Import(in)
	wantOVN := []model.OVNRoute{
		{Router: "GR_n1", Prefix: pfx("10.1.0.0/16"), NextHop: addr("192.0.2.1"), OutputPort: "rtoe-GR_n1", Rule: "up", Network: "default"},
		{Router: "GR_n1", Prefix: pfx("10.1.0.0/16"), NextHop: addr("192.0.2.2"), OutputPort: "rtoe-GR_n1", Rule: "up", Network: "default"},
		{Router: "GR_n1", Prefix: pfx("2001:db8:100::/48"), NextHop: addr("2001:db8::1"), OutputPort: "rtoe-GR_n1", Rule: "up", Network: "default"},
	}
	wantKernel := []model.KernelRoute{
		{Table: 100, Prefix: pfx("10.1.0.0/16"), Protocol: 200, Rule: "up",
			NextHops: []model.NextHop{{Addr: addr("192.0.2.1"), Dev: "eth0"}, {Addr: addr("192.0.2.2"), Dev: "eth0"}}},
		{Table: 100, Prefix: pfx("2001:db8:100::/48"), Protocol: 200, Rule: "up",
			NextHops: []model.NextHop{{Addr: addr("2001:db8::1"), Dev: "eth0"}}},
	}
	if d := cmp.Diff(wantOVN, res.OVN, cmpAddrs); d != "" {
		t.Errorf("OVN (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantKernel, res.Kernel, cmpAddrs); d != "" {
		t.Errorf("kernel (-want +got):\n%s", d)
	}
}

// TestImportTwoRules: rules are tried in config order; a target takes a
// prefix from the first rule that accepts it; a rule with another target
// installs it there too.
func TestImportTwoRules(t *testing.T) {
	in := importFixture()
	second := config.ImportRule{Name: "second", Peers: []string{"tor-a"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 32}}, MaxRoutes: 10, Mode: "auto",
		Targets: config.ImportTargets{OVN: true, Kernel: config.KernelTarget{Table: 100}}}
	third := config.ImportRule{Name: "third", Peers: []string{"tor-a"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 32}}, MaxRoutes: 10, Mode: "auto",
		Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 200}}}
	in.Config.Import = append(in.Config.Import, second, third)
	in.Learned = []model.LearnedPath{
		path("tor-a", "10.1.0.0/16", "192.0.2.1"), // up, then second (same targets: up wins), then third (table 200)
		path("tor-a", "10.9.9.0/28", "192.0.2.1"), // too long for up: second and third
	}
	res := Import(in)
	if p := res.Paths[0]; !p.Accepted || p.Rule != "up" || p.Reason != "accepted by rule up (10.0.0.0/8 length 8..24) and rule second (10.0.0.0/8 length 8..32) and rule third (10.0.0.0/8 length 8..32)" {
		t.Errorf("path 0: %+v", p)
	}
	if p := res.Paths[1]; !p.Accepted || p.Rule != "second" {
		t.Errorf("path 1: %+v", p)
	}
	var ovn, kern []string
	for _, r := range res.OVN {
		ovn = append(ovn, r.Prefix.String()+" "+r.Rule)
	}
	for _, r := range res.Kernel {
		kern = append(kern, fmt.Sprint(r.Table, " ", r.Prefix, " ", r.Rule))
	}
	if d := cmp.Diff([]string{"10.1.0.0/16 up", "10.9.9.0/28 second"}, ovn); d != "" {
		t.Errorf("OVN (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"100 10.1.0.0/16 up", "100 10.9.9.0/28 second", "200 10.1.0.0/16 third", "200 10.9.9.0/28 third"}, kern); d != "" {
		t.Errorf("kernel (-want +got):\n%s", d)
	}
	// A first rule that rejects gives the reason when no later one accepts.
	in.Learned = []model.LearnedPath{path("tor-a", "10.128.0.0/24", "192.0.2.1")}
	if p := Import(in).Paths[0]; p.Accepted || p.Rule != "up" || !strings.Contains(p.Reason, "(rule up)") {
		t.Errorf("protected, three rules: %+v", p)
	}
}

// TestImportCap: above maxRoutes nothing new is imported; installed routes
// stay first, then prefix order; the result does not depend on the order
// of the paths; an alarm names rule, peer, max and offered.
func TestImportCap(t *testing.T) {
	in := importFixture()
	in.Config.Import[0].MaxRoutes = 2
	var learned []model.LearnedPath
	for _, p := range []string{"10.4.0.0/16", "10.3.0.0/16", "10.2.0.0/16", "10.1.0.0/16"} {
		learned = append(learned, path("tor-a", p, "192.0.2.1"))
	}
	learned = append(learned, path("tor-b", "10.1.0.0/16", "192.0.2.2")) // other peer: own budget
	accepted := func(res ImportResult) []string {
		var out []string
		for _, p := range res.Paths {
			if p.Accepted {
				out = append(out, p.Peer+" "+p.Prefix.String())
			}
		}
		return out
	}
	in.Learned = learned
	res := Import(in)
	if d := cmp.Diff([]string{"tor-a 10.2.0.0/16", "tor-a 10.1.0.0/16", "tor-b 10.1.0.0/16"}, accepted(res)); d != "" {
		t.Errorf("nothing installed: prefix order (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]ImportAlarm{{Rule: "up", Peer: "tor-a", Max: 2, Wanted: 4}}, res.Alarms); d != "" {
		t.Errorf("alarms (-want +got):\n%s", d)
	}
	if r := res.Paths[0].Reason; r != "import cap: rule up accepts at most 2 routes from peer tor-a (4 offered)" {
		t.Errorf("cap reason %q", r)
	}
	want := map[string]PeerImport{"tor-a": {Imported: 2, Alarm: "import cap: rule up accepts at most 2 routes from peer tor-a (4 offered)"}, "tor-b": {Imported: 1}}
	if d := cmp.Diff(want, res.PeerImports()); d != "" {
		t.Errorf("PeerImports (-want +got):\n%s", d)
	}
	// Reversed input: same verdicts.
	rev := make([]model.LearnedPath, len(learned))
	for i, p := range learned {
		rev[len(learned)-1-i] = p
	}
	in.Learned = rev
	if d := cmp.Diff([]string{"tor-b 10.1.0.0/16", "tor-a 10.1.0.0/16", "tor-a 10.2.0.0/16"}, accepted(Import(in))); d != "" {
		t.Errorf("reversed input (-want +got):\n%s", d)
	}
	// 10.4 installed in OVN and 10.3 in table 100: they stay, new 10.1 and
	// 10.2 wait.
	in.Learned = learned
	in.Snapshot.OwnedRoutes = []model.OVNRoute{{UUID: "u1", Router: "GR_n1", Prefix: pfx("10.4.0.0/16"), NextHop: addr("192.0.2.1"), OutputPort: "rtoe-GR_n1", Rule: "up"}}
	in.Host.Routes = []model.KernelRoute{kroute(100, "10.3.0.0/16", "192.0.2.1")}
	if d := cmp.Diff([]string{"tor-a 10.4.0.0/16", "tor-a 10.3.0.0/16", "tor-b 10.1.0.0/16"}, accepted(Import(in))); d != "" {
		t.Errorf("installed first (-want +got):\n%s", d)
	}
	// A route installed by another rule does not count for this one.
	in.Snapshot.OwnedRoutes[0].Rule = "other"
	in.Host.Routes = nil
	if d := cmp.Diff([]string{"tor-a 10.2.0.0/16", "tor-a 10.1.0.0/16", "tor-b 10.1.0.0/16"}, accepted(Import(in))); d != "" {
		t.Errorf("installed by another rule (-want +got):\n%s", d)
	}
}

// TestImportTargetProblems: a rule whose target is missing or refused
// installs nothing there and says why; a VRF asked for is created once.
func TestImportTargetProblems(t *testing.T) {
	learned := []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
	tests := []struct {
		name     string
		edit     func(*ImportInput)
		problems []string
		ovn      int
		kernel   []string // "table vrf"
		vrfs     []model.VRFDevice
	}{
		{name: "foreign import", edit: func(in *ImportInput) {
			in.Snapshot.Routers[0].ForeignImport = "static route 10.9.0.0/16 carries k8s.ovn.org/owner-controller=RouteImport"
		}, problems: []string{"rule up: refusing to import into GR_n1, which OVN-Kubernetes' own route import manages: static route 10.9.0.0/16 carries k8s.ovn.org/owner-controller=RouteImport"},
			kernel: []string{"100 "}},
		{name: "no gateway router", edit: func(in *ImportInput) { in.Snapshot.Routers = nil },
			problems: []string{"rule up: network default has no gateway router on node n1 in NB: nothing is imported into OVN"}, kernel: []string{"100 "}},
		{name: "no external port", edit: func(in *ImportInput) { in.Snapshot.Routers[0].ExternalPort = "" },
			problems: []string{"rule up: gateway router GR_n1 of network default has no external port: nothing is imported into OVN"}, kernel: []string{"100 "}},
		{name: "VRF missing", edit: func(in *ImportInput) { in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue"} },
			problems: []string{"rule up: VRF blue does not exist on this host: create it, or set targets.kernel.createVRF: true with a table"}, ovn: 1},
		{name: "VRF created", edit: func(in *ImportInput) {
			in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue", Table: 1000, CreateVRF: true}
		}, ovn: 1, kernel: []string{"1000 blue"}, vrfs: []model.VRFDevice{{Name: "blue", Table: 1000}}},
		{name: "VRF adopted", edit: func(in *ImportInput) {
			in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue", Table: 1000, CreateVRF: true}
			in.Host.VRFs = []model.VRFDevice{{Name: "blue", Table: 1000}}
		}, ovn: 1, kernel: []string{"1000 blue"}},
		{name: "VRF adopted, its table", edit: func(in *ImportInput) {
			in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue"}
			in.Host.VRFs = []model.VRFDevice{{Name: "blue", Table: 7}}
		}, ovn: 1, kernel: []string{"7 blue"}},
		{name: "VRF in another table", edit: func(in *ImportInput) {
			in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue", Table: 1000, CreateVRF: true}
			in.Host.VRFs = []model.VRFDevice{{Name: "blue", Table: 7}}
		}, problems: []string{"rule up: VRF blue uses table 7, not targets.kernel.table 1000: set table: 7, or remove it"}, ovn: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := importFixture()
			in.Learned = learned
			tt.edit(&in)
			res := Import(in)
			if d := cmp.Diff(tt.problems, res.Problems, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
			if len(res.OVN) != tt.ovn {
				t.Errorf("OVN = %v, want %d rows", res.OVN, tt.ovn)
			}
			var kern []string
			for _, r := range res.Kernel {
				kern = append(kern, fmt.Sprint(r.Table, " ", r.VRF))
			}
			if d := cmp.Diff(tt.kernel, kern, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("kernel (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.vrfs, res.VRFs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("VRFs (-want +got):\n%s", d)
			}
		})
	}
}

// BenchmarkImport: 100,000 /30s from one peer, 40,000 of them over the cap.
func BenchmarkImport(b *testing.B) {
	in := importFixture()
	in.Config.Import[0].MaxRoutes = 60000
	for i := range 100000 {
		pf := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 14), byte(i >> 6), byte(i << 2)}), 30).Masked()
		in.Learned = append(in.Learned, model.LearnedPath{Peer: "tor-a", Prefix: pf, NextHop: addr("192.0.2.1")})
	}
	in.Config.Import[0].Accept[0].MaxLength = 30
	b.ResetTimer()
	for b.Loop() {
		res := Import(in)
		if len(res.Alarms) != 1 {
			b.Fatalf("alarms %v", res.Alarms)
		}
	}
}

// TestImportInvariants throws random paths, hostile ones among them, at
// Import and checks what must always hold: nothing installed is equal to or
// inside a protected prefix, every installed next hop is of the prefix's
// family (or IPv6 from the session over IPv6), not local and on-link
// through its peer's link, no (rule, peer) gets more than maxRoutes
// prefixes, every rejection has a reason, and the result does not depend
// on the order of the paths.
func TestImportInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	prefixes := []string{"10.1.0.0/16", "10.2.3.0/24", "10.128.0.0/24", "10.129.0.0/16", "172.30.1.0/24", "100.64.0.0/24",
		"100.88.0.0/16", "0.0.0.0/0", "10.66.1.0/24", "192.0.2.1/32", "192.0.2.10/32", "10.0.0.0/8", "10.9.0.0/28",
		"2001:db8:100::/48", "2001:db8:100::/40", "fd98::/64", "2001:db8::10/128", "::/0", "172.16.0.0/12", "100.65.0.0/16"}
	// Hostile next hops for everyone; the good ones of a peer are its own
	// (so that an installed next hop names its peer), but tor-c, on eth1,
	// also sends tor-a's, which is not on-link through eth1.
	hostile := []string{"192.0.2.10", "127.0.0.1", "0.0.0.0", "224.0.0.1", "10.128.0.1", "fe80::1", "2001:db8::10", "::", ""}
	own := map[string][]string{"tor-a": {"192.0.2.1", "192.0.2.99"}, "tor-b": {"192.0.2.2"}, "tor-c": {"198.51.100.1", "192.0.2.1"},
		"tor-6": {"2001:db8::1", "2001:db8::2"}, "ghost": {"192.0.2.1"}}
	peers := []string{"tor-a", "tor-b", "tor-c", "tor-6", "ghost"}
	in := importFixture()
	in.Config.Import[0].MaxRoutes = 2
	in.Config.Import[0].AllowDefaultRoute = rng.IntN(2) == 0
	in.Config.Import = append(in.Config.Import, config.ImportRule{Name: "kern", Peers: []string{"tor-a", "tor-c"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 32}}, MaxRoutes: 2, Mode: "auto",
		Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 200}}})
	seen := map[model.Key]bool{} // a peer sends one path per prefix
	for range 400 {
		peer := peers[rng.IntN(len(peers))]
		nexthops := slices.Concat(hostile, own[peer], own[peer], own[peer])
		p := path(peer, prefixes[rng.IntN(len(prefixes))], nexthops[rng.IntN(len(nexthops))])
		if k := (model.Key{Peer: p.Peer, Prefix: p.Prefix}); seen[k] {
			continue
		} else {
			seen[k] = true
		}
		if rng.IntN(20) == 0 {
			p.Malformed = "AS 0 in the AS path (RFC 7607)"
		}
		in.Learned = append(in.Learned, p)
	}
	res := Import(in)
	links := map[string]model.Link{}
	for _, l := range in.Host.Links {
		links[l.Name] = l
	}
	for _, r := range res.Kernel {
		if pp, ok := protectedCovering(res.Protected, r.Prefix); ok {
			t.Errorf("installed %s inside protected %v", r.Prefix, pp)
		}
		for _, nh := range r.NextHops {
			l := links[nh.Dev]
			// An IPv4 prefix may have an IPv6 next hop only from tor-6,
			// the one session over IPv6 (RFC 8950, issue 20).
			mixed := r.Prefix.Addr().Is4() && nh.Addr.Is6() && slices.Contains(own["tor-6"], nh.Addr.String())
			if nh.Addr.Is4() != r.Prefix.Addr().Is4() && !mixed || !onLink(&l, nh.Addr) || nh.Addr.IsLoopback() || nh.Addr.IsLinkLocalUnicast() {
				t.Errorf("installed %s via %v", r.Prefix, nh)
			}
			for _, l := range in.Host.Links {
				for _, a := range l.Addrs {
					if a.Addr() == nh.Addr {
						t.Errorf("installed %s via local %v", r.Prefix, nh)
					}
				}
			}
		}
	}
	perPeer := map[string]map[netip.Prefix]bool{}
	for _, r := range res.OVN {
		if perPeer[r.Rule+r.NextHop.String()] == nil {
			perPeer[r.Rule+r.NextHop.String()] = map[netip.Prefix]bool{}
		}
		perPeer[r.Rule+r.NextHop.String()][r.Prefix] = true
	}
	for _, r := range res.Kernel {
		for _, nh := range r.NextHops {
			if perPeer[r.Rule+nh.Addr.String()] == nil {
				perPeer[r.Rule+nh.Addr.String()] = map[netip.Prefix]bool{}
			}
			perPeer[r.Rule+nh.Addr.String()][r.Prefix] = true
		}
	}
	for _, p := range res.Paths {
		if !p.Accepted {
			if p.Reason == "" {
				t.Errorf("rejected without a reason: %+v", p)
			}
			continue
		}
		if p.Malformed != "" || (p.Prefix.Bits() == 0 && !in.Config.Import[0].AllowDefaultRoute) {
			t.Errorf("accepted %+v", p)
		}
	}
	// A good next hop here names its peer: (rule, next hop) stands for
	// (rule, peer).
	for k, pfxs := range perPeer {
		if len(pfxs) > 2 {
			t.Errorf("%s: %d prefixes installed, cap 2", k, len(pfxs))
		}
	}
	if len(res.OVN) == 0 || len(res.Alarms) == 0 {
		t.Errorf("the random input accepted nothing or reached no cap: %d rows, alarms %v", len(res.OVN), res.Alarms)
	}
	shuffled := slices.Clone(in.Learned)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	in.Learned = shuffled
	again := Import(in)
	if d := cmp.Diff(res.OVN, again.OVN, cmpAddrs); d != "" {
		t.Errorf("OVN depends on the order of the paths (-first +shuffled):\n%s", d)
	}
	if d := cmp.Diff(res.Kernel, again.Kernel, cmpAddrs); d != "" {
		t.Errorf("kernel depends on the order of the paths (-first +shuffled):\n%s", d)
	}
}

// TestImportMappedPrefix: an IPv4-mapped IPv6 prefix (::ffff:0:0/96 or
// inside it) is malformed and never imported, even where a rule accepts
// every IPv6 prefix; it would otherwise slip past the IPv4 protected set.
func TestImportMappedPrefix(t *testing.T) {
	in := importFixture()
	in.Config.Import[0].AllowDefaultRoute = true
	in.Config.Import[0].Accept = append(in.Config.Import[0].Accept, config.PrefixMatch{Prefix: pfx("::/0"), MaxLength: 128})
	in.Learned = []model.LearnedPath{
		path("tor-6", "::ffff:0:0/96", "2001:db8::1"),
		path("tor-6", "::ffff:10.128.0.0/110", "2001:db8::1"),
		path("tor-6", "::ffff:203.0.113.0/120", "2001:db8::1"),
		path("tor-6", "2001:db8:100::/48", "2001:db8::1"),
	}
	res := Import(in)
	for _, p := range res.Paths[:3] {
		want := fmt.Sprintf("malformed: prefix %s is IPv4-mapped IPv6 (inside ::ffff:0:0/96); such a path is never imported", p.Prefix)
		if p.Accepted || p.Reason != want {
			t.Errorf("%s: got accepted=%v %q, want rejected %q", p.Prefix, p.Accepted, p.Reason, want)
		}
	}
	if !res.Paths[3].Accepted {
		t.Errorf("control 2001:db8:100::/48 rejected: %q", res.Paths[3].Reason)
	}
	if len(res.OVN) != 1 || len(res.Kernel) != 1 {
		t.Errorf("only the control is installed: OVN %v, kernel %v", res.OVN, res.Kernel)
	}
}

// TestImportAcceptedWhere: an accepted path's reason says where it is not
// installed and why, so that `routes learned` and `explain` never claim an
// install that does not happen; a fully installed one says only which rule
// accepted it.
func TestImportAcceptedWhere(t *testing.T) {
	const accepted = "accepted by rule up (10.0.0.0/8 length 8..24)"
	foreign := "static route 10.9.0.0/16 carries k8s.ovn.org/owner-controller=RouteImport"
	tests := []struct {
		name   string
		nh     string
		edit   func(*ImportInput)
		reason string // exact, "" = rejected with the want below
		ovn    int
		kernel int
	}{
		{"installed everywhere", "192.0.2.1", func(*ImportInput) {}, accepted, 1, 1},
		{"foreign import, OVN only", "192.0.2.1", func(in *ImportInput) {
			in.Snapshot.Routers[0].ForeignImport = foreign
			in.Config.Import[0].Targets.Kernel = config.KernelTarget{}
		}, accepted + ", but installed nowhere: not in OVN: rule up: refusing to import into GR_n1, which OVN-Kubernetes' own route import manages: " + foreign, 0, 0},
		{"foreign import, with a table", "192.0.2.1", func(in *ImportInput) {
			in.Snapshot.Routers[0].ForeignImport = foreign
		}, accepted + ", installed in table 100 only: not in OVN: rule up: refusing to import into GR_n1, which OVN-Kubernetes' own route import manages: " + foreign, 0, 1},
		{"no gateway router", "192.0.2.1", func(in *ImportInput) { in.Snapshot.Routers = nil },
			accepted + ", installed in table 100 only: not in OVN: rule up: network default has no gateway router on node n1 in NB: nothing is imported into OVN", 0, 1},
		{"VRF missing", "192.0.2.1", func(in *ImportInput) { in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue"} },
			accepted + ", installed in OVN (GR_n1) only: not in the kernel: rule up: VRF blue does not exist on this host: create it, or set targets.kernel.createVRF: true with a table", 1, 0},
		{"next hop outside the external networks, with a table", "192.0.2.20", func(in *ImportInput) {
			in.Snapshot.Routers[0].ExternalNetworks = []netip.Prefix{pfx("192.0.2.0/28")}
		}, accepted + ", installed in table 100 only: not in OVN: next hop 192.0.2.20 of 10.1.0.0/16 is outside the external networks 192.0.2.0/28 of gateway router GR_n1 (network default)", 0, 1},
		{"next hop outside the external networks, OVN only", "192.0.2.20", func(in *ImportInput) {
			in.Snapshot.Routers[0].ExternalNetworks = []netip.Prefix{pfx("192.0.2.0/28")}
			in.Config.Import[0].Targets.Kernel = config.KernelTarget{}
		}, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := importFixture()
			in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", tt.nh)}
			tt.edit(&in)
			res := Import(in)
			got := res.Paths[0]
			if tt.reason == "" {
				want := "next hop 192.0.2.20 of 10.1.0.0/16 is outside the external networks 192.0.2.0/28 of gateway router GR_n1 (rule up, network default)"
				if got.Accepted || got.Reason != want {
					t.Errorf("got %v %q, want rejected %q", got.Accepted, got.Reason, want)
				}
			} else if !got.Accepted || got.Reason != tt.reason {
				t.Errorf("got %v %q\nwant accepted %q", got.Accepted, got.Reason, tt.reason)
			}
			if len(res.OVN) != tt.ovn || len(res.Kernel) != tt.kernel {
				t.Errorf("OVN %v, kernel %v, want %d and %d", res.OVN, res.Kernel, tt.ovn, tt.kernel)
			}
		})
	}
}

// TestImportForeignKernelKey: a key a route not ours holds in the target
// table gets no kernel route (the writer would refuse it on every pass);
// OVN still gets the path, and the problem says why.
func TestImportForeignKernelKey(t *testing.T) {
	in := importFixture()
	in.Host.Foreign = []model.KernelRouteKey{{Table: 100, Prefix: pfx("10.1.0.0/16")}}
	in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1"), path("tor-a", "10.2.0.0/16", "192.0.2.1")}
	res := Import(in)
	if len(res.Kernel) != 1 || res.Kernel[0].Prefix != pfx("10.2.0.0/16") {
		t.Errorf("kernel = %+v, want only 10.2.0.0/16", res.Kernel)
	}
	if len(res.OVN) != 2 {
		t.Errorf("OVN = %+v, want both", res.OVN)
	}
	found := false
	for _, p := range res.Problems {
		found = found || strings.Contains(p, "10.1.0.0/16") && strings.Contains(p, "not ovnbgp's")
	}
	if !found {
		t.Errorf("problems = %q, want one naming 10.1.0.0/16 held by a route not ovnbgp's", res.Problems)
	}
}

// TestImportForeignOVNRoute: an identical static route that is not ours
// (an operator's ovn-nbctl lr-route-add) is not duplicated by import; the
// kernel still gets the path, and the problem says why.
func TestImportForeignOVNRoute(t *testing.T) {
	in := importFixture()
	in.Snapshot.Routers[0].ForeignRoutes = []model.OVNRouteKey{{Router: "GR_n1", Prefix: pfx("10.1.0.0/16"), NextHop: addr("192.0.2.1")}}
	in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1"), path("tor-b", "10.1.0.0/16", "192.0.2.2")}
	res := Import(in)
	if len(res.OVN) != 1 || res.OVN[0].NextHop != addr("192.0.2.2") {
		t.Errorf("OVN = %+v, want only the row via 192.0.2.2", res.OVN)
	}
	if len(res.Kernel) != 1 || len(res.Kernel[0].NextHops) != 2 {
		t.Errorf("kernel = %+v, want one route via both", res.Kernel)
	}
	found := false
	for _, p := range res.Problems {
		found = found || strings.Contains(p, "GR_n1") && strings.Contains(p, "10.1.0.0/16 via 192.0.2.1") && strings.Contains(p, "not ovnbgp's")
	}
	if !found {
		t.Errorf("problems = %q, want one naming the foreign row", res.Problems)
	}
}

// TestImportMartians: special-purpose address space (RFC 6890) that must
// never be routed to a peer is rejected as protected even where a rule
// accepts every prefix: loopback, "this network", link-local, multicast,
// the reserved class E and the limited broadcast, and the IPv6
// counterparts. A covering aggregate (0.0.0.0/1) is not a martian.
// (Found by the hostile-input suite: 127.0.0.0/8 and 224.0.0.0/4 were
// installed in OVN and the kernel.)
func TestImportMartians(t *testing.T) {
	in := importFixture()
	in.Config.Import[0].Accept = append(in.Config.Import[0].Accept,
		config.PrefixMatch{Prefix: pfx("0.0.0.0/0"), MaxLength: 32}, config.PrefixMatch{Prefix: pfx("::/0"), MaxLength: 128})
	martians := map[string]string{
		"127.0.0.0/8":        "127.0.0.0/8 is protected: special-purpose address space (RFC 6890: loopback) (rule up)",
		"127.1.2.0/24":       "127.1.2.0/24 is inside protected 127.0.0.0/8: special-purpose address space (RFC 6890: loopback)",
		"0.0.0.0/8":          "is protected: special-purpose address space (RFC 6890: this network)",
		"169.254.200.0/24":   "is inside protected 169.254.0.0/16: special-purpose address space (RFC 6890: link-local)",
		"224.0.0.0/4":        "is protected: special-purpose address space (RFC 6890: multicast)",
		"239.1.0.0/16":       "is inside protected 224.0.0.0/4: special-purpose address space (RFC 6890: multicast)",
		"240.0.0.0/4":        "is protected: special-purpose address space (RFC 6890: reserved)",
		"255.255.255.255/32": "is inside protected 240.0.0.0/4: special-purpose address space (RFC 6890: reserved)",
		"::1/128":            "::1/128 is protected: ", // the host's own address first
		"fe80::/64":          "is inside protected fe80::/10: special-purpose address space (RFC 6890: link-local)",
		"ff02::/16":          "is inside protected ff00::/8: special-purpose address space (RFC 6890: multicast)",
		"::/128":             "::/128 is protected: special-purpose address space (RFC 6890: unspecified)",
	}
	for p := range martians {
		nh := "192.0.2.1"
		peer := "tor-a"
		if pfx(p).Addr().Is6() {
			nh, peer = "2001:db8::1", "tor-6"
		}
		in.Learned = append(in.Learned, path(peer, p, nh))
	}
	in.Learned = append(in.Learned, path("tor-a", "0.0.0.0/1", "192.0.2.1"), path("tor-a", "128.0.0.0/1", "192.0.2.1"))
	res := Import(in)
	for _, p := range res.Paths {
		want, martian := martians[p.Prefix.String()]
		switch {
		case martian && (p.Accepted || !strings.Contains(p.Reason, want)):
			t.Errorf("%s: accepted=%v %q, want rejected %q", p.Prefix, p.Accepted, p.Reason, want)
		case !martian && !p.Accepted:
			t.Errorf("control %s rejected: %q", p.Prefix, p.Reason)
		}
	}
	if len(res.OVN) != 2 || len(res.Kernel) != 2 {
		t.Errorf("only the two /1 controls are installed: OVN %v, kernel %v", res.OVN, res.Kernel)
	}
}

// TestImportFirstAS: a path from an eBGP peer whose AS path does not start
// with the peer's ASN is never imported (RFC 4271 6.3, FRR's
// enforce-first-as), with a reason naming both ASNs and the opt-out; a
// peer with enforceFirstAS false (a route server) and an iBGP peer are not
// checked.
func TestImportFirstAS(t *testing.T) {
	in := importFixture()
	for i := range in.Config.BGP.Peers {
		in.Config.BGP.Peers[i].EnforceFirstAS = true
	}
	in.Config.BGP.Peers = append(in.Config.BGP.Peers,
		config.Peer{Name: "rs", Address: addr("192.0.2.3"), ASN: 65050, Families: []config.Family{config.IPv4}},
		config.Peer{Name: "ibgp", Address: addr("192.0.2.4"), ASN: 64512, Families: []config.Family{config.IPv4}, EnforceFirstAS: true})
	in.Config.Import[0].Peers = append(in.Config.Import[0].Peers, "rs", "ibgp")
	with := func(p model.LearnedPath, as ...uint32) model.LearnedPath {
		p.ASPath = as
		return p
	}
	in.Learned = []model.LearnedPath{
		with(path("tor-a", "10.1.0.0/16", "192.0.2.1"), 65999),
		with(path("tor-a", "10.2.0.0/16", "192.0.2.1"), 65001, 65999),
		with(path("tor-6", "2001:db8:100::/48", "2001:db8::1"), 65999, 65001),
		with(path("rs", "10.3.0.0/16", "192.0.2.3"), 65999),
		with(path("ibgp", "10.4.0.0/16", "192.0.2.4"), 65999),
	}
	want := map[string]string{
		"10.1.0.0/16":       "malformed: first AS 65999 of the AS path is not peer tor-a's AS 65001 (RFC 4271 6.3)",
		"2001:db8:100::/48": "malformed: first AS 65999 of the AS path is not peer tor-6's AS 65001 (RFC 4271 6.3)",
	}
	table := NewImportTable(in)
	for _, p := range table.Result().Paths {
		reason, refused := want[p.Prefix.String()]
		switch {
		case refused && (p.Accepted || !strings.HasPrefix(p.Reason, reason) || !strings.Contains(p.Reason, "enforceFirstAS: false")):
			t.Errorf("%s from %s: accepted=%v %q, want rejected %q naming the opt-out", p.Prefix, p.Peer, p.Accepted, p.Reason, reason)
		case !refused && !p.Accepted:
			t.Errorf("%s from %s (AS path %v) rejected: %q", p.Prefix, p.Peer, p.ASPath, p.Reason)
		}
	}
	if got := table.Count(nil).RejectedBy[Rejection{"tor-a", RejectMalformed}]; got != 1 {
		t.Errorf("tor-a's refused path counted %d times as %s, want 1", got, RejectMalformed)
	}

	// The opt-out takes effect in a new table (a reload), without a
	// session reset: nothing of bgp is involved.
	in.Config.BGP.Peers[0].EnforceFirstAS = false
	for _, p := range Import(in).Paths {
		if p.Peer == "tor-a" && !p.Accepted {
			t.Errorf("enforceFirstAS false: %s from tor-a still rejected: %q", p.Prefix, p.Reason)
		}
	}
}

// TestPeerNextHopConflicts: a peer listed by an import rule whose address
// is inside a protected prefix (the default join subnet when NB has no
// live value, cluster.serviceCIDRs, protectedPrefixes) or of a class no next
// hop may have is named, with the verdict its routes get; routes from it
// with itself as next hop are rejected with that same reason. A live join
// subnet elsewhere, or a peer no import rule lists, is not a conflict.
func TestPeerNextHopConflicts(t *testing.T) {
	in := importFixture()
	in.Snapshot.Protected = nil // NB has no live join subnet: the default is protected
	in.Config.BGP.Peers = append(in.Config.BGP.Peers,
		config.Peer{Name: "join", Address: addr("100.64.0.7"), ASN: 65001, Families: []config.Family{config.IPv4}},
		config.Peer{Name: "svc", Address: addr("172.30.0.9"), ASN: 65001, Families: []config.Family{config.IPv4}},
		config.Peer{Name: "prot", Address: addr("10.66.1.1"), ASN: 65001, Families: []config.Family{config.IPv4}},
		config.Peer{Name: "tgw", Address: addr("169.254.6.2"), ASN: 65001, Families: []config.Family{config.IPv4}},
		config.Peer{Name: "unused", Address: addr("100.64.0.8"), ASN: 65001, Families: []config.Family{config.IPv4}},
		// A link-local peer on its own link is a valid next hop (issue 20).
		config.Peer{Name: "ll", Address: addr("fe80::99%eth0"), Interface: "eth0", ASN: 65001, Families: []config.Family{config.IPv4, config.IPv6}})
	in.Config.Import[0].Peers = append(in.Config.Import[0].Peers, "join", "svc", "prot", "tgw", "ll")
	in.Host.Links = append(in.Host.Links, model.Link{Name: "eth9", Index: 9, Up: true,
		Addrs: []netip.Prefix{pfx("100.64.0.10/24"), pfx("172.30.0.10/24"), pfx("10.66.1.10/24"), pfx("169.254.6.1/29")}})
	got := PeerNextHopConflicts(in.Config, in.Snapshot)
	want := map[string]string{
		"join": "next hop 100.64.0.7 is inside protected 100.64.0.0/16: default join subnet of OVN-Kubernetes (NB has no live value)",
		"svc":  "next hop 172.30.0.9 is inside protected 172.30.0.0/16: cluster.serviceCIDRs",
		"prot": "next hop 10.66.1.1 is inside protected 10.66.0.0/16: protectedPrefixes",
		"tgw":  "next hop 169.254.6.2 is a link-local address",
	}
	if len(got) != len(want) {
		t.Errorf("conflicts %+v, want %d", got, len(want))
	}
	for _, c := range got {
		if want[c.Peer] != c.Reason {
			t.Errorf("peer %s: %q, want %q", c.Peer, c.Reason, want[c.Peer])
		}
	}
	// The import decision says the same of a route with the peer as next hop.
	for _, c := range got {
		in.Learned = append(in.Learned, path(c.Peer, "10.5.0.0/16", c.Address.String()))
	}
	for _, p := range Import(in).Paths {
		w := strings.Replace(want[p.Peer], " is ", " of 10.5.0.0/16 is ", 1)
		if p.Accepted || !strings.HasPrefix(p.Reason, w) {
			t.Errorf("route from %s: accepted %v, %q, want %q", p.Peer, p.Accepted, p.Reason, w)
		}
	}
	// A live join subnet elsewhere: the default is not protected.
	in.Snapshot.Protected = []model.ProtectedPrefix{{Prefix: pfx("100.65.0.0/16"), Why: "join subnet (Logical_Router_Port rtoj-GR_n1)"}}
	for _, c := range PeerNextHopConflicts(in.Config, in.Snapshot) {
		if c.Peer == "join" {
			t.Errorf("live join subnet 100.65.0.0/16: peer join still named: %+v", c)
		}
	}
}
