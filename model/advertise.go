package model

import (
	"net/netip"
	"time"
)

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

// WorkloadIP is one address of one pod or KubeVirt VM whose logical
// switch port is this node's, in one network (docs/ovn-nb.md,
// "Workloads"): the port carries external_ids pod=true and is not a remote
// one. A disabled port is listed only in a live migration's states
// (HandoverLeft, HandoverArriving).
type WorkloadIP struct {
	IP netip.Addr `json:"ip"`
	// Network is "default" or the network's name as Network.Name has it.
	Network string `json:"network"`
	// Namespace and Pod name the pod (a VM's virt-launcher pod).
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// VM is the KubeVirt VirtualMachine, "<namespace>/<name>", "" for a
	// pod that runs none.
	VM string `json:"vm,omitempty"`
	// Port is the Logical_Switch_Port's name.
	Port string `json:"port"`
	// Handover is where a live migration stands for this address, as this
	// node's NB shows it; Since is when the NB client first saw the
	// address in that state (zero for HandoverNone).
	Handover Handover  `json:"handover,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	// Source names the rows, for explain.
	Source string `json:"source"`
}

// Workload is the pod or VM behind the address, as `routes advertised`
// and explain name it: "vm <namespace>/<name>" or "pod <namespace>/<name>".
func (w WorkloadIP) Workload() string {
	if w.VM != "" {
		return "vm " + w.VM
	}
	return "pod " + w.Namespace + "/" + w.Pod
}

// Handover is a workload address's place in a KubeVirt live migration.
type Handover string

// The handover states (docs/config.md, "Live migration").
const (
	// HandoverNone: the workload runs here, and no migration shows.
	HandoverNone Handover = ""
	// HandoverLeaving: the VM runs here, and the target of a migration
	// away from this node shows (a port of another node with the address,
	// not active yet). It is advertised with the rule's handover
	// attributes, which make a router prefer the target once the target
	// advertises too.
	HandoverLeaving Handover = "leaving"
	// HandoverLeft: the VM became active on another node (this node's
	// port was disabled, or a VM route says it runs in another zone). It
	// is still advertised with the handover attributes until the rule's
	// handover holdTime after Since, so that some node advertises it at
	// every moment, and then withdrawn.
	HandoverLeft Handover = "left"
	// HandoverArriving: this node's port is the target of a migration
	// that is not active yet: not advertised.
	HandoverArriving Handover = "arriving"
)

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
	// WorkloadIPs are the addresses whose workload entries changed.
	WorkloadIPs []netip.Addr
	// Protected are the addresses whose protected host prefix came or
	// went with an egress IP row that is not this node's (another node's,
	// or one on no router yet): not Context, but an aggregate of this
	// node's that would cover one is decided again.
	Protected []netip.Addr
	// OwnedRoutes: the owned static routes changed.
	OwnedRoutes bool
}

// Empty reports whether nothing changed.
func (d SnapshotDelta) Empty() bool {
	return !d.All && !d.Context && !d.OwnedRoutes && len(d.EgressIPs) == 0 && len(d.ServiceVIPs) == 0 && len(d.WorkloadIPs) == 0 && len(d.Protected) == 0
}
