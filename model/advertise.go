package model

import "net/netip"

// EgressIP is an egress IP this node holds in one network: the external_ip
// of the EgressIP SNAT rows on this node's gateway router of that network
// (docs/ovn-nb.md, "Advertise: egress IPs and Service VIPs"). Egress IPs
// that other nodes hold are not listed.
type EgressIP struct {
	IP netip.Addr `json:"ip"`
	// Network is "default" or the network's name as Network.Name has it.
	Network string `json:"network"`
	// Router is the gateway router holding the SNAT rows, GR_<prefix><node>.
	Router string `json:"router"`
	// Name is the EgressIP object, from external_ids k8s.ovn.org/name
	// "<egressip>_<namespace>/<pod>" (the first in name order when rows of
	// several objects share the IP).
	Name string `json:"name"`
	// Namespaces are the namespaces of the pods using the IP on this node,
	// sorted and unique.
	Namespaces []string `json:"namespaces"`
	// Source names the rows, for explain.
	Source string `json:"source"`
}

// ServiceVIP is one VIP address of one Service load balancer in one
// network, whatever its ports, protocols and load-balancer rows.
type ServiceVIP struct {
	// Service is "<namespace>/<name>" (external_ids k8s.ovn.org/owner).
	Service string `json:"service"`
	// Network is "default" or the network's name as Network.Name has it.
	Network string     `json:"network"`
	VIP     netip.Addr `json:"vip"`
	// Backends are every backend address of the VIP on every port and
	// protocol and in every row, sorted and unique; empty when the Service
	// has no ready endpoint.
	Backends []netip.Addr `json:"backends"`
	// Source names the rows, for explain.
	Source string `json:"source"`
}

// SnapshotDelta says what differs between two snapshots of one node, for
// whoever updates per item instead of recomputing everything (the NB
// client hands it over with the newer snapshot). Addresses name every
// entry of that address, of any network or Service: an entry added,
// changed or removed.
type SnapshotDelta struct {
	// All: the snapshots may differ anywhere (the first snapshot, a new
	// NB session, a full re-read, a node the caller did not read before):
	// recompute everything.
	All bool
	// Context: something else than the egress IPs, the Service VIPs and
	// the owned routes (and the routers' StaticRoutes, which follow them)
	// changed (networks, routers, node addresses, or
	// protected prefixes other than the host prefixes of the addresses
	// listed below, which come and go with their entries): what depends
	// on them is recomputed.
	Context bool
	// EgressIPs are the addresses whose egress IP entries changed.
	EgressIPs []netip.Addr
	// ServiceVIPs are the addresses whose Service VIP entries changed.
	ServiceVIPs []netip.Addr
	// OwnedRoutes: the owned static routes changed.
	OwnedRoutes bool
}

// Empty reports whether nothing changed.
func (d SnapshotDelta) Empty() bool {
	return !d.All && !d.Context && !d.OwnedRoutes && len(d.EgressIPs) == 0 && len(d.ServiceVIPs) == 0
}
