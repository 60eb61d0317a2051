package ovn

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSpecialPurposeFromNB: pod subnets, egress IPs and Service VIPs that NB
// holds in special-purpose address space (RFC 6890: inside a block, or an
// aggregate covering one such as 0.0.0.0/1), and a pod subnet holding a
// node address (the node's own /32), are never advertised: left out of the
// snapshot, each listed as a problem (ovnbgp status), the rest of the row
// kept. They stay protected from import (Cluster, Protected).
func TestSpecialPurposeFromNB(t *testing.T) {
	in := nbRows{
		Switches: []switchRow{
			def("node1", "10.128.0.0/23,127.0.0.0/8", "ff00::"),
			udn("half_node1", "half", "layer3", "", "0.0.0.0/1", ""),
			udn("mc_node1", "mc", "layer3", "", "224.0.0.0/4", "fd04:0:0:1::"),
			udn("masq_node1", "masq", "layer3", "", "169.254.169.0/29", ""),
			udn("ll_node1", "ll", "layer3", "", "", "fe80::"),
			udn("self_node1", "self", "layer3", "", "192.0.2.10/32", ""),
			udn("wide_ovn_layer2_switch", "wide", "layer2", "", "192.0.2.0/24", ""),
			udn("top_node1", "top", "layer3", "", "128.0.0.0/1", ""),
			// another node's: not advertised here anyway, no problem
			def("node2", "127.0.0.0/8", ""),
		},
		Ports: []routerPortRow{
			{UUID: "p1", Name: "rtoe-GR_node1", Networks: []string{"192.0.2.10/24"}},
		},
		NATs: []natRow{
			{UUID: "n1", Router: "GR_node1", ExternalIP: "172.18.0.100", Name: "eip1_ns1/p1"},
			{UUID: "n2", Router: "GR_node1", ExternalIP: "127.0.0.5", Name: "eip2_ns1/p2"},
			{UUID: "n3", Router: "GR_node1", ExternalIP: "ff02::1", Name: "eip3_ns1/p3"},
		},
		LoadBalancers: lbRows([]lbIn{
			{UUID: "l1", Name: "Service_ns1/a_TCP_cluster", Owner: "ns1/a",
				VIPs:     []string{"198.51.100.7:80", "127.0.0.1:80", "224.1.1.1:80", "[::1]:80", "[fe80::7]:80"},
				Backends: []string{"10.128.0.5:80", "10.128.0.5:80", "10.128.0.5:80", "[fd00::5]:80", "[fd00::5]:80"}},
		}),
	}
	got := buildNB(in, "node1")
	var subnets []string
	for _, n := range got.Snapshot.Networks {
		for _, s := range n.Subnets {
			subnets = append(subnets, n.Name+" "+s.Prefix.String())
		}
	}
	if want := []string{"default 10.128.0.0/23", "mc fd04:0:0:1::/64"}; !slices.Equal(subnets, want) {
		t.Errorf("advertisable subnets %q, want %q", subnets, want)
	}
	var eips, vips []string
	for _, e := range got.Snapshot.EgressIPs {
		eips = append(eips, e.IP.String())
	}
	for _, v := range got.Snapshot.ServiceVIPs {
		vips = append(vips, v.VIP.String())
	}
	if want := []string{"172.18.0.100"}; !slices.Equal(eips, want) {
		t.Errorf("egress IPs %q, want %q", eips, want)
	}
	if want := []string{"198.51.100.7"}; !slices.Equal(vips, want) {
		t.Errorf("service VIPs %q, want %q", vips, want)
	}
	wantProblems := []string{
		`Load_Balancer Service_ns1/a_TCP_cluster vips["127.0.0.1:80"]: 127.0.0.1 is inside 127.0.0.0/8, special-purpose address space (RFC 6890: loopback): never advertised`,
		`Load_Balancer Service_ns1/a_TCP_cluster vips["224.1.1.1:80"]: 224.1.1.1 is inside 224.0.0.0/4, special-purpose address space (RFC 6890: multicast): never advertised`,
		`Load_Balancer Service_ns1/a_TCP_cluster vips["[::1]:80"]: ::1 is ::1/128, special-purpose address space (RFC 6890: loopback): never advertised`,
		`Load_Balancer Service_ns1/a_TCP_cluster vips["[fe80::7]:80"]: fe80::7 is inside fe80::/10, special-purpose address space (RFC 6890: link-local): never advertised`,
		`Logical_Switch half_node1: pod subnet 0.0.0.0/1 (Logical_Switch half_node1 other_config:subnet) covers 0.0.0.0/8, special-purpose address space (RFC 6890: this network): never advertised`,
		`Logical_Switch ll_node1: pod subnet fe80::/64 (Logical_Switch ll_node1 other_config:ipv6_prefix) is inside fe80::/10, special-purpose address space (RFC 6890: link-local): never advertised`,
		`Logical_Switch masq_node1: pod subnet 169.254.169.0/29 (Logical_Switch masq_node1 other_config:subnet) is inside 169.254.0.0/16, special-purpose address space (RFC 6890: link-local): never advertised`,
		`Logical_Switch mc_node1: pod subnet 224.0.0.0/4 (Logical_Switch mc_node1 other_config:subnet) is 224.0.0.0/4, special-purpose address space (RFC 6890: multicast): never advertised`,
		`Logical_Switch node1: pod subnet 127.0.0.0/8 (Logical_Switch node1 other_config:subnet) is 127.0.0.0/8, special-purpose address space (RFC 6890: loopback): never advertised`,
		`Logical_Switch node1: pod subnet ff00::/64 (Logical_Switch node1 other_config:ipv6_prefix) is inside ff00::/8, special-purpose address space (RFC 6890: multicast): never advertised`,
		`Logical_Switch self_node1: pod subnet 192.0.2.10/32 (Logical_Switch self_node1 other_config:subnet) holds node address 192.0.2.10 (a network of a gateway router's external port rtoe-GR_*): never advertised`,
		`Logical_Switch top_node1: pod subnet 128.0.0.0/1 (Logical_Switch top_node1 other_config:subnet) covers 169.254.0.0/16, special-purpose address space (RFC 6890: link-local): never advertised`,
		`Logical_Switch wide_ovn_layer2_switch: pod subnet 192.0.2.0/24 (Logical_Switch wide_ovn_layer2_switch other_config:subnet) holds node address 192.0.2.10 (a network of a gateway router's external port rtoe-GR_*): never advertised`,
		`NAT n2 on GR_node1 (k8s.ovn.org/owner-type=EgressIP, k8s.ovn.org/name=eip2_ns1/p2) external_ip 127.0.0.5 is inside 127.0.0.0/8, special-purpose address space (RFC 6890: loopback): never advertised`,
		`NAT n3 on GR_node1 (k8s.ovn.org/owner-type=EgressIP, k8s.ovn.org/name=eip3_ns1/p3) external_ip ff02::1 is inside ff00::/8, special-purpose address space (RFC 6890: multicast): never advertised`,
	}
	if d := diff(wantProblems, got.Problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	// Still protected from import, as every pod subnet NB holds.
	var cluster []string
	for _, s := range got.Cluster {
		cluster = append(cluster, s.Prefix.String())
	}
	for _, p := range []string{"0.0.0.0/1", "127.0.0.0/8", "192.0.2.10/32", "ff00::/64"} {
		if !slices.Contains(cluster, p) {
			t.Errorf("%s is not in Cluster (protected): %q", p, cluster)
		}
	}
	var prot []string
	for _, p := range got.Snapshot.Protected {
		prot = append(prot, fmt.Sprintf("%s %s", p.Prefix, p.Why))
	}
	for _, p := range []string{"127.0.0.5/32 egress IP", "127.0.0.1/32 Service VIP"} {
		if !slices.ContainsFunc(prot, func(s string) bool { return strings.HasPrefix(s, p) }) {
			t.Errorf("%s is not protected: %q", p, prot)
		}
	}
}
