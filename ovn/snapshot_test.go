package ovn

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
)

// diff is cmp.Diff that compares netip values by ==.
func diff(want, got any) string {
	return cmp.Diff(want, got,
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
}

func sub(prefix, source string) model.Subnet {
	return model.Subnet{Prefix: netip.MustParsePrefix(prefix), Source: source}
}

// udn returns a row of a user-defined network.
func udn(name, network, topology, role, subnet, v6 string) switchRow {
	return switchRow{UUID: "u-" + name, Name: name, Network: network, Topology: topology, Role: role, Subnet: subnet, IPv6Prefix: v6}
}

// def returns a row of the default network.
func def(name, subnet, v6 string) switchRow {
	return switchRow{UUID: "u-" + name, Name: name, Subnet: subnet, IPv6Prefix: v6}
}

func TestNetworkPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"default":              "",
		"blue":                 "blue_",
		"ns1_blue":             "ns1_blue_",
		"cluster_udn_prod-net": "cluster_udn_prod.net_",
		"ns/nad-a":             "ns.nad.a_",
	} {
		if got := networkPrefix(in); got != want {
			t.Errorf("networkPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBuild(t *testing.T) {
	const node = "node1"
	tests := []struct {
		name     string
		rows     []switchRow
		want     []model.Network
		problems []string // substrings, one per expected problem, in order
	}{
		{
			name: "default network, dual stack; other nodes and other switches ignored",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", "fd00:10:128:1::"),
				def("node2", "10.128.2.0/23", "fd00:10:128:2::"),
				def("join", "", ""),
				def("ext_node1", "", ""),
			},
			want: []model.Network{{
				Name: "default", Topology: "layer3", Subnets: []model.Subnet{
					sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet"),
					sub("fd00:10:128:1::/64", "Logical_Switch node1 other_config:ipv6_prefix"),
				},
			}},
		},
		{
			name: "layer3 UDN beside the default network, sorted default first",
			rows: []switchRow{
				udn("blue_node1", "blue", "layer3", "primary", "10.200.0.0/24", ""),
				udn("blue_node2", "blue", "layer3", "primary", "10.200.1.0/24", ""),
				udn("blue_join", "blue", "layer3", "primary", "", ""),
				udn("aaa_node1", "aaa", "layer3", "secondary", "10.201.0.0/24", ""),
				def("node1", "10.128.0.0/23", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "aaa", Topology: "layer3", Role: "secondary", Subnets: []model.Subnet{sub("10.201.0.0/24", "Logical_Switch aaa_node1 other_config:subnet")}},
				{Name: "blue", Topology: "layer3", Role: "primary", Subnets: []model.Subnet{sub("10.200.0.0/24", "Logical_Switch blue_node1 other_config:subnet")}},
			},
		},
		{
			name: "CUDN with '-' in its name: prefix cluster_udn_prod.net_",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("cluster_udn_prod.net_node1", "cluster_udn_prod-net", "layer3", "primary", "10.50.0.0/24", "fd50:0:0:1::"),
				udn("cluster_udn_prod-net_node1", "cluster_udn_prod-net", "layer3", "primary", "10.66.0.0/24", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "cluster_udn_prod-net", Topology: "layer3", Role: "primary", Subnets: []model.Subnet{
					sub("10.50.0.0/24", "Logical_Switch cluster_udn_prod.net_node1 other_config:subnet"),
					sub("fd50:0:0:1::/64", "Logical_Switch cluster_udn_prod.net_node1 other_config:ipv6_prefix"),
				}},
			},
		},
		{
			name: "layer2 UDN: whole network subnets, space and comma separated",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("ns1_green_ovn_layer2_switch", "ns1_green", "layer2", "primary", "10.10.0.0/16, 10.11.0.0/16", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "ns1_green", Topology: "layer2", Role: "primary", Subnets: []model.Subnet{
					sub("10.10.0.0/16", "Logical_Switch ns1_green_ovn_layer2_switch other_config:subnet"),
					sub("10.11.0.0/16", "Logical_Switch ns1_green_ovn_layer2_switch other_config:subnet"),
				}},
			},
		},
		{
			name: "layer2 without topology key: inferred from the switch name",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("l2_ovn_layer2_switch", "l2", "", "", "10.12.0.0/16", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "l2", Topology: "layer2", Subnets: []model.Subnet{sub("10.12.0.0/16", "Logical_Switch l2_ovn_layer2_switch other_config:subnet")}},
			},
		},
		{
			name: "localnet: listed without subnets",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("phys_ovn_localnet_switch", "phys", "localnet", "secondary", "192.168.50.0/24", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "phys", Topology: "localnet", Role: "secondary", Subnets: []model.Subnet{}},
			},
		},
		{
			name: "several IPv4 prefixes in subnet, duplicates dropped",
			rows: []switchRow{def("node1", "10.128.0.0/23 10.130.0.0/23 10.128.0.0/23", "fd00::/64")},
			want: []model.Network{{Name: "default", Topology: "layer3", Subnets: []model.Subnet{
				sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet"),
				sub("10.130.0.0/23", "Logical_Switch node1 other_config:subnet"),
				sub("fd00::/64", "Logical_Switch node1 other_config:ipv6_prefix"),
			}}},
		},
		{
			name: "malformed rows are skipped, the rest survives",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("bad_node1", "bad", "layer3", "", "10.1.0.0/33", ""),
				udn("host_node1", "host", "layer3", "", "10.2.0.1/24", ""),
				udn("v6host_node1", "v6host", "layer3", "", "", "fd00::1"),
				udn("v6v4_node1", "v6v4", "layer3", "", "", "10.0.0.0"),
				udn("empty_node1", "empty", "layer3", "", "", ""),
				udn("weird_node1", "weird", "layer7", "", "10.3.0.0/24", ""),
				udn("good_node1", "good", "layer3", "", "10.4.0.0/24", ""),
				udn("bad_node2", "bad", "layer3", "", "nonsense", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "good", Topology: "layer3", Subnets: []model.Subnet{sub("10.4.0.0/24", "Logical_Switch good_node1 other_config:subnet")}},
			},
			problems: []string{
				`Logical_Switch bad_node1: other_config:subnet "10.1.0.0/33": not a CIDR; row skipped`,
				`Logical_Switch bad_node2: other_config:subnet "nonsense": not a CIDR`,
				`Logical_Switch empty_node1: no other_config:subnet or other_config:ipv6_prefix; skipped`,
				`Logical_Switch host_node1: other_config:subnet "10.2.0.1/24": host bits set (network is 10.2.0.0/24); row skipped`,
				`Logical_Switch v6host_node1: other_config:ipv6_prefix "fd00::1": host bits set beyond /64`,
				`Logical_Switch v6v4_node1: other_config:ipv6_prefix "10.0.0.0": not a plain IPv6 address`,
				`Logical_Switch weird_node1: unknown topology "layer7"`,
			},
		},
		{
			// Issue 5 item 9: a /0 was advertised as a default route and an
			// IPv6 prefix in the IPv4 column was accepted.
			name: "default routes and prefixes of the wrong family are refused",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("any4_node1", "any4", "layer3", "", "0.0.0.0/0", ""),
				udn("any6_node1", "any6", "layer3", "", "", "::/0"),
				udn("any6addr_node1", "any6addr", "layer3", "", "", "::"),
				udn("v6in4_node1", "v6in4", "layer3", "", "fd00:1::/64", ""),
				udn("v4in6_node1", "v4in6", "layer3", "", "", "10.9.0.0/24"),
				udn("mixed_ovn_layer2_switch", "mixed", "layer2", "", "10.30.0.0/16 fd30::/60", ""),
				udn("l2any_ovn_layer2_switch", "l2any", "layer2", "", "0.0.0.0/0", ""),
				udn("ok_node1", "ok", "layer3", "", "10.4.0.0/24", "fd04:0:0:1::"),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
				{Name: "ok", Topology: "layer3", Subnets: []model.Subnet{
					sub("10.4.0.0/24", "Logical_Switch ok_node1 other_config:subnet"),
					sub("fd04:0:0:1::/64", "Logical_Switch ok_node1 other_config:ipv6_prefix"),
				}},
			},
			problems: []string{
				`Logical_Switch any4_node1: other_config:subnet "0.0.0.0/0": a default route, not a pod subnet; row skipped`,
				`Logical_Switch any6_node1: other_config:ipv6_prefix "::/0": a default route, not a pod subnet; row skipped`,
				`Logical_Switch any6addr_node1: other_config:ipv6_prefix "::": the unspecified address, not a pod subnet; row skipped`,
				`Logical_Switch l2any_ovn_layer2_switch: other_config:subnet "0.0.0.0/0": a default route, not a pod subnet; row skipped`,
				`Logical_Switch mixed_ovn_layer2_switch: other_config:subnet "fd30::/60": an IPv6 prefix in the IPv4 column (OVN-Kubernetes writes IPv6 to other_config:ipv6_prefix); row skipped`,
				`Logical_Switch v4in6_node1: other_config:ipv6_prefix "10.9.0.0/24": not an IPv6 prefix; row skipped`,
				`Logical_Switch v6in4_node1: other_config:subnet "fd00:1::/64": an IPv6 prefix in the IPv4 column (OVN-Kubernetes writes IPv6 to other_config:ipv6_prefix); row skipped`,
			},
		},
		{
			// Decision (docs/ovn-nb.md): spelling is not refused; the
			// canonical form is used and shown.
			name: "non-canonical spellings are accepted in canonical form",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", "FD00:0:0:1:0::"),
				udn("ns_node1", "ns", "layer3", "", "", "fd00:0:0:2::/64"),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{
					sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet"),
					sub("fd00:0:0:1::/64", "Logical_Switch node1 other_config:ipv6_prefix"),
				}},
				{Name: "ns", Topology: "layer3", Subnets: []model.Subnet{sub("fd00:0:0:2::/64", "Logical_Switch ns_node1 other_config:ipv6_prefix")}},
			},
		},
		{
			name: "two rows with one name: both skipped, one problem",
			rows: []switchRow{
				{UUID: "a", Name: "node1", Subnet: "10.128.0.0/23"},
				{UUID: "b", Name: "node1", Subnet: "10.99.0.0/23"},
				udn("blue_node1", "blue", "layer3", "primary", "10.200.0.0/24", ""),
			},
			want: []model.Network{
				{Name: "blue", Topology: "layer3", Role: "primary", Subnets: []model.Subnet{sub("10.200.0.0/24", "Logical_Switch blue_node1 other_config:subnet")}},
			},
			problems: []string{`Logical_Switch node1: 2 rows have this name; all skipped`},
		},
		{
			name:     "no switch for this node: empty snapshot and a hint",
			rows:     []switchRow{def("node2", "10.128.2.0/23", "")},
			want:     []model.Network{},
			problems: []string{`Logical_Switch node1: no such row: the default network has no switch for node "node1" (is node.name right?)`},
		},
		{
			name: "a network with two switches for this node is ambiguous",
			rows: []switchRow{
				def("node1", "10.128.0.0/23", ""),
				udn("mix_node1", "mix", "layer3", "", "10.5.0.0/24", ""),
				udn("mix_ovn_layer2_switch", "mix", "layer2", "", "10.6.0.0/16", ""),
			},
			want: []model.Network{
				{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
			},
			problems: []string{`network mix: several switches for this node (mix_node1, mix_ovn_layer2_switch); all skipped`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := build(tt.rows, node)
			want := model.Snapshot{Node: node, Networks: tt.want}
			if d := diff(want, model.Snapshot{Node: got.Snapshot.Node, Networks: got.Snapshot.Networks}); d != "" {
				t.Errorf("snapshot (-want +got):\n%s", d)
			}
			if len(got.Problems) != len(tt.problems) {
				t.Fatalf("problems = %q, want %d like %q", got.Problems, len(tt.problems), tt.problems)
			}
			for i, p := range tt.problems {
				if !strings.Contains(got.Problems[i], p) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got.Problems[i], p)
				}
			}
			// Deterministic: the same rows in reverse order give the same result.
			rev := make([]switchRow, len(tt.rows))
			for i, r := range tt.rows {
				rev[len(rev)-1-i] = r
			}
			if d := diff(got, build(rev, node)); d != "" {
				t.Errorf("row order changes the result (-first +reversed):\n%s", d)
			}
		})
	}
}

func TestBuildCluster(t *testing.T) {
	rows := []switchRow{
		def("node1", "10.128.0.0/23", "fd00:10:128:1::"),
		def("node2", "10.128.2.0/23", "bogus"),
		udn("blue_node2", "blue", "layer3", "primary", "10.200.1.0/24", ""),
		udn("blue_node1", "blue", "layer3", "primary", "10.200.0.0/24", ""),
		def("join", "", ""),
		udn("any_node2", "any", "layer3", "", "0.0.0.0/0", "::/0"),
		{UUID: "x", Name: "node3", Subnet: "10.128.4.0/23"},
		{UUID: "y", Name: "node3", Subnet: "10.128.4.0/23"},
	}
	got := build(rows, "").Cluster
	want := []model.Subnet{
		sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet"),
		sub("10.128.2.0/23", "Logical_Switch node2 other_config:subnet"),
		sub("10.128.4.0/23", "Logical_Switch node3 other_config:subnet"),
		sub("10.200.0.0/24", "Logical_Switch blue_node1 other_config:subnet"),
		sub("10.200.1.0/24", "Logical_Switch blue_node2 other_config:subnet"),
		sub("fd00:10:128:1::/64", "Logical_Switch node1 other_config:ipv6_prefix"),
	}
	if d := diff(want, got); d != "" {
		t.Errorf("cluster subnets (-want +got):\n%s", d)
	}
}

// TestBuildRouterPorts: the lengths and lost families a layer2 switch's
// router port supplies, and the interconnect routes (issue 5 item 11).
func TestBuildRouterPorts(t *testing.T) {
	in := nbRows{
		Switches: []switchRow{
			def("node1", "10.128.0.0/23", "fd00:10:128:1::"),
			// <= 1.2 dual stack: only ipv6_prefix survived.
			udn("a_ovn_layer2_switch", "a", "layer2", "primary", "", "fd10:a::"),
			// a secondary network: no router port at all.
			udn("b_ovn_layer2_switch", "b", "layer2", "secondary", "10.11.0.0/16", "fd10:b::"),
			// a port network that does not parse is said, the rest used.
			udn("c_ovn_layer2_switch", "c", "layer2", "primary", "10.12.0.0/16", "fd10:c::"),
		},
		Ports: []routerPortRow{
			// The gateway router's port: join addresses are not subnets.
			{UUID: "p1", Name: "rtos-a_ovn_layer2_switch", Networks: []string{"100.65.0.2/16", "10.10.0.1/16", "fd10:a::1/60", "fd99::2/64"}},
			{UUID: "p2", Name: "trtos-c_ovn_layer2_switch", Networks: []string{"nonsense", "fd10:c::1/56"}},
			// Another node's layer3 port: its length is used for Cluster.
			{UUID: "p3", Name: "rtos-node2", Networks: []string{"fd00:10:128:2::1/64"}},
		},
		Routes: []routeRow{
			{UUID: "r1", Router: "ovn_cluster_router", IPPrefix: "10.128.2.0/23", Nexthop: "100.88.0.3", ICNode: "node2"},
			{UUID: "r2", Router: "ovn_cluster_router", IPPrefix: "0.0.0.0/0", Nexthop: "100.88.0.3", ICNode: "node2"},
			{UUID: "r3", Router: "ovn_cluster_router", IPPrefix: "10.99.0.0/16", Nexthop: "100.88.0.3"},
		},
	}
	got := buildNB(in, "node1")
	want := []model.Network{
		{Name: "default", Topology: "layer3", Subnets: []model.Subnet{
			sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet"),
			sub("fd00:10:128:1::/64", "Logical_Switch node1 other_config:ipv6_prefix"),
		}},
		{Name: "a", Topology: "layer2", Role: "primary", Subnets: []model.Subnet{
			sub("10.10.0.0/16", "Logical_Router_Port rtos-a_ovn_layer2_switch networks"),
			sub("fd10:a::/60", "Logical_Switch a_ovn_layer2_switch other_config:ipv6_prefix, length from Logical_Router_Port rtos-a_ovn_layer2_switch networks"),
		}},
		{Name: "b", Topology: "layer2", Role: "secondary", Subnets: []model.Subnet{
			sub("10.11.0.0/16", "Logical_Switch b_ovn_layer2_switch other_config:subnet"),
		}},
		{Name: "c", Topology: "layer2", Role: "primary", Subnets: []model.Subnet{
			sub("10.12.0.0/16", "Logical_Switch c_ovn_layer2_switch other_config:subnet"),
			sub("fd10:c::/56", "Logical_Switch c_ovn_layer2_switch other_config:ipv6_prefix, length from Logical_Router_Port trtos-c_ovn_layer2_switch networks"),
		}},
	}
	if d := diff(model.Snapshot{Node: "node1", Networks: want}, model.Snapshot{Node: got.Snapshot.Node, Networks: got.Snapshot.Networks}); d != "" {
		t.Errorf("snapshot (-want +got):\n%s", d)
	}
	wantProblems := []string{
		`Logical_Router_Static_Route r2 on ovn_cluster_router (ic-node=node2): ip_prefix "0.0.0.0/0": a default route, not a pod subnet; not protected`,
		`Logical_Switch b_ovn_layer2_switch: other_config:ipv6_prefix "fd10:b::": the length of this IPv6 subnet is not in NB (no router port trtos-b_ovn_layer2_switch or rtos-b_ovn_layer2_switch has a network starting there); not advertised, fd10:b::/32 protected`,
		`Logical_Switch c_ovn_layer2_switch: Logical_Router_Port trtos-c_ovn_layer2_switch networks "nonsense": not an address/length; ignored`,
	}
	if d := diff(wantProblems, got.Problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	var cluster []string
	for _, s := range got.Cluster {
		cluster = append(cluster, s.Prefix.String())
	}
	wantCluster := []string{"10.10.0.0/16", "10.11.0.0/16", "10.12.0.0/16", "10.128.0.0/23", "10.128.2.0/23",
		// fd10:b::'s length is unknown: the widest prefix starting there
		// is protected (never advertised).
		"fd00:10:128:1::/64", "fd10:a::/60", "fd10:b::/32", "fd10:c::/56"}
	if d := diff(wantCluster, cluster); d != "" {
		t.Errorf("cluster (-want +got):\n%s", d)
	}
}
