package ovn

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// eipGroupKey names the egress IP SNAT rows of one router (by name, as
// buildEgressIPs matches it) and network: a node's egress IPs are those of
// the groups (gatewayRouterName(network, node), network).
type eipGroupKey struct {
	router, network string
}

// eipGroupOf is n's group; ok is false for a row on no router.
func eipGroupOf(n *natRow) (k eipGroupKey, ok bool) {
	if n.Router == "" {
		return k, false
	}
	return eipGroupKey{router: n.Router, network: networkName(n.RouterNetwork)}, true
}

// eipContrib is what row n, on a node's gateway router, gives
// buildEgressIPs: the address of its entry, the EgressIP object and the
// namespace (ns "" when k8s.ovn.org/name is not <egressip>_<namespace>/<pod>:
// eip is then the name), and its problem; ok is false when it makes no
// entry.
func eipContrib(n *natRow) (a netip.Addr, eip, ns string, ok bool, problem string) {
	a, err := netip.ParseAddr(n.ExternalIP)
	if err != nil || a.Zone() != "" || a.IsUnspecified() {
		// Reported once, by buildProtectedAddresses.
		return netip.Addr{}, "", "", false, ""
	}
	a = a.Unmap()
	if why := specialPurpose(netip.PrefixFrom(a, a.BitLen())); why != "" {
		return a, "", "", false, fmt.Sprintf("%s %s on %s (%s=%s, %s=%s) external_ip %s %s: never advertised",
			tableNAT, n.UUID, n.Router, ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDName, n.Name, a, why)
	}
	eip, rest, ok1 := strings.Cut(n.Name, "_")
	ns, pod, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || eip == "" || ns == "" || pod == "" {
		return a, n.Name, "", true, fmt.Sprintf("%s on %s (%s=%s) %s %q: not <egressip>_<namespace>/<pod>; egress IP %s listed without a namespace (row %s)",
			tableNAT, n.Router, ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDName, n.Name, a, n.UUID)
	}
	return a, eip, ns, true, ""
}

// eipEntry is the entry of address ip on router of network, from the
// k8s.ovn.org/name, EgressIP object and namespace of each row holding it
// (sorted here, in place).
func eipEntry(ip netip.Addr, network, router string, names, eips, namespaces []string) model.EgressIP {
	slices.Sort(names)
	slices.Sort(eips)
	slices.Sort(namespaces)
	names = slices.Compact(names)
	return model.EgressIP{
		IP: ip, Network: network, Router: router, Name: eips[0],
		Namespaces: append([]string{}, slices.Compact(namespaces)...),
		// Not Sprintf: one per egress IP, on every pass.
		Source: tableNAT + " external_ip on " + router + " (" + ovnk.ExtIDOwnerType + "=" + ovnk.OwnerTypeEgressIP + "; " +
			sourceNames(names) + ")",
	}
}

// sameEIP says whether two entries are equal.
func sameEIP(a, b model.EgressIP) bool {
	return a.IP == b.IP && a.Network == b.Network && a.Router == b.Router && a.Name == b.Name &&
		a.Source == b.Source && slices.Equal(a.Namespaces, b.Namespaces)
}

// natBadIP is natProtected's problem for a row whose external_ip is not an
// address ("" when it is one), and the address.
func natBadIP(n *natRow) (netip.Addr, string) {
	a, err := netip.ParseAddr(n.ExternalIP)
	if err != nil || a.Zone() != "" || a.IsUnspecified() {
		return netip.Addr{}, fmt.Sprintf("%s %s (%s=%s, %s=%s) external_ip %q: not an address; not protected nor advertised",
			tableNAT, n.UUID, ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDName, n.Name, n.ExternalIP)
	}
	return a.Unmap(), ""
}

// natWhy is why n's external_ip is protected.
func natWhy(n *natRow) string {
	router := n.Router
	if router == "" {
		router = "no router"
	}
	return fmt.Sprintf("egress IP %s (%s on %s external_ip, %s=%s, %s=%s)", n.Name, tableNAT, router,
		ovnk.ExtIDOwnerType, ovnk.OwnerTypeEgressIP, ovnk.ExtIDOwnerController, n.Controller)
}

// compareNATProt is natProtected's order of the rows: the first row of an
// address names its reason.
func compareNATProt(a, b *natRow) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Router, b.Router), cmp.Compare(a.UUID, b.UUID))
}

// eipChange is an address whose entry in a group was added, changed or
// removed, or (group zero) the address of a row that came, changed or
// went: its protected entry may have.
type eipChange struct {
	group eipGroupKey
	ip    netip.Addr
}

// eipGroup is the entries of one group.
type eipGroup struct {
	byIP     map[netip.Addr][]*natRow // address -> the rows holding it
	problems map[string]string        // UUID -> buildEgressIPs' problem of the row
	list     []model.EgressIP         // sorted by address; replaced, never mutated
	probList []string                 // sorted; replaced, never mutated
}

// eipIndex keeps the egress IP SNAT rows by row, as vipIndex keeps the
// load balancers: buildEgressIPs' entries and problems per group (router
// and network: any node's, picked at build time, natEIPs.forNode), and
// natProtected's list and problems over every row, so that a change of
// some rows builds again only the entries of the addresses those rows
// touch, for O(changed rows × log n) work and one copy of the lists
// touched.
//
// Not safe for concurrent use: readNATs updates it under rowMemo.read.
type eipIndex struct {
	rows   map[string]*natRow // UUID -> indexed row
	groups map[eipGroupKey]*eipGroup
	// The protected addresses, as natProtected gives them: by address,
	// the rows holding it (by compareNATProt), each row's problem, and
	// the lists.
	protRows     map[netip.Addr][]*natRow
	protProblems map[string]string
	prot         []model.ProtectedPrefix
	protProbList []string
	// view is what a read hands out (natEIPs), made again after a change.
	view *natEIPs
}

func newEIPIndex() *eipIndex {
	return &eipIndex{rows: map[string]*natRow{}, groups: map[eipGroupKey]*eipGroup{},
		protRows: map[netip.Addr][]*natRow{}, protProblems: map[string]string{}, prot: []model.ProtectedPrefix{}}
}

// natEIPs is the egress IPs of nbRows.NATs, as readRows keeps them
// (eipIndex); read-only.
type natEIPs struct {
	groups map[eipGroupKey]eipGroupView
	nets   []string // the networks of groups, by compareNetworks
	// prot and protProblems are natProtected of the rows.
	prot         []model.ProtectedPrefix
	protProblems []string
}

// eipGroupView is one group's entries and problems; read-only.
type eipGroupView struct {
	list     []model.EgressIP
	problems []string
}

// forNode is buildEgressIPs(rows, node) of the rows (problems in another
// order).
func (v *natEIPs) forNode(node string) ([]model.EgressIP, []string) {
	if node == "" {
		return nil, nil
	}
	var sel []eipGroupView
	for _, n := range v.nets {
		if g, ok := v.groups[eipGroupKey{gatewayRouterName(n, node), n}]; ok {
			sel = append(sel, g)
		}
	}
	switch len(sel) {
	case 0:
		return []model.EgressIP{}, nil
	case 1:
		return sel[0].list, sel[0].problems
	}
	var list []model.EgressIP
	var problems []string
	for _, g := range sel {
		list = append(list, g.list...)
		problems = append(problems, g.problems...)
	}
	return slices.Clip(list), problems
}

// changedFor is the addresses of changes in node's groups, sorted and
// unique.
func changedFor(changes []eipChange, node string) []netip.Addr {
	var out []netip.Addr
	for _, c := range changes {
		if c.group.router == gatewayRouterName(c.group.network, node) {
			out = append(out, c.ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// snapshot is the index as a read hands it out.
func (x *eipIndex) snapshot() *natEIPs {
	if x.view != nil {
		return x.view
	}
	v := &natEIPs{groups: make(map[eipGroupKey]eipGroupView, len(x.groups)), prot: x.prot, protProblems: x.protProbList}
	nets := map[string]bool{}
	for k, g := range x.groups {
		v.groups[k] = eipGroupView{list: g.list, problems: g.probList}
		nets[k.network] = true
	}
	v.nets = slices.SortedFunc(maps.Keys(nets), compareNetworks)
	x.view = v
	return v
}

// applyProtected is apply's part for the protected addresses.
func (x *eipIndex) applyProtected(rows map[string]*natRow) {
	affected := map[netip.Addr]struct{}{}
	probs := false
	for uuid, n := range rows {
		if old := x.rows[uuid]; old != nil {
			if a, bad := natBadIP(old); bad == "" {
				affected[a] = struct{}{}
				list := x.protRows[a]
				if i := slices.Index(list, old); i >= 0 {
					list = slices.Delete(list, i, i+1)
				}
				if len(list) == 0 {
					delete(x.protRows, a)
				} else {
					x.protRows[a] = list
				}
			}
			if _, had := x.protProblems[uuid]; had {
				delete(x.protProblems, uuid)
				probs = true
			}
		}
		if n == nil {
			continue
		}
		a, bad := natBadIP(n)
		if bad != "" {
			x.protProblems[uuid] = bad
			probs = true
			continue
		}
		affected[a] = struct{}{}
		list := x.protRows[a]
		i, _ := slices.BinarySearchFunc(list, n, compareNATProt)
		x.protRows[a] = slices.Insert(list, i, n)
	}
	if probs {
		x.protProbList = slices.Sorted(maps.Values(x.protProblems))
	}
	if len(affected) == 0 {
		return
	}
	x.prot = editHostProtected(x.prot, affected, func(a netip.Addr) (string, bool) {
		if list := x.protRows[a]; len(list) > 0 {
			return natWhy(list[0]), true
		}
		return "", false
	})
}

// entry builds the entry of a in group k; ok is false when no row holds
// it.
func (x *eipIndex) entry(k eipGroupKey, g *eipGroup, a netip.Addr) (e model.EgressIP, ok bool) {
	rows := g.byIP[a]
	if len(rows) == 0 {
		return e, false
	}
	names := make([]string, 0, len(rows))
	eips := make([]string, 0, len(rows))
	var namespaces []string
	for _, n := range rows {
		_, eip, ns, _, _ := eipContrib(n)
		names = append(names, n.Name)
		eips = append(eips, eip)
		if ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	return eipEntry(a, k.network, k.router, names, eips, namespaces), true
}

// apply makes the index hold rows: each UUID's row is replaced by the one
// given, nil removing it. It returns the entries added, changed or
// removed.
func (x *eipIndex) apply(rows map[string]*natRow) (changed []eipChange) {
	if len(rows) == 0 {
		return nil
	}
	x.view = nil
	x.applyProtected(rows) // before the rows below are replaced
	affected := map[eipGroupKey]map[netip.Addr]struct{}{}
	probs := map[eipGroupKey]bool{}
	touch := func(k eipGroupKey, a netip.Addr) {
		s := affected[k]
		if s == nil {
			s = map[netip.Addr]struct{}{}
			affected[k] = s
		}
		s[a] = struct{}{}
	}
	// Every row's protected entry comes and goes with it (natProtected),
	// an entry or not, on a router or not: its address is a change of no
	// group too.
	protChange := func(n *natRow) {
		if a, why := natBadIP(n); why == "" {
			changed = append(changed, eipChange{ip: a})
		}
	}
	for uuid, n := range rows {
		if old := x.rows[uuid]; old != nil {
			protChange(old)
			if k, ok := eipGroupOf(old); ok && x.groups[k] != nil {
				g := x.groups[k]
				a, _, _, entry, problem := eipContrib(old)
				if entry {
					touch(k, a)
					list := g.byIP[a]
					if i := slices.Index(list, old); i >= 0 {
						list = slices.Delete(list, i, i+1)
					}
					if len(list) == 0 {
						delete(g.byIP, a)
					} else {
						g.byIP[a] = list
					}
				}
				if problem != "" {
					delete(g.problems, uuid)
					probs[k] = true
				}
				if _, ok := affected[k]; !ok {
					affected[k] = map[netip.Addr]struct{}{}
				}
			}
			delete(x.rows, uuid)
		}
		if n == nil {
			continue
		}
		x.rows[uuid] = n
		protChange(n)
		k, ok := eipGroupOf(n)
		a, _, _, entry, problem := eipContrib(n)
		if !ok || !entry && problem == "" {
			continue
		}
		g := x.groups[k]
		if g == nil {
			g = &eipGroup{byIP: map[netip.Addr][]*natRow{}, problems: map[string]string{}, list: []model.EgressIP{}}
			x.groups[k] = g
		}
		if _, ok := affected[k]; !ok {
			affected[k] = map[netip.Addr]struct{}{}
		}
		if entry {
			touch(k, a)
			g.byIP[a] = append(g.byIP[a], n)
		}
		if problem != "" {
			g.problems[uuid] = problem
			probs[k] = true
		}
	}
	for k, addrs := range affected {
		g := x.groups[k]
		if g == nil {
			continue
		}
		if probs[k] {
			g.probList = nil
			if len(g.problems) > 0 {
				g.probList = slices.Sorted(maps.Values(g.problems))
			}
		}
		if len(addrs) > 0 {
			edits := slices.SortedFunc(maps.Keys(addrs), netip.Addr.Compare)
			old := g.list
			out := make([]model.EgressIP, 0, len(old)+len(edits))
			at := 0
			for _, a := range edits {
				i, found := slices.BinarySearchFunc(old[at:], a, func(e model.EgressIP, a netip.Addr) int { return e.IP.Compare(a) })
				i += at
				out = append(out, old[at:i]...)
				at = i
				e, ok := x.entry(k, g, a)
				switch {
				case found && ok:
					if !sameEIP(old[i], e) {
						changed = append(changed, eipChange{k, a})
					}
					out = append(out, e)
					at++
				case found:
					changed = append(changed, eipChange{k, a})
					at++
				case ok:
					changed = append(changed, eipChange{k, a})
					out = append(out, e)
				}
			}
			out = append(out, old[at:]...)
			g.list = slices.Clip(out)
		}
		if len(g.byIP) == 0 && len(g.problems) == 0 {
			delete(x.groups, k)
		}
	}
	return changed
}

// natMemo is what readNATs keeps between reads: the egress IP SNAT rows
// without their router (raw), which NAT rows each router's nat column
// holds, and by NAT row the routers holding it, so that a changed router
// row costs the difference of its nat set with the last read's and a
// changed NAT row its own read; idx is the index of the rows with their
// routers.
type natMemo struct {
	idx     *eipIndex
	raw     map[string]natRow      // NAT UUID -> the row, Router and RouterNetwork unset
	routers map[string]*routerNATs // router UUID -> its nat column
	owners  map[string][]string    // NAT UUID -> the routers holding it, sorted
}

// routerNATs is a router's name, network and nat column: each NAT UUID
// with the pass of setRouter that last saw it in the column (a removal
// costs a walk of the map, not a set of the column built for it).
type routerNATs struct {
	name, network string
	nats          map[string]uint64
	pass          uint64
}

func newNATMemo(idx *eipIndex) *natMemo {
	return &natMemo{idx: idx, raw: map[string]natRow{}, routers: map[string]*routerNATs{}, owners: map[string][]string{}}
}

// natRowOf is n as an egress IP SNAT row without its router; ok is false
// when n is not one.
func natRowOf(n *nbdb.NAT) (natRow, bool) {
	if n.ExternalIDs[ovnk.ExtIDOwnerType] != ovnk.OwnerTypeEgressIP {
		return natRow{}, false
	}
	return natRow{UUID: n.UUID, Type: string(n.Type), ExternalIP: n.ExternalIP, LogicalIP: n.LogicalIP,
		Name: n.ExternalIDs[ovnk.ExtIDName], Controller: n.ExternalIDs[ovnk.ExtIDOwnerController]}, true
}

// setNAT records NAT row uuid (nil: gone); affected gets its UUID.
func (m *natMemo) setNAT(uuid string, n *nbdb.NAT, affected map[string]struct{}) {
	affected[uuid] = struct{}{}
	if n != nil {
		if row, ok := natRowOf(n); ok {
			m.raw[uuid] = row
			return
		}
	}
	delete(m.raw, uuid)
}

func (m *natMemo) addOwner(nat, router string) {
	l := m.owners[nat]
	if i, found := slices.BinarySearch(l, router); !found {
		m.owners[nat] = slices.Insert(l, i, router)
	}
}

func (m *natMemo) removeOwner(nat, router string) {
	l := m.owners[nat]
	if i, found := slices.BinarySearch(l, router); found {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(m.owners, nat)
	} else {
		m.owners[nat] = l
	}
}

// setRouter records router row uuid (nil: gone); affected gets the NAT
// rows whose router may have changed: the difference of its nat set with
// the last one, or every NAT of both when its name or network changed.
func (m *natMemo) setRouter(uuid string, r *nbdb.LogicalRouter, affected map[string]struct{}) {
	old := m.routers[uuid]
	if r == nil || old != nil && (old.name != r.Name || old.network != r.ExternalIDs[extIDNetwork]) {
		if old != nil {
			for id := range old.nats {
				m.removeOwner(id, uuid)
				affected[id] = struct{}{}
			}
			delete(m.routers, uuid)
			old = nil
		}
		if r == nil {
			return
		}
	}
	if old == nil {
		old = &routerNATs{name: r.Name, network: r.ExternalIDs[extIDNetwork], nats: make(map[string]uint64, len(r.Nat))}
		m.routers[uuid] = old
	}
	for _, id := range r.Nat {
		if _, ok := old.nats[id]; ok {
			continue
		}
		old.nats[id] = old.pass
		m.addOwner(id, uuid)
		affected[id] = struct{}{}
	}
	if len(old.nats) == len(r.Nat) {
		return // nothing removed
	}
	// Some removed: those the column no longer holds are the ones not
	// stamped with this pass.
	old.pass++
	for _, id := range r.Nat {
		old.nats[id] = old.pass
	}
	for id, pass := range old.nats {
		if pass != old.pass {
			delete(old.nats, id)
			m.removeOwner(id, uuid)
			affected[id] = struct{}{}
		}
	}
}

// row is NAT uuid's egress IP SNAT row with its router (of the routers
// holding it, the one of the least UUID), nil when it is not one.
func (m *natMemo) row(uuid string) *natRow {
	raw, ok := m.raw[uuid]
	if !ok {
		return nil
	}
	if l := m.owners[uuid]; len(l) > 0 {
		r := m.routers[l[0]]
		raw.Router, raw.RouterNetwork = r.name, r.network
	}
	return &raw
}

// flush gives the index the rows of affected that differ from what it
// holds; changes is what it said changed, rows whether any row did.
func (m *natMemo) flush(affected map[string]struct{}) (changes []eipChange, rows map[string]*natRow) {
	rows = map[string]*natRow{}
	for uuid := range affected {
		n, old := m.row(uuid), m.idx.rows[uuid]
		if n == nil && old == nil || n != nil && old != nil && *n == *old {
			continue
		}
		rows[uuid] = n
	}
	return m.idx.apply(rows), rows
}
