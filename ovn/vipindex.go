package ovn

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
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
// What a row gives (its entries, its protected addresses) is not kept
// beside it: the row is, and gives them again when it goes (vipKeys,
// protAddrs). One map by address finds the rows of an entry and of a
// protected address.
//
// Not safe for concurrent use: readRows updates it under rowMemo.read. The
// lists it returns are replaced, never mutated.
type vipIndex struct {
	// rows are the indexed rows by UUID, each with the cached model it
	// was read from (readLoadBalancers; nil when read from a clone).
	rows map[string]lbEntry
	// byAddr is, by address (addrKey), the first of the rows holding
	// it in a vips key (what protAddrs gives), by compareLB, and more
	// the others of an address several rows hold: the rows of an entry
	// are those of its address that give it (gives), and of a protected
	// address the first one's reason is kept. Most addresses are one
	// row's: a pointer each, not a list.
	byAddr   map[[16]byte]*lbRow
	more     map[[16]byte][]*lbRow
	problems map[string][]string // UUID -> the row's problems, rows with any
	list     []model.ServiceVIP  // sorted by compareVIPKey
	probList []string            // sorted

	// The protected addresses of the rows, as lbProtected gives them
	// over all the rows: each row's problems, and the list, sorted by
	// prefix.
	protProblems map[string][]string
	prot         []model.ProtectedPrefix
	protProbList []string // sorted
}

// lbEntry is one Service load balancer of the last read, with the cached
// model it was read from (nil when read from a clone, by UUID).
type lbEntry struct {
	model *nbdb.LoadBalancer
	row   *lbRow
}

func newVIPIndex() *vipIndex {
	return &vipIndex{rows: map[string]lbEntry{}, byAddr: map[[16]byte]*lbRow{}, more: map[[16]byte][]*lbRow{},
		problems: map[string][]string{}, list: []model.ServiceVIP{},
		protProblems: map[string][]string{}, prot: []model.ProtectedPrefix{}}
}

// compareLB is readRows' order of load-balancer rows.
func compareLB(a, b *lbRow) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UUID, b.UUID))
}

// validOwner says whether owner (k8s.ovn.org/owner) is
// <namespace>/<name>: the rows of other owners give no entry.
func validOwner(owner string) bool {
	ns, name, ok := strings.Cut(owner, "/")
	return ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// special says whether a is in special-purpose address space: never an
// entry.
func special(a netip.Addr) bool {
	_, sp := model.SpecialPurposeOverlap(netip.PrefixFrom(a, a.BitLen()))
	return sp
}

// vipKeys is the entries row lb is in, as buildServiceVIPs makes them.
func vipKeys(lb *lbRow) (keys []vipKey) {
	if !validOwner(lb.Owner) {
		return nil
	}
	network := networkName(lb.Network)
	for _, a := range lb.addrs() {
		if !special(a) {
			keys = append(keys, vipKey{network: network, vip: a, service: lb.Owner})
		}
	}
	return keys
}

// gives says whether row lb is in entry k (vipKeys).
func gives(lb *lbRow, k vipKey) bool {
	if lb.Owner != k.service || networkName(lb.Network) != k.network || !validOwner(lb.Owner) || special(k.vip) {
		return false
	}
	_, ok := backendsOf(lb, k.vip)
	return ok
}

// vipProblems is what buildServiceVIPs says of row lb: the same texts,
// in the same cases.
func vipProblems(lb *lbRow) (problems []string) {
	if !validOwner(lb.Owner) {
		return []string{fmt.Sprintf("%s %s: external_ids %s %q is not <namespace>/<name>; its VIPs are not advertised",
			tableLoadBalancer, lb.Name, ovnk.ExtIDLBOwner, lb.Owner)}
	}
	for j, v := range lb.VIPs {
		if v.template() || !v.Addr.IsValid() || isMasquerade(v.Addr) {
			continue
		}
		if why := specialPurpose(netip.PrefixFrom(v.Addr, v.Addr.BitLen())); why != "" {
			problems = append(problems, fmt.Sprintf("%s %s vips[%q]: %s %s: never advertised", tableLoadBalancer, lb.Name, v.Key, v.Addr, why))
			continue
		}
		for b := range lb.badOf(j) {
			problems = append(problems, fmt.Sprintf("%s %s vips[%q] backend %q: not IP:PORT, [IPv6]:PORT or an address; left out",
				tableLoadBalancer, lb.Name, v.Key, b))
		}
	}
	return problems
}

// backendsOf is the backends row lb holds for address a (backendsAt);
// ok is false when a is none of its addresses (lbRow.addrs).
func backendsOf(lb *lbRow, a netip.Addr) (backends []netip.Addr, ok bool) {
	if !a.IsValid() || isMasquerade(a) {
		return nil, false
	}
	i, ok := slices.BinarySearchFunc(lb.VIPs, a, func(v lbVIP, t netip.Addr) int { return v.Addr.Compare(t) })
	if !ok {
		return nil, false
	}
	return lb.backendsAt(i), true
}

// entry builds k's entry from the rows holding it, as buildServiceVIPs
// merges them; ok is false when no row holds it.
func (x *vipIndex) entry(k vipKey) (v model.ServiceVIP, ok bool) {
	var (
		backends []netip.Addr
		merged   bool
		first    *lbRow
		names    []string
	)
	for lb := range x.rowsOf(k.vip) {
		if !gives(lb, k) {
			continue
		}
		if first == nil {
			first = lb
		}
		if len(names) == 0 || names[len(names)-1] != lb.Name {
			names = append(names, lb.Name)
		}
		bs, _ := backendsOf(lb, k.vip)
		switch {
		case len(bs) == 0 || slices.Equal(backends, bs):
		case backends == nil:
			backends = bs
		default:
			backends = append(slices.Clip(backends), bs...)
			merged = true
		}
	}
	if first == nil {
		return v, false
	}
	if merged {
		slices.SortFunc(backends, netip.Addr.Compare)
		backends = slices.Compact(backends)
	}
	if backends == nil {
		backends = []netip.Addr{}
	}
	return model.ServiceVIP{Service: k.service, Network: k.network, VIP: k.vip, Backends: slices.Clip(backends),
		Source: vipSource(first, names)}, true
}

// vipSource is the Source of an entry of the rows named names, the first
// of them lb: of one row, a part of the row's protectWhy (one string for
// both, made once per row version).
func vipSource(lb *lbRow, names []string) string {
	if len(names) == 1 {
		return lb.source()
	}
	return tableLoadBalancer + " " + sourceNames(names) + " vips"
}

// sameVIP says whether two entries of one key are equal.
func sameVIP(a, b model.ServiceVIP) bool {
	return a.Source == b.Source && slices.Equal(a.Backends, b.Backends)
}

// protAddrs is the addresses row lb gives lbProtected, each once,
// unmapped.
func protAddrs(lb *lbRow) (addrs []netip.Addr) {
	for _, vip := range lb.VIPs {
		if vip.template() || !vip.Addr.IsValid() {
			continue
		}
		if a := vip.Addr.Unmap(); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// protProblems is what lbProtected says of row lb (the same texts).
func protProblems(lb *lbRow) (problems []string) {
	for _, vip := range lb.VIPs {
		if !vip.template() && !vip.Addr.IsValid() {
			problems = append(problems, fmt.Sprintf("%s %s vips key %q: not IP:PORT, [IPv6]:PORT or an address; not protected nor advertised",
				tableLoadBalancer, lb.Name, vip.Key))
		}
	}
	return problems
}

// apply makes the index hold rows: each UUID's row is replaced by the one
// given, nil removing it (gone, or not a Service load balancer). It
// returns the addresses whose entries were added, changed or removed,
// sorted and unique. A row given is recorded with no model (setModel
// sets it).
func (x *vipIndex) apply(rows map[string]*lbRow) (changed []netip.Addr) {
	affected := map[vipKey]struct{}{}
	protAffected := map[netip.Addr]struct{}{}
	probs, protProbs := false, false
	for uuid, lb := range rows {
		if old := x.rows[uuid].row; old != nil {
			for _, k := range vipKeys(old) {
				affected[k] = struct{}{}
			}
			for _, a := range protAddrs(old) {
				protAffected[a] = struct{}{}
				x.removeRow(a, old)
			}
			if _, had := x.problems[uuid]; had {
				delete(x.problems, uuid)
				probs = true
			}
			if _, had := x.protProblems[uuid]; had {
				delete(x.protProblems, uuid)
				protProbs = true
			}
			delete(x.rows, uuid)
		}
		if lb == nil {
			continue
		}
		for _, k := range vipKeys(lb) {
			affected[k] = struct{}{}
		}
		for _, a := range protAddrs(lb) {
			protAffected[a] = struct{}{}
			x.addRow(a, lb)
		}
		if p := vipProblems(lb); len(p) > 0 {
			x.problems[uuid] = p
			probs = true
		}
		if p := protProblems(lb); len(p) > 0 {
			x.protProblems[uuid] = p
			protProbs = true
		}
		x.rows[uuid] = lbEntry{row: lb}
	}
	if probs {
		x.probList = allProblems(x.problems)
	}
	if protProbs {
		x.protProbList = allProblems(x.protProblems)
	}
	if len(protAffected) > 0 {
		x.prot = editHostProtected(x.prot, protAffected, func(a netip.Addr) (string, bool) {
			if lb := x.byAddr[addrKey(a)]; lb != nil {
				return lb.protectWhy(), true
			}
			return "", false
		})
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

// addrKey is a as a key of vipIndex.byAddr: the addresses of its rows
// are unmapped and have no zone (parseVIP), so their 16 bytes name them.
func addrKey(a netip.Addr) [16]byte { return a.As16() }

// rowsOf is the rows holding address a in a vips key, by compareLB.
func (x *vipIndex) rowsOf(a netip.Addr) iter.Seq[*lbRow] {
	return func(yield func(*lbRow) bool) {
		k := addrKey(a)
		first := x.byAddr[k]
		if first == nil || !yield(first) {
			return
		}
		for _, lb := range x.more[k] {
			if !yield(lb) {
				return
			}
		}
	}
}

// addRow records that lb holds address a.
func (x *vipIndex) addRow(a netip.Addr, lb *lbRow) {
	k := addrKey(a)
	first := x.byAddr[k]
	if first == nil {
		x.byAddr[k] = lb
		return
	}
	all := append([]*lbRow{first}, x.more[k]...)
	i, _ := slices.BinarySearchFunc(all, lb, compareLB)
	all = slices.Insert(all, i, lb)
	x.byAddr[k], x.more[k] = all[0], all[1:]
}

// removeRow records that lb no longer holds address a.
func (x *vipIndex) removeRow(a netip.Addr, lb *lbRow) {
	k := addrKey(a)
	rest := x.more[k]
	switch {
	case x.byAddr[k] != lb:
		i := slices.Index(rest, lb)
		if i < 0 {
			return
		}
		rest = slices.Delete(rest, i, i+1)
	case len(rest) == 0:
		delete(x.byAddr, k)
		return
	default:
		x.byAddr[k], rest = rest[0], rest[1:]
	}
	if len(rest) == 0 {
		delete(x.more, k)
	} else {
		x.more[k] = rest
	}
}

// setModel records that the row of uuid was read from the cached model m.
func (x *vipIndex) setModel(uuid string, m *nbdb.LoadBalancer) {
	if e, ok := x.rows[uuid]; ok {
		e.model = m
		x.rows[uuid] = e
	}
}

// allProblems is the problems of every row, sorted.
func allProblems(byRow map[string][]string) []string {
	var all []string
	for _, p := range byRow {
		all = append(all, p...)
	}
	slices.Sort(all)
	return all
}
