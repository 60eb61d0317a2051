package plan

import (
	"net/netip"
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
			got := Advertisements(cfg, tt.snap)
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
	if got := Advertisements(cfg, snap); len(got) != 1 || got[0].Network != "ns/name" {
		t.Errorf(`networks: ["*"] with a network "ns/name": %+v, want it advertised`, got)
	}
}
