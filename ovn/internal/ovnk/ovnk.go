// Package ovnk holds the names OVN-Kubernetes gives the NB rows ovnbgp reads
// (external_ids keys, other_config keys, entity and port names), in one
// place for the reader (package ovn) and the lab writers (package
// ovn/labnb). docs/ovn-nb.md says where in OVN-Kubernetes' go-controller
// each one comes from.
package ovnk

import "strings"

// DefaultNetwork is the name of OVN-Kubernetes' cluster default network.
const DefaultNetwork = "default"

// External IDs (go-controller/pkg/types/const.go).
const (
	// ExtIDNetwork names the network of a row of a user-defined network
	// (types.NetworkExternalID); absent on the default network.
	ExtIDNetwork = "k8s.ovn.org/network"
	// ExtIDTopology is layer3, layer2 or localnet (types.TopologyExternalID).
	ExtIDTopology = "k8s.ovn.org/topology"
	// ExtIDRole is primary or secondary (types.NetworkRoleExternalID).
	ExtIDRole = "k8s.ovn.org/role"
	// ExtIDICNode marks the static routes on a cluster router towards
	// another node in interconnect mode ("ic-node", zone_ic_handler.go
	// addRemoteNodeStaticRoutes); the value is that node's name.
	ExtIDICNode = "ic-node"
	// ExtIDOwnerController names the controller that owns a row
	// (libovsdb/ops OwnerControllerKey); OVN-Kubernetes' route import
	// (ovn/routeimport/route_import.go) sets it to RouteImportController
	// on the static routes it copies into a gateway router.
	ExtIDOwnerController = "k8s.ovn.org/owner-controller"
	// RouteImportController is the value of ExtIDOwnerController on the
	// rows of OVN-Kubernetes' route import (controllerName "RouteImport").
	RouteImportController = "RouteImport"
	// ExtIDLegacyController and LegacyRouteImportController are the
	// marker of the first releases of OVN-Kubernetes' route import
	// (route_import.go: ExternalIDs{"controller": "routeimport"}), before
	// it used ExtIDOwnerController; package ovn reads both as
	// RouteImportController.
	ExtIDLegacyController       = "controller"
	LegacyRouteImportController = "routeimport"
)

// other_config keys of a Logical_Switch.
const (
	// CfgSubnet holds an IPv4 CIDR.
	CfgSubnet = "subnet"
	// CfgIPv6Prefix holds only the address of an IPv6 subnet: its length
	// is not written there (see docs/ovn-nb.md).
	CfgIPv6Prefix = "ipv6_prefix"
)

// The topologies of a network (ExtIDTopology).
const (
	TopologyLayer3   = "layer3"
	TopologyLayer2   = "layer2"
	TopologyLocalnet = "localnet"
)

// Entity names, after the network prefix.
const (
	Layer2Switch   = "ovn_layer2_switch"
	LocalnetSwitch = "ovn_localnet_switch"
	ClusterRouter  = "ovn_cluster_router"
	TransitRouter  = "transit_router"
	TransitSwitch  = "transit_switch"
	JoinSwitch     = "join"
	// GatewayRouterPrefix goes before the network prefix and node name:
	// GR_<prefix><node>.
	GatewayRouterPrefix = "GR_"
)

// Port name prefixes (go-controller/pkg/types/const.go).
const (
	// RouterToSwitch names the router port on a node switch (layer3, on the
	// cluster router) or on a layer2 switch (on the gateway router, before
	// the layer2 transit router): rtos-<switch>.
	RouterToSwitch = "rtos-"
	// SwitchToRouter is the switch side of RouterToSwitch: stor-<switch>.
	SwitchToRouter = "stor-"
	// TransitRouterToSwitch names the port of <prefix>transit_router on a
	// layer2 switch (OVN-Kubernetes 1.2 and later): trtos-<switch>.
	TransitRouterToSwitch = "trtos-"
	// SwitchToTransitRouter is its switch side: stotr-<switch>.
	SwitchToTransitRouter = "stotr-"
	// RouterToTransitSwitch names a cluster router's port on the transit
	// switch in interconnect mode: <prefix>rtots-<node>.
	RouterToTransitSwitch = "rtots-"
	// TransitSwitchToRouter is its switch side: <prefix>tstor-<node>.
	TransitSwitchToRouter = "tstor-"
	// GatewayRouterToJoinSwitch names a router's port on the join switch:
	// rtoj-GR_<prefix><node> (gateway router) and
	// rtoj-<prefix>ovn_cluster_router (types.GWRouterToJoinSwitchPrefix).
	GatewayRouterToJoinSwitch = "rtoj-"
	// JoinSwitchToGatewayRouter is its switch side: jtor-<router>.
	JoinSwitchToGatewayRouter = "jtor-"
	// GatewayRouterToExtSwitch names a gateway router's port on the
	// external switch: rtoe-GR_<prefix><node>
	// (types.GWRouterToExtSwitchPrefix); route import uses it as the
	// output_port of imported routes.
	GatewayRouterToExtSwitch = "rtoe-"
	// ManagementPort is the node's management port: <prefix>k8s-<node>.
	ManagementPort = "k8s-"
)

// NetworkPrefix is the prefix OVN-Kubernetes puts before the names of a
// network's logical entities (GetUserDefinedNetworkPrefix, formerly
// GetSecondaryNetworkPrefix): the network name with '-' and '/' replaced by
// '.', plus '_'; empty for the default network.
func NetworkPrefix(network string) string {
	if network == "" || network == DefaultNetwork {
		return ""
	}
	return strings.NewReplacer("-", ".", "/", ".").Replace(network) + "_"
}

// Service load balancers, egress IPs (go-controller/pkg/types/const.go,
// pkg/libovsdb/ops/db_object_types.go and db_object_ids.go).
const (
	// ExtIDLBKind is the kind of the object a Load_Balancer row serves
	// (types.LoadBalancerKindExternalID); "Service" for Services.
	ExtIDLBKind = "k8s.ovn.org/kind"
	// ExtIDLBOwner is "<namespace>/<name>" of the Service
	// (types.LoadBalancerOwnerExternalID).
	ExtIDLBOwner = "k8s.ovn.org/owner"
	// LBKindService is the value of ExtIDLBKind on Service load balancers.
	LBKindService = "Service"
	// ExtIDOwnerType is the owner type of a row written with DbObjectIDs
	// (libovsdbops.OwnerTypeKey).
	ExtIDOwnerType = "k8s.ovn.org/owner-type"
	// ExtIDName is the object name of such a row (libovsdbops.ObjectNameKey);
	// on an egress IP SNAT "<egressip>_<namespace>/<pod>".
	ExtIDName = "k8s.ovn.org/name"
	// OwnerTypeEgressIP is ExtIDOwnerType on the SNAT rows of egress IPs
	// (libovsdbops.EgressIPOwnerType, NATEgressIP), on the gateway router of
	// the egress node, for the default network and for user-defined
	// networks alike (the controller, in ExtIDOwnerController, differs).
	OwnerTypeEgressIP = "EgressIP"
)
