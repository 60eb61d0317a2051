package ovn

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestBuildServiceVIPs: one entry per (network, VIP, Service); ports,
// protocols and rows merged; backends in every spelling OVN takes; an IP
// shared by two Services (MetalLB's allow-shared-ip) listed for each;
// masquerade VIPs and backends, templates and unparsable keys left out; a
// bad backend reported and the VIP kept with the others.
func TestBuildServiceVIPs(t *testing.T) {
	lbs := lbRows([]lbIn{
		{UUID: "l1", Name: "Service_ns1/a_TCP_cluster", Owner: "ns1/a",
			VIPs:     []string{"192.0.2.10:80", "192.0.2.10:443", "[2001:db8::10]:80", "^NODEIP_IPv4_0:30080"},
			Backends: []string{"10.128.0.5:80, 10.128.0.6:80", "10.128.0.7:443,10.128.0.5:443", "[fd00::5]:80,[fd00::6]", "x"}},
		{UUID: "l2", Name: "Service_ns1/a_UDP_cluster", Owner: "ns1/a",
			VIPs: []string{"192.0.2.10:53"}, Backends: []string{"10.128.0.8:53,bogus:53,169.254.169.2:53"}},
		{UUID: "l3", Name: "Service_ns2/b_TCP_cluster", Owner: "ns2/b",
			VIPs: []string{"192.0.2.10:8080", "169.254.169.3:30000", "300.1.1.1:80"}, Backends: []string{"10.128.1.5:8080", "10.128.1.5:8080", "10.128.1.5:80"}},
		{UUID: "l4", Name: "blue_Service_ns1/a_TCP_cluster", Owner: "ns1/a", Network: "blue",
			VIPs: []string{"192.0.2.10"}, Backends: []string{"10.200.0.5"}},
		// No owner: which Service it is is unknown.
		{UUID: "l5", Name: "Service_orphan", VIPs: []string{"192.0.2.99:80"}, Backends: []string{"10.128.0.99:80"}},
	})
	vips, problems := buildServiceVIPs(lbs)
	var got []string
	for _, v := range vips {
		got = append(got, fmt.Sprintf("%s %s %s %v (%s)", v.Network, v.Service, v.VIP, v.Backends, v.Source))
	}
	want := []string{
		"default ns1/a 192.0.2.10 [10.128.0.5 10.128.0.6 10.128.0.7 10.128.0.8] (Load_Balancer Service_ns1/a_TCP_cluster, Service_ns1/a_UDP_cluster vips)",
		"default ns2/b 192.0.2.10 [10.128.1.5] (Load_Balancer Service_ns2/b_TCP_cluster vips)",
		"default ns1/a 2001:db8::10 [fd00::5 fd00::6] (Load_Balancer Service_ns1/a_TCP_cluster vips)",
		"blue ns1/a 192.0.2.10 [10.200.0.5] (Load_Balancer blue_Service_ns1/a_TCP_cluster vips)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("VIPs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantProblems := []string{
		`Load_Balancer Service_ns1/a_UDP_cluster vips["192.0.2.10:53"] backend "bogus:53": not IP:PORT, [IPv6]:PORT or an address; left out`,
		`Load_Balancer Service_orphan: external_ids k8s.ovn.org/owner "" is not <namespace>/<name>; its VIPs are not advertised`,
	}
	if strings.Join(problems, "\n") != strings.Join(wantProblems, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
}

// TestBuildEgressIPs: only node's gateway routers of each network count,
// one entry per (network, IP), namespaces merged.
func TestBuildEgressIPs(t *testing.T) {
	nats := []natRow{
		{UUID: "n1", Router: "GR_node1", ExternalIP: "172.18.0.100", Name: "eip1_ns2/p1"},
		{UUID: "n2", Router: "GR_node1", ExternalIP: "172.18.0.100", Name: "eip1_ns1/p2"},
		{UUID: "n3", Router: "GR_node1", ExternalIP: "172.18.0.100", Name: "eip1_ns1/p3"},
		{UUID: "n4", Router: "GR_node2", ExternalIP: "172.18.0.101", Name: "eip2_ns1/p4"},
		{UUID: "n5", Router: "GR_blue_node1", RouterNetwork: "blue", ExternalIP: "172.18.0.100", Name: "eip3_ns3/p5"},
		// Named like node1's router of blue but not of that network.
		{UUID: "n6", Router: "GR_blue_node1", ExternalIP: "172.18.0.102", Name: "eip4_ns3/p6"},
		{UUID: "n7", Router: "GR_node10", ExternalIP: "172.18.0.103", Name: "eip5_ns3/p7"},
		{UUID: "n8", Router: "", ExternalIP: "172.18.0.104", Name: "eip6_ns3/p8"},
		// Unexpected shapes on this node's router: skipped.
		{UUID: "n9", Router: "GR_node1", ExternalIP: "", Name: "eip7_ns3/p9"},
		{UUID: "n10", Router: "GR_node1", ExternalIP: "fe80::1%eth0", Name: "eip8_ns3/p10"},
		// Not this node's: not even looked at.
		{UUID: "n11", Router: "GR_node2", ExternalIP: "bogus", Name: "eip9_ns3/p11"},
	}
	eips, problems := buildEgressIPs(nats, "node1")
	var got []string
	for _, e := range eips {
		got = append(got, fmt.Sprintf("%s %s %s %s %v", e.Network, e.IP, e.Router, e.Name, e.Namespaces))
	}
	want := []string{
		"default 172.18.0.100 GR_node1 eip1 [ns1 ns2]",
		"blue 172.18.0.100 GR_blue_node1 eip3 [ns3]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("egress IPs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The rows of unexpected shape are reported by buildProtectedAddresses
	// (once: not here too).
	if len(problems) != 0 {
		t.Errorf("problems: %q, want none", problems)
	}
}

// TestServiceVIPBackendsShared: a VIP's backends come from its row's
// parsed list without a copy (one pass at scale copied 100,000), so they
// must be capped: a reader appending to one never changes the row's list
// nor the next build; a VIP with no endpoint has an empty, non-nil list.
func TestServiceVIPBackendsShared(t *testing.T) {
	row := lbIn{UUID: "l1", Name: "Service_ns1/a_TCP_cluster", Owner: "ns1/a",
		VIPs: []string{"192.0.2.10:80", "192.0.2.11:80"}, Backends: []string{"10.128.0.5:80,10.128.0.6:80", ""}}.row()
	lbs := []*lbRow{row}
	first, _ := buildServiceVIPs(lbs)
	if len(first) != 2 || len(first[0].Backends) != 2 {
		t.Fatalf("got %+v", first)
	}
	if first[1].Backends == nil || len(first[1].Backends) != 0 {
		t.Errorf("no endpoint: backends %#v, want an empty non-nil list", first[1].Backends)
	}
	if c := cap(first[0].Backends); c != len(first[0].Backends) {
		t.Errorf("backends not capped: len %d cap %d", len(first[0].Backends), c)
	}
	grown := append(first[0].Backends, netip.MustParseAddr("10.128.0.99"))
	grown[0] = netip.MustParseAddr("10.128.0.98")
	again, _ := buildServiceVIPs(lbs)
	if got := fmt.Sprint(again[0].Backends, row.VIPs[0].Backends); got != "[10.128.0.5 10.128.0.6] [10.128.0.5 10.128.0.6]" {
		t.Errorf("after a reader appended to the first build's list: next build and the row's list are %s", got)
	}
}
