package ovn

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	libmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// This file writes OVN-Kubernetes-like rows, for `ovnbgp lab` and tests
// only. Each helper creates or deletes exactly the rows it is told to; none
// of it is used by the daemon, whose client is read-only.

// LabSwitch describes a Logical_Switch as OVN-Kubernetes writes it. For labs
// and tests only.
type LabSwitch struct {
	// Network is the network name; "" or "default" is the default network.
	Network string
	// Topology is layer3 (the default), layer2 or localnet. Ignored for the
	// default network, which is layer3.
	Topology string
	// Role is external_ids:k8s.ovn.org/role, e.g. "primary" (UDNs only).
	Role string
	// Node names the node of a layer3 switch (<prefix><node>).
	Node string
	// Subnets go to other_config:subnet (space separated), except that an
	// IPv6 /64 of a layer3 switch goes to other_config:ipv6_prefix as an
	// address, as OVN-Kubernetes writes it.
	Subnets []netip.Prefix
}

// Name is the switch name OVN-Kubernetes gives it.
func (s LabSwitch) Name() string {
	p := networkPrefix(s.Network)
	switch s.topology() {
	case TopologyLayer2:
		return p + layer2SwitchName
	case TopologyLocalnet:
		return p + localnetSwitchName
	default:
		return p + s.Node
	}
}

func (s LabSwitch) topology() string {
	if s.isDefault() || s.Topology == "" {
		return TopologyLayer3
	}
	return s.Topology
}

func (s LabSwitch) isDefault() bool {
	return s.Network == "" || s.Network == model.DefaultNetwork
}

// row is the nbdb model of the switch.
func (s LabSwitch) row(uuid string) *nbdb.LogicalSwitch {
	ls := &nbdb.LogicalSwitch{UUID: uuid, Name: s.Name(), OtherConfig: map[string]string{}}
	if !s.isDefault() {
		ls.ExternalIDs = map[string]string{extIDNetwork: s.Network, extIDTopology: s.topology()}
		if s.Role != "" {
			ls.ExternalIDs[extIDRole] = s.Role
		}
	}
	var subnet []string
	for _, p := range s.Subnets {
		if p.Addr().Is6() && p.Bits() == ipv6NodePrefixLen && s.topology() == TopologyLayer3 {
			ls.OtherConfig[cfgIPv6Prefix] = p.Addr().String()
			continue
		}
		subnet = append(subnet, p.String())
	}
	if len(subnet) > 0 {
		ls.OtherConfig[cfgSubnet] = strings.Join(subnet, " ")
	}
	return ls
}

// AddLabSwitch inserts one Logical_Switch into the NB at endpoint and
// returns its name. It fails if a switch of that name exists. For labs and
// tests only.
func AddLabSwitch(ctx context.Context, endpoint string, sw LabSwitch, log *zap.Logger) (string, error) {
	name := sw.Name()
	switch t := sw.topology(); {
	case t != TopologyLayer3 && t != TopologyLayer2 && t != TopologyLocalnet:
		return "", fmt.Errorf("add lab switch: unknown topology %q", t)
	case t == TopologyLayer3 && sw.Node == "":
		return "", fmt.Errorf("add lab switch: a layer3 switch needs a node")
	}
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		if err := mustNotExist(ctx, cli, name); err != nil {
			return err
		}
		ops, err := cli.Create(sw.row("lab_switch"))
		if err != nil {
			return err
		}
		return transact(ctx, cli, ops)
	})
	if err != nil {
		return "", fmt.Errorf("add lab switch %s: %w", name, err)
	}
	return name, nil
}

// DeleteLabSwitch deletes the Logical_Switch rows named name, and nothing
// else, from the NB at endpoint. It fails if there is none. For labs and
// tests only.
func DeleteLabSwitch(ctx context.Context, endpoint, name string, log *zap.Logger) error {
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		ls := &nbdb.LogicalSwitch{}
		ops, err := cli.WhereAny(ls, libmodel.Condition{Field: &ls.Name, Function: ovsdb.ConditionEqual, Value: name}).Delete()
		if err != nil {
			return err
		}
		res, err := cli.Transact(ctx, ops...)
		if err != nil {
			return err
		}
		if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
			return err
		}
		if len(res) == 0 || res[0].Count == 0 {
			return fmt.Errorf("no such switch")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete lab switch %s: %w", name, err)
	}
	return nil
}

// LabTopology writes a small OVN-Kubernetes topology for node into an empty
// NB at endpoint, in one transaction:
//
//   - default network: node switch <node> (10.128.0.0/23 and
//     ipv6_prefix fd00:10:128:1::), join and ext_<node> switches,
//     ovn_cluster_router, gateway router GR_<node> with its join and external
//     ports, static routes, the node SNAT and an egress IP SNAT
//     (172.18.0.100), and two Service load balancers (a ClusterIP, and one
//     with the LoadBalancer ingress VIP 192.0.2.50);
//   - a layer3 user-defined network "blue" (primary): blue_<node>
//     (10.200.0.0/24), blue_ovn_cluster_router, GR_blue_<node>, a Service;
//   - a second node, "node2" (or "node1" when node is "node2"), with its own
//     switches in both networks (10.128.2.0/23, fd00:10:128:2::,
//     10.200.1.0/24), so that other nodes' subnets exist.
//
// It fails, writing nothing, if a switch named node already exists. For
// labs and tests only.
func LabTopology(ctx context.Context, endpoint, node string, log *zap.Logger) error {
	if node == "" {
		return fmt.Errorf("lab topology: empty node name")
	}
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		if err := mustNotExist(ctx, cli, node); err != nil {
			return err
		}
		ops, err := cli.Create(labRows(node)...)
		if err != nil {
			return err
		}
		return transact(ctx, cli, ops)
	})
	if err != nil {
		return fmt.Errorf("lab topology for %s: %w", node, err)
	}
	return nil
}

// LabOtherNode is the second node LabTopology creates beside node.
func LabOtherNode(node string) string {
	if node == "node2" {
		return "node1"
	}
	return "node2"
}

// labRows are the rows of LabTopology; references use named UUIDs.
func labRows(node string) []libmodel.Model {
	other := LabOtherNode(node)
	var rows []libmodel.Model
	n := 0
	id := func() string { n++; return "lab" + strconv.Itoa(n) }
	add := func(m libmodel.Model) { rows = append(rows, m) }
	ptr := func(s string) *string { return &s }
	lrp := func(name, mac string, nets ...string) *nbdb.LogicalRouterPort {
		p := &nbdb.LogicalRouterPort{UUID: id(), Name: name, MAC: mac, Networks: nets}
		add(p)
		return p
	}
	tcp := nbdb.LoadBalancerProtocolTCP
	pfx := netip.MustParsePrefix

	// ---- default network ----
	svc := &nbdb.LoadBalancer{
		UUID: id(), Name: "Service_default/kubernetes_TCP_cluster", Protocol: &tcp,
		Vips:        map[string]string{"10.96.0.1:443": "172.18.0.2:6443"},
		ExternalIDs: map[string]string{"k8s.ovn.org/kind": "Service", "k8s.ovn.org/owner": "default/kubernetes"},
	}
	web := &nbdb.LoadBalancer{
		UUID: id(), Name: "Service_default/web_TCP_cluster", Protocol: &tcp,
		Vips: map[string]string{
			"10.96.100.10:80": "10.128.0.5:8080,10.128.2.7:8080",
			"192.0.2.50:80":   "10.128.0.5:8080,10.128.2.7:8080",
		},
		ExternalIDs: map[string]string{"k8s.ovn.org/kind": "Service", "k8s.ovn.org/owner": "default/web"},
	}
	add(svc)
	add(web)
	for _, nd := range []struct {
		name string
		v4   string
		v6   string
	}{{node, "10.128.0.0/23", "fd00:10:128:1::/64"}, {other, "10.128.2.0/23", "fd00:10:128:2::/64"}} {
		ls := LabSwitch{Node: nd.name, Subnets: []netip.Prefix{pfx(nd.v4), pfx(nd.v6)}}.row(id())
		ls.OtherConfig["mcast_snoop"] = "true"
		ls.LoadBalancer = []string{svc.UUID, web.UUID}
		add(ls)
	}
	add(&nbdb.LogicalSwitch{UUID: id(), Name: "join"})
	add(&nbdb.LogicalSwitch{UUID: id(), Name: "ext_" + node})

	cr := &nbdb.LogicalRouter{
		UUID: id(), Name: "ovn_cluster_router",
		ExternalIDs: map[string]string{"k8s-cluster-router": "yes", "k8s-ovn-topo-version": "11"},
		Ports: []string{
			lrp("rtos-"+node, "0a:58:0a:80:00:01", "10.128.0.1/23", "fd00:10:128:1::1/64").UUID,
			lrp("rtos-"+other, "0a:58:0a:80:02:01", "10.128.2.1/23", "fd00:10:128:2::1/64").UUID,
			lrp("rtoj-ovn_cluster_router", "0a:58:64:40:00:01", "100.64.0.1/16", "fd98::1/64").UUID,
		},
	}
	add(cr)
	route := func(prefix, nexthop string, port *string) string {
		r := &nbdb.LogicalRouterStaticRoute{UUID: id(), IPPrefix: prefix, Nexthop: nexthop, OutputPort: port}
		add(r)
		return r.UUID
	}
	snat := func(external, logical string, ids map[string]string) string {
		r := &nbdb.NAT{UUID: id(), Type: nbdb.NATTypeSNAT, ExternalIP: external, LogicalIP: logical, ExternalIDs: ids}
		add(r)
		return r.UUID
	}
	gr := &nbdb.LogicalRouter{
		UUID: id(), Name: "GR_" + node,
		Options: map[string]string{"chassis": "chassis-" + node, "lb_force_snat_ip": "router_ip", "snat-ct-zone": "0"},
		ExternalIDs: map[string]string{
			"physical_ip": "172.18.0.2", "physical_ips": "172.18.0.2",
		},
		Ports: []string{
			lrp("rtoj-GR_"+node, "0a:58:64:40:00:02", "100.64.0.2/16", "fd98::2/64").UUID,
			lrp("rtoe-GR_"+node, "02:42:ac:12:00:02", "172.18.0.2/16").UUID,
		},
		StaticRoutes: []string{
			route("10.128.0.0/14", "100.64.0.1", nil),
			route("0.0.0.0/0", "172.18.0.1", ptr("rtoe-GR_"+node)),
		},
		Nat: []string{
			snat("172.18.0.2", "10.128.0.0/14", nil),
			snat("172.18.0.100", "10.128.0.5", map[string]string{
				"k8s.ovn.org/owner-type":       "EgressIP",
				"k8s.ovn.org/owner-controller": "default-network-controller",
				"k8s.ovn.org/name":             "egressip-demo_default/pod-a",
			}),
		},
		LoadBalancer: []string{svc.UUID, web.UUID},
	}
	add(gr)

	// ---- layer3 user-defined network "blue" ----
	const blue = "blue"
	p := networkPrefix(blue)
	ids := func(extra ...string) map[string]string {
		m := map[string]string{extIDNetwork: blue, extIDTopology: TopologyLayer3, extIDRole: "primary"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	blueSvc := &nbdb.LoadBalancer{
		UUID: id(), Name: "Service_blue/web_TCP_cluster", Protocol: &tcp,
		Vips:        map[string]string{"10.96.10.10:80": "10.200.0.5:8080"},
		ExternalIDs: ids("k8s.ovn.org/kind", "Service", "k8s.ovn.org/owner", "blue/web"),
	}
	add(blueSvc)
	for _, nd := range []struct{ name, v4 string }{{node, "10.200.0.0/24"}, {other, "10.200.1.0/24"}} {
		ls := LabSwitch{Network: blue, Topology: TopologyLayer3, Role: "primary", Node: nd.name,
			Subnets: []netip.Prefix{pfx(nd.v4)}}.row(id())
		ls.LoadBalancer = []string{blueSvc.UUID}
		add(ls)
	}
	add(&nbdb.LogicalSwitch{UUID: id(), Name: p + "join", ExternalIDs: ids()})
	rtosNode := lrp("rtos-"+p+node, "0a:58:0a:c8:00:01", "10.200.0.1/24")
	rtosOther := lrp("rtos-"+p+other, "0a:58:0a:c8:01:01", "10.200.1.1/24")
	rtosNode.ExternalIDs, rtosOther.ExternalIDs = ids(), ids()
	bcr := &nbdb.LogicalRouter{
		UUID: id(), Name: p + "ovn_cluster_router", ExternalIDs: ids("k8s-cluster-router", "yes"),
		Ports: []string{rtosNode.UUID, rtosOther.UUID},
	}
	add(bcr)
	add(&nbdb.LogicalRouter{
		UUID: id(), Name: "GR_" + p + node,
		Options:     map[string]string{"chassis": "chassis-" + node},
		ExternalIDs: ids(),
		Ports:       []string{lrp("rtoj-GR_"+p+node, "0a:58:64:41:00:02", "100.65.0.2/16").UUID},
		Nat:         []string{snat("172.18.0.2", "10.200.0.0/16", ids())},
	})
	return rows
}

// withWriter runs f with a short-lived, non-monitoring libovsdb client.
func withWriter(ctx context.Context, endpoint string, log *zap.Logger, f func(context.Context, client.Client) error) error {
	if log == nil {
		log = zap.NewNop()
	}
	parsed, err := config.ParseNorthbound(endpoint)
	if err != nil {
		return err
	}
	eps := parsed.Strings()
	if parsed.NeedTLS() {
		return fmt.Errorf("lab writers do not speak ssl: use a unix or tcp endpoint")
	}
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return err
	}
	opts := []client.Option{client.WithLogger(newLogr(log)), client.WithLeaderOnly(false)}
	for _, ep := range eps {
		opts = append(opts, client.WithEndpoint(ep))
	}
	cli, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := cli.Connect(ctx); err != nil {
		return fmt.Errorf("connect %s: %w", endpoint, err)
	}
	return f(ctx, cli)
}

// mustNotExist fails if a Logical_Switch named name exists.
func mustNotExist(ctx context.Context, cli client.Client, name string) error {
	op := ovsdb.Operation{
		Op:      ovsdb.OperationSelect,
		Table:   nbdb.LogicalSwitchTable,
		Where:   []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)},
		Columns: []string{"_uuid"},
	}
	res, err := cli.Transact(ctx, op)
	if err != nil {
		return err
	}
	if _, err := ovsdb.CheckOperationResults(res, []ovsdb.Operation{op}); err != nil {
		return err
	}
	if len(res) > 0 && len(res[0].Rows) > 0 {
		return fmt.Errorf("a %s named %q exists already", nbdb.LogicalSwitchTable, name)
	}
	return nil
}

// transact runs ops in one transaction and checks every result.
func transact(ctx context.Context, cli client.Client, ops []ovsdb.Operation) error {
	res, err := cli.Transact(ctx, ops...)
	if err != nil {
		return err
	}
	_, err = ovsdb.CheckOperationResults(res, ops)
	return err
}
