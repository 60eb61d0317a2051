package ovn

import (
	"strings"
	"testing"
)

// TestBuildProtectedAddresses: Service VIPs (IPv4 and IPv6, ports dropped,
// duplicates merged, template VIPs and other kinds left out), egress IPs on
// any node's gateway router (default network and UDN controllers), every
// gateway router's external addresses, and the interconnect next hops
// towards other nodes, each as a host prefix with a reason naming the row;
// malformed values are Problems (issue 6 item 2, safety rule 2).
func TestBuildProtectedAddresses(t *testing.T) {
	in := nbRows{
		Ports: []routerPortRow{
			{UUID: "p1", Name: "rtoe-GR_node1", Networks: []string{"172.18.0.2/16", "fc00:f853:ccd:e793::2/64"}},
			{UUID: "p2", Name: "rtoe-GR_node2", Networks: []string{"172.18.0.3/16"}},
			{UUID: "p3", Name: "rtoe-GR_red_node2", Networks: []string{"172.18.0.3/16", "junk"}},
			// Not a gateway router's external port: its addresses are not a node's.
			{UUID: "p4", Name: "rtos-node1", Networks: []string{"10.128.0.1/23"}},
		},
		LoadBalancers: lbRows([]lbIn{
			{UUID: "l1", Name: "Service_default/kubernetes_TCP_cluster", Owner: "default/kubernetes",
				VIPs: []string{"10.96.0.1:443", "[fd00:10:96::1]:443"}},
			{UUID: "l2", Name: "Service_ns1/web_TCP_cluster", Owner: "ns1/web",
				VIPs: []string{"10.96.0.20:80", "10.96.0.20:8080", "192.0.2.50:80", "10.96.0.30"}},
			// The same VIP on another protocol's load balancer: merged.
			{UUID: "l3", Name: "Service_ns1/web_UDP_cluster", Owner: "ns1/web", VIPs: []string{"10.96.0.20:53"}},
			// A node port template: its addresses are the nodes' (protected
			// from the gateway routers), not in the key.
			{UUID: "l4", Name: "Service_ns1/np_TCP_node_switch_template_IPv4", Owner: "ns1/np", VIPs: []string{"^NODEIP_IPv4_0:30080"}},
			{UUID: "l5", Name: "Service_ns1/bad_TCP_cluster", Owner: "ns1/bad", VIPs: []string{"10.96.0.300:80"}},
		}),
		NATs: []natRow{
			{UUID: "n1", Router: "GR_node2", Type: "snat", ExternalIP: "172.18.0.100", LogicalIP: "10.128.2.5",
				Name: "eip1_ns1/pod1", Controller: "default-network-controller"},
			{UUID: "n2", Router: "GR_red_node1", Type: "snat", ExternalIP: "172.18.0.101", LogicalIP: "10.200.0.5",
				Name: "eip2_ns2/pod2", Controller: "red-network-controller"},
			{UUID: "n3", Router: "GR_node1", Type: "snat", ExternalIP: "2001:db8::100", LogicalIP: "fd00:10:128:1::5",
				Name: "eip3_ns1/pod3", Controller: "default-network-controller"},
			{UUID: "n4", Router: "", Type: "snat", ExternalIP: "bogus", Name: "eip4_ns1/pod4"},
			// The same egress IP for another pod, first by UUID: the reason
			// stays the same whatever the UUIDs.
			{UUID: "n0", Router: "GR_node2", Type: "snat", ExternalIP: "172.18.0.100", LogicalIP: "10.128.2.9",
				Name: "eip1_ns1/pod9", Controller: "default-network-controller"},
		},
		Routes: []routeRow{
			{UUID: "s1", Router: "ovn_cluster_router", IPPrefix: "10.128.2.0/23", Nexthop: "100.88.0.3", ICNode: "node2"},
			{UUID: "s2", Router: "ovn_cluster_router", IPPrefix: "100.64.0.3/32", Nexthop: "100.88.0.3", ICNode: "node2"},
			{UUID: "s3", Router: "GR_node1", IPPrefix: "192.0.2.0/24", Nexthop: "172.18.0.10", Owner: "node1"},
		},
	}
	prot, _, problems := buildProtectedAddresses(in)

	var got []string
	for _, p := range sortProtected(prot) {
		got = append(got, p.Prefix.String()+" "+p.Why)
	}
	want := []string{
		"10.96.0.1/32 Service VIP of default/kubernetes (Load_Balancer Service_default/kubernetes_TCP_cluster vips)",
		"10.96.0.20/32 Service VIP of ns1/web (Load_Balancer Service_ns1/web_TCP_cluster vips)",
		"10.96.0.30/32 Service VIP of ns1/web (Load_Balancer Service_ns1/web_TCP_cluster vips)",
		"100.88.0.3/32 interconnect next hop to node node2 (Logical_Router_Static_Route on ovn_cluster_router nexthop, ic-node=node2)",
		"172.18.0.2/32 node address (Logical_Router_Port rtoe-GR_node1 networks)",
		"172.18.0.3/32 node address (Logical_Router_Port rtoe-GR_node2 networks)",
		"172.18.0.100/32 egress IP eip1_ns1/pod1 (NAT on GR_node2 external_ip, k8s.ovn.org/owner-type=EgressIP, k8s.ovn.org/owner-controller=default-network-controller)",
		"172.18.0.101/32 egress IP eip2_ns2/pod2 (NAT on GR_red_node1 external_ip, k8s.ovn.org/owner-type=EgressIP, k8s.ovn.org/owner-controller=red-network-controller)",
		"192.0.2.50/32 Service VIP of ns1/web (Load_Balancer Service_ns1/web_TCP_cluster vips)",
		"2001:db8::100/128 egress IP eip3_ns1/pod3 (NAT on GR_node1 external_ip, k8s.ovn.org/owner-type=EgressIP, k8s.ovn.org/owner-controller=default-network-controller)",
		"fc00:f853:ccd:e793::2/128 node address (Logical_Router_Port rtoe-GR_node1 networks)",
		"fd00:10:96::1/128 Service VIP of default/kubernetes (Load_Balancer Service_default/kubernetes_TCP_cluster vips)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("protected:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantProblems := []string{
		`Load_Balancer Service_ns1/bad_TCP_cluster vips key "10.96.0.300:80": not IP:PORT, [IPv6]:PORT or an address; not protected nor advertised`,
		`Logical_Router_Port rtoe-GR_red_node2 networks "junk": not an address/length; not protected`,
		`NAT n4 (k8s.ovn.org/owner-type=EgressIP, k8s.ovn.org/name=eip4_ns1/pod4) external_ip "bogus": not an address; not protected nor advertised`,
	}
	if strings.Join(problems, "\n") != strings.Join(wantProblems, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
}
