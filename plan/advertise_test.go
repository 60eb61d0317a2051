package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

var cmpAddrs = cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// globs compiles patterns as config does when it loads a file.
func globs(patterns ...string) []config.Glob {
	out := make([]config.Glob, len(patterns))
	for i, p := range patterns {
		g, err := config.ParseGlob(p)
		if err != nil {
			panic(err)
		}
		out[i] = g
	}
	return out
}

func peer(name, addr string, fams ...config.Family) config.Peer {
	if len(fams) == 0 {
		fams = []config.Family{config.IPv4}
	}
	return config.Peer{Name: name, Address: netip.MustParseAddr(addr), ASN: 65001, Families: fams}
}

func snapshot() model.Snapshot {
	return model.Snapshot{Node: "node1", Networks: []model.Network{
		{Name: "default", Topology: "layer3", Subnets: []model.Subnet{
			{Prefix: pfx("10.128.0.0/23"), Source: "Logical_Switch node1 other_config:subnet"},
			{Prefix: pfx("fd00:10:128:1::/64"), Source: "Logical_Switch node1 other_config:ipv6_prefix"},
		}},
		{Name: "blue", Topology: "layer3", Subnets: []model.Subnet{
			{Prefix: pfx("10.200.0.0/24"), Source: "Logical_Switch blue_node1 other_config:subnet"},
		}},
		{Name: "cluster_udn_red", Topology: "layer2", Subnets: []model.Subnet{
			{Prefix: pfx("10.250.0.0/16"), Source: "Logical_Switch cluster_udn_red_ovn_layer2_switch other_config:subnet"},
		}},
	}}
}

func adv(peer, prefix, rule, network, source string, attrs model.PathAttrs) model.Advertisement {
	return model.Advertisement{Peer: peer, Prefix: pfx(prefix), Rule: rule, Network: network, Source: source, Attrs: attrs}
}

func TestAdvertisements(t *testing.T) {
	torA := peer("tor-a", "192.0.2.1")
	torB := peer("tor-b", "192.0.2.3", config.IPv4, config.IPv6)
	torV6 := peer("tor-v6", "2001:db8::1", config.IPv6)
	srcDef := "Logical_Switch node1 other_config:subnet"
	srcDef6 := "Logical_Switch node1 other_config:ipv6_prefix"
	srcBlue := "Logical_Switch blue_node1 other_config:subnet"
	srcRed := "Logical_Switch cluster_udn_red_ovn_layer2_switch other_config:subnet"
	none := model.PathAttrs{}

	tests := []struct {
		name  string
		peers []config.Peer
		rules []config.AdvertiseRule
		snap  model.Snapshot
		want  []model.Advertisement
	}{
		{
			name:  "no rules advertise nothing",
			peers: []config.Peer{torA},
			snap:  snapshot(),
		},
		{
			name:  "default network to all peers, per family",
			peers: []config.Peer{torA, torB, torV6},
			rules: []config.AdvertiseRule{{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("default")}},
			snap:  snapshot(),
			want: []model.Advertisement{
				adv("tor-a", "10.128.0.0/23", "pods", "default", srcDef, none),
				adv("tor-b", "10.128.0.0/23", "pods", "default", srcDef, none),
				adv("tor-b", "fd00:10:128:1::/64", "pods", "default", srcDef6, none),
				adv("tor-v6", "fd00:10:128:1::/64", "pods", "default", srcDef6, none),
			},
		},
		{
			name:  "glob selects UDNs, peer selection",
			peers: []config.Peer{torA, torB},
			rules: []config.AdvertiseRule{{Name: "udn", Kind: config.KindPodNetwork, Networks: globs("cluster_udn_*", "bl?e"), Peers: []string{"tor-b"}}},
			snap:  snapshot(),
			want: []model.Advertisement{
				adv("tor-b", "10.200.0.0/24", "udn", "blue", srcBlue, none),
				adv("tor-b", "10.250.0.0/16", "udn", "cluster_udn_red", srcRed, none),
			},
		},
		{
			name:  "first rule wins for the same peer and prefix",
			peers: []config.Peer{torA},
			rules: []config.AdvertiseRule{
				{Name: "blue-tagged", Kind: config.KindPodNetwork, Networks: globs("blue"), Communities: []model.Community{65001<<16 | 100}, MED: 10},
				{Name: "all", Kind: config.KindPodNetwork, Networks: globs("*"), ASPathPrepend: 2},
			},
			snap: snapshot(),
			want: []model.Advertisement{
				adv("tor-a", "10.128.0.0/23", "all", "default", srcDef, model.PathAttrs{ASPathPrepend: 2}),
				adv("tor-a", "10.200.0.0/24", "blue-tagged", "blue", srcBlue, model.PathAttrs{Communities: []model.Community{65001<<16 | 100}, MED: 10}),
				adv("tor-a", "10.250.0.0/16", "all", "cluster_udn_red", srcRed, model.PathAttrs{ASPathPrepend: 2}),
			},
		},
		{
			name:  "rule naming an unknown peer selects nobody",
			peers: []config.Peer{torA},
			rules: []config.AdvertiseRule{{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("*"), Peers: []string{"gone"}}},
			snap:  snapshot(),
		},
		{
			name:  "other kinds are not pod networks",
			peers: []config.Peer{torA},
			rules: []config.AdvertiseRule{{Name: "eip", Kind: config.KindEgressIP, Networks: globs("*")}},
			snap:  snapshot(),
		},
		{
			name:  "host bits are masked",
			peers: []config.Peer{torA},
			rules: []config.AdvertiseRule{{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("default")}},
			snap: model.Snapshot{Networks: []model.Network{{Name: "default", Subnets: []model.Subnet{
				{Prefix: pfx("10.128.0.7/23"), Source: "s"}}}}},
			want: []model.Advertisement{adv("tor-a", "10.128.0.0/23", "pods", "default", "s", none)},
		},
		{
			name:  "empty snapshot advertises nothing",
			peers: []config.Peer{torA},
			rules: []config.AdvertiseRule{{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("*")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: tt.peers}, Advertise: tt.rules}
			got := Advertisements(cfg, tt.snap, testNow)
			if d := cmp.Diff(tt.want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Advertisements() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestDiffAdvertisements(t *testing.T) {
	a := adv("tor-a", "10.128.0.0/23", "pods", "default", "s", model.PathAttrs{})
	b := adv("tor-a", "10.200.0.0/24", "pods", "blue", "s", model.PathAttrs{})
	bTagged := b
	bTagged.Attrs = model.PathAttrs{Communities: []model.Community{65001<<16 | 1, 65001<<16 | 2}}
	bTaggedReordered := b
	bTaggedReordered.Attrs = model.PathAttrs{Communities: []model.Community{65001<<16 | 2, 65001<<16 | 1}}
	bOtherRule := b
	bOtherRule.Rule = "other"
	c := adv("tor-b", "10.128.0.0/23", "pods", "default", "s", model.PathAttrs{})

	tests := []struct {
		name             string
		desired, current []model.Advertisement
		want             AdvertDiff
	}{
		{name: "both empty"},
		{name: "announce all", desired: []model.Advertisement{b, a}, want: AdvertDiff{Announce: []model.Advertisement{a, b}}},
		{name: "withdraw all", current: []model.Advertisement{a, c}, want: AdvertDiff{Withdraw: []model.Advertisement{a, c}}},
		{name: "same set", desired: []model.Advertisement{a, b}, current: []model.Advertisement{b, a}},
		{name: "explanations are not state", desired: []model.Advertisement{bOtherRule}, current: []model.Advertisement{b}},
		{name: "communities as a set", desired: []model.Advertisement{bTagged}, current: []model.Advertisement{bTaggedReordered}},
		{name: "attribute change", desired: []model.Advertisement{a, bTagged}, current: []model.Advertisement{a, b},
			want: AdvertDiff{Change: []model.Advertisement{bTagged}}},
		{name: "per peer", desired: []model.Advertisement{a, c}, current: []model.Advertisement{a, b},
			want: AdvertDiff{Announce: []model.Advertisement{c}, Withdraw: []model.Advertisement{b}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DiffAdvertisements(tt.desired, tt.current)
			if d := cmp.Diff(tt.want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("DiffAdvertisements() mismatch (-want +got):\n%s", d)
			}
			if got.Empty() != tt.want.Empty() {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

// TestMatchAnyEveryName: ["*"] selects every network, whatever its name
// holds ("/", ".", "_"), and other globs match across "/" too.
func TestMatchAnyEveryName(t *testing.T) {
	names := []string{"default", "ns1_udn", "cluster_udn_blue", "ns/name", "a.b.c", "x/y/z", "with space"}
	for _, n := range names {
		if !MatchAny(globs("*"), n) {
			t.Errorf(`["*"] does not match %q`, n)
		}
	}
	tests := []struct {
		glob string
		name string
		want bool
	}{
		{"ns/*", "ns/name", true},
		{"*/name", "ns/name", true},
		{"*.c", "a.b.c", true},
		{"a.?.c", "a.b.c", true},
		{"a.?.c", "a/b.c", false},
		{"cluster_udn_*", "cluster_udn_a/b", true},
		{"ns1_*", "ns2_udn", false},
		{"?", "/", true},
	}
	for _, tt := range tests {
		if got := MatchAny(globs(tt.glob), tt.name); got != tt.want {
			t.Errorf("MatchAny(%q, %q) = %v, want %v", tt.glob, tt.name, got, tt.want)
		}
	}
	// Advertisements: a network named with "/" is selected by ["*"].
	cfg := &config.Config{BGP: config.BGP{Peers: []config.Peer{peer("tor-a", "192.0.2.1")}},
		Advertise: []config.AdvertiseRule{{Name: "all", Kind: config.KindPodNetwork, Networks: globs("*")}}}
	snap := model.Snapshot{Networks: []model.Network{{Name: "ns/name", Subnets: []model.Subnet{{Prefix: pfx("10.9.0.0/24")}}}}}
	if got := Advertisements(cfg, snap, testNow); len(got) != 1 || got[0].Network != "ns/name" {
		t.Errorf(`networks: ["*"] with a network "ns/name": %+v, want it advertised`, got)
	}
}

// advSnapshot is snapshot() with egress IPs, Service VIPs, this node's
// gateway router and the node addresses NB holds.
func advSnapshot() model.Snapshot {
	s := snapshot()
	a := netip.MustParseAddr
	s.Routers = []model.GatewayRouter{{Network: "default", Name: "GR_node1", ExternalNetworks: []netip.Prefix{pfx("172.18.0.2/16"), pfx("fc00::2/64")}}}
	s.NodeAddresses = []netip.Addr{a("172.18.0.2"), a("172.18.0.3"), a("fc00::2")}
	s.EgressIPs = []model.EgressIP{
		{IP: a("172.18.0.100"), Network: "default", Router: "GR_node1", Name: "eip1", Namespaces: []string{"prod-a", "web"}, Source: "nat eip1"},
		{IP: a("fc00::100"), Network: "default", Router: "GR_node1", Name: "eip6", Namespaces: []string{"web"}, Source: "nat eip6"},
		{IP: a("172.19.0.100"), Network: "blue", Router: "GR_blue_node1", Name: "eip2", Namespaces: []string{"blue-ns"}, Source: "nat eip2"},
		{IP: a("172.18.0.101"), Network: "default", Router: "GR_node1", Name: "eip3", Source: "nat eip3 (no namespace)"},
	}
	s.ServiceVIPs = []model.ServiceVIP{
		{Service: "web/front", Network: "default", VIP: a("172.30.0.10"), Backends: []netip.Addr{a("10.128.0.5")}, Source: "lb clusterip"},
		{Service: "web/front", Network: "default", VIP: a("192.0.2.50"), Backends: []netip.Addr{a("10.128.2.5")}, Source: "lb remote only"},
		{Service: "web/front", Network: "default", VIP: a("192.0.2.51"), Backends: []netip.Addr{a("10.128.2.5"), a("10.128.0.5")}, Source: "lb local pod"},
		{Service: "web/host", Network: "default", VIP: a("192.0.2.52"), Backends: []netip.Addr{a("172.18.0.2")}, Source: "lb host-network here"},
		{Service: "web/host", Network: "default", VIP: a("172.18.0.3"), Backends: []netip.Addr{a("10.128.0.5")}, Source: "lb nodeport"},
		{Service: "web/idle", Network: "default", VIP: a("192.0.2.53"), Source: "lb no endpoints"},
		{Service: "db/pg", Network: "default", VIP: a("192.0.2.54"), Backends: []netip.Addr{a("10.128.0.9")}, Source: "lb db"},
		{Service: "blue-ns/app", Network: "blue", VIP: a("192.0.2.60"), Backends: []netip.Addr{a("10.200.0.4")}, Source: "lb blue local"},
		{Service: "web/v6", Network: "default", VIP: a("2001:db8:50::1"), Backends: []netip.Addr{a("fd00:10:128:1::5")}, Source: "lb v6"},
		{Service: "web/shared-a", Network: "default", VIP: a("192.0.2.70"), Backends: []netip.Addr{a("10.128.2.7")}, Source: "lb shared a"},
		{Service: "web/shared-b", Network: "default", VIP: a("192.0.2.70"), Backends: []netip.Addr{a("10.128.2.8")}, Source: "lb shared b"},
	}
	return s
}

// TestAdvertiseEgressIPsAndVIPs: what egressIP and loadBalancerIP rules
// select (networks, namespaces, services, families), what they never do
// (ClusterIPs, NodePorts, Services without an endpoint), localEndpointsOnly
// (a pod of the Service's network on this node, or this node's own address
// for a host-network endpoint), and one prefix per VIP whatever shares it.
func TestAdvertiseEgressIPsAndVIPs(t *testing.T) {
	torA := peer("tor-a", "192.0.2.1")
	torB := peer("tor-b", "192.0.2.3", config.IPv4, config.IPv6)
	none := model.PathAttrs{}
	tests := []struct {
		name  string
		rules []config.AdvertiseRule
		want  []model.Advertisement
	}{
		{
			name:  "egress IPs of every network, per family",
			rules: []config.AdvertiseRule{{Name: "eips", Kind: config.KindEgressIP}},
			want: []model.Advertisement{
				adv("tor-a", "172.18.0.100/32", "eips", "default", "nat eip1", none),
				adv("tor-a", "172.18.0.101/32", "eips", "default", "nat eip3 (no namespace)", none),
				adv("tor-a", "172.19.0.100/32", "eips", "blue", "nat eip2", none),
				adv("tor-b", "172.18.0.100/32", "eips", "default", "nat eip1", none),
				adv("tor-b", "172.18.0.101/32", "eips", "default", "nat eip3 (no namespace)", none),
				adv("tor-b", "172.19.0.100/32", "eips", "blue", "nat eip2", none),
				adv("tor-b", "fc00::100/128", "eips", "default", "nat eip6", none),
			},
		},
		{
			name:  "egress IPs by network and namespace",
			rules: []config.AdvertiseRule{{Name: "prod", Kind: config.KindEgressIP, Networks: globs("default"), Namespaces: globs("prod-*"), Peers: []string{"tor-a"}}},
			want:  []model.Advertisement{adv("tor-a", "172.18.0.100/32", "prod", "default", "nat eip1", none)},
		},
		{
			name:  "VIPs: never a ClusterIP, a NodePort or a Service without endpoints; ECMP by default",
			rules: []config.AdvertiseRule{{Name: "vips", Kind: config.KindLoadBalancerIP, Peers: []string{"tor-a"}}},
			want: []model.Advertisement{
				adv("tor-a", "192.0.2.50/32", "vips", "default", "lb remote only", none),
				adv("tor-a", "192.0.2.51/32", "vips", "default", "lb local pod", none),
				adv("tor-a", "192.0.2.52/32", "vips", "default", "lb host-network here", none),
				adv("tor-a", "192.0.2.54/32", "vips", "default", "lb db", none),
				adv("tor-a", "192.0.2.60/32", "vips", "blue", "lb blue local", none),
				adv("tor-a", "192.0.2.70/32", "vips", "default", "lb shared a", none),
			},
		},
		{
			name:  "localEndpointsOnly: a local pod of the Service's network, or this node for a host-network endpoint",
			rules: []config.AdvertiseRule{{Name: "local", Kind: config.KindLoadBalancerIP, LocalEndpointsOnly: true}},
			want: []model.Advertisement{
				adv("tor-a", "192.0.2.51/32", "local", "default", "lb local pod", none),
				adv("tor-a", "192.0.2.52/32", "local", "default", "lb host-network here", none),
				adv("tor-a", "192.0.2.54/32", "local", "default", "lb db", none),
				adv("tor-a", "192.0.2.60/32", "local", "blue", "lb blue local", none),
				adv("tor-b", "192.0.2.51/32", "local", "default", "lb local pod", none),
				adv("tor-b", "192.0.2.52/32", "local", "default", "lb host-network here", none),
				adv("tor-b", "192.0.2.54/32", "local", "default", "lb db", none),
				adv("tor-b", "192.0.2.60/32", "local", "blue", "lb blue local", none),
				adv("tor-b", "2001:db8:50::1/128", "local", "default", "lb v6", none),
			},
		},
		{
			name: "services and namespaces; the first rule wins for a prefix and peer",
			rules: []config.AdvertiseRule{
				{Name: "front", Kind: config.KindLoadBalancerIP, Services: globs("web/front"), Peers: []string{"tor-a"}, MED: 5},
				{Name: "web", Kind: config.KindLoadBalancerIP, Namespaces: globs("web"), Networks: globs("default"), Peers: []string{"tor-a"}},
			},
			want: []model.Advertisement{
				adv("tor-a", "192.0.2.50/32", "front", "default", "lb remote only", model.PathAttrs{MED: 5}),
				adv("tor-a", "192.0.2.51/32", "front", "default", "lb local pod", model.PathAttrs{MED: 5}),
				adv("tor-a", "192.0.2.52/32", "web", "default", "lb host-network here", none),
				adv("tor-a", "192.0.2.70/32", "web", "default", "lb shared a", none),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{torA, torB}}, Advertise: tt.rules,
				Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16"), pfx("fd02::/112")}}}
			got := Advertisements(cfg, advSnapshot(), testNow)
			if d := cmp.Diff(tt.want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Advertisements() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// BenchmarkAdvertisementsAtScale: the plan side of issue 7's NB-at-scale
// goal (snapshot and plan rebuilt after one change in <= 50 ms): 10,000
// Service VIPs with 10 backends each and 1,000 egress IPs, selected by a
// loadBalancerIP rule with localEndpointsOnly and an egressIP rule, for
// two peers.
func BenchmarkAdvertisementsAtScale(b *testing.B) {
	snap := snapshot()
	snap.Routers = []model.GatewayRouter{{Network: "default", Name: "GR_node1", ExternalNetworks: []netip.Prefix{pfx("172.18.0.2/16")}}}
	for i := range 250 {
		snap.NodeAddresses = append(snap.NodeAddresses, netip.AddrFrom4([4]byte{172, 18, byte(i >> 8), byte(i)}))
	}
	for i := range 10000 {
		v := model.ServiceVIP{Service: fmt.Sprintf("ns%d/svc%d", i%100, i), Network: "default",
			VIP: netip.AddrFrom4([4]byte{192, 168, byte(i >> 8), byte(i)}), Source: "lb"}
		for j := range 10 {
			v.Backends = append(v.Backends, netip.AddrFrom4([4]byte{10, 128, byte(j), byte(i)}))
		}
		snap.ServiceVIPs = append(snap.ServiceVIPs, v)
	}
	for i := range 1000 {
		snap.EgressIPs = append(snap.EgressIPs, model.EgressIP{IP: netip.AddrFrom4([4]byte{172, 19, byte(i >> 8), byte(i)}),
			Network: "default", Namespaces: []string{fmt.Sprintf("ns%d", i%100)}, Source: "nat"})
	}
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1"), peer("tor-b", "192.0.2.3")}},
		Advertise: []config.AdvertiseRule{
			{Name: "vips", Kind: config.KindLoadBalancerIP, Namespaces: globs("ns*"), LocalEndpointsOnly: true},
			{Name: "eips", Kind: config.KindEgressIP},
		},
		Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}}}
	var n int
	for b.Loop() {
		n = len(Advertisements(cfg, snap, testNow))
	}
	b.ReportMetric(float64(n), "advertisements")
}

// TestAdvertiseAggregates: with aggregateLength (IPv4) and
// aggregateLengthV6 (IPv6) a rule sends the covering prefix, with the
// addresses behind it as its members, while one is selected; a members-only
// change is a Change of what the prefix stands for, not of its attributes.
func TestAdvertiseAggregates(t *testing.T) {
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-b", "192.0.2.3", config.IPv4, config.IPv6)}},
		Advertise: []config.AdvertiseRule{
			{Name: "eips", Kind: config.KindEgressIP, Networks: globs("default"), AggregateLength: 26},
			{Name: "vips", Kind: config.KindLoadBalancerIP, LocalEndpointsOnly: true, AggregateLength: 24, AggregateLengthV6: 120},
		},
		Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}}}
	snap := advSnapshot()
	got := Advertisements(cfg, snap, testNow)
	m := func(ps ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			out = append(out, pfx(p))
		}
		return out
	}
	want := []model.Advertisement{
		{Peer: "tor-b", Prefix: pfx("172.18.0.64/26"), Rule: "eips", Network: "default",
			Source: "aggregate of 2 selected by rule eips: 172.18.0.100/32, 172.18.0.101/32", Members: m("172.18.0.100/32", "172.18.0.101/32")},
		{Peer: "tor-b", Prefix: pfx("192.0.2.0/24"), Rule: "vips", Network: "default and other networks",
			Source: "aggregate of 4 selected by rule vips: 192.0.2.51/32, 192.0.2.52/32, 192.0.2.54/32, 192.0.2.60/32", Members: m("192.0.2.51/32", "192.0.2.52/32", "192.0.2.54/32", "192.0.2.60/32")},
		{Peer: "tor-b", Prefix: pfx("2001:db8:50::/120"), Rule: "vips", Network: "default",
			Source: "aggregate of 1 selected by rule vips: 2001:db8:50::1/128", Members: m("2001:db8:50::1/128")},
		{Peer: "tor-b", Prefix: pfx("fc00::100/128"), Rule: "eips", Network: "default", Source: "nat eip6"},
	}
	if d := cmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("Advertisements() mismatch (-want +got):\n%s", d)
	}

	// The last local endpoint of 192.0.2.51 goes: still three members.
	snap.ServiceVIPs[2].Backends = []netip.Addr{netip.MustParseAddr("10.128.2.5")}
	next := Advertisements(cfg, snap, testNow)
	d := DiffAdvertisements(next, got)
	if len(d.Announce)+len(d.Withdraw) != 0 || len(d.Change) != 1 || d.Change[0].Prefix != pfx("192.0.2.0/24") || len(d.Change[0].Members) != 3 {
		t.Errorf("one member gone: %+v, want only a change of 192.0.2.0/24 to three members", d)
	}
	// Every member gone: the aggregate is withdrawn.
	for i := range snap.ServiceVIPs {
		snap.ServiceVIPs[i].Backends = nil
	}
	d = DiffAdvertisements(Advertisements(cfg, snap, testNow), next)
	var withdrawn []string
	for _, a := range d.Withdraw {
		withdrawn = append(withdrawn, a.Prefix.String())
	}
	if !slices.Equal(withdrawn, []string{"192.0.2.0/24", "2001:db8:50::/120"}) || len(d.Announce)+len(d.Change) != 0 {
		t.Errorf("no endpoint left: %+v, want 192.0.2.0/24 and 2001:db8:50::/120 withdrawn", d)
	}

	// explain: the aggregate is selected, a member is sent inside it.
	e := Explain(cfg, pfx("192.0.2.0/24"), ImportResult{}, got, Plan{}, advSnapshot(), model.Host{}, testNow)
	if v := e.AdvertiseRules[1]; !v.Selects || !strings.Contains(v.Why, "aggregate of 4") {
		t.Errorf("explain 192.0.2.0/24, rule vips: %+v", v)
	}
	e = Explain(cfg, pfx("192.0.2.54/32"), ImportResult{}, got, Plan{}, advSnapshot(), model.Host{}, testNow)
	if v := e.AdvertiseRules[1]; v.Selects || v.Why != "selected, as a member of the aggregate 192.0.2.0/24 (aggregateLength); the aggregate is sent to tor-b" {
		t.Errorf("explain 192.0.2.54/32, rule vips: %+v", v)
	}
	// The export cap holds the aggregate back: explain says so, not "sent".
	held := slices.Clone(got)
	for i := range held {
		if held[i].Prefix == pfx("192.0.2.0/24") {
			held[i].State, held[i].Reason = model.AdvHeldBack, "held back: export cap"
		}
	}
	e = Explain(cfg, pfx("192.0.2.54/32"), ImportResult{}, held, Plan{}, advSnapshot(), model.Host{}, testNow)
	if v := e.AdvertiseRules[1]; v.Why != "selected, as a member of the aggregate 192.0.2.0/24 (aggregateLength); the aggregate is held back from tor-b by the export cap (maxAdvertised)" {
		t.Errorf("explain 192.0.2.54/32 with the aggregate held back, rule vips: %+v", v)
	}
}

// TestAggregateNeverCoversForeign: an aggregate that would cover what is
// not this node's to draw traffic for (a node address, cluster.serviceCIDRs,
// another node's pod subnet, a join subnet, protectedPrefixes) is not sent:
// its members go as themselves, each saying why; its own pod subnets, the
// egress IPs it holds, Service VIPs and peer addresses do not count.
func TestAggregateNeverCoversForeign(t *testing.T) {
	snap := advSnapshot()
	snap.Protected = append(snap.Protected,
		model.ProtectedPrefix{Prefix: pfx("10.128.2.0/23"), Why: "pod subnet (Logical_Switch node2)"},
		model.ProtectedPrefix{Prefix: pfx("100.64.0.0/16"), Why: "join subnet (Logical_Router_Port rtoj-GR_node1 networks)"})
	snap.ServiceVIPs = append(snap.ServiceVIPs,
		model.ServiceVIP{Service: "web/a", Network: "default", VIP: netip.MustParseAddr("10.129.0.10"), Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}, Source: "lb a"},
		model.ServiceVIP{Service: "web/b", Network: "default", VIP: netip.MustParseAddr("100.65.0.10"), Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}, Source: "lb b"},
		model.ServiceVIP{Service: "web/c", Network: "default", VIP: netip.MustParseAddr("198.51.100.10"), Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}, Source: "lb c"},
		model.ServiceVIP{Service: "web/d", Network: "default", VIP: netip.MustParseAddr("172.31.0.10"), Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}, Source: "lb d"},
		model.ServiceVIP{Service: "web/e", Network: "default", VIP: netip.MustParseAddr("fe00::10"), Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}, Source: "lb e"})
	tests := []struct {
		name   string
		rule   config.AdvertiseRule
		prot   []netip.Prefix
		prefix string // what is sent for the address
		why    string // in its source, "" = aggregated
	}{
		{"egress IPs /16: node addresses inside", config.AdvertiseRule{Name: "r", Kind: config.KindEgressIP, Networks: globs("default"), AggregateLength: 16},
			nil, "172.18.0.100/32", "not aggregated: 172.18.0.0/16 would cover 172.18.0.2/32 (a node address): choose a longer aggregateLength"},
		{"egress IPs /26: clear", config.AdvertiseRule{Name: "r", Kind: config.KindEgressIP, Networks: globs("default"), AggregateLength: 26},
			nil, "172.18.0.64/26", ""},
		{"VIP /15: cluster.serviceCIDRs inside", config.AdvertiseRule{Name: "r", Kind: config.KindLoadBalancerIP, Services: globs("web/d"), AggregateLength: 15},
			nil, "172.31.0.10/32", "would cover 172.30.0.0/16 (cluster.serviceCIDRs)"},
		{"VIP /14: another node's pod subnet inside, not only its own", config.AdvertiseRule{Name: "r", Kind: config.KindLoadBalancerIP, Services: globs("web/a"), AggregateLength: 14},
			nil, "10.129.0.10/32", "would cover 10.128.2.0/23 (pod subnet (Logical_Switch node2))"},
		{"VIP /15: a join subnet inside", config.AdvertiseRule{Name: "r", Kind: config.KindLoadBalancerIP, Services: globs("web/b"), AggregateLength: 15},
			nil, "100.65.0.10/32", "would cover 100.64.0.0/16 (join subnet"},
		{"VIP /24: protectedPrefixes inside", config.AdvertiseRule{Name: "r", Kind: config.KindLoadBalancerIP, Services: globs("web/c"), AggregateLength: 24},
			[]netip.Prefix{pfx("198.51.100.128/25")}, "198.51.100.10/32", "would cover 198.51.100.128/25 (protectedPrefixes)"},
		{"VIP /7: special-purpose address space inside (RFC 6890)", config.AdvertiseRule{Name: "r", Kind: config.KindLoadBalancerIP, Services: globs("web/e"), AggregateLengthV6: 7},
			nil, "fe00::10/128", "not aggregated: fe00::/7 would cover fe80::/10 (special-purpose address space (RFC 6890: link-local)): choose a longer aggregateLength"},
		{"VIP /24 with other VIPs and peers inside: clear", config.AdvertiseRule{Name: "r", Kind: config.KindLoadBalancerIP, Services: globs("web/*"), AggregateLength: 24},
			nil, "192.0.2.0/24", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-b", "192.0.2.3", config.IPv4, config.IPv6)}},
				Advertise: []config.AdvertiseRule{tt.rule}, ProtectedPrefixes: tt.prot,
				Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}}}
			var got *model.Advertisement
			advs := Advertisements(cfg, snap, testNow)
			for i := range advs {
				if advs[i].Prefix == pfx(tt.prefix) {
					got = &advs[i]
				}
			}
			switch {
			case got == nil:
				t.Fatalf("%s not sent: %+v", tt.prefix, advs)
			case tt.why == "" && len(got.Members) == 0:
				t.Errorf("%s sent without members: %+v", tt.prefix, got)
			case tt.why != "" && !strings.Contains(got.Source, tt.why):
				t.Errorf("%s: source %q, want it to say %q", tt.prefix, got.Source, tt.why)
			}
			for _, a := range advs {
				if a.Prefix.Bits() < 32 && tt.why != "" && a.Prefix.Addr().Is4() {
					t.Errorf("an aggregate is sent: %+v", a)
				}
			}
		})
	}
}

// TestExportCap: a peer's maxAdvertised keeps it from being sent more
// prefixes: subnets and aggregates first, then single addresses, each in
// prefix order; the rest is held back with why; other peers are not
// affected; under the cap nothing is held.
func TestExportCap(t *testing.T) {
	torA := peer("tor-a", "192.0.2.1")
	torA.MaxAdvertised = 3
	torB := peer("tor-b", "192.0.2.3")
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{torA, torB}},
		Advertise: []config.AdvertiseRule{
			{Name: "vips", Kind: config.KindLoadBalancerIP},
			{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("*")},
		},
		Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}}}
	snap := advSnapshot()
	// A /32 that comes first in prefix order still waits for the subnets.
	snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: "web/early", Network: "default",
		VIP: netip.MustParseAddr("10.1.0.1"), Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}, Source: "lb early"})
	sent, held := CappedAdvertisements(cfg, snap, testNow)
	var gotA, gotB, gotHeld []string
	for _, a := range sent {
		if a.Peer == "tor-a" {
			gotA = append(gotA, a.Prefix.String())
		} else {
			gotB = append(gotB, a.Prefix.String())
		}
	}
	for _, a := range held {
		gotHeld = append(gotHeld, a.Peer+" "+a.Prefix.String())
		if a.State != model.AdvHeldBack || a.Reason != "held back: export cap: peer tor-a takes at most 3 prefixes (maxAdvertised)" {
			t.Errorf("held %s: state %q, reason %q", a.Prefix, a.State, a.Reason)
		}
	}
	if want := []string{"10.128.0.0/23", "10.200.0.0/24", "10.250.0.0/16"}; !slices.Equal(gotA, want) {
		t.Errorf("tor-a is sent %v, want the three subnets before any /32: %v", gotA, want)
	}
	if want := []string{"tor-a 10.1.0.1/32", "tor-a 192.0.2.50/32", "tor-a 192.0.2.51/32", "tor-a 192.0.2.52/32", "tor-a 192.0.2.54/32", "tor-a 192.0.2.60/32", "tor-a 192.0.2.70/32"}; !slices.Equal(gotHeld, want) {
		t.Errorf("held back %v, want %v", gotHeld, want)
	}
	if len(gotB) != 10 {
		t.Errorf("tor-b (no cap) is sent %d prefixes, want all 10: %v", len(gotB), gotB)
	}
	if d := cmp.Diff(sent, Advertisements(cfg, snap, testNow), cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("Advertisements differs from CappedAdvertisements' sent (-capped +plain):\n%s", d)
	}

	// explain says so.
	e := Explain(cfg, pfx("192.0.2.50/32"), ImportResult{}, slices.Concat(sent, held), Plan{}, snap, model.Host{}, testNow)
	if v := e.AdvertiseRules[0]; !v.Selects || !strings.Contains(v.Why, "sent to tor-b; held back from tor-a by the export cap") {
		t.Errorf("explain 192.0.2.50/32: %+v", v)
	}
	// Its text names how many tor-a selected, counted when it is shown
	// (the Reason of each one held does not carry it).
	if !slices.Contains(e.Summary, "advertise: 192.0.2.50/32 not to peer tor-a, rule vips: held back: export cap: peer tor-a takes at most 3 prefixes (maxAdvertised), 10 selected") {
		t.Errorf("explain 192.0.2.50/32 says\n%s", strings.Join(e.Summary, "\n"))
	}

	// The cap at 7: the three subnets and the first four /32s.
	cfg.BGP.Peers[0].MaxAdvertised = 7
	_, held = CappedAdvertisements(cfg, advSnapshot(), testNow)
	if len(held) != 2 || held[0].Prefix != pfx("192.0.2.60/32") || held[1].Prefix != pfx("192.0.2.70/32") {
		t.Errorf("cap 7: held %v, want 192.0.2.60/32 and 192.0.2.70/32", held)
	}
	// At or under the cap nothing is held.
	cfg.BGP.Peers[0].MaxAdvertised = 9
	if _, held = CappedAdvertisements(cfg, advSnapshot(), testNow); len(held) != 0 {
		t.Errorf("cap 9 with 9 selected: held %v", held)
	}
}

// TestWeightByEndpoints (issue 21): a weightByEndpoints rule sends each VIP
// with the link-bandwidth community of its endpoints on this node (pods in
// this node's subnet of the Service's network, or a node address), N ×
// 125000 bytes/s, the ASN AS_TRANS above 65535; a VIP with none here is
// sent without it, or not at all with localEndpointsOnly; a rule without
// the key sends none.
func TestWeightByEndpoints(t *testing.T) {
	torA := peer("tor-a", "192.0.2.1")
	snap := advSnapshot()
	for i := range snap.ServiceVIPs {
		if v := &snap.ServiceVIPs[i]; v.Source == "lb local pod" {
			// three of this node's pods and one elsewhere
			v.Backends = addrs("10.128.0.5", "10.128.0.6", "10.128.0.7", "10.128.2.5")
		}
	}
	lb := func(asn uint16, n int) model.PathAttrs {
		return model.PathAttrs{LinkBandwidth: &model.LinkBandwidth{ASN: asn, BytesPerSecond: float32(n) * 125000}}
	}
	for _, tc := range []struct {
		name string
		asn  uint32
		rule config.AdvertiseRule
		want []model.Advertisement
	}{
		{"weights, remote-only VIPs without", 65010,
			config.AdvertiseRule{Name: "w", Kind: config.KindLoadBalancerIP, Networks: globs("default"), WeightByEndpoints: true},
			[]model.Advertisement{
				adv("tor-a", "192.0.2.50/32", "w", "default", "lb remote only", model.PathAttrs{}),
				adv("tor-a", "192.0.2.51/32", "w", "default", "lb local pod", lb(65010, 3)),
				adv("tor-a", "192.0.2.52/32", "w", "default", "lb host-network here", lb(65010, 1)),
				adv("tor-a", "192.0.2.54/32", "w", "default", "lb db", lb(65010, 1)),
				adv("tor-a", "192.0.2.70/32", "w", "default", "lb shared a", model.PathAttrs{}),
			}},
		{"with localEndpointsOnly and the rule's attributes, a 4-byte ASN", 4200000000,
			config.AdvertiseRule{Name: "w", Kind: config.KindLoadBalancerIP, Networks: globs("default"), Services: globs("web/front"),
				WeightByEndpoints: true, LocalEndpointsOnly: true, MED: 7},
			[]model.Advertisement{adv("tor-a", "192.0.2.51/32", "w", "default", "lb local pod", func() model.PathAttrs {
				a := lb(model.ASTrans, 3)
				a.MED = 7
				return a
			}())}},
		{"without the key", 65010,
			config.AdvertiseRule{Name: "w", Kind: config.KindLoadBalancerIP, Services: globs("web/front"), LocalEndpointsOnly: true, MED: 7},
			[]model.Advertisement{adv("tor-a", "192.0.2.51/32", "w", "default", "lb local pod", model.PathAttrs{MED: 7})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{BGP: config.BGP{ASN: tc.asn, Peers: []config.Peer{torA}}, Advertise: []config.AdvertiseRule{tc.rule},
				Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16"), pfx("fd02::/112")}}}
			got := Advertisements(cfg, snap, testNow)
			if d := cmp.Diff(tc.want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Advertisements() mismatch (-want +got):\n%s", d)
			}
			st := NewAdvertState(cfg, snap, testNow)
			if sent := st.Sent(); !slices.EqualFunc(got, sent, sameAdv) {
				t.Errorf("AdvertState differs (-full +state):\n%s", cmp.Diff(got, sent, cmpAddrs, cmpopts.EquateEmpty()))
			}
		})
	}
}

// TestWeightChangeIsAChange (issue 21): a new count of local endpoints is a
// change of the advertisement's attributes, never a withdrawal and a new
// announcement.
func TestWeightChangeIsAChange(t *testing.T) {
	one := model.PathAttrs{LinkBandwidth: &model.LinkBandwidth{ASN: 65010, BytesPerSecond: 125000}}
	three := model.PathAttrs{LinkBandwidth: &model.LinkBandwidth{ASN: 65010, BytesPerSecond: 375000}}
	cur := []model.Advertisement{adv("tor-a", "192.0.2.51/32", "w", "default", "lb", one)}
	want := []model.Advertisement{adv("tor-a", "192.0.2.51/32", "w", "default", "lb", three)}
	d := DiffAdvertisements(want, cur)
	if len(d.Change) != 1 || len(d.Announce) != 0 || len(d.Withdraw) != 0 {
		t.Errorf("1 -> 3 endpoints: %+v, want one change", d)
	}
	if d := DiffAdvertisements([]model.Advertisement{adv("tor-a", "192.0.2.51/32", "w", "default", "lb", model.PathAttrs{})}, cur); len(d.Change) != 1 {
		t.Errorf("1 -> none: %+v, want one change", d)
	}
	if d := DiffAdvertisements([]model.Advertisement{adv("tor-a", "192.0.2.51/32", "w", "default", "lb", one)}, cur); len(d.Change) != 0 {
		t.Errorf("same weight: %+v, want no change", d)
	}
}

// TestBulkDiffCopies (issue 18, the bulk of 10,000 VIPs): a bulk's diff
// makes each list once at its size, and sorting a list already in key
// order (a pass's changes are taken in that order) copies nothing. Before,
// the announcements grew by doubling (each advertisement copied about
// twice more) and the sort copied the whole list twice over.
func TestBulkDiffCopies(t *testing.T) {
	const n = 3000
	desired := make([]model.Advertisement, n)
	for i := range desired {
		desired[i] = model.Advertisement{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)}
	}
	d := DiffAdvertisements(desired, nil)
	if len(d.Announce) != n || cap(d.Announce) != n {
		t.Errorf("the diff announces %d in a list of room %d, want %d in %d", len(d.Announce), cap(d.Announce), n, n)
	}
	if !cmp.Equal(d.Announce, desired, cmpopts.EquateComparable(netip.Prefix{})) {
		t.Error("the diff announces other advertisements than desired, or in another order")
	}
	if allocs := testing.AllocsPerRun(5, func() { SortAdvertisements(desired) }); allocs != 0 {
		t.Errorf("sorting %d advertisements in key order allocates %.0f times, want none", n, allocs)
	}
	shuffled := slices.Clone(desired)
	shuffled[0], shuffled[n-1] = shuffled[n-1], shuffled[0]
	SortAdvertisements(shuffled)
	if !cmp.Equal(shuffled, desired, cmpopts.EquateComparable(netip.Prefix{})) {
		t.Error("a list out of order is not sorted")
	}
}
