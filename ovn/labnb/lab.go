package labnb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/go-logr/zapr"
	"github.com/ovn-org/libovsdb/client"
	libmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// The topologies of a network, as in package ovn.
const (
	TopologyLayer3   = ovnk.TopologyLayer3
	TopologyLayer2   = ovnk.TopologyLayer2
	TopologyLocalnet = ovnk.TopologyLocalnet
)

// Switch describes a Logical_Switch as OVN-Kubernetes (1.3 and later)
// writes it, and for a primary layer2 network the transit router port that
// carries its subnets' lengths (docs/ovn-nb.md).
type Switch struct {
	// Network is the network name; "" or "default" is the default network.
	Network string
	// Topology is layer3 (the default), layer2 or localnet. Ignored for the
	// default network, which is layer3.
	Topology string
	// Role is external_ids:k8s.ovn.org/role, e.g. "primary" (UDNs only).
	Role string
	// Node names the node of a layer3 switch (<prefix><node>).
	Node string
	// Subnets: IPv4 ones go to other_config:subnet (space separated), the
	// IPv6 one to other_config:ipv6_prefix as its address only, as
	// OVN-Kubernetes writes them. A primary layer2 network also gets
	// <prefix>transit_router with port trtos-<switch> whose networks are the
	// subnets' first addresses with their lengths.
	Subnets []netip.Prefix
}

// Name is the switch name OVN-Kubernetes gives it.
func (s Switch) Name() string {
	p := ovnk.NetworkPrefix(s.Network)
	switch s.topology() {
	case TopologyLayer2:
		return p + ovnk.Layer2Switch
	case TopologyLocalnet:
		return p + ovnk.LocalnetSwitch
	default:
		return p + s.Node
	}
}

func (s Switch) topology() string {
	if s.isDefault() || s.Topology == "" {
		return TopologyLayer3
	}
	return s.Topology
}

func (s Switch) isDefault() bool {
	return s.Network == "" || s.Network == ovnk.DefaultNetwork
}

func (s Switch) externalIDs() map[string]string {
	if s.isDefault() {
		return nil
	}
	ids := map[string]string{ovnk.ExtIDNetwork: s.Network, ovnk.ExtIDTopology: s.topology()}
	if s.Role != "" {
		ids[ovnk.ExtIDRole] = s.Role
	}
	return ids
}

// switchRow is the nbdb model of the switch alone.
func (s Switch) switchRow(uuid string) *nbdb.LogicalSwitch {
	ls := &nbdb.LogicalSwitch{UUID: uuid, Name: s.Name(), OtherConfig: map[string]string{}, ExternalIDs: s.externalIDs()}
	var subnet []string
	for _, p := range s.Subnets {
		if p.Addr().Is6() {
			ls.OtherConfig[ovnk.CfgIPv6Prefix] = p.Addr().String()
			continue
		}
		subnet = append(subnet, p.String())
	}
	if len(subnet) > 0 {
		ls.OtherConfig[ovnk.CfgSubnet] = strings.Join(subnet, " ")
	}
	return ls
}

// rows are the switch and, for a primary layer2 network, its transit router
// and the ports joining them. uuid names the rows (named UUIDs).
func (s Switch) rows(uuid string) []libmodel.Model {
	ls := s.switchRow(uuid)
	if s.topology() != TopologyLayer2 || s.Role != "primary" {
		return []libmodel.Model{ls}
	}
	var networks []string
	for _, p := range s.Subnets {
		networks = append(networks, netip.PrefixFrom(p.Addr().Next(), p.Bits()).String())
	}
	ids := s.externalIDs()
	lrp := &nbdb.LogicalRouterPort{UUID: uuid + "_trtos", Name: ovnk.TransitRouterToSwitch + ls.Name,
		MAC: "0a:58:0a:00:00:01", Networks: networks, ExternalIDs: ids}
	lsp := &nbdb.LogicalSwitchPort{UUID: uuid + "_stotr", Name: ovnk.SwitchToTransitRouter + ls.Name, Type: "router",
		Addresses: []string{"router"}, Options: map[string]string{"router-port": lrp.Name}, ExternalIDs: ids}
	ls.Ports = []string{lsp.UUID}
	lr := &nbdb.LogicalRouter{UUID: uuid + "_tr", Name: ovnk.NetworkPrefix(s.Network) + ovnk.TransitRouter,
		Ports: []string{lrp.UUID}, ExternalIDs: ids}
	return []libmodel.Model{ls, lsp, lrp, lr}
}

func (s Switch) check() error {
	switch t := s.topology(); {
	case t != TopologyLayer3 && t != TopologyLayer2 && t != TopologyLocalnet:
		return fmt.Errorf("unknown topology %q", t)
	case t == TopologyLayer3 && s.Node == "":
		return fmt.Errorf("a layer3 switch needs a node")
	}
	return nil
}

// AddSwitch inserts one switch (and, for a primary layer2 network, its
// transit router) into the NB at endpoint and returns the switch's name. It
// fails if a switch of that name exists.
func AddSwitch(ctx context.Context, endpoint string, sw Switch, log *zap.Logger) (string, error) {
	if err := AddSwitches(ctx, endpoint, []Switch{sw}, log); err != nil {
		return "", err
	}
	return sw.Name(), nil
}

// AddSwitches inserts switches like AddSwitch, all in one transaction.
func AddSwitches(ctx context.Context, endpoint string, sws []Switch, log *zap.Logger) error {
	var models []libmodel.Model
	for i, sw := range sws {
		if err := sw.check(); err != nil {
			return fmt.Errorf("add lab switch %s: %w", sw.Name(), err)
		}
		models = append(models, sw.rows("sw"+strconv.Itoa(i))...)
	}
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		names := make([]string, len(sws))
		for i, sw := range sws {
			names[i] = sw.Name()
		}
		if err := mustNotExist(ctx, cli, names...); err != nil {
			return err
		}
		ops, err := cli.Create(models...)
		if err != nil {
			return err
		}
		return transact(ctx, cli, ops)
	})
	if err != nil {
		if len(sws) == 1 {
			return fmt.Errorf("add lab switch %s: %w", sws[0].Name(), err)
		}
		return fmt.Errorf("add %d lab switches: %w", len(sws), err)
	}
	return nil
}

// DeleteSwitch deletes the Logical_Switch rows named name (their ports go
// with them), and nothing else, from the NB at endpoint. It fails if there
// is none.
func DeleteSwitch(ctx context.Context, endpoint, name string, log *zap.Logger) error {
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		op := ovsdb.Operation{
			Op:    ovsdb.OperationDelete,
			Table: nbdb.LogicalSwitchTable,
			Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)},
		}
		res, err := cli.Transact(ctx, op)
		if err != nil {
			return err
		}
		if _, err := ovsdb.CheckOperationResults(res, []ovsdb.Operation{op}); err != nil {
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

// Topology writes a small OVN-Kubernetes topology for node into an empty
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
//   - a second node, OtherNode(node), with its own switches in both
//     networks (10.128.2.0/23, fd00:10:128:2::, 10.200.1.0/24), so that
//     other nodes' subnets exist.
//
// It fails, writing nothing, if a switch named node already exists.
func Topology(ctx context.Context, endpoint, node string, log *zap.Logger) error {
	if node == "" {
		return fmt.Errorf("lab topology: empty node name")
	}
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		if err := mustNotExist(ctx, cli, node); err != nil {
			return err
		}
		ops, err := cli.Create(topologyRows(node)...)
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

// OtherNode is the second node Topology creates beside node.
func OtherNode(node string) string {
	if node == "node2" {
		return "node1"
	}
	return "node2"
}

// Transact applies ops, a JSON array of OVSDB operations (RFC 7047 5.2,
// without the database name: the format of the NB fixtures in
// ovn/testdata, which `ovsdb-client transact` also takes with
// "OVN_Northbound" prepended), to the NB at endpoint in one transaction and
// checks every result.
func Transact(ctx context.Context, endpoint string, ops []byte, log *zap.Logger) error {
	var parsed []ovsdb.Operation
	if err := json.Unmarshal(ops, &parsed); err != nil {
		return fmt.Errorf("lab transact: %w", err)
	}
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		return transact(ctx, cli, parsed)
	})
	if err != nil {
		return fmt.Errorf("lab transact: %w", err)
	}
	return nil
}

// topologyRows are the rows of Topology; references use named UUIDs.
func topologyRows(node string) []libmodel.Model {
	other := OtherNode(node)
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
		ls := Switch{Node: nd.name, Subnets: []netip.Prefix{pfx(nd.v4), pfx(nd.v6)}}.switchRow(id())
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
	p := ovnk.NetworkPrefix(blue)
	ids := func(extra ...string) map[string]string {
		m := map[string]string{ovnk.ExtIDNetwork: blue, ovnk.ExtIDTopology: ovnk.TopologyLayer3, ovnk.ExtIDRole: "primary"}
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
		ls := Switch{Network: blue, Topology: ovnk.TopologyLayer3, Role: "primary", Node: nd.name,
			Subnets: []netip.Prefix{pfx(nd.v4)}}.switchRow(id())
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

// withWriter runs f with a short-lived, non-monitoring libovsdb client on
// endpoint, a single unix:PATH or tcp:HOST:PORT.
func withWriter(ctx context.Context, endpoint string, log *zap.Logger, f func(context.Context, client.Client) error) error {
	if log == nil {
		log = zap.NewNop()
	}
	eps, err := config.ParseNorthbound(endpoint)
	if err != nil {
		return err
	}
	if len(eps) != 1 || eps.NeedTLS() {
		return fmt.Errorf("lab writers take one unix:PATH or tcp:HOST:PORT endpoint, not %q", endpoint)
	}
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return err
	}
	// Always pass a logger: without one libovsdb sets stdr's verbosity to
	// 5 process-wide.
	l := zapr.NewLogger(log.Named("libovsdb"))
	cli, err := client.NewOVSDBClient(dbModel, client.WithLogger(&l), client.WithLeaderOnly(false), client.WithEndpoint(endpoint))
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := cli.Connect(ctx); err != nil {
		return fmt.Errorf("connect %s: %w", endpoint, err)
	}
	return f(ctx, cli)
}

// mustNotExist fails if a Logical_Switch of one of these names exists. It
// asks in one transaction.
func mustNotExist(ctx context.Context, cli client.Client, names ...string) error {
	ops := make([]ovsdb.Operation, len(names))
	for i, name := range names {
		ops[i] = ovsdb.Operation{
			Op:      ovsdb.OperationSelect,
			Table:   nbdb.LogicalSwitchTable,
			Where:   []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)},
			Columns: []string{"_uuid"},
		}
	}
	res, err := cli.Transact(ctx, ops...)
	if err != nil {
		return err
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		return err
	}
	for i, r := range res {
		if i < len(names) && len(r.Rows) > 0 {
			return fmt.Errorf("a %s named %q exists already", nbdb.LogicalSwitchTable, names[i])
		}
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

// MoveNATs moves the NAT rows whose external_ip is externalIP from router
// from to router to (as OVN-Kubernetes does when an egress IP moves to
// another node): one transaction mutates both routers' nat columns. It
// fails if from holds no such row.
func MoveNATs(ctx context.Context, endpoint, externalIP, from, to string, log *zap.Logger) error {
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		sel := []ovsdb.Operation{
			{Op: ovsdb.OperationSelect, Table: nbdb.NATTable, Columns: []string{"_uuid"},
				Where: []ovsdb.Condition{ovsdb.NewCondition("external_ip", ovsdb.ConditionEqual, externalIP)}},
			{Op: ovsdb.OperationSelect, Table: nbdb.LogicalRouterTable, Columns: []string{"nat"},
				Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, from)}},
		}
		res, err := cli.Transact(ctx, sel...)
		if err != nil {
			return err
		}
		if _, err := ovsdb.CheckOperationResults(res, sel); err != nil {
			return err
		}
		if len(res[1].Rows) != 1 {
			return fmt.Errorf("%d routers named %s", len(res[1].Rows), from)
		}
		onFrom := map[string]bool{}
		if set, ok := res[1].Rows[0]["nat"].(ovsdb.OvsSet); ok {
			for _, u := range set.GoSet {
				if id, ok := u.(ovsdb.UUID); ok {
					onFrom[id.GoUUID] = true
				}
			}
		}
		var ids []any
		for _, r := range res[0].Rows {
			if id, ok := r["_uuid"].(ovsdb.UUID); ok && onFrom[id.GoUUID] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return fmt.Errorf("router %s has no NAT with external_ip %s", from, externalIP)
		}
		set, err := ovsdb.NewOvsSet(ids)
		if err != nil {
			return err
		}
		return transact(ctx, cli, []ovsdb.Operation{
			{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
				Where:     []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, from)},
				Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("nat", ovsdb.MutateOperationDelete, set)}},
			{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
				Where:     []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, to)},
				Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("nat", ovsdb.MutateOperationInsert, set)}},
		})
	})
	if err != nil {
		return fmt.Errorf("lab move NATs %s from %s to %s: %w", externalIP, from, to, err)
	}
	return nil
}
