package ovn

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
)

// vipKey names one Service VIP entry: buildServiceVIPs makes one per
// (network, address, Service).
type vipKey struct {
	network string
	vip     netip.Addr
	service string
}

// compareVIPKey is the order of the entries: network (default first),
// address, Service.
func compareVIPKey(a, b vipKey) int {
	return cmp.Or(compareNetworks(a.network, b.network), a.vip.Compare(b.vip), cmp.Compare(a.service, b.service))
}

func keyOf(v model.ServiceVIP) vipKey { return vipKey{v.Network, v.VIP, v.Service} }

// vipIndex keeps the Service VIPs of a set of Service load-balancer rows
// by row, so that a change of some rows builds again only the entries of
// the VIPs those rows hold: what buildServiceVIPs gives over all the rows
// (sorted by name and UUID, as readRows gives them), for O(changed rows ×
// log n) work and one copy of the list (a snapshot holds the old one).
// An address may be in several rows (the TCP and UDP load balancers of
// one Service, the rows of several Services): its entries are merged from
// every row holding them, as buildServiceVIPs merges them.
//
// Not safe for concurrent use: readRows updates it under rowMemo.read. The
// lists it returns are replaced, never mutated.
type vipIndex struct {
	rows     map[string]*lbRow   // UUID -> indexed row
	rowKeys  map[string][]vipKey // UUID -> the entries the row is in
	keys     map[vipKey][]*lbRow // entry -> the rows holding it, by (name, UUID)
	problems map[string][]string // UUID -> the row's problems, rows with any
	list     []model.ServiceVIP  // sorted by compareVIPKey
	probList []string            // sorted

	// The protected addresses of the rows, as lbProtected gives them
	// over all the rows: by address, the rows holding it (by compareLB:
	// the first one's reason is kept), each row's addresses and problems,
	// and the list, sorted by prefix.
	protRows     map[netip.Addr][]*lbRow
	protKeys     map[string][]netip.Addr
	protProblems map[string][]string
	prot         []model.ProtectedPrefix
	protProbList []string // sorted
}

func newVIPIndex() *vipIndex {
	return &vipIndex{rows: map[string]*lbRow{}, rowKeys: map[string][]vipKey{},
		keys: map[vipKey][]*lbRow{}, problems: map[string][]string{}, list: []model.ServiceVIP{},
		protRows: map[netip.Addr][]*lbRow{}, protKeys: map[string][]netip.Addr{}, protProblems: map[string][]string{},
		prot: []model.ProtectedPrefix{}}
}

// compareLB is readRows' order of load-balancer rows.
func compareLB(a, b *lbRow) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UUID, b.UUID))
}

// vipContrib is what one row gives buildServiceVIPs: the entries it is in
// and its problems (the same texts, in the same cases).
func vipContrib(lb *lbRow) (keys []vipKey, problems []string) {
	if ns, name, ok := strings.Cut(lb.Owner, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, []string{fmt.Sprintf("%s %s: external_ids %s %q is not <namespace>/<name>; its VIPs are not advertised",
			tableLoadBalancer, lb.Name, ovnk.ExtIDLBOwner, lb.Owner)}
	}
	p := lb.parsed()
	for _, v := range p.VIPs {
		if v.Template || !v.Addr.IsValid() || isMasquerade(v.Addr) {
			continue
		}
		if why := specialPurpose(netip.PrefixFrom(v.Addr, v.Addr.BitLen())); why != "" {
			problems = append(problems, fmt.Sprintf("%s %s vips[%q]: %s %s: never advertised", tableLoadBalancer, lb.Name, v.Key, v.Addr, why))
			continue
		}
		for _, b := range v.BadBackends {
			problems = append(problems, fmt.Sprintf("%s %s vips[%q] backend %q: not IP:PORT, [IPv6]:PORT or an address; left out",
				tableLoadBalancer, lb.Name, v.Key, b))
		}
	}
	network := networkName(lb.Network)
	for _, a := range p.Addrs {
		if _, special := model.SpecialPurposeOverlap(netip.PrefixFrom(a.Addr, a.Addr.BitLen())); special {
			continue
		}
		keys = append(keys, vipKey{network: network, vip: a.Addr, service: lb.Owner})
	}
	return keys, problems
}

// backendsOf is the backends row lb holds for address a.
func backendsOf(lb *lbRow, a netip.Addr) []netip.Addr {
	addrs := lb.parsed().Addrs
	i, ok := slices.BinarySearchFunc(addrs, a, func(x lbAddr, t netip.Addr) int { return x.Addr.Compare(t) })
	if !ok {
		return nil
	}
	return addrs[i].Backends
}

// entry builds k's entry from the rows holding it, as buildServiceVIPs
// merges them; ok is false when no row holds it.
func (x *vipIndex) entry(k vipKey) (v model.ServiceVIP, ok bool) {
	rows := x.keys[k]
	if len(rows) == 0 {
		return v, false
	}
	var (
		backends []netip.Addr
		merged   bool
		names    = make([]string, 0, len(rows))
	)
	for _, lb := range rows {
		if len(names) == 0 || names[len(names)-1] != lb.Name {
			names = append(names, lb.Name)
		}
		bs := backendsOf(lb, k.vip)
		switch {
		case len(bs) == 0 || slices.Equal(backends, bs):
		case backends == nil:
			backends = bs
		default:
			backends = append(slices.Clip(backends), bs...)
			merged = true
		}
	}
	if merged {
		slices.SortFunc(backends, netip.Addr.Compare)
		backends = slices.Compact(backends)
	}
	if backends == nil {
		backends = []netip.Addr{}
	}
	return model.ServiceVIP{Service: k.service, Network: k.network, VIP: k.vip, Backends: slices.Clip(backends),
		Source: tableLoadBalancer + " " + sourceNames(names) + " vips"}, true
}

// sameVIP says whether two entries of one key are equal.
func sameVIP(a, b model.ServiceVIP) bool {
	return a.Source == b.Source && slices.Equal(a.Backends, b.Backends)
}

// protContrib is what one row gives lbProtected: its addresses (each
// once, unmapped) and its problems (the same texts).
func protContrib(lb *lbRow) (addrs []netip.Addr, problems []string) {
	for _, vip := range lb.parsed().VIPs {
		if vip.Template {
			continue
		}
		if !vip.Addr.IsValid() {
			problems = append(problems, fmt.Sprintf("%s %s vips key %q: not IP:PORT, [IPv6]:PORT or an address; not protected nor advertised",
				tableLoadBalancer, lb.Name, vip.Key))
			continue
		}
		if a := vip.Addr.Unmap(); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, problems
}

// applyProtected is apply's part for the protected addresses: O(changed
// rows × log n) and one copy of the list.
func (x *vipIndex) applyProtected(rows map[string]*lbRow) {
	affected := map[netip.Addr]struct{}{}
	probs := false
	for uuid, lb := range rows {
		if old := x.rows[uuid]; old != nil {
			for _, a := range x.protKeys[uuid] {
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
			delete(x.protKeys, uuid)
		}
		if lb == nil {
			continue
		}
		addrs, problems := protContrib(lb)
		for _, a := range addrs {
			affected[a] = struct{}{}
			list := x.protRows[a]
			i, _ := slices.BinarySearchFunc(list, lb, compareLB)
			x.protRows[a] = slices.Insert(list, i, lb)
		}
		if len(addrs) > 0 {
			x.protKeys[uuid] = addrs
		}
		if len(problems) > 0 {
			x.protProblems[uuid] = problems
			probs = true
		}
	}
	if probs {
		var all []string
		for _, p := range x.protProblems {
			all = append(all, p...)
		}
		slices.Sort(all)
		x.protProbList = all
	}
	if len(affected) == 0 {
		return
	}
	x.prot = editHostProtected(x.prot, affected, func(a netip.Addr) (string, bool) {
		if list := x.protRows[a]; len(list) > 0 {
			return list[0].protectWhy(), true
		}
		return "", false
	})
}

// apply makes the index hold rows: each UUID's row is replaced by the one
// given, nil removing it (gone, or not a Service load balancer). It
// returns the addresses whose entries were added, changed or removed,
// sorted and unique.
func (x *vipIndex) apply(rows map[string]*lbRow) (changed []netip.Addr) {
	x.applyProtected(rows) // before the rows below are replaced
	affected := map[vipKey]struct{}{}
	probs := false
	for uuid, lb := range rows {
		if old := x.rows[uuid]; old != nil {
			for _, k := range x.rowKeys[uuid] {
				affected[k] = struct{}{}
				list := x.keys[k]
				if i := slices.Index(list, old); i >= 0 {
					list = slices.Delete(list, i, i+1)
				}
				if len(list) == 0 {
					delete(x.keys, k)
				} else {
					x.keys[k] = list
				}
			}
			if _, had := x.problems[uuid]; had {
				delete(x.problems, uuid)
				probs = true
			}
			delete(x.rows, uuid)
			delete(x.rowKeys, uuid)
		}
		if lb == nil {
			continue
		}
		keys, problems := vipContrib(lb)
		for _, k := range keys {
			affected[k] = struct{}{}
			list := x.keys[k]
			i, _ := slices.BinarySearchFunc(list, lb, compareLB)
			x.keys[k] = slices.Insert(list, i, lb)
		}
		if len(problems) > 0 {
			x.problems[uuid] = problems
			probs = true
		}
		x.rows[uuid] = lb
		x.rowKeys[uuid] = keys
	}
	if probs {
		var all []string
		for _, p := range x.problems {
			all = append(all, p...)
		}
		slices.Sort(all)
		x.probList = all
	}
	if len(affected) == 0 {
		return nil
	}

	// The edits in list order, then one pass that copies the runs between
	// them.
	edits := make([]vipKey, 0, len(affected))
	for k := range affected {
		edits = append(edits, k)
	}
	slices.SortFunc(edits, compareVIPKey)
	old := x.list
	out := make([]model.ServiceVIP, 0, len(old)+len(edits))
	at := 0
	for _, k := range edits {
		i, found := slices.BinarySearchFunc(old[at:], k, func(v model.ServiceVIP, k vipKey) int { return compareVIPKey(keyOf(v), k) })
		i += at
		out = append(out, old[at:i]...)
		at = i
		v, ok := x.entry(k)
		switch {
		case found && ok:
			if !sameVIP(old[i], v) {
				changed = append(changed, k.vip)
			}
			out = append(out, v)
			at++
		case found:
			changed = append(changed, k.vip)
			at++
		case ok:
			changed = append(changed, k.vip)
			out = append(out, v)
		}
	}
	out = append(out, old[at:]...)
	x.list = slices.Clip(out)
	slices.SortFunc(changed, netip.Addr.Compare)
	return slices.Compact(changed)
}
