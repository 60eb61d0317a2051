package lab

import (
	"net/netip"
	"strings"
)

// Network is one OVN-Kubernetes network on one node, as its node switch
// shows it in NB.
type Network struct {
	// Name is "" for the cluster default network, else the UDN name
	// (external_ids:k8s.ovn.org/network).
	Name string
	// Node is the OVN-Kubernetes node owning the switch.
	Node string
	// Subnet is other_config:subnet (IPv4), Subnet6 the /64 whose address
	// goes in other_config:ipv6_prefix. Either may be invalid.
	Subnet, Subnet6 netip.Prefix
}

// Switch is the node switch name OVN-Kubernetes gives the network on the
// node: "<prefix>node" with prefix "<network>_" (with "-" and "/" as ".")
// or "" for the default network.
func (n Network) Switch() string {
	if n.Name == "" {
		return n.Node
	}
	return strings.NewReplacer("-", ".", "/", ".").Replace(n.Name) + "_" + n.Node
}

// NBCtlArgs are the ovn-nbctl arguments that create the node switch in one
// transaction.
func (n Network) NBCtlArgs() []string {
	sw := n.Switch()
	args := []string{"ls-add", sw, "--", "set", "logical_switch", sw}
	if n.Subnet.IsValid() {
		args = append(args, "other_config:subnet="+n.Subnet.String())
	}
	if n.Subnet6.IsValid() {
		args = append(args, `other_config:ipv6_prefix="`+n.Subnet6.Addr().String()+`"`)
	}
	if n.Name != "" {
		args = append(args,
			"external_ids:k8s.ovn.org/network="+n.Name,
			"external_ids:k8s.ovn.org/topology=layer3",
			"external_ids:k8s.ovn.org/role=primary")
	}
	return args
}

// Add creates the network's node switch.
func (nb *NB) Add(n Network) error {
	_, err := nb.NBCtl(n.NBCtlArgs()...)
	return err
}

// Delete removes the network's node switch.
func (nb *NB) Delete(n Network) error {
	_, err := nb.NBCtl("ls-del", n.Switch())
	return err
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// The standard topology of PopulateOVNK.
var (
	// DefaultNode1 is node1's switch on the default network.
	DefaultNode1 = Network{Node: "node1", Subnet: pfx("10.128.0.0/23"), Subnet6: pfx("fd00:10:128:1::/64")}
	// BlueNode1 is node1's switch of the layer3 primary UDN "blue".
	BlueNode1 = Network{Name: "blue", Node: "node1", Subnet: pfx("10.200.0.0/24")}
	// DefaultNode2 and BlueNode2 belong to another node: never advertised
	// by node1.
	DefaultNode2 = Network{Node: "node2", Subnet: pfx("10.128.2.0/23"), Subnet6: pfx("fd00:10:128:2::/64")}
	BlueNode2    = Network{Name: "blue", Node: "node2", Subnet: pfx("10.200.1.0/24")}
)

// PopulateOVNK writes a small OVN-Kubernetes topology for nodes node1 and
// node2: the default network's node switches (with a pod each, router
// ports on ovn_cluster_router), the join switch and node1's gateway router
// GR_node1, and the layer3 UDN "blue" (node switches, cluster router).
func (nb *NB) PopulateOVNK() {
	t := nb.t
	t.Helper()
	for _, n := range []Network{DefaultNode1, DefaultNode2, BlueNode1, BlueNode2} {
		if err := nb.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	blueIDs := []string{"external_ids:k8s.ovn.org/network=blue", "external_ids:k8s.ovn.org/topology=layer3"}
	cmds := [][]string{
		{"lr-add", "ovn_cluster_router", "--", "set", "logical_router", "ovn_cluster_router", "external_ids:k8s-cluster-router=yes"},
		{"lrp-add", "ovn_cluster_router", "rtos-node1", "0a:58:0a:80:00:01", "10.128.0.1/23", "fd00:10:128:1::1/64"},
		{"lsp-add", "node1", "stor-node1", "--", "lsp-set-type", "stor-node1", "router",
			"--", "lsp-set-addresses", "stor-node1", "router", "--", "lsp-set-options", "stor-node1", "router-port=rtos-node1"},
		{"lrp-add", "ovn_cluster_router", "rtos-node2", "0a:58:0a:80:02:01", "10.128.2.1/23"},
		{"lsp-add", "node1", "default_pod-a", "--", "lsp-set-addresses", "default_pod-a", "0a:58:0a:80:00:05 10.128.0.5"},
		{"lsp-add", "node2", "default_pod-b", "--", "lsp-set-addresses", "default_pod-b", "0a:58:0a:80:02:05 10.128.2.5"},
		{"ls-add", "join"},
		{"lrp-add", "ovn_cluster_router", "rtoj-ovn_cluster_router", "0a:58:64:40:00:01", "100.64.0.1/16"},
		{"lr-add", "GR_node1", "--", "set", "logical_router", "GR_node1", "options:chassis=chassis-node1"},
		{"lrp-add", "GR_node1", "rtoj-GR_node1", "0a:58:64:40:00:02", "100.64.0.2/16"},
		{"lrp-add", "GR_node1", "rtoe-GR_node1", "02:42:ac:12:00:02", "172.18.0.2/16"},
		{"lr-route-add", "GR_node1", "10.128.0.0/14", "100.64.0.1"},
		append([]string{"lr-add", "blue_ovn_cluster_router", "--", "set", "logical_router", "blue_ovn_cluster_router"}, blueIDs...),
		{"lrp-add", "blue_ovn_cluster_router", "rtos-blue_node1", "0a:58:0a:c8:00:01", "10.200.0.1/24"},
		append([]string{"ls-add", "blue_join", "--", "set", "logical_switch", "blue_join"}, blueIDs...),
	}
	for _, c := range cmds {
		nb.MustNBCtl(c...)
	}
}
