package ovn

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"

	"github.com/ovn-org/libovsdb/cache"
	libmodel "github.com/ovn-org/libovsdb/model"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// rowMemo is what readRows keeps between reads of one session's cache:
// the rows of the last read with the version of each table they were read
// at, the UUIDs of the rows each cache event named since, the Service
// load-balancer rows by UUID with their Service VIPs (vipIndex), the egress
// IP SNATs and the routers' nat sets with their egress IPs (natMemo,
// eipIndex), and the generations of the rows read (gen, log).
//
// libovsdb replaces a cached model on an update and never mutates it. The
// cache event handler (event) bumps a table's version after libovsdb
// changed it and records the row's UUID, so a table whose version is the
// last read's has not changed since, and one whose every event since named
// its row changed only in those rows: a read that raced an update recorded
// the version from before it and reads that row again next time. An event
// naming no row (touch) or events libovsdb dropped (touchAll) make the next
// read read the table whole; it still tells which rows changed, by
// comparing them with the last read's. A new session's cache holds new
// models: nothing is reused across sessions.
type rowMemo struct {
	mu sync.Mutex
	// version counts each table's cache events; all counts touchAll.
	version map[string]uint64
	all     uint64
	// dirty holds, per table, the UUIDs named by events since the last
	// read, each at the table version of its latest event; unknown the
	// version of a table's latest event that named no row.
	dirty   map[string]map[string]uint64
	unknown map[string]uint64
	// last is the last read's rows, from cache, at versions lastVer and
	// lastAll; replaced, never mutated.
	last    *nbRows
	cache   *cache.TableCache
	lastVer map[string]uint64
	lastAll uint64
	// gen is the generation of the last rows read; log says what changed
	// at each of the last maxGenLog generations.
	gen uint64
	log []genChange

	// read serializes reads (the session's, ApplyRoutes'): what follows is
	// updated in place by the read holding it.
	read sync.Mutex
	// vips are the Service load-balancer rows of the last read, by UUID,
	// and their Service VIPs.
	vips *vipIndex
	// nats are the egress IP SNATs of the last read and the routers'
	// nat columns, with their index (readNATs).
	nats *natMemo
	// workloads: the switch ports and DHCP options are monitored
	// (config.OVN.Workloads); wl is their index (readWorkloads).
	workloads bool
	wl        *wlIndex
}

// maxGenLog is how many generations SnapshotDelta can look back.
const maxGenLog = 1024

// maxDirty is the most UUIDs kept per table between reads; beyond, the
// table is read whole.
const maxDirty = 1 << 16

// tableSet names the kinds of rows a generation changed.
type tableSet uint16

const (
	tSwitches tableSet = 1 << iota
	tPorts
	tNATs
	tRouters
	tRoutes
	tLoadBalancers
	// tLBProtected: a load balancer's protected addresses may differ
	// (a row added or removed with VIPs, or its VIP keys, name or owner
	// changed): more than a backend.
	tLBProtected
	// tWorkloads: node's workload addresses may differ.
	tWorkloads
	// tNBGlobal: northd's version differs.
	tNBGlobal
)

// genChange is what changed from the rows of generation gen-1 to those of
// gen.
type genChange struct {
	gen uint64
	// reset: anything may have changed (a new session's first read).
	reset  bool
	tables tableSet
	// vips are the addresses whose Service VIP entries changed.
	vips []netip.Addr
	// eips are the egress IP entries (of any node) that changed;
	// eipsUnknown says the rows had no egress IP index (compare the
	// snapshots).
	eips        []eipChange
	eipsUnknown bool
	// wls are the workload keys whose entries changed, for node wlNode;
	// wlsUnknown: not known (compare the snapshots).
	wls        []wlKey
	wlNode     string
	wlsUnknown bool
}

// lbVIPs is the Service VIPs of nbRows.LoadBalancers, as readRows keeps
// them (vipIndex); read-only.
type lbVIPs struct {
	list     []model.ServiceVIP
	problems []string // sorted
	// prot and protProblems are lbProtected of the rows, kept row by row
	// (vipIndex): a new VIP costs an edit, not a sort of every VIP.
	prot         []model.ProtectedPrefix
	protProblems []string
}

func newRowMemo() *rowMemo {
	return &rowMemo{version: map[string]uint64{}, dirty: map[string]map[string]uint64{}, unknown: map[string]uint64{}}
}

// rowUUID is the UUID of a cached model of a monitored table.
func rowUUID(m libmodel.Model) (string, bool) {
	switch r := m.(type) {
	case *nbdb.LoadBalancer:
		return r.UUID, true
	case *nbdb.LogicalSwitch:
		return r.UUID, true
	case *nbdb.LogicalRouterPort:
		return r.UUID, true
	case *nbdb.LogicalRouter:
		return r.UUID, true
	case *nbdb.LogicalRouterStaticRoute:
		return r.UUID, true
	case *nbdb.NAT:
		return r.UUID, true
	case *nbdb.LogicalSwitchPort:
		return r.UUID, true
	case *nbdb.DHCPOptions:
		return r.UUID, true
	case *nbdb.NBGlobal:
		return r.UUID, true
	}
	return "", false
}

// event records a cache event of table about row m (libovsdb calls the
// handler after it changed the cache).
func (m *rowMemo) event(table string, row libmodel.Model) {
	uuid, ok := rowUUID(row)
	if !ok || uuid == "" {
		m.touch(table)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version[table]++
	d := m.dirty[table]
	if d == nil {
		d = map[string]uint64{}
		m.dirty[table] = d
	}
	if len(d) >= maxDirty {
		m.unknown[table] = m.version[table]
		clear(d)
		return
	}
	d[uuid] = m.version[table]
}

// touch records a cache event of table that names no row: the next read
// reads the table whole.
func (m *rowMemo) touch(table string) {
	m.mu.Lock()
	m.version[table]++
	m.unknown[table] = m.version[table]
	m.mu.Unlock()
}

// touchRow records a cache event of table about the row uuid.
func (m *rowMemo) touchRow(table, uuid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version[table]++
	if m.dirty[table] == nil {
		m.dirty[table] = map[string]uint64{}
	}
	m.dirty[table][uuid] = m.version[table]
}

// touchAll makes the next read read every table whole.
func (m *rowMemo) touchAll() {
	m.mu.Lock()
	m.all++
	m.mu.Unlock()
}

// readState is one read's view of the memo, taken at its start.
type readState struct {
	m        *rowMemo
	tc       *cache.TableCache
	prev     *nbRows // the last read's rows from tc, nil if none
	ver      map[string]uint64
	all      uint64
	lastVer  map[string]uint64
	lastAll  uint64
	dirty    map[string][]string // tables with events since the last read: the rows they named
	wholeTab map[string]bool     // tables with an event naming no row since the last read
}

// begin starts a read of tc; the caller holds m.read.
func (m *rowMemo) begin(tc *cache.TableCache) *readState {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &readState{m: m, tc: tc, ver: maps.Clone(m.version), all: m.all, lastVer: m.lastVer, lastAll: m.lastAll,
		dirty: map[string][]string{}, wholeTab: map[string]bool{}}
	if m.last != nil && m.cache == tc {
		s.prev = m.last
	}
	for t, v := range s.ver {
		if v == s.lastVer[t] {
			continue
		}
		s.wholeTab[t] = m.unknown[t] > s.lastVer[t]
		s.dirty[t] = slices.Collect(maps.Keys(m.dirty[t]))
	}
	return s
}

// fresh says whether table has had no event since the last read.
func (s *readState) fresh(table string) bool {
	return s.prev != nil && s.all == s.lastAll && s.ver[table] == s.lastVer[table]
}

// changedRows returns the UUIDs of table's rows that changed since the
// last read; ok is false when that is not known (read the table whole).
func (s *readState) changedRows(table string) (uuids []string, ok bool) {
	if s.prev == nil || s.all != s.lastAll || s.wholeTab[table] {
		return nil, false
	}
	return s.dirty[table], true
}

// done records rows as the last read's at the versions seen at begin,
// with what changed since the previous read: the whole tables compared
// (an equal table keeps the previous read's slice, shared), the load
// balancers and NATs as readLoadBalancers and readNATs found them. It sets rows.gen.
func (s *readState) done(rows *nbRows, lb lbResult, nat natResult, wl wlResult) {
	var ch genChange
	p := s.prev
	if p == nil {
		ch.reset = true
	} else {
		table := func(bit tableSet, cur, old any, keep func()) {
			if sameSlice(cur, old) {
				return
			}
			if reflect.DeepEqual(cur, old) {
				keep()
				return
			}
			ch.tables |= bit
		}
		table(tSwitches, rows.Switches, p.Switches, func() { rows.Switches = p.Switches })
		table(tPorts, rows.Ports, p.Ports, func() { rows.Ports = p.Ports })
		if nat.changed {
			ch.tables |= tNATs
		}
		ch.eips, ch.eipsUnknown = nat.eips, rows.eips == nil
		table(tRouters, rows.Routers, p.Routers, func() { rows.Routers = p.Routers })
		table(tRoutes, rows.Routes, p.Routes, func() { rows.Routes = p.Routes })
		if lb.changed {
			ch.tables |= tLoadBalancers
		}
		if lb.prot {
			ch.tables |= tLBProtected
		}
		ch.vips = lb.vips
		if rows.Northd != p.Northd {
			ch.tables |= tNBGlobal
		}
		if wl.changed {
			ch.tables |= tWorkloads
			ch.wls, ch.wlNode, ch.wlsUnknown = wl.keys, wl.node, wl.unknown
		}
	}
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch.reset || ch.tables != 0 {
		m.gen++
		ch.gen = m.gen
		m.log = append(m.log, ch)
		if len(m.log) > maxGenLog {
			m.log = slices.Delete(m.log, 0, len(m.log)-maxGenLog)
		}
	}
	rows.gen = m.gen
	m.last, m.cache, m.lastVer, m.lastAll = rows, s.tc, s.ver, s.all
	// The rows named by the events this read saw have been read; a later
	// event of the same row keeps it.
	for t, uuids := range s.dirty {
		d := m.dirty[t]
		for _, u := range uuids {
			if d[u] <= s.ver[t] {
				delete(d, u)
			}
		}
		if len(d) == 0 {
			// A map keeps the room of its most rows: 10,000 rows
			// added in one transaction would keep ~50 B each.
			delete(m.dirty, t)
		}
	}
}

// sameSlice says whether a and b (slices of one type) are the same slice.
func sameSlice(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Len() == vb.Len() && (va.Len() == 0 || va.Pointer() == vb.Pointer())
}

// changesSince merges what changed after generation since up to gen; ok
// is false when the log cannot say (since is 0, newer than gen or older
// than the log, or a new session in between).
func (m *rowMemo) changesSince(since, gen uint64) (ch genChange, ok bool) {
	if since == 0 || since > gen {
		return ch, false
	}
	if since == gen {
		return ch, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.log, since+1, func(c genChange, g uint64) int { return cmp.Compare(c.gen, g) })
	if i == len(m.log) || m.log[i].gen != since+1 {
		return ch, false
	}
	for _, c := range m.log[i:] {
		if c.gen > gen {
			break
		}
		if c.reset {
			return genChange{}, false
		}
		ch.tables |= c.tables
		ch.vips = append(ch.vips, c.vips...)
		ch.eips = append(ch.eips, c.eips...)
		ch.eipsUnknown = ch.eipsUnknown || c.eipsUnknown
		if c.tables&tWorkloads != 0 {
			ch.wlsUnknown = ch.wlsUnknown || c.wlsUnknown || ch.wlNode != "" && ch.wlNode != c.wlNode
			ch.wlNode = c.wlNode
			ch.wls = append(ch.wls, c.wls...)
		}
	}
	slices.SortFunc(ch.vips, netip.Addr.Compare)
	ch.vips = slices.Compact(ch.vips)
	return ch, true
}

// lbResult is what readLoadBalancers found changed.
type lbResult struct {
	changed bool         // a Service load-balancer row changed
	prot    bool         // tLBProtected
	vips    []netip.Addr // the addresses whose Service VIP entries changed
}

// lbRowOf is the Service load balancer l, parsed; nil when l is not one.
func lbRowOf(l *nbdb.LoadBalancer) *lbRow {
	if l.ExternalIDs[ovnk.ExtIDLBKind] != ovnk.LBKindService {
		return nil
	}
	keys := slices.Sorted(maps.Keys(l.Vips))
	values := make([]string, len(keys))
	for i, k := range keys {
		values[i] = l.Vips[k]
	}
	return newLBRow(l.UUID, l.Name, l.ExternalIDs[ovnk.ExtIDLBOwner], l.ExternalIDs[extIDNetwork], keys, values)
}

// readLoadBalancers fills out's Service load balancers and their VIPs. A
// table with no event since the last read is the last read's; one whose
// events all named their rows is read at those rows only (RowCache.Row);
// else the table is read whole and compared with the last read, row by
// row (a cached model read before is not parsed again). Either way, only
// the rows whose parse differs (sameLB) are given to the VIP index, and
// what they changed is returned. The caller holds s.m.read.
func readLoadBalancers(out *nbRows, s *readState) (lbResult, error) {
	m, prev := s.m, s.prev
	if prev != nil && s.fresh(nbdb.LoadBalancerTable) {
		out.LoadBalancers, out.vips = prev.LoadBalancers, prev.vips
		return lbResult{}, nil
	}
	t := s.tc.Table(nbdb.LoadBalancerTable)
	if t == nil {
		return lbResult{}, fmt.Errorf("no %s table in the cache", nbdb.LoadBalancerTable)
	}
	reset := prev == nil || prev.vips == nil || m.vips == nil
	var last map[string]lbEntry
	if !reset {
		last = m.vips.rows
	}
	changes := map[string]*lbRow{} // UUID -> the new row, nil: gone
	// models are the cached models of the rows read whole, by UUID: of
	// the new rows, and of the rows whose model changed but not what
	// they read (the next read compares them by pointer).
	models := map[string]*nbdb.LoadBalancer{}
	uuids, byRow := s.changedRows(nbdb.LoadBalancerTable)
	// A row read by UUID is a clone (~9 µs with its parse), a row of a
	// whole read a map entry and a pointer compared: beyond ~1/64 of
	// the table, the whole read is cheaper.
	if reset || len(uuids) > max(64, len(last)/64) {
		byRow = false
	}
	if byRow {
		for _, uuid := range uuids {
			var row *lbRow
			if mod := t.Row(uuid); mod != nil {
				l, ok := mod.(*nbdb.LoadBalancer)
				if !ok {
					return lbResult{}, fmt.Errorf("%s cache holds a %T", nbdb.LoadBalancerTable, mod)
				}
				row = lbRowOf(l)
			}
			old := last[uuid].row
			if sameLB(old, row) {
				continue
			}
			changes[uuid] = row
		}
	} else {
		all := t.RowsShallow()
		for uuid, mod := range all {
			l, ok := mod.(*nbdb.LoadBalancer)
			if !ok {
				return lbResult{}, fmt.Errorf("%s cache holds a %T", nbdb.LoadBalancerTable, mod)
			}
			e, had := last[uuid]
			if had && e.model == l {
				continue
			}
			row := lbRowOf(l)
			if row != nil {
				models[uuid] = l
			}
			if sameLB(e.row, row) {
				continue
			}
			changes[uuid] = row
		}
		for uuid := range last {
			if _, ok := all[uuid]; !ok {
				changes[uuid] = nil
			}
		}
	}

	// Nothing fails from here: the memo is updated.
	if reset {
		m.vips = newVIPIndex()
	}
	res := lbResult{changed: len(changes) > 0, prot: reset}
	olds := make(map[string]*lbRow, len(changes))
	for uuid, row := range changes {
		olds[uuid] = m.vips.rows[uuid].row
		if !sameProtected(olds[uuid], row) {
			res.prot = true
		}
	}
	if len(changes) > 0 {
		res.vips = m.vips.apply(changes)
	}
	for uuid, l := range models {
		m.vips.setModel(uuid, l)
	}
	if !reset && len(changes) == 0 {
		out.LoadBalancers, out.vips = prev.LoadBalancers, prev.vips
		return res, nil
	}
	out.vips = &lbVIPs{list: m.vips.list, problems: m.vips.probList,
		prot: m.vips.prot, protProblems: m.vips.protProbList}
	if reset || len(changes) > 64 {
		out.LoadBalancers = make([]*lbRow, 0, len(m.vips.rows))
		for _, e := range m.vips.rows {
			out.LoadBalancers = append(out.LoadBalancers, e.row)
		}
		slices.SortFunc(out.LoadBalancers, compareLB)
		return res, nil
	}
	// A few rows: the last read's slice, edited (a copy: it is shared).
	lbs := slices.Clone(prev.LoadBalancers)
	for uuid, row := range changes {
		if old := olds[uuid]; old != nil {
			if i, ok := slices.BinarySearchFunc(lbs, old, compareLB); ok {
				lbs = slices.Delete(lbs, i, i+1)
			}
		}
		if row != nil {
			i, _ := slices.BinarySearchFunc(lbs, row, compareLB)
			lbs = slices.Insert(lbs, i, row)
		}
	}
	out.LoadBalancers = lbs
	return res, nil
}

// natResult is what readNATs found changed.
type natResult struct {
	changed bool        // an egress IP SNAT row (or its router) changed
	eips    []eipChange // the egress IP entries that changed
}

// readNATs fills out's egress IP SNATs, with their routers, and their
// egress IPs and protected addresses (eipIndex). With no event of the NAT
// and Logical_Router tables since the last read, they are the last read's;
// when every event named its row, only those NAT rows are read again
// (RowCache.Row) and of the routers only the difference of each changed
// router's nat set with the last read's is looked at (natMemo.setRouter);
// else both tables are read whole, and the rows compared with the index's.
// Either way the index is given only the rows that changed. The caller
// holds s.m.read.
func readNATs(out *nbRows, s *readState) (natResult, error) {
	m, prev := s.m, s.prev
	if prev != nil && prev.eips != nil && s.fresh(nbdb.NATTable) && s.fresh(nbdb.LogicalRouterTable) {
		out.NATs, out.eips = prev.NATs, prev.eips
		return natResult{}, nil
	}
	nt, rt := s.tc.Table(nbdb.NATTable), s.tc.Table(nbdb.LogicalRouterTable)
	if nt == nil || rt == nil {
		return natResult{}, fmt.Errorf("no %s or %s table in the cache", nbdb.NATTable, nbdb.LogicalRouterTable)
	}
	reset := prev == nil || prev.eips == nil || m.nats == nil
	natIDs, natByRow := s.changedRows(nbdb.NATTable)
	lrIDs, lrByRow := s.changedRows(nbdb.LogicalRouterTable)
	affected := map[string]struct{}{}
	var nm *natMemo
	if !reset && natByRow && lrByRow && len(natIDs)+len(lrIDs) <= max(64, len(m.nats.raw)/64) {
		// Read first, then change the memo: an error leaves it as it was.
		// The routers from the shallow copy of their table (a map of
		// pointers, one per router): Row would clone a gateway router's
		// nat set of thousands of UUIDs, through JSON.
		lrs := make(map[string]*nbdb.LogicalRouter, len(lrIDs))
		var shallow map[string]libmodel.Model
		if len(lrIDs) > 0 {
			shallow = rt.RowsShallow()
		}
		for _, id := range lrIDs {
			var lr *nbdb.LogicalRouter
			if mod := shallow[id]; mod != nil {
				var ok bool
				if lr, ok = mod.(*nbdb.LogicalRouter); !ok {
					return natResult{}, fmt.Errorf("%s cache holds a %T", nbdb.LogicalRouterTable, mod)
				}
			}
			lrs[id] = lr
		}
		ns := make(map[string]*nbdb.NAT, len(natIDs))
		for _, id := range natIDs {
			var n *nbdb.NAT
			if mod := nt.Row(id); mod != nil {
				var ok bool
				if n, ok = mod.(*nbdb.NAT); !ok {
					return natResult{}, fmt.Errorf("%s cache holds a %T", nbdb.NATTable, mod)
				}
			}
			ns[id] = n
		}
		nm = m.nats
		for id, lr := range lrs {
			nm.setRouter(id, lr, affected)
		}
		for id, n := range ns {
			nm.setNAT(id, n, affected)
		}
	} else {
		idx := newEIPIndex()
		if !reset {
			idx = m.nats.idx
		}
		nm = newNATMemo(idx)
		for uuid, mod := range rt.RowsShallow() {
			lr, ok := mod.(*nbdb.LogicalRouter)
			if !ok {
				return natResult{}, fmt.Errorf("%s cache holds a %T", nbdb.LogicalRouterTable, mod)
			}
			nm.setRouter(uuid, lr, affected)
		}
		for uuid, mod := range nt.RowsShallow() {
			n, ok := mod.(*nbdb.NAT)
			if !ok {
				return natResult{}, fmt.Errorf("%s cache holds a %T", nbdb.NATTable, mod)
			}
			nm.setNAT(uuid, n, affected)
		}
		for uuid := range idx.rows {
			affected[uuid] = struct{}{}
		}
	}
	changes, rows := nm.flush(affected)
	m.nats = nm
	if !reset && len(rows) == 0 {
		out.NATs, out.eips = prev.NATs, prev.eips
		return natResult{}, nil
	}
	out.eips = nm.idx.snapshot()
	res := natResult{changed: true, eips: changes}
	if reset || len(rows) > 64 {
		out.NATs = make([]natRow, 0, len(nm.idx.rows))
		for _, n := range nm.idx.rows {
			out.NATs = append(out.NATs, *n)
		}
		slices.SortFunc(out.NATs, compareNATUUID)
		return res, nil
	}
	// A few rows: the last read's slice, edited (a copy: it is shared).
	nats := slices.Clone(prev.NATs)
	for uuid, n := range rows {
		i, found := slices.BinarySearchFunc(nats, uuid, func(r natRow, u string) int { return cmp.Compare(r.UUID, u) })
		switch {
		case found && n != nil:
			nats[i] = *n
		case found:
			nats = slices.Delete(nats, i, i+1)
		case n != nil:
			nats = slices.Insert(nats, i, *n)
		}
	}
	out.NATs = nats
	return res, nil
}

// compareNATUUID is the order of nbRows.NATs.
func compareNATUUID(a, b natRow) int { return cmp.Compare(a.UUID, b.UUID) }
