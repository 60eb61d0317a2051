package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Issue 7: egress IPs and Service VIPs, written into NB as OVN-Kubernetes
// writes them (docs/ovn-nb.md, "Advertise: egress IPs and Service VIPs"),
// reach FRR as host prefixes, and leave it when the rows go.

// advServiceCIDRs is cluster.serviceCIDRs of these tests: ClusterIPs inside are
// never advertised.
var advServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}

// advWorld is a lab with two sessions to FRR, tor (IPv4) and tor6 (IPv6),
// NB with the standard topology plus gateway routers GR_node2 (another
// node) and GR_blue_node1 (node1's router of the UDN blue).
type advWorld struct {
	*world
	t *testing.T
}

// setupAdvertise starts the lab with the advertise rules (YAML lines under
// "advertise:"); a rule "pods" for the default network's pod subnets is
// appended, so that FRR holding node1's subnet proves the daemon has read
// NB and its sessions are up.
func setupAdvertise(t *testing.T, rules string) *advWorld {
	t.Helper()
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	w.nb.GatewayRouter("node2", netip.MustParsePrefix("172.18.0.3/16"))
	w.nb.MustNBCtl("lr-add", "GR_blue_node1", "--", "set", "logical_router", "GR_blue_node1",
		"options:chassis=chassis-node1", "external_ids:k8s.ovn.org/network=blue", "external_ids:k8s.ovn.org/topology=layer3")
	w.nb.MustNBCtl("lrp-add", "GR_blue_node1", "rtoe-GR_blue_node1", "02:42:ac:12:00:04", "172.18.0.2/16")
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{
		{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
		{Address: lab.NodeIPv6, ASN: 65010, Passive: true},
	}})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{
		Peers: []lab.Peer{lab.DefaultTor(),
			{Name: "tor6", Address: lab.TorIPv6, ASN: 65001, Families: []string{"ipv6"}}},
		Advertise:    rules + "\n  - {name: pods, kind: podNetwork, networks: [default]}",
		ServiceCIDRs: advServiceCIDRs,
	})
	a := &advWorld{world: w, t: t}
	a.waitFRR("node1's pod subnets (the sessions are up)", []netip.Prefix{lab.DefaultNode1.Subnet, lab.DefaultNode1.Subnet6}, nil)
	return a
}

// hostPrefix is the host prefix of address s.
func hostPrefix(s string) netip.Prefix {
	a := netip.MustParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

// splitFamilies returns the IPv4 and the IPv6 prefixes of ps.
func splitFamilies(ps []netip.Prefix) (v4, v6 []netip.Prefix) {
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6
}

// waitFRR waits (generously) until FRR has best paths for every prefix of
// want and none for absent: IPv4 ones from the daemon's IPv4 session, IPv6
// ones from its IPv6 session.
func (a *advWorld) waitFRR(what string, want, absent []netip.Prefix) {
	a.t.Helper()
	w4, w6 := splitFamilies(want)
	a4, a6 := splitFamilies(absent)
	v4 := a.rib("ipv4", lab.NodeIPv4, w4, a4)
	v6 := a.rib("ipv6", lab.NodeIPv6, w6, a6)
	lab.Eventually(a.t, generous, 100*time.Millisecond, what, func() error {
		if err := v4(); err != nil {
			return err
		}
		return v6()
	})
}

// noFRR fails unless FRR, right now, has none of the prefixes (from
// anyone) and the daemon plans none of them. Call it after an event that
// proves the daemon has seen the rows in question.
func (a *advWorld) noFRR(what string, absent []netip.Prefix) {
	a.t.Helper()
	for _, fam := range []string{"ipv4", "ipv6"} {
		best, err := a.frr.BestPaths(fam)
		if err != nil {
			a.t.Fatal(err)
		}
		for _, p := range absent {
			if path, ok := best[p]; ok {
				a.t.Errorf("%s: FRR has %s (next hop %s)", what, p, path.NextHop)
			}
		}
	}
	advs, err := a.d.Advertised()
	if err != nil {
		a.t.Fatal(err)
	}
	for _, adv := range advs {
		if slices.Contains(absent, adv.Prefix) {
			a.t.Errorf("%s: the daemon advertises %s to %s (rule %s, %s)", what, adv.Prefix, adv.Peer, adv.Rule, adv.Source)
		}
	}
}

// advertised is the daemon's advertisements of prefix p (routes advertised).
func (a *advWorld) advertised(p netip.Prefix) []model.Advertisement {
	a.t.Helper()
	advs, err := a.d.Advertised()
	if err != nil {
		a.t.Fatal(err)
	}
	var out []model.Advertisement
	for _, adv := range advs {
		if adv.Prefix == p {
			out = append(out, adv)
		}
	}
	return out
}

// addEgressIP writes the NAT row OVN-Kubernetes writes for EgressIP eip
// holding address ext for pod ns/pod (address podIP) on router, and
// returns its UUID.
func (a *advWorld) addEgressIP(router, eip, ns, pod, ext, podIP string) string {
	a.t.Helper()
	return createEgressIP(a.t, a.nb, router, eip, ns, pod, ext, podIP)
}

// createEgressIP writes into nb the NAT row of addEgressIP and returns its
// UUID.
func createEgressIP(t *testing.T, nb *lab.NB, router, eip, ns, pod, ext, podIP string) string {
	t.Helper()
	fam := "ip4"
	if netip.MustParseAddr(ext).Is6() {
		fam = "ip6"
	}
	name := eip + "_" + ns + "/" + pod
	// the management port of the router's network on its node:
	// <prefix>k8s-<node>
	mgmt := ""
	for _, node := range []string{"node1", "node2"} {
		if p, ok := strings.CutSuffix(router, node); ok {
			mgmt = strings.TrimPrefix(p, "GR_") + "k8s-" + node
		}
	}
	return strings.TrimSpace(nb.MustNBCtl("--id=@n", "create", "NAT", "type=snat",
		"external_ip="+nbQuote(ext), "logical_ip="+nbQuote(podIP), "logical_port="+nbQuote(mgmt),
		"external_ids:k8s.ovn.org/owner-type=EgressIP",
		"external_ids:k8s.ovn.org/owner-controller=default-network-controller",
		"external_ids:k8s.ovn.org/name="+nbQuote(name),
		"external_ids:ip-family="+fam,
		"external_ids:k8s.ovn.org/id="+nbQuote("default-network-controller:EgressIP:"+name+":"+fam),
		"--", "add", "Logical_Router", router, "nat", "@n"))
}

// deleteNAT removes the NAT row uuid from router (NAT is not a root table:
// the row goes with the reference).
func (a *advWorld) deleteNAT(router, uuid string) {
	a.t.Helper()
	a.nb.MustNBCtl("remove", "Logical_Router", router, "nat", uuid)
}

// nbQuote quotes s as an OVSDB string for ovn-nbctl.
func nbQuote(s string) string { return `"` + s + `"` }

// vipsArg renders vips (VIP key -> backends) as an ovn-nbctl map.
func vipsArg(vips map[string]string) string {
	keys := make([]string, 0, len(vips))
	for k := range vips {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = nbQuote(k) + "=" + nbQuote(vips[k])
	}
	return "vips={" + strings.Join(parts, ",") + "}"
}

// addServiceLB writes a Service load balancer row of the default network
// as OVN-Kubernetes names it (Service_<ns>/<name>_<PROTO>_cluster) and
// returns its UUID.
func (a *advWorld) addServiceLB(owner, proto string, vips map[string]string) string {
	a.t.Helper()
	return a.addNetworkServiceLB("", owner, proto, vips)
}

// addNetworkServiceLB is addServiceLB for a Service of the UDN network
// ("" = the default network): its row's name has the network's prefix and
// its external_ids name the network.
func (a *advWorld) addNetworkServiceLB(network, owner, proto string, vips map[string]string) string {
	a.t.Helper()
	return createServiceLB(a.t, a.nb, network, owner, proto, vips)
}

// createServiceLB writes into nb the load balancer row of Service owner
// (<ns>/<name>) of network ("" = the default network) as OVN-Kubernetes
// names it, and returns its UUID.
func createServiceLB(t *testing.T, nb *lab.NB, network, owner, proto string, vips map[string]string) string {
	t.Helper()
	name := "Service_" + owner + "_" + strings.ToUpper(proto) + "_cluster"
	args := []string{"create", "Load_Balancer", "protocol=" + proto, vipsArg(vips),
		"external_ids:k8s.ovn.org/kind=Service", "external_ids:k8s.ovn.org/owner=" + nbQuote(owner)}
	if network != "" {
		name = network + "_" + name
		args = append(args, "external_ids:k8s.ovn.org/network="+network, "external_ids:k8s.ovn.org/role=primary")
	}
	return strings.TrimSpace(nb.MustNBCtl(append(args, "name="+nbQuote(name))...))
}

// setVIPs replaces the vips of load balancer uuid.
func (a *advWorld) setVIPs(uuid string, vips map[string]string) {
	a.t.Helper()
	a.nb.MustNBCtl("set", "Load_Balancer", uuid, vipsArg(vips))
}

// deleteLB removes load balancer uuid.
func (a *advWorld) deleteLB(uuid string) {
	a.t.Helper()
	a.nb.MustNBCtl("destroy", "Load_Balancer", uuid)
}

// TestAdvertiseEgressIPs: EgressIP SNATs on node1's gateway routers of the
// default network (IPv4 and IPv6) and of the UDN blue reach FRR as /32 and
// /128; one on node2's router never does; deleting a NAT row withdraws its
// prefix.
func TestAdvertiseEgressIPs(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: eips, kind: egressIP}`)
	eip4, eip6, eipBlue, eipNode2 := hostPrefix("172.18.0.100"), hostPrefix("fc00:f853:ccd:e793::100"), hostPrefix("172.18.0.101"), hostPrefix("172.18.0.102")

	// node2's first: once node1's are in FRR, the daemon has read it.
	a.addEgressIP("GR_node2", "eip2", "ns1", "pod9", "172.18.0.102", "10.128.2.5")
	n4 := a.addEgressIP("GR_node1", "eip1", "ns1", "pod1", "172.18.0.100", "10.128.0.5")
	n6 := a.addEgressIP("GR_node1", "eip1", "ns1", "pod1", "fc00:f853:ccd:e793::100", "fd00:10:128:1::5")
	nBlue := a.addEgressIP("GR_blue_node1", "eip-blue", "ns1", "pod3", "172.18.0.101", "10.200.0.5")
	a.waitFRR("node1's egress IPs in FRR", []netip.Prefix{eip4, eip6, eipBlue}, []netip.Prefix{eipNode2})
	a.noFRR("node2's egress IP", []netip.Prefix{eipNode2})
	for _, c := range []struct {
		p       netip.Prefix
		peer    string
		network string
	}{{eip4, "tor", "default"}, {eip6, "tor6", "default"}, {eipBlue, "tor", "blue"}} {
		advs := a.advertised(c.p)
		if len(advs) != 1 || advs[0].Peer != c.peer || advs[0].Rule != "eips" || advs[0].Network != c.network {
			t.Errorf("routes advertised for %s = %+v, want one to %s by rule eips, network %s", c.p, advs, c.peer, c.network)
		}
	}

	a.deleteNAT("GR_node1", n4)
	a.waitFRR("IPv4 egress IP withdrawn after its NAT row is deleted", []netip.Prefix{eip6, eipBlue}, []netip.Prefix{eip4})
	a.deleteNAT("GR_node1", n6)
	a.waitFRR("IPv6 egress IP withdrawn after its NAT row is deleted", []netip.Prefix{eipBlue}, []netip.Prefix{eip6})
	a.deleteNAT("GR_blue_node1", nBlue)
	a.waitFRR("UDN egress IP withdrawn after its NAT row is deleted", []netip.Prefix{lab.DefaultNode1.Subnet}, []netip.Prefix{eipBlue})

	// the egress IP moves to node1: OVN-Kubernetes writes it on GR_node1
	a.addEgressIP("GR_node1", "eip2", "ns1", "pod9", "172.18.0.102", "10.128.0.9")
	a.waitFRR("egress IP moved to node1", []netip.Prefix{eipNode2}, nil)
}

// TestAdvertiseServiceVIPs: a Service's external VIPs (IPv4 and IPv6)
// reach FRR; its ClusterIPs (inside cluster.serviceCIDRs) and node-port
// VIPs (a node address) never do; a VIP on two ports and two protocols
// (two rows) is one prefix, kept while either row holds it; removing the
// last row withdraws it. A Service of the UDN blue (IPv4 and IPv6 VIPs)
// comes and goes with its row the same way.
func TestAdvertiseServiceVIPs(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: lbs, kind: loadBalancerIP}`)
	ext4, ext6 := hostPrefix("203.0.113.10"), hostPrefix("2001:db8:f00::10")
	never := []netip.Prefix{hostPrefix("10.96.0.10"), hostPrefix("fd00:10:96::10"), hostPrefix("172.18.0.2")}

	tcp := a.addServiceLB("ns1/web", "tcp", map[string]string{
		"10.96.0.10:80":           "10.128.0.5:8080,10.128.2.5:8080",
		"203.0.113.10:80":         "10.128.0.5:8080,10.128.2.5:8080",
		"203.0.113.10:443":        "10.128.0.5:8443",
		"172.18.0.2:30080":        "10.128.0.5:8080", // a node port (node1's address)
		"[fd00:10:96::10]:80":     "[fd00:10:128:1::5]:8080",
		"[2001:db8:f00::10]:80":   "[fd00:10:128:1::5]:8080",
		"[2001:db8:f00::10]:8080": "[fd00:10:128:1::5]:8080",
	})
	udp := a.addServiceLB("ns1/web", "udp", map[string]string{
		"10.96.0.10:53":   "10.128.0.5:53",
		"203.0.113.10:53": "10.128.0.5:53",
	})
	blue4, blue6 := hostPrefix("203.0.113.20"), hostPrefix("2001:db8:f00::20")
	blue := a.addNetworkServiceLB("blue", "ns2/api", "tcp", map[string]string{
		"203.0.113.20:443":       "10.200.0.5:8443",
		"[2001:db8:f00::20]:443": "[fd00:10:200::5]:8443",
	})
	a.waitFRR("the Services' external VIPs in FRR", []netip.Prefix{ext4, ext6, blue4, blue6}, never)
	a.noFRR("ClusterIPs and the node-port VIP", never)
	for _, c := range []struct {
		p    netip.Prefix
		peer string
	}{{ext4, "tor"}, {ext6, "tor6"}} {
		advs := a.advertised(c.p)
		if len(advs) != 1 || advs[0].Peer != c.peer || advs[0].Rule != "lbs" {
			t.Errorf("routes advertised for %s = %+v, want one (two ports, two protocols: one prefix) to %s by rule lbs", c.p, advs, c.peer)
		}
	}

	// the TCP row goes: the UDP row still holds 203.0.113.10; the IPv6
	// VIP was only on the TCP row
	a.deleteLB(tcp)
	a.waitFRR("IPv6 VIP withdrawn with its only row", []netip.Prefix{ext4}, []netip.Prefix{ext6})
	if advs := a.advertised(ext4); len(advs) != 1 {
		t.Errorf("routes advertised for %s after the TCP row went = %+v, want one (the UDP row holds it)", ext4, advs)
	}
	a.deleteLB(udp)
	a.waitFRR("IPv4 VIP withdrawn with its last row", []netip.Prefix{lab.DefaultNode1.Subnet, blue4, blue6}, []netip.Prefix{ext4})
	for _, p := range []netip.Prefix{blue4, blue6} {
		if advs := a.advertised(p); len(advs) != 1 || advs[0].Network != "blue" {
			t.Errorf("routes advertised for %s = %+v, want one, of network blue", p, advs)
		}
	}
	a.deleteLB(blue)
	a.waitFRR("the UDN Service's VIPs withdrawn with its row", []netip.Prefix{lab.DefaultNode1.Subnet}, []netip.Prefix{blue4, blue6})
}

// TestAdvertiseLocalEndpointsOnly: with localEndpointsOnly a VIP is
// advertised while a backend is a pod inside node1's subnet of the
// Service's network, or node1's own address (a host-network endpoint);
// when the only backend is node2's pod or node2's address it is withdrawn,
// and announced again when node1's is back. Locality is per network: a
// backend inside node1's subnet of the UDN blue is local for a Service of
// blue, not for one of the default network. A rule without
// localEndpointsOnly keeps its Service's VIP (backend on node2) throughout.
func TestAdvertiseLocalEndpointsOnly(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: local, kind: loadBalancerIP, services: ["ns1/local*", "ns2/*"], localEndpointsOnly: true}
  - {name: any, kind: loadBalancerIP, services: ["ns1/any"]}`)
	local, anywhere, blue, wrongNet := hostPrefix("203.0.113.30"), hostPrefix("203.0.113.31"), hostPrefix("203.0.113.32"), hostPrefix("203.0.113.33")
	vip := func(backends string) map[string]string { return map[string]string{"203.0.113.30:80": backends} }

	// the default network's Service whose backend is in blue's subnet
	// first: when the others are in FRR, the daemon has read it
	a.addServiceLB("ns1/local-wrong-net", "tcp", map[string]string{"203.0.113.33:80": "10.200.0.5:8080"})
	lb := a.addServiceLB("ns1/local", "tcp", vip("10.128.0.5:8080"))
	a.addServiceLB("ns1/any", "tcp", map[string]string{"203.0.113.31:80": "10.128.2.5:8080"})
	a.addNetworkServiceLB("blue", "ns2/web", "tcp", map[string]string{"203.0.113.32:80": "10.200.0.5:8080"})
	a.waitFRR("VIPs with a local endpoint, and of the rule without localEndpointsOnly", []netip.Prefix{local, anywhere, blue}, []netip.Prefix{wrongNet})
	a.noFRR("a default-network Service whose only backend is in another network's subnet", []netip.Prefix{wrongNet})
	for p, rule := range map[netip.Prefix]string{local: "local", blue: "local", anywhere: "any"} {
		if advs := a.advertised(p); len(advs) != 1 || advs[0].Rule != rule {
			t.Errorf("routes advertised for %s = %+v, want one by rule %s", p, advs, rule)
		}
	}

	for round := range 2 {
		a.setVIPs(lb, vip("10.128.2.5:8080"))
		a.waitFRR(fmt.Sprintf("round %d: VIP withdrawn when its only endpoint is node2's pod", round), []netip.Prefix{anywhere, blue}, []netip.Prefix{local})
		a.setVIPs(lb, vip("10.128.2.5:8080,10.128.0.5:8080"))
		a.waitFRR(fmt.Sprintf("round %d: VIP back with node1's pod", round), []netip.Prefix{local, anywhere, blue}, nil)
	}
	a.setVIPs(lb, vip("172.18.0.3:8080"))
	a.waitFRR("VIP withdrawn when its only endpoint is node2's address", []netip.Prefix{anywhere}, []netip.Prefix{local})
	a.setVIPs(lb, vip("172.18.0.2:8080"))
	a.waitFRR("VIP back with a host-network endpoint on node1", []netip.Prefix{local, anywhere}, nil)
}

// TestAdvertiseSelectors: namespace and service globs select only the
// matching egress IPs and Services (an egress IP when one of its pods'
// namespaces matches); a rule naming one peer (tor6, IPv6
// only) sends its Service's IPv6 VIP there and its IPv4 VIP nowhere (not to
// tor).
func TestAdvertiseSelectors(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: prod-eips, kind: egressIP, namespaces: ["prod-*"]}
  - {name: prod-web, kind: loadBalancerIP, services: ["prod-*/web-*"]}
  - {name: v6-only, kind: loadBalancerIP, namespaces: [v6], peers: [tor6]}`)
	eipProd, eipDev, eipMixed := hostPrefix("172.18.0.110"), hostPrefix("172.18.0.111"), hostPrefix("172.18.0.112")
	webProd, apiProd, webDev := hostPrefix("203.0.113.20"), hostPrefix("203.0.113.21"), hostPrefix("203.0.113.22")
	v6 := hostPrefix("2001:db8:f00::20")

	// the unselected rows first, then one selected row in a transaction of
	// its own: when that is in FRR, the daemon has read the others
	a.addEgressIP("GR_node1", "eip-dev", "dev", "pod2", "172.18.0.111", "10.128.0.6")
	a.addServiceLB("prod-a/api", "tcp", map[string]string{"203.0.113.21:80": "10.128.0.5:8080"})
	a.addServiceLB("dev/web-1", "tcp", map[string]string{"203.0.113.22:80": "10.128.0.5:8080"})
	a.addServiceLB("v6/web-1", "tcp", map[string]string{"203.0.113.23:80": "10.128.0.5:8080", "[2001:db8:f00::20]:80": "[fd00:10:128:1::5]:8080"})
	a.addServiceLB("prod-a/web-1", "tcp", map[string]string{"203.0.113.20:80": "10.128.0.5:8080"})
	// one egress IP used by pods of two namespaces, one matching
	a.addEgressIP("GR_node1", "eip-mixed", "dev", "pod3", "172.18.0.112", "10.128.0.7")
	a.addEgressIP("GR_node1", "eip-mixed", "prod-b", "pod4", "172.18.0.112", "10.128.0.8")
	a.addEgressIP("GR_node1", "eip-prod", "prod-a", "pod1", "172.18.0.110", "10.128.0.5")
	unselected := []netip.Prefix{eipDev, apiProd, webDev, hostPrefix("203.0.113.23")}
	a.waitFRR("the selected egress IPs and VIPs", []netip.Prefix{eipProd, eipMixed, webProd, v6}, unselected)
	a.noFRR("egress IP and VIPs no rule selects", unselected)
	for p, rule := range map[netip.Prefix]string{eipProd: "prod-eips", eipMixed: "prod-eips", webProd: "prod-web", v6: "v6-only"} {
		if advs := a.advertised(p); len(advs) != 1 || advs[0].Rule != rule {
			t.Errorf("routes advertised for %s = %+v, want one by rule %s", p, advs, rule)
		}
	}
}

// TestAdvertiseOddRows: NB rows of an unexpected shape (a VIP that is not
// an IP, a backend that does not parse, an EgressIP NAT row without an
// external_ip) are skipped with one log line each; they never stop the
// loop (a later good row is advertised) and never withdraw anything (the
// daemon withdraws nothing in the whole test).
func TestAdvertiseOddRows(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: lbs, kind: loadBalancerIP}
  - {name: eips, kind: egressIP}`)
	good, eip, half, later := hostPrefix("203.0.113.50"), hostPrefix("172.18.0.110"), hostPrefix("203.0.113.51"), hostPrefix("203.0.113.52")
	a.addServiceLB("ns1/good", "tcp", map[string]string{"203.0.113.50:80": "10.128.0.5:8080"})
	a.addEgressIP("GR_node1", "eip-good", "ns1", "pod1", "172.18.0.110", "10.128.0.5")
	a.waitFRR("the good rows", []netip.Prefix{good, eip}, nil)

	a.addServiceLB("ns1/odd", "tcp", map[string]string{
		"bogus:80":        "10.128.0.5:8080",
		"203.0.113.51:80": "10.128.0.5:8080,garbage",
	})
	a.nb.MustNBCtl("--id=@n", "create", "NAT", "type=snat", `external_ip=""`, `logical_ip="10.128.0.6"`,
		"external_ids:k8s.ovn.org/owner-type=EgressIP", `external_ids:k8s.ovn.org/name="eip-odd_ns1/pod2"`,
		"--", "add", "Logical_Router", "GR_node1", "nat", "@n")
	a.addServiceLB("ns1/later", "tcp", map[string]string{"203.0.113.52:80": "10.128.0.5:8080"})
	a.waitFRR("a later good row, and the VIP whose other backend is good", []netip.Prefix{good, eip, half, later}, nil)

	lab.Eventually(t, generous, 100*time.Millisecond, "one log line per odd row", func() error {
		lines, err := a.d.LogLines("nb row skipped")
		if err != nil {
			return err
		}
		var problems []string
		for _, l := range lines {
			problems = append(problems, fmt.Sprint(l["problem"]))
		}
		slices.Sort(problems)
		want := []string{"bogus:80", "garbage", `external_ip ""`}
		if len(problems) != len(want) {
			return fmt.Errorf("%d lines, want %d: %q", len(problems), len(want), problems)
		}
		for _, w := range want {
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
				return fmt.Errorf("no line names %s: %q", w, problems)
			}
		}
		return nil
	})
	lines, err := a.d.LogLines("advertisement")
	if err != nil {
		t.Fatal(err)
	}
	announced := false
	for _, l := range lines {
		if l["op"] == "withdraw" {
			t.Errorf("the daemon withdrew %v from %v", l["prefix"], l["peer"])
		}
		announced = announced || (l["op"] == "announce" && l["prefix"] == later.String())
	}
	if !announced {
		t.Errorf("no debug line announces %s: the log does not record advertisements as this test reads them", later)
	}
}
