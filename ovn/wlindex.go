package ovn

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// lspRow is the part of a Logical_Switch_Port ovnbgp reads for workloads
// (docs/ovn-nb.md, "Workloads"): a pod's port (external_ids pod=true), or
// a transit switch port tstor-<node> naming another node and its chassis.
type lspRow struct {
	UUID      string
	Name      string
	Type      string // "" or "remote" for a pod
	Enabled   bool   // enabled is unset or true
	Pod       bool   // external_ids:pod=true
	Namespace string // external_ids:namespace
	PodName   string // the LSP name after its last "_"
	Network   string // external_ids:k8s.ovn.org/network, "default" when absent
	Chassis   string // options:requested-chassis
	Node      string // external_ids:node, of a tstor- port
	IPs       []netip.Addr
	DHCP      []string // dhcpv4_options, dhcpv6_options UUIDs
	Problem   string   // why the addresses were not read, "" if they were
}

// OVN-Kubernetes' keys on a pod's switch port and its DHCP options
// (docs/ovn-nb.md, "Workloads").
const (
	extIDPod          = "pod"
	extIDNamespace    = "namespace"
	extIDNode         = "node"
	optRequestedCh    = "requested-chassis"
	lspTypeRemote     = "remote"
	ownerTypeVM       = "VirtualMachine"
	extIDVM           = "k8s.ovn.org/vm"
	extIDVMNamespace  = "k8s.ovn.org/namespace"
	extIDZone         = "k8s.ovn.org/zone"
	zoneLocal         = "local"
	zoneRemote        = "remote"
	tableSwitchPort   = "Logical_Switch_Port"
	tableDHCPOptions  = "DHCP_Options"
	workloadPodMarker = "true"
)

// lspRowOf is the part of p ovnbgp reads, nil when p is neither a pod's
// port nor a tstor- port.
func lspRowOf(p *nbdb.LogicalSwitchPort) *lspRow {
	if strings.HasPrefix(p.Name, ovnk.TransitSwitchToRouter) || strings.Contains(p.Name, "_"+ovnk.TransitSwitchToRouter) {
		if n := p.ExternalIDs[extIDNode]; n != "" {
			return &lspRow{UUID: p.UUID, Name: p.Name, Type: p.Type, Node: n, Chassis: p.Options[optRequestedCh]}
		}
	}
	if p.ExternalIDs[extIDPod] != workloadPodMarker {
		return nil
	}
	r := &lspRow{UUID: p.UUID, Name: p.Name, Type: p.Type, Enabled: p.Enabled == nil || *p.Enabled, Pod: true,
		Namespace: p.ExternalIDs[extIDNamespace], Network: p.ExternalIDs[extIDNetwork],
		Chassis: p.Options[optRequestedCh]}
	if r.Network == "" {
		r.Network = model.DefaultNetwork
	}
	if i := strings.LastIndexByte(p.Name, '_'); i >= 0 {
		r.PodName = p.Name[i+1:]
	}
	for _, d := range []*string{p.Dhcpv4Options, p.Dhcpv6Options} {
		if d != nil && *d != "" {
			r.DHCP = append(r.DHCP, *d)
		}
	}
	// A disabled port (a live migration's target not ready yet, or its
	// source once the target is) has no addresses: its port_security
	// tells which address it hands over.
	col, list := "addresses", p.Addresses
	if !r.Enabled {
		col, list = "port_security", p.PortSecurity
	}
	if len(list) == 0 {
		return r
	}
	f := strings.Fields(list[0])
	if slices.Contains(f, "dynamic") {
		// OVN's own IPAM (dynamic_addresses), which OVN-Kubernetes never
		// asks for: the address is not known here.
		r.Problem = fmt.Sprintf("%s %s %s %q: a dynamic address (OVN's IPAM, which OVN-Kubernetes does not use) is not read; port skipped", tableSwitchPort, p.Name, col, list[0])
		return r
	}
	for _, s := range f[min(1, len(f)):] {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() {
			r.Problem = fmt.Sprintf("%s %s %s %q: %q is not an address; port skipped", tableSwitchPort, p.Name, col, list[0], s)
			r.IPs = nil
			return r
		}
		r.IPs = append(r.IPs, a)
	}
	return r
}

// vmOf is the VM "ns/name" a DHCP_Options row's external_ids name, ""
// if none (OVN-Kubernetes' extractVMFromExternalIDs).
func vmOf(d *nbdb.DHCPOptions) string {
	if d.ExternalIDs[ovnk.ExtIDOwnerType] != ownerTypeVM {
		return ""
	}
	if n := d.ExternalIDs[ovnk.ExtIDName]; strings.Count(n, "/") == 1 && !strings.HasPrefix(n, "/") && !strings.HasSuffix(n, "/") {
		return n
	}
	ns, vm := d.ExternalIDs[extIDVMNamespace], d.ExternalIDs[extIDVM]
	if ns != "" && vm != "" {
		return ns + "/" + vm
	}
	return ""
}

// vmRouteRow is a KubeVirt static route on ovn_cluster_router
// (k8s.ovn.org/vm): the VM runs in this zone (local) or another (remote).
type vmRouteRow struct {
	UUID     string
	IPPrefix string
	Zone     string
	VM       string
}

// wlKey is one address of one network.
type wlKey struct {
	network string
	ip      netip.Addr
}

// wlContext is what decides which ports are node's beyond the ports
// themselves: node's networks and their pod subnets, the primary
// networks (switches with k8s.ovn.org/role=primary), the KubeVirt VM
// routes by address, and the other nodes named by tstor- ports.
type wlContext struct {
	node    string
	nets    map[string]wlNet
	primary map[string]bool
	routes  map[netip.Addr]vmRoute
	ic      bool            // tstor- ports name nodes: interconnect mode
	others  map[string]bool // names and chassis of the other nodes
}

type wlNet struct {
	topology string
	subnets  []netip.Prefix
}

type vmRoute struct {
	zone  string
	since time.Time // when first seen; zero: at the session's first read
	uuid  string
}

// wlIndex keeps the workload ports of one session by row, and node's
// workload addresses (list), so that one port's change recomputes only
// the addresses of that port and of the other ports of its pod
// (primary network) or sharing its address (handover). The caller holds
// rowMemo.read.
type wlIndex struct {
	ports  map[string]*lspRow                 // pod ports by UUID
	models map[string]*nbdb.LogicalSwitchPort // the cached model each row was read from (nil: by UUID)
	tstor  map[string]*lspRow
	// byKey, byPod and dhcpUsers are sets of port UUIDs as small
	// slices (each UUID once): most hold one, and a map per key was 7.6 MB
	// of 10,000 pods' index (issue 19).
	byKey     map[wlKey][]string
	byPod     map[string][]string // "ns/pod" -> UUIDs
	dhcp      map[string]string   // DHCP_Options UUID -> VM
	dhcpUsers map[string][]string
	// seenEnabled: this client saw the port enabled (here or remote); since: when each
	// address of each port first showed its handover state.
	seenEnabled map[string]bool
	// ranHere: a default-network port outside this node's subnets that
	// had its VM's local-zone route (the VM ran here after a migration).
	ranHere   map[sinceKey]bool
	since     map[sinceKey]sinceState
	routeSeen map[string]time.Time
	first     bool // the session's first read is under way

	// The node the entries are for ("" none yet), its context, the
	// entries by key and sorted (replaced, never mutated). The list points
	// into the entries' slices, so that a change copies 8 bytes per entry,
	// not the whole entry (~160 bytes with pointers: 1.6 MB for 10,000
	// pods, each change, issue 19).
	ctx      *wlContext
	entries  map[wlKey][]model.WorkloadIP
	list     []*model.WorkloadIP
	ctxRows  wlCtxRows         // the rows ctx was built from
	problems map[string]string // port UUID -> problem
	// outside are the ports of a layer2 network whose address lies
	// outside the network's subnets (compute's problem), by key.
	outside  map[wlKey]map[string]string
	probList []string
	now      func() time.Time
	// seq counts the reads (readWorkloads).
	seq uint64
}

// wlCtxRows are the rows a wlContext was built from.
type wlCtxRows struct {
	switches []switchRow
	ports    []routerPortRow
	routes   []vmRouteRow
}

type sinceKey struct {
	port string
	ip   netip.Addr
}

type sinceState struct {
	h     model.Handover
	since time.Time
}

func newWLIndex() *wlIndex {
	return &wlIndex{ports: map[string]*lspRow{}, tstor: map[string]*lspRow{}, byKey: map[wlKey][]string{},
		byPod: map[string][]string{}, models: map[string]*nbdb.LogicalSwitchPort{}, dhcp: map[string]string{}, dhcpUsers: map[string][]string{},
		seenEnabled: map[string]bool{}, ranHere: map[sinceKey]bool{}, since: map[sinceKey]sinceState{}, routeSeen: map[string]time.Time{},
		entries: map[wlKey][]model.WorkloadIP{}, problems: map[string]string{}, outside: map[wlKey]map[string]string{}, first: true, now: time.Now}
}

// addTo adds uuid to the set m[k], once.
func addTo[K comparable](m map[K][]string, k K, uuid string) {
	if s := m[k]; !slices.Contains(s, uuid) {
		m[k] = append(s, uuid)
	}
}

// delFrom removes uuid from the set m[k], and the set once empty.
func delFrom[K comparable](m map[K][]string, k K, uuid string) {
	s := m[k]
	i := slices.Index(s, uuid)
	switch {
	case i < 0:
	case len(s) == 1:
		delete(m, k)
	default:
		m[k] = slices.Delete(s, i, i+1) // the index's own: not shared
	}
}

func podKey(r *lspRow) string { return r.Namespace + "/" + r.PodName }

// setPort records the port uuid as row (nil: gone) and adds to affected
// the keys whose entries may change; it says whether the context (the
// other nodes) changed.
func (x *wlIndex) setPort(uuid string, row *lspRow, affected map[wlKey]struct{}) (ctxChanged bool) {
	if old, ok := x.tstor[uuid]; ok {
		if row != nil && !row.Pod && row.Node == old.Node && row.Chassis == old.Chassis && row.Name == old.Name {
			return false
		}
		delete(x.tstor, uuid)
		ctxChanged = true
	}
	if old := x.ports[uuid]; old != nil {
		x.touchPod(old, affected)
		for _, ip := range old.IPs {
			delFrom(x.byKey, wlKey{old.Network, ip}, uuid)
		}
		delFrom(x.byPod, podKey(old), uuid)
		for _, d := range old.DHCP {
			delFrom(x.dhcpUsers, d, uuid)
		}
		delete(x.ports, uuid)
		delete(x.problems, uuid)
	}
	if row == nil || !row.Pod {
		delete(x.seenEnabled, uuid)
		for k := range x.since {
			if k.port == uuid {
				delete(x.since, k)
			}
		}
		for k := range x.ranHere {
			if k.port == uuid {
				delete(x.ranHere, k)
			}
		}
	}
	if row == nil {
		return ctxChanged
	}
	if !row.Pod {
		x.tstor[uuid] = row
		return true
	}
	x.ports[uuid] = row
	if row.Enabled {
		x.seenEnabled[uuid] = true
	}
	for _, ip := range row.IPs {
		addTo(x.byKey, wlKey{row.Network, ip}, uuid)
	}
	addTo(x.byPod, podKey(row), uuid)
	for _, d := range row.DHCP {
		addTo(x.dhcpUsers, d, uuid)
	}
	if row.Problem != "" {
		x.problems[uuid] = row.Problem
	}
	x.touchPod(row, affected)
	return ctxChanged
}

// touchPod adds the keys of every port of r's pod (r's own among them):
// a port on a primary network hides the pod's default-network port.
func (x *wlIndex) touchPod(r *lspRow, affected map[wlKey]struct{}) {
	for _, ip := range r.IPs {
		affected[wlKey{r.Network, ip}] = struct{}{}
	}
	for _, u := range x.byPod[podKey(r)] {
		p := x.ports[u]
		for _, ip := range p.IPs {
			affected[wlKey{p.Network, ip}] = struct{}{}
		}
	}
}

// setDHCP records the DHCP_Options row uuid's VM ("" none or gone).
func (x *wlIndex) setDHCP(uuid, vm string, affected map[wlKey]struct{}) {
	if x.dhcp[uuid] == vm {
		return
	}
	if vm == "" {
		delete(x.dhcp, uuid)
	} else {
		x.dhcp[uuid] = vm
	}
	for _, u := range x.dhcpUsers[uuid] {
		p := x.ports[u]
		for _, ip := range p.IPs {
			affected[wlKey{p.Network, ip}] = struct{}{}
		}
	}
}

// context builds node's wlContext from the rows and the index's tstor-
// ports, and records the rows.
func (x *wlIndex) context(node string, switches []switchRow, ports []routerPortRow, routes []vmRouteRow) *wlContext {
	x.ctxRows = wlCtxRows{switches: switches, ports: ports, routes: routes}
	c := &wlContext{node: node, nets: map[string]wlNet{}, primary: map[string]bool{},
		routes: map[netip.Addr]vmRoute{}, others: map[string]bool{}}
	pm := make(map[string]routerPortRow, len(ports))
	for _, p := range ports {
		pm[p.Name] = p
	}
	for _, r := range switches {
		network, topology, ok := classify(r, node)
		if r.Role == "primary" {
			c.primary[network] = true
		}
		if !ok {
			continue
		}
		subnets, _, _, _ := resolveSubnets(r, topology, pm)
		n := c.nets[network]
		n.topology = topology
		for _, s := range subnets {
			n.subnets = append(n.subnets, s.Prefix)
		}
		c.nets[network] = n
	}
	for _, rt := range routes {
		a, err := netip.ParseAddr(rt.IPPrefix)
		if err != nil {
			p, perr := netip.ParsePrefix(rt.IPPrefix)
			if perr != nil || !p.IsSingleIP() {
				continue
			}
			a = p.Addr()
		}
		since, seen := x.routeSeen[rt.UUID]
		if !seen && !x.first {
			since = x.now()
		}
		old, dup := c.routes[a]
		if dup && (old.zone == zoneRemote || old.uuid < rt.UUID) {
			continue
		}
		c.routes[a] = vmRoute{zone: rt.Zone, since: since, uuid: rt.UUID}
	}
	for _, t := range x.tstor {
		if t.Node == node {
			continue
		}
		c.ic = true
		c.others[t.Node] = true
		if t.Chassis != "" {
			c.others[t.Chassis] = true
		}
	}
	return c
}

// noteRoutes records when each VM route was first seen.
func (x *wlIndex) noteRoutes(routes []vmRouteRow) {
	seen := make(map[string]bool, len(routes))
	for _, rt := range routes {
		seen[rt.UUID] = true
		if _, ok := x.routeSeen[rt.UUID]; !ok {
			var t time.Time
			if !x.first {
				t = x.now()
			}
			x.routeSeen[rt.UUID] = t
		}
	}
	for u := range x.routeSeen {
		if !seen[u] {
			delete(x.routeSeen, u)
		}
	}
}

func sameWLContext(a, b *wlContext) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.node == b.node && a.ic == b.ic && maps.Equal(a.primary, b.primary) && maps.Equal(a.others, b.others) &&
		maps.Equal(a.routes, b.routes) &&
		maps.EqualFunc(a.nets, b.nets, func(x, y wlNet) bool { return x.topology == y.topology && slices.Equal(x.subnets, y.subnets) })
}

// local says whether r is node's port (docs/ovn-nb.md, "Workloads").
func (c *wlContext) local(r *lspRow) bool {
	if r.Type != "" {
		return false
	}
	if r.Chassis == "" || r.Chassis == c.node {
		return true
	}
	return c.ic && !c.others[r.Chassis]
}

// compute is the entries of key k for the context.
func (x *wlIndex) compute(c *wlContext, k wlKey) []model.WorkloadIP {
	delete(x.outside, k) // made again below, if still so
	net, ok := c.nets[k.network]
	if !ok {
		return nil
	}
	uuids := x.byKey[k]
	if len(uuids) == 0 {
		return nil
	}
	var out []model.WorkloadIP
	for _, u := range uuids {
		r := x.ports[u]
		if !c.local(r) || r.Problem != "" {
			continue
		}
		if net.topology == ovnk.TopologyLayer2 && outsideSubnets(net.subnets, k.ip) {
			// One network, one subnet per family (other_config): an
			// address outside it is not the network's.
			if x.outside[k] == nil {
				x.outside[k] = map[string]string{}
			}
			x.outside[k][u] = fmt.Sprintf("%s %s address %s is outside network %s's subnets (%s): not advertised",
				tableSwitchPort, r.Name, k.ip, k.network, prefixesString(net.subnets))
			continue
		}
		if k.network == model.DefaultNetwork && x.onPrimaryUDN(c, r) {
			continue
		}
		// Another port of the network with the address: a live
		// migration's other side (the least name, to name one). A
		// disabled one this client saw enabled is a source the VM left,
		// not a target: this port is then the VM's, not leaving.
		var otherOn, otherOff string
		least := func(cur, name string) string {
			if cur == "" || name < cur {
				return name
			}
			return cur
		}
		for _, v := range uuids {
			if v == u {
				continue
			}
			if o := x.ports[v]; o.Enabled {
				otherOn = least(otherOn, o.Name)
			} else if !x.seenEnabled[v] {
				otherOff = least(otherOff, o.Name)
			}
		}
		e := model.WorkloadIP{IP: k.ip, Network: k.network, Namespace: r.Namespace, Pod: r.PodName, Port: r.Name,
			VM: x.vm(r)}
		col := "addresses"
		if !r.Enabled {
			col = "port_security"
		}
		src := tableSwitchPort + " " + r.Name + " " + col // per entry: no fmt
		var since time.Time
		switch {
		case r.Enabled && otherOff != "":
			e.Handover = model.HandoverLeaving
			src += fmt.Sprintf("; %s %s is disabled with this address: a migration's target", tableSwitchPort, otherOff)
		case !r.Enabled && x.seenEnabled[u]:
			// Seen enabled, now disabled: the VM left, whether or not the
			// target's enable is read yet. OVN-Kubernetes writes both in
			// one transaction, but libovsdb hands over a transaction's
			// rows one event at a time, and a read between the two must
			// not withdraw it: it is held as any left address is.
			e.Handover = model.HandoverLeft
			if otherOn != "" {
				src += fmt.Sprintf("; disabled, and %s is enabled with this address: the VM left", otherOn)
			} else {
				src += "; disabled after this client saw it enabled: the VM left"
			}
		case !r.Enabled && otherOn == "":
			delete(x.since, sinceKey{u, k.ip})
			continue
		case !r.Enabled:
			e.Handover = model.HandoverArriving
			src += fmt.Sprintf("; disabled, and %s is enabled with this address: a migration's target", otherOn)
		}
		if k.network == model.DefaultNetwork && e.Handover == model.HandoverNone {
			rt, hasRoute := c.routes[k.ip]
			inSubnet := slices.ContainsFunc(net.subnets, func(p netip.Prefix) bool { return p.Contains(k.ip) })
			switch {
			case hasRoute && rt.zone == zoneRemote:
				e.Handover, since = model.HandoverLeft, rt.since
				src += fmt.Sprintf("; %s %s=%s on %s: the VM runs in another zone", tableStaticRoute, extIDZone, zoneRemote, ovnk.ClusterRouter)
			case !inSubnet && hasRoute && rt.zone == zoneLocal:
				x.ranHere[sinceKey{u, k.ip}] = true
				src += fmt.Sprintf("; outside this node's subnets, %s %s=%s on %s: the VM runs here", tableStaticRoute, extIDZone, zoneLocal, ovnk.ClusterRouter)
			case !inSubnet && x.ranHere[sinceKey{u, k.ip}]:
				// OVN-Kubernetes deletes the VM's routes when it goes
				// back to the node that owns its subnet: handed over.
				e.Handover = model.HandoverLeft
				src += fmt.Sprintf("; outside this node's subnets, its %s %s=%s gone: the VM left", tableStaticRoute, extIDZone, zoneLocal)
			case !inSubnet:
				e.Handover = model.HandoverArriving
				src += fmt.Sprintf("; outside this node's subnets, no %s %s=%s for it: not active here yet", tableStaticRoute, extIDZone, zoneLocal)
			}
			e.Source = src
			if e.Handover == model.HandoverLeft && hasRoute && rt.zone == zoneRemote {
				e.Since = since // when the route was seen
				out = append(out, e)
				continue
			}
		}
		e.Source = src
		if e.Handover == model.HandoverNone {
			delete(x.since, sinceKey{u, k.ip})
		} else {
			sk := sinceKey{u, k.ip}
			s, ok := x.since[sk]
			if !ok || s.h != e.Handover {
				s = sinceState{h: e.Handover, since: x.now()}
				x.since[sk] = s
			}
			e.Since = s.since
		}
		out = append(out, e)
	}
	slices.SortFunc(out, compareWorkload)
	return out
}

// onPrimaryUDN says whether r's pod has a port on a primary network: its
// default-network port holds an infrastructure-locked address.
func (x *wlIndex) onPrimaryUDN(c *wlContext, r *lspRow) bool {
	for _, u := range x.byPod[podKey(r)] {
		if p := x.ports[u]; p.Network != model.DefaultNetwork && c.primary[p.Network] {
			return true
		}
	}
	return false
}

// vm is the VM of r's DHCP options, "" if none.
func (x *wlIndex) vm(r *lspRow) string {
	for _, d := range r.DHCP {
		if v := x.dhcp[d]; v != "" {
			return v
		}
	}
	return ""
}

// compareWorkload is model.Snapshot.WorkloadIPs' order; the fields after
// the port only break ties between rows of one name (NB indexes the name:
// not in a sane database), so that the order is total.
func compareWorkload(a, b model.WorkloadIP) int {
	return cmp.Or(compareNetworks(a.Network, b.Network), a.IP.Compare(b.IP), cmp.Compare(a.Port, b.Port),
		cmp.Compare(a.VM, b.VM), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod),
		cmp.Compare(a.Handover, b.Handover), a.Since.Compare(b.Since), cmp.Compare(a.Source, b.Source))
}

// compareWorkloadRef is compareWorkload of the entries a and b point to.
func compareWorkloadRef(a, b *model.WorkloadIP) int { return compareWorkload(*a, *b) }

// rebuild computes every entry for c; it returns the keys whose entries
// differ from before.
func (x *wlIndex) rebuild(c *wlContext) []wlKey {
	old := x.entries
	x.ctx, x.entries, x.outside = c, map[wlKey][]model.WorkloadIP{}, map[wlKey]map[string]string{}
	var changed []wlKey
	for k := range x.byKey {
		if e := x.compute(c, k); len(e) > 0 {
			x.entries[k] = e
		}
	}
	for k, e := range x.entries {
		if !slices.Equal(e, old[k]) {
			changed = append(changed, k)
		}
	}
	for k := range old {
		if _, ok := x.entries[k]; !ok {
			changed = append(changed, k)
		}
	}
	x.list = make([]*model.WorkloadIP, 0, len(x.entries))
	for _, e := range x.entries {
		for i := range e {
			x.list = append(x.list, &e[i])
		}
	}
	slices.SortFunc(x.list, compareWorkloadRef)
	x.sortProblems()
	return changed
}

// update recomputes the affected keys; it returns the addresses whose
// entries changed. The list is the last one, edited (a copy: it is
// shared): O(n) copying of pointers and O(k log n) comparisons for k
// changed entries, never k insertions into the list one at a time (10,000
// ports added at once took 0.27 s of memmove that way).
func (x *wlIndex) update(affected map[wlKey]struct{}) []wlKey {
	var changed []wlKey
	var dropped, added []*model.WorkloadIP
	for k := range affected {
		e := x.compute(x.ctx, k)
		old := x.entries[k]
		if slices.Equal(e, old) {
			continue
		}
		changed = append(changed, k)
		for i := range old {
			dropped = append(dropped, &old[i])
		}
		for i := range e {
			added = append(added, &e[i])
		}
		if len(e) == 0 {
			delete(x.entries, k)
		} else {
			x.entries[k] = e
		}
	}
	if len(changed) > 0 {
		x.list = editSorted(x.list, dropped, added, compareWorkloadRef)
	}
	x.sortProblems()
	return changed
}

// editSorted is list (sorted by cmp, a total order) without the elements
// of drop and with those of add, in a new slice: the edits in list order,
// each found by binary search, and the runs of list between them copied
// whole. O(n) copying but only O(k log n) comparisons for k edits: a merge
// that compared every element took a third of the daemon's CPU for one pod
// changed among 10,000 (issue 19). A drop not in list is ignored; of equal
// elements, a drop removes the first.
func editSorted[T any](list, drop, add []T, cmp func(a, b T) int) []T {
	slices.SortFunc(drop, cmp)
	slices.SortFunc(add, cmp)
	out := make([]T, 0, len(list)-min(len(drop), len(list))+len(add))
	at, i, j := 0, 0, 0 // next of list, of drop, of add
	for i < len(drop) || j < len(add) {
		// The next edit in order; a drop before an add equal to it.
		if i < len(drop) && (j == len(add) || cmp(drop[i], add[j]) <= 0) {
			k, found := slices.BinarySearchFunc(list[at:], drop[i], cmp)
			out = append(out, list[at:at+k]...)
			at += k
			if found {
				at++
			}
			i++
			continue
		}
		k, _ := slices.BinarySearchFunc(list[at:], add[j], cmp)
		out = append(out, list[at:at+k]...)
		at += k
		out = append(out, add[j])
		j++
	}
	return append(out, list[at:]...)
}

// outsideSubnets says whether a is outside every subnet of its family,
// while some subnet of that family is known.
func outsideSubnets(subnets []netip.Prefix, a netip.Addr) bool {
	known := false
	for _, p := range subnets {
		if p.Addr().Is4() == a.Is4() {
			known = true
			if p.Contains(a) {
				return false
			}
		}
	}
	return known
}

func prefixesString(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func (x *wlIndex) sortProblems() {
	p := slices.Collect(maps.Values(x.problems))
	for _, m := range x.outside {
		for _, why := range m {
			p = append(p, why)
		}
	}
	slices.Sort(p)
	if !slices.Equal(p, x.probList) {
		x.probList = p
	}
}

// wlView is the workload addresses of one read, for node; read-only.
type wlView struct {
	// seq is the index's read this view is of (wlIndex.seq).
	seq      uint64
	node     string
	list     []*model.WorkloadIP
	problems []string
	// memo, switches, ports and routes let forNode compute another
	// node's addresses.
	memo     *rowMemo
	switches []switchRow
	ports    []routerPortRow
	routes   []vmRouteRow
}

// forNode is node's workload addresses: the read's when it was for node,
// else computed now from the index and kept for the next reads. newer
// says the index had moved on past this view's read (a later read, not
// installed yet, changed it): the addresses are newer than the rows, and
// a delta against this view's generation would lose that change.
func (v *wlView) forNode(node string) (list []*model.WorkloadIP, problems []string, newer bool) {
	if v == nil {
		return nil, nil, false
	}
	if v.node == node {
		return v.list, v.problems, false
	}
	m := v.memo
	m.read.Lock()
	defer m.read.Unlock()
	x := m.wl
	if x == nil {
		return nil, nil, false
	}
	if x.ctx == nil || x.ctx.node != node {
		x.rebuild(x.context(node, v.switches, v.ports, v.routes))
	}
	return x.list, x.probList, x.seq != v.seq
}

// wlResult is what readWorkloads found changed.
type wlResult struct {
	changed bool
	keys    []wlKey // the keys whose entries changed, for node
	node    string
	unknown bool // the entries were built whole: compare the snapshots
}

// readWorkloads fills out's workload addresses (wlView) from the switch
// ports and DHCP options, when they are monitored. Like readNATs: with no
// event of either table and the same context rows, they are the last
// read's; when every event named its row, only those rows are read again
// (RowCache.Row) and only the addresses of those ports (and of the
// ports of the same pod, or with the same address) computed again; else
// both tables are read whole and compared with the index's rows. A
// changed context (node's networks and subnets, the primary networks,
// the VM routes, the other nodes) computes every address again. The
// caller holds s.m.read.
func readWorkloads(out *nbRows, s *readState) (wlResult, error) {
	m, prev := s.m, s.prev
	if !m.workloads {
		return wlResult{}, nil
	}
	reset := prev == nil || prev.wl == nil || m.wl == nil
	if !reset && s.fresh(nbdb.LogicalSwitchPortTable) && s.fresh(nbdb.DHCPOptionsTable) &&
		sameRows(prev.Switches, out.Switches) && sameRows(prev.Ports, out.Ports) && sameRows(prev.VMRoutes, out.VMRoutes) {
		out.wl = prev.wl
		return wlResult{}, nil
	}
	lt, dt := s.tc.Table(nbdb.LogicalSwitchPortTable), s.tc.Table(nbdb.DHCPOptionsTable)
	if lt == nil || dt == nil {
		return wlResult{}, fmt.Errorf("no %s or %s table in the cache", nbdb.LogicalSwitchPortTable, nbdb.DHCPOptionsTable)
	}
	x := m.wl
	if reset {
		x = newWLIndex()
	}
	affected := map[wlKey]struct{}{}
	ctxChanged := reset
	lspIDs, lspByRow := s.changedRows(nbdb.LogicalSwitchPortTable)
	dIDs, dByRow := s.changedRows(nbdb.DHCPOptionsTable)
	if !reset && lspByRow && dByRow && len(lspIDs)+len(dIDs) <= max(64, len(x.ports)/64) {
		ports := make(map[string]*lspRow, len(lspIDs))
		for _, id := range lspIDs {
			var row *lspRow
			if mod := lt.Row(id); mod != nil {
				p, ok := mod.(*nbdb.LogicalSwitchPort)
				if !ok {
					return wlResult{}, fmt.Errorf("%s cache holds a %T", nbdb.LogicalSwitchPortTable, mod)
				}
				row = lspRowOf(p)
			}
			ports[id] = row
		}
		dhcp := make(map[string]string, len(dIDs))
		for _, id := range dIDs {
			vm := ""
			if mod := dt.Row(id); mod != nil {
				d, ok := mod.(*nbdb.DHCPOptions)
				if !ok {
					return wlResult{}, fmt.Errorf("%s cache holds a %T", nbdb.DHCPOptionsTable, mod)
				}
				vm = vmOf(d)
			}
			dhcp[id] = vm
		}
		for id, row := range ports {
			if x.samePort(id, row) {
				continue
			}
			x.models[id] = nil
			if x.setPort(id, row, affected) {
				ctxChanged = true
			}
		}
		for id, vm := range dhcp {
			x.setDHCP(id, vm, affected)
		}
	} else {
		all := lt.RowsShallow()
		rows := make(map[string]*lspRow, len(all))
		models := make(map[string]*nbdb.LogicalSwitchPort, len(all))
		for uuid, mod := range all {
			p, ok := mod.(*nbdb.LogicalSwitchPort)
			if !ok {
				return wlResult{}, fmt.Errorf("%s cache holds a %T", nbdb.LogicalSwitchPortTable, mod)
			}
			models[uuid] = p
			if x.models[uuid] == p {
				continue
			}
			rows[uuid] = lspRowOf(p)
		}
		dhcp := map[string]string{}
		for uuid, mod := range dt.RowsShallow() {
			d, ok := mod.(*nbdb.DHCPOptions)
			if !ok {
				return wlResult{}, fmt.Errorf("%s cache holds a %T", nbdb.DHCPOptionsTable, mod)
			}
			if vm := vmOf(d); vm != "" {
				dhcp[uuid] = vm
			}
		}
		for uuid, row := range rows {
			if !x.samePort(uuid, row) && x.setPort(uuid, row, affected) {
				ctxChanged = true
			}
		}
		for uuid := range x.ports {
			if _, ok := all[uuid]; !ok {
				x.setPort(uuid, nil, affected)
			}
		}
		for uuid := range x.tstor {
			if _, ok := all[uuid]; !ok {
				x.setPort(uuid, nil, affected)
				ctxChanged = true
			}
		}
		for uuid, vm := range dhcp {
			x.setDHCP(uuid, vm, affected)
		}
		for uuid := range x.dhcp {
			if _, ok := dhcp[uuid]; !ok {
				x.setDHCP(uuid, "", affected)
			}
		}
		x.models = models
	}
	m.wl = x
	x.noteRoutes(out.VMRoutes)
	res := wlResult{unknown: reset}
	view := &wlView{memo: m, switches: out.Switches, ports: out.Ports, routes: out.VMRoutes}
	if x.ctx != nil {
		node := x.ctx.node
		// The context is the last one while its rows are the same
		// slices (readRows shares a table's rows until they change).
		c := x.ctx
		if ctxChanged || !sameRows(x.ctxRows.switches, out.Switches) || !sameRows(x.ctxRows.ports, out.Ports) ||
			!sameRows(x.ctxRows.routes, out.VMRoutes) {
			c = x.context(node, out.Switches, out.Ports, out.VMRoutes)
		}
		var keys []wlKey
		if ctxChanged || !sameWLContext(c, x.ctx) {
			keys = x.rebuild(c)
		} else {
			keys = x.update(affected)
		}
		res.changed, res.keys, res.node = len(keys) > 0 || reset, keys, node
		view.node, view.list, view.problems = node, x.list, x.probList
	} else {
		// No node's addresses in the index yet (forNode computes them):
		// any row that changed may change them, which keys, unknown.
		res.changed = reset || ctxChanged || len(affected) > 0
		res.unknown = res.unknown || res.changed
		view.node = "\x00"
	}
	x.first = false
	x.seq++
	view.seq = x.seq
	out.wl = view
	return res, nil
}

// samePort says whether row is what the index holds for uuid.
func (x *wlIndex) samePort(uuid string, row *lspRow) bool {
	old := x.ports[uuid]
	if old == nil {
		old = x.tstor[uuid]
	}
	if old == nil || row == nil {
		return old == row
	}
	return old.UUID == row.UUID && old.Name == row.Name && old.Type == row.Type && old.Enabled == row.Enabled &&
		old.Pod == row.Pod && old.Namespace == row.Namespace && old.PodName == row.PodName && old.Network == row.Network &&
		old.Chassis == row.Chassis && old.Node == row.Node && slices.Equal(old.IPs, row.IPs) &&
		slices.Equal(old.DHCP, row.DHCP) && old.Problem == row.Problem
}
