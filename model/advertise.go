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
