package lab

import (
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Layer2Net is a primary layer2 UDN as OVN-Kubernetes writes it in each
// node's NB in interconnect mode (docs/ovn-nb.md, "layer2 networks" and
// "Workloads"; the fixture ovn/testdata/nb/kubevirt-layer2-ic.json).
type Layer2Net struct {
	// Network is k8s.ovn.org/network ("ns2_green"), NAD the NAD key
	// ("ns2/green").
	Network, NAD string
	Subnet       netip.Prefix
}

// Switch is the network's logical switch, the same in every zone.
func (n Layer2Net) Switch() string { return n.Network + "_ovn_layer2_switch" }

// Chassis is the lab's chassis-id of node.
func Chassis(node string) string { return "chassis-" + node }

// Layer2Zone writes node's zone of an interconnect cluster of nodes into
// nb: the transit switch with a tstor- port per node (node's a router
// port, the others remote, naming their node and chassis), and the layer2
// network's switch with its router port (on GR_<network>_<node>) and
// management port.
func (nb *NB) Layer2Zone(node string, nodes []string, n Layer2Net) error {
	cmd := []string{"ls-add", "transit_switch", "--", "set", "Logical_Switch", "transit_switch",
		"other_config:interconn-ts=transit_switch", "other_config:requested-tnl-key=16711683"}
	for i, o := range nodes {
		p := "tstor-" + o
		cmd = append(cmd, "--", "lsp-add", "transit_switch", p, "--", "set", "Logical_Switch_Port", p,
			"external_ids:node="+o, "options:requested-tnl-key="+strconv.Itoa(i+2))
		if o == node {
			cmd = append(cmd, "type=router", "addresses=router", "options:router-port=rtots-"+o)
		} else {
			cmd = append(cmd, "type=remote", "options:requested-chassis="+Chassis(o),
				fmt.Sprintf(`addresses="0a:58:64:58:00:%02x 100.88.0.%d/16"`, i+2, i+2))
		}
	}
	sw, gw := n.Switch(), "GR_"+n.Network+"_"+node
	ids := []string{"external_ids:k8s.ovn.org/network=" + n.Network, "external_ids:k8s.ovn.org/topology=layer2"}
	gwIP := n.Subnet.Addr().Next()
	cmd = append(cmd, "--", "ls-add", sw, "--", "set", "Logical_Switch", sw,
		"other_config:subnet="+n.Subnet.String(), "other_config:interconn-ts="+sw, "external_ids:k8s.ovn.org/role=primary")
	cmd = append(cmd, ids...)
	cmd = append(cmd, "--", "lsp-add", sw, "stor-"+sw, "--", "set", "Logical_Switch_Port", "stor-"+sw,
		"type=router", "addresses=router", "options:router-port=rtos-"+sw)
	cmd = append(cmd, ids...)
	cmd = append(cmd, "--", "lsp-add", sw, n.Network+"_k8s-"+node, "--", "set", "Logical_Switch_Port", n.Network+"_k8s-"+node,
		fmt.Sprintf(`addresses="0a:58:0a:64:00:02 %s"`, gwIP.Next()))
	cmd = append(cmd, "--", "lr-add", gw, "--", "set", "Logical_Router", gw, "options:chassis="+Chassis(node),
		"external_ids:k8s.ovn.org/role=primary")
	cmd = append(cmd, ids...)
	cmd = append(cmd, "--", "lrp-add", gw, "rtos-"+sw, "0a:58:64:41:00:02", "100.65.0.2/16",
		netip.PrefixFrom(gwIP, n.Subnet.Bits()).String())
	_, err := nb.NBCtl(cmd...)
	return err
}

// DefaultZone writes node's zone of the default network into nb
// (interconnect, the fixture ovn/testdata/nb/kubevirt-default.json): the
// node switch with subnet, its router port on ovn_cluster_router, and the
// transit switch with a remote tstor- port per other node (index i: MAC
// 0a:58:64:58:00:0<i+2>, 100.88.0.<i+2>/16, TransitIP).
func (nb *NB) DefaultZone(node string, nodes []string, subnet netip.Prefix) error {
	gw := subnet.Addr().Next()
	cmd := []string{"ls-add", node, "--", "set", "Logical_Switch", node, "other_config:subnet=" + subnet.String(),
		"--", "lr-add", "ovn_cluster_router", "--", "set", "Logical_Router", "ovn_cluster_router", "external_ids:k8s-cluster-router=yes",
		"--", "lrp-add", "ovn_cluster_router", "rtos-" + node, "0a:58:0a:80:00:01", netip.PrefixFrom(gw, subnet.Bits()).String(),
		"--", "lsp-add", node, "stor-" + node, "--", "set", "Logical_Switch_Port", "stor-" + node,
		"type=router", "addresses=router", "options:router-port=rtos-" + node,
		"--", "ls-add", "transit_switch", "--", "set", "Logical_Switch", "transit_switch", "other_config:interconn-ts=transit_switch"}
	for i, o := range nodes {
		if o == node {
			continue
		}
		p := "tstor-" + o
		cmd = append(cmd, "--", "lsp-add", "transit_switch", p, "--", "set", "Logical_Switch_Port", p,
			"type=remote", "external_ids:node="+o, "options:requested-chassis="+Chassis(o),
			fmt.Sprintf(`addresses="0a:58:64:58:00:%02x %s/16"`, i+2, TransitIP(nodes, o)))
	}
	_, err := nb.NBCtl(cmd...)
	return err
}

// TransitIP is node's address on the transit switch of DefaultZone.
func TransitIP(nodes []string, node string) netip.Addr {
	for i, o := range nodes {
		if o == node {
			return netip.AddrFrom4([4]byte{100, 88, 0, byte(i + 2)})
		}
	}
	return netip.Addr{}
}

// VMRoute writes the static route on ovn_cluster_router that tells where
// a default-network VM runs after a live migration (kubevirt/router.go):
// in zone "local" (the VM runs on this NB's node: output_port
// rtos-<node>, next hop the VM's address) or "remote" (next hop the
// running node's transit address).
func (nb *NB) VMRoute(p VMPod, zone, node string, nexthop netip.Addr) (time.Time, error) {
	cmd := []string{"--id=@r", "create", "Logical_Router_Static_Route", "ip_prefix=" + p.IP.String(),
		`nexthop="` + nexthop.String() + `"`, "policy=dst-ip",
		"external_ids:k8s.ovn.org/vm=" + p.VM, "external_ids:k8s.ovn.org/namespace=" + p.Namespace,
		"external_ids:k8s.ovn.org/zone=" + zone}
	if zone == "local" {
		cmd = append(cmd, "output_port=rtos-"+node)
	}
	cmd = append(cmd, "--", "add", "Logical_Router", "ovn_cluster_router", "static_routes", "@r")
	_, err := nb.NBCtl(cmd...)
	return time.Now(), err
}

// VMPod is the port of one virt-launcher pod of a KubeVirt VM on a
// layer2 network, as addLogicalPortToNetwork writes it: name
// "<nad prefix>_<namespace>_<pod>", external_ids pod=true and the
// network's keys, options requested-chassis (the node's chassis) and
// requested-tnl-key, and the VM's DHCP options. On the default network
// (Net.Network ""): "<namespace>_<pod>" on the node's switch, without the
// network's keys and the tunnel key.
type VMPod struct {
	Net       Layer2Net
	Namespace string
	VM        string // the VirtualMachine's name
	Pod       string // the virt-launcher pod's name
	Node      string // where the pod runs
	MAC       string
	IP        netip.Addr
	TnlKey    int
}

// Port is the pod's logical switch port name.
func (p VMPod) Port() string {
	if p.Net.Network == "" {
		return p.Namespace + "_" + p.Pod
	}
	return strings.NewReplacer("-", ".", "/", ".").Replace(p.Net.NAD) + "_" + p.Namespace + "_" + p.Pod
}

// sw is the switch of p's port.
func (p VMPod) sw() string {
	if p.Net.Network == "" {
		return p.Node
	}
	return p.Net.Switch()
}

func (p VMPod) address() string { return p.MAC + " " + p.IP.String() }

// AddVMPod writes p's port into zone's NB (nb is zone's): local there
// when p runs on zone, else remote. enabled nil leaves the column unset
// (a running VM's port), false makes it a migration's target before the
// target domain is ready: no addresses, only port_security. The VM's
// DHCP_Options row is created the first time.
func (nb *NB) AddVMPod(zone string, p VMPod, enabled *bool) error {
	dhcp, err := nb.vmDHCP(p)
	if err != nil {
		return err
	}
	name := p.Port()
	set := []string{"set", "Logical_Switch_Port", name,
		`port_security="` + p.address() + `"`,
		"external_ids:namespace=" + p.Namespace, "external_ids:pod=true",
		"options:requested-chassis=" + Chassis(p.Node), "dhcpv4_options=" + dhcp}
	if p.Net.Network != "" {
		set = append(set, "external_ids:k8s.ovn.org/network="+p.Net.Network, "external_ids:k8s.ovn.org/nad="+p.Net.NAD,
			"external_ids:k8s.ovn.org/topology=layer2", "options:requested-tnl-key="+strconv.Itoa(p.TnlKey))
	}
	if enabled == nil || *enabled {
		set = append(set, `addresses="`+p.address()+`"`)
	}
	if enabled != nil {
		set = append(set, "enabled="+strconv.FormatBool(*enabled))
	}
	if p.Node != zone {
		set = append(set, "type=remote")
	}
	_, err = nb.NBCtl(append([]string{"lsp-add", p.sw(), name, "--"}, set...)...)
	return err
}

// vmDHCP is the UUID of p's VM's DHCP_Options row, created when missing
// (kubevirt/dhcp.go composeDHCPOptions' external_ids).
func (nb *NB) vmDHCP(p VMPod) (string, error) {
	key := p.Namespace + "/" + p.VM
	uuid, err := nb.NBCtl("--bare", "--columns=_uuid", "find", "DHCP_Options", `external_ids:k8s.ovn.org/name="`+key+`"`)
	if err != nil || uuid != "" {
		return uuid, err
	}
	ctrl := p.Net.Network + "-network-controller"
	if p.Net.Network == "" {
		ctrl = "default-network-controller"
	}
	return nb.NBCtl("create", "DHCP_Options", "cidr="+p.Net.Subnet.String(),
		"options:lease_time=3500", "options:router="+p.Net.Subnet.Addr().Next().String(),
		"options:server_id=169.254.1.1", `options:server_mac="0a:58:a9:fe:01:01"`,
		"external_ids:k8s.ovn.org/owner-type=VirtualMachine", "external_ids:k8s.ovn.org/owner-controller="+ctrl,
		`external_ids:k8s.ovn.org/name="`+key+`"`, "external_ids:k8s.ovn.org/cidr="+p.Net.Subnet.String(),
		"external_ids:k8s.ovn.org/zone=local",
		`external_ids:k8s.ovn.org/id="`+ctrl+":VirtualMachine:"+key+":"+p.Net.Subnet.String()+`"`)
}

// HandOver is the target domain ready, as OVN-Kubernetes writes it in
// each zone's NB: one transaction enables the target's port (its
// addresses set) and disables the source's (its addresses cleared:
// setPodLogicalSwitchPortAddressesAndEnabledField,
// disableLiveMigrationSourceLSPOps). It returns when the transaction
// returned: the commit is done by then.
func (nb *NB) HandOver(target, source VMPod) (time.Time, error) {
	_, err := nb.NBCtl("set", "Logical_Switch_Port", target.Port(), "enabled=true", `addresses="`+target.address()+`"`,
		"--", "set", "Logical_Switch_Port", source.Port(), "enabled=false", "addresses=[]")
	return time.Now(), err
}

// DeleteVMPod deletes p's port (its pod is gone).
func (nb *NB) DeleteVMPod(p VMPod) error {
	_, err := nb.NBCtl("lsp-del", p.Port())
	return err
}

// Update is one line of FRR's log of received UPDATEs (FRRConfig.UpdateLog)
// about one prefix: announced, or withdrawn, by the neighbor at the time
// FRR logged it, with the attributes of the UPDATE that announced it.
type Update struct {
	At       time.Time
	Neighbor netip.Addr
	Prefix   netip.Prefix
	Withdraw bool
	// Attrs is FRR's text of the announcing UPDATE's attributes
	// ("nexthop 192.0.2.0, origin i, path 65010 65010"), "" for a
	// withdraw.
	Attrs string
}

// FRR 8.4's `debug bgp updates in` lines, after the timestamp
// ("2026/12/03 10:55:00.123456 BGP: [ID] "): "N(host) rcvd UPDATE w/
// attr: ATTRS" before the prefixes of the UPDATE it describes, "N(host)
// rcvd P IPv4 unicast" (announced; "...duplicate ignored" too), "N(host)
// rcvd UPDATE about P IPv4 unicast -- withdrawn", "-- DENIED due to: ..."
// (not taken, skipped here).
var (
	updAttrRE   = regexp.MustCompile(`\] (\S+)\(\S*\) rcvd UPDATE w/ attr: (.*)$`)
	updPrefixRE = regexp.MustCompile(`\] (\S+)\(\S*\) rcvd (?:UPDATE about )?(\S+/\d+) IPv(?:4|6) unicast(.*)$`)
	updTimeRE   = regexp.MustCompile(`^(\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)`)
)

// ParseUpdateLog reads FRR's log file of received UPDATEs, in order.
func ParseUpdateLog(file string) ([]Update, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Update
	attrs := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		if m := updAttrRE.FindStringSubmatch(line); m != nil {
			attrs[m[1]] = m[2]
			continue
		}
		m := updPrefixRE.FindStringSubmatch(line)
		if m == nil || strings.Contains(m[3], "DENIED") {
			continue
		}
		n, err := netip.ParseAddr(m[1])
		if err != nil {
			return nil, fmt.Errorf("FRR log line %q: neighbor: %w", line, err)
		}
		p, err := netip.ParsePrefix(m[2])
		if err != nil {
			return nil, fmt.Errorf("FRR log line %q: prefix: %w", line, err)
		}
		at, err := time.ParseInLocation("2006/01/02 15:04:05.999999", updTimeRE.FindString(line), time.Local)
		if err != nil {
			return nil, fmt.Errorf("FRR log line %q: no timestamp: %w", line, err)
		}
		u := Update{At: at, Neighbor: n, Prefix: p, Withdraw: strings.Contains(m[3], "withdrawn")}
		if !u.Withdraw {
			u.Attrs = attrs[m[1]]
		}
		out = append(out, u)
	}
	return out, nil
}
