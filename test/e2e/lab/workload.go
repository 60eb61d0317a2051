package lab

import (
	"net/netip"
	"strconv"
	"strings"
)

// Workload ports (issue 19): the Logical_Switch_Port rows OVN-Kubernetes
// writes for pods and KubeVirt VMs, shaped as ovn/testdata/nb/kubevirt-*.json
// and interconnect.json show them (docs/ovn-nb.md, "Workloads").

// Layer2 is a layer2 UDN as every node's NB holds it in interconnect mode:
// the switch "<network>_ovn_layer2_switch" (role primary), its router port
// stor-<switch> to rtos-<switch> on node1's gateway router
// GR_<network>_node1, whose networks give the IPv6 prefix its length.
type Layer2 struct {
	// Name is the network name (external_ids:k8s.ovn.org/network).
	Name string
	// Subnet is other_config:subnet, Subnet6 the prefix whose address goes
	// in other_config:ipv6_prefix. Either may be invalid.
	Subnet, Subnet6 netip.Prefix
}

// Switch is the layer2 switch's name.
func (n Layer2) Switch() string {
	return strings.NewReplacer("-", ".", "/", ".").Replace(n.Name) + "_ovn_layer2_switch"
}

// gatewayNet is the address host 1 of p with p's length ("10.100.0.1/16").
func gatewayNet(p netip.Prefix) string {
	return netip.PrefixFrom(p.Addr().Next(), p.Bits()).String()
}

// AddLayer2 writes the layer2 network's switch, router port and node1's
// gateway router in one transaction (the IPv6 prefix's length is never
// missing).
func (nb *NB) AddLayer2(n Layer2) {
	nb.t.Helper()
	sw, gr := n.Switch(), "GR_"+n.Name+"_node1"
	ids := []string{q("external_ids", "k8s.ovn.org/network", n.Name), q("external_ids", "k8s.ovn.org/topology", "layer2")}
	ls := []string{"ls-add", sw, "--", "set", "logical_switch", sw, q("other_config", "interconn-ts", sw),
		q("external_ids", "k8s.ovn.org/role", "primary")}
	ls = append(ls, ids...)
	var nets []string
	if n.Subnet.IsValid() {
		ls = append(ls, q("other_config", "subnet", n.Subnet.String()))
		nets = append(nets, gatewayNet(n.Subnet))
	}
	if n.Subnet6.IsValid() {
		ls = append(ls, q("other_config", "ipv6_prefix", n.Subnet6.Addr().String()))
		nets = append(nets, gatewayNet(n.Subnet6))
	}
	args := append(ls, "--", "lr-add", gr, "--", "set", "logical_router", gr, q("options", "chassis", "chassis-node1"),
		q("external_ids", "k8s.ovn.org/role", "primary"))
	args = append(args, ids...)
	args = append(append(args, "--", "lrp-add", gr, "rtos-"+sw, "0a:58:64:41:00:02"), nets...)
	args = append(args, "--", "lsp-add", sw, "stor-"+sw, "--", "lsp-set-type", "stor-"+sw, "router",
		"--", "lsp-set-addresses", "stor-"+sw, "router", "--", "lsp-set-options", "stor-"+sw, "router-port=rtos-"+sw,
		"--", "set", "logical_switch_port", "stor-"+sw)
	nb.MustNBCtl(append(args, ids...)...)
}

// AddTransitSwitch writes the interconnect transit switch: node1's port
// tstor-node1 (type router) and, for each other node, tstor-<node> of type
// remote with requested-chassis chassis-<node> and external_ids:node, as
// ZoneInterconnectHandler writes them. Their presence is what tells ovnbgp
// that NB is one zone of an interconnected cluster.
func (nb *NB) AddTransitSwitch(others ...string) {
	nb.t.Helper()
	nb.MustNBCtl("ls-add", "transit_switch", "--", "set", "logical_switch", "transit_switch",
		q("other_config", "interconn-ts", "transit_switch"))
	nb.MustNBCtl("lsp-add", "transit_switch", "tstor-node1", "--", "lsp-set-type", "tstor-node1", "router",
		"--", "lsp-set-addresses", "tstor-node1", "router", "--", "lsp-set-options", "tstor-node1", "router-port=rtots-node1", "requested-tnl-key=2",
		"--", "set", "logical_switch_port", "tstor-node1", q("external_ids", "node", "node1"))
	for i, n := range others {
		p := "tstor-" + n
		nb.MustNBCtl("lsp-add", "transit_switch", p, "--", "lsp-set-type", p, "remote",
			"--", "set", "logical_switch_port", p, "addresses="+strconv.Quote("0a:58:64:58:00:"+strconv.FormatInt(int64(i+3), 16)+" 100.88.0."+strconv.Itoa(i+3)+"/16"),
			q("options", "requested-chassis", "chassis-"+n), q("options", "requested-tnl-key", strconv.Itoa(i+3)), q("external_ids", "node", n))
	}
}

// PodPort is the port of one pod (or a VM's virt-launcher pod) on one
// network, as BaseNetworkController.addLogicalPortToNetwork writes it.
type PodPort struct {
	// Switch is the switch holding the port (a node switch, or a layer2
	// network's switch).
	Switch string
	// Network and NAD are the UDN's name and NAD key "<ns>/<nad>" (both ""
	// on the default network); Topology its topology (layer2, layer3).
	Network, NAD, Topology string
	// Namespace and Pod name the pod.
	Namespace, Pod string
	// Addresses is the one string of the addresses column ("<MAC> <IP>
	// [<IP>]"; "" leaves the column empty), written as is, unchecked.
	// PortSecurity likewise; "" copies Addresses.
	Addresses, PortSecurity string
	// Chassis is options:requested-chassis ("" leaves it out).
	Chassis string
	// Remote makes the port type remote (a pod of another node on a
	// layer2 network with interconnect).
	Remote bool
	// Disabled sets enabled=false (a live migration's target).
	Disabled bool
	// VM "<ns>/<vm>" points dhcpv4_options at a new DHCP_Options row of
	// that VirtualMachine (kubevirt/dhcp.go composeDHCPOptions), with cidr
	// CIDR.
	VM, CIDR string
}

// Name is the port's name: "<namespace>_<pod>", on a UDN prefixed with the
// NAD key's ("-" and "/" as ".", then "_").
func (p PodPort) Name() string {
	n := p.Namespace + "_" + p.Pod
	if p.NAD != "" {
		n = strings.NewReplacer("-", ".", "/", ".").Replace(p.NAD) + "_" + n
	}
	return n
}

// AddPodPort writes the port (and its DHCP_Options row) in one transaction
// and returns its name.
func (nb *NB) AddPodPort(p PodPort) string {
	nb.t.Helper()
	name := p.Name()
	args := []string{"lsp-add", p.Switch, name}
	if p.VM != "" {
		args = append(args, "--", "--id=@d", "create", "DHCP_Options", "cidr="+strconv.Quote(p.CIDR),
			q("external_ids", "k8s.ovn.org/owner-type", "VirtualMachine"),
			q("external_ids", "k8s.ovn.org/owner-controller", "default-network-controller"),
			q("external_ids", "k8s.ovn.org/name", p.VM), q("external_ids", "k8s.ovn.org/cidr", p.CIDR),
			q("external_ids", "k8s.ovn.org/zone", "local"),
			q("external_ids", "k8s.ovn.org/id", "default-network-controller:VirtualMachine:"+p.VM+":"+p.CIDR))
	}
	args = append(args, "--", "set", "logical_switch_port", name,
		q("external_ids", "namespace", p.Namespace), q("external_ids", "pod", "true"),
		q("options", "iface-id-ver", "e2e-"+p.Namespace+"-"+p.Pod))
	if p.Network != "" {
		args = append(args, q("external_ids", "k8s.ovn.org/network", p.Network), q("external_ids", "k8s.ovn.org/nad", p.NAD),
			q("external_ids", "k8s.ovn.org/topology", p.Topology))
	}
	if p.Addresses != "" {
		args = append(args, "addresses="+strconv.Quote(p.Addresses))
	}
	ps := p.PortSecurity
	if ps == "" {
		ps = p.Addresses
	}
	if ps != "" {
		args = append(args, "port_security="+strconv.Quote(ps))
	}
	if p.Chassis != "" {
		args = append(args, q("options", "requested-chassis", p.Chassis))
	}
	if p.Remote {
		args = append(args, "type=remote")
	}
	if p.Disabled {
		args = append(args, "enabled=false")
	}
	if p.VM != "" {
		args = append(args, "dhcpv4_options=@d")
	}
	nb.MustNBCtl(args...)
	return name
}

// DeletePort deletes a logical switch port (lsp-del).
func (nb *NB) DeletePort(name string) {
	nb.t.Helper()
	nb.MustNBCtl("lsp-del", name)
}

// SetPort sets columns of a logical switch port ("type=remote",
// `options:requested-chassis="chassis-node2"`) in one transaction.
func (nb *NB) SetPort(name string, columns ...string) {
	nb.t.Helper()
	nb.MustNBCtl(append([]string{"set", "logical_switch_port", name}, columns...)...)
}

// q is the ovn-nbctl argument column:"key"="value", both quoted.
func q(column, key, value string) string {
	return column + ":" + strconv.Quote(key) + "=" + strconv.Quote(value)
}
