package ovn

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// fuzzRows decodes NB rows from text, one per line, fields split by "|":
//
//	S|name|network|topology|role|subnet|ipv6_prefix     a Logical_Switch
//	P|name|network,network,...                         a Logical_Router_Port
//	R|router|prefix|nexthop|outputPort|icNode|owner|controller   a static route
//	G|name|network                                     a Logical_Router
//	L|name|network|owner|vip;vip|backends;backends     a load balancer
//	N|router|type|externalIP|logicalIP|controller      a NAT
func fuzzRows(text string) nbRows {
	var rows nbRows
	for i, line := range strings.Split(text, "\n") {
		f := strings.Split(line, "|")
		get := func(j int) string {
			if j < len(f) {
				return f[j]
			}
			return ""
		}
		list := func(j int, sep string) []string {
			if get(j) == "" {
				return nil
			}
			return strings.Split(get(j), sep)
		}
		uuid := "u" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		switch get(0) {
		case "S":
			rows.Switches = append(rows.Switches, switchRow{UUID: uuid, Name: get(1), Network: get(2), Topology: get(3), Role: get(4), Subnet: get(5), IPv6Prefix: get(6)})
		case "P":
			rows.Ports = append(rows.Ports, routerPortRow{UUID: uuid, Name: get(1), Networks: list(2, ",")})
		case "R":
			rows.Routes = append(rows.Routes, routeRow{UUID: uuid, Router: get(1), IPPrefix: get(2), Nexthop: get(3), OutputPort: get(4), ICNode: get(5), Owner: get(6), OwnerController: get(7)})
		case "G":
			rows.Routers = append(rows.Routers, routerRow{UUID: uuid, Name: get(1), Network: get(2)})
		case "L":
			vips, backends := list(4, ";"), list(5, ";")
			for len(backends) < len(vips) {
				backends = append(backends, "")
			}
			rows.LoadBalancers = append(rows.LoadBalancers, lbIn{UUID: uuid, Name: get(1), Network: get(2), Owner: get(3), VIPs: vips, Backends: backends[:len(vips)]}.row())
		case "N":
			rows.NATs = append(rows.NATs, natRow{UUID: uuid, Router: get(1), Type: get(2), ExternalIP: get(3), LogicalIP: get(4), Controller: get(5)})
		}
	}
	return rows
}

// FuzzSnapshot builds node1's snapshot from NB rows of any shape: it must
// not panic, must be deterministic, and may only hand the plan valid,
// masked pod subnets and valid protected prefixes; a row it cannot read is
// a problem it reports, not a subnet.
func FuzzSnapshot(f *testing.F) {
	for _, seed := range []string{
		"S|node1|||||\nS|node1|||| 10.128.0.0/23|fd00:10:128:1::",
		"S|node1||||10.128.0.0/23|fd00:10:128:1::\nP|rtos-node1|10.128.0.1/23,fd00:10:128:1::1/64\nG|GR_node1|\nP|rtoe-GR_node1|172.18.0.2/16\nP|rtoj-GR_node1|100.64.0.2/16",
		"S|blue_node1|blue|layer3|primary|10.200.0.0/24|\nS|blue_node2|blue|layer3|primary|10.200.1.0/24|",
		"S|l2_ovn_layer2_switch|l2|layer2|primary|10.100.0.0/16 10.101.0.0/16|fd00:100::\nP|rtos-l2_ovn_layer2_switch|100.65.0.2/16,10.100.0.1/16,fd00:100::1/64",
		"S|node1||||10.128.0.0/33|zzz\nS|node1||||10.128.0.7/23|\nS|node1||||::ffff:10.0.0.0/104|",
		"R|ovn_cluster_router|10.128.2.0/23|100.88.0.3||node2||\nR|GR_node1|198.51.100.0/24|192.0.2.1|rtoe-GR_node1||node1|\nR|GR_node1|0.0.0.0/0|192.0.2.9|||||RouteImport",
		"S|node1||||10.128.0.0/23|\nL|Service_ns/web_TCP_cluster||ns/web|172.30.0.10:80;[fd00::1]:443;192.0.2.200|10.128.0.5:8080,10.128.2.5:8080;;\nN|GR_node1|snat|172.18.0.100|10.128.0.5|EgressIP",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 {
			return
		}
		rows := fuzzRows(text)
		a, b := buildNB(rows, "node1"), buildNB(fuzzRows(text), "node1")
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("two builds of the same rows differ:\n%+v\n%+v", a, b)
		}
		for _, nw := range a.Snapshot.Networks {
			if nw.Name == "" {
				t.Fatalf("a network without a name: %+v", nw)
			}
			for _, sn := range nw.Subnets {
				checkSubnet(t, sn.Prefix, "pod subnet of "+nw.Name)
				if sn.Source == "" {
					t.Fatalf("pod subnet %s of %s says nothing of where it comes from", sn.Prefix, nw.Name)
				}
			}
		}
		for _, sn := range a.Cluster {
			checkSubnet(t, sn.Prefix, "cluster subnet")
		}
		for _, pp := range a.Snapshot.Protected {
			if !pp.Prefix.IsValid() || pp.Why == "" {
				t.Fatalf("protected entry %+v", pp)
			}
		}
	})
}

func checkSubnet(t *testing.T, p netip.Prefix, what string) {
	t.Helper()
	if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		t.Fatalf("%s %v is invalid, has host bits, is IPv4-mapped or zoned", what, p)
	}
}
