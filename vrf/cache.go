package vrf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
)

// The route cache. The manager keeps what the kernel holds at every key
// (table, prefix, metric): our routes in every table, and every route of
// every table but local, main and default (so foreign keys are known).
// One dump fills it at Open and after a lost subscription (or a link or
// address change: the kernel flushes IPv4 routes of a device that goes
// away without telling); from then on the route events keep it, our own
// writes included (their echoes). An event replayed over a newer dump
// converges: events are in order, and the last event of a key carries its
// latest state.

// rkey is the kernel's key of a route (the prefix first: 40 bytes, not
// 48, for each of the cache's entries).
type rkey struct {
	prefix netip.Prefix
	table  uint32
	metric uint32
}

// alias is one route at a key: IPv4 can hold several (ip route append),
// IPv6 one per key with all its next hops (siblings).
type alias struct {
	proto uint8
	typ   uint8
	hops  []nlHop // sorted
}

func defaultMetric(p netip.Prefix) uint32 {
	if p.Addr().Is6() {
		return ipv6DefaultMetric
	}
	return 0
}

func kernelTable(t uint32) bool {
	return t == unix.RT_TABLE_LOCAL || t == unix.RT_TABLE_MAIN || t == unix.RT_TABLE_DEFAULT
}

func compareHop(a, b nlHop) int {
	return cmp.Or(a.gw.Compare(b.gw), cmp.Compare(a.ifindex, b.ifindex), cmp.Compare(a.hops, b.hops))
}

// gateway is a next hop's address: its RTA_GATEWAY, else its RTA_VIA (an
// IPv4 route's IPv6 next hop, issue 20). netlink's NexthopInfo.Equal
// ignores Via, so the cache compares the address it keeps here.
func gateway(gw net.IP, via netlink.Destination) (netip.Addr, bool) {
	if a, ok := netip.AddrFromSlice(gw); ok {
		return a.Unmap(), true
	}
	if v, ok := via.(*netlink.Via); ok && v != nil {
		if a, ok := netip.AddrFromSlice(v.Addr); ok {
			if v.AddrFamily == unix.AF_INET {
				a = a.Unmap()
			}
			return a, true
		}
	}
	return netip.Addr{}, false
}

// fromRoute turns a netlink route into its key and alias; ok is false for
// what the cache does not keep (cloned routes, no destination, and routes
// not ours in the kernel's own tables).
func (m *Manager) fromRoute(r netlink.Route) (rkey, alias, bool) {
	if r.Flags&unix.RTM_F_CLONED != 0 {
		return rkey{}, alias{}, false
	}
	p, ok := routeDst(r)
	if !ok || r.Table <= 0 {
		return rkey{}, alias{}, false
	}
	k := rkey{table: uint32(r.Table), prefix: p, metric: uint32(r.Priority)}
	if int(r.Protocol) != m.protocol && kernelTable(k.table) {
		return rkey{}, alias{}, false
	}
	a := alias{proto: uint8(r.Protocol), typ: uint8(r.Type)}
	if len(r.MultiPath) == 0 {
		if gw, ok := gateway(r.Gw, r.Via); ok || r.LinkIndex != 0 {
			a.hops = []nlHop{{gw: gw, ifindex: r.LinkIndex}}
		}
	}
	for _, nh := range r.MultiPath {
		gw, _ := gateway(nh.Gw, nh.Via)
		a.hops = append(a.hops, nlHop{gw: gw, ifindex: nh.LinkIndex, hops: uint8(nh.Hops)})
	}
	slices.SortFunc(a.hops, compareHop)
	a.hops = slices.Compact(a.hops)
	return k, a, true
}

// dumpRoutes reads every route of every table (IPv4 and IPv6) into a new
// cache.
func (m *Manager) dumpRoutes() (map[rkey][]alias, error) {
	return m.dumpRoutesOf(unix.RT_TABLE_UNSPEC)
}

// dumpRoutesOf reads the routes of one table (all tables: RT_TABLE_UNSPEC).
func (m *Manager) dumpRoutesOf(table uint32) (map[rkey][]alias, error) {
	m.dmu.Lock()
	defer m.dmu.Unlock()
	list, err := retryDump("routes", func() ([]netlink.Route, error) {
		return m.dh.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: int(table)}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, err
	}
	c := make(map[rkey][]alias, len(list))
	for _, r := range list {
		k, a, ok := m.fromRoute(r)
		if !ok {
			continue
		}
		as := c[k]
		// Old kernels report an IPv6 multipath route one next hop per
		// message: merge them into one alias.
		if i := slices.IndexFunc(as, func(o alias) bool { return o.proto == a.proto }); i >= 0 && k.prefix.Addr().Is6() {
			as[i].hops = append(as[i].hops, a.hops...)
			slices.SortFunc(as[i].hops, compareHop)
			as[i].hops = slices.Compact(as[i].hops)
			continue
		}
		c[k] = append(as, a)
	}
	return c, nil
}

// reload dumps the routes again and installs them, recording every key
// whose routes differ from the cache's.
func (m *Manager) reload() error {
	c, err := m.dumpRoutes()
	if err != nil {
		return err
	}
	m.cmu.Lock()
	for k, as := range c {
		if !sameAliases(m.cache[k], as) {
			m.changedLocked(k, m.cache[k], as)
		}
		c[k] = m.internLocked(as)
	}
	for k, as := range m.cache {
		if _, ok := c[k]; !ok {
			m.changedLocked(k, as, nil)
		}
	}
	m.cache = c
	m.alt = map[model.KernelRouteKey][]uint32{}
	for k, as := range c {
		m.indexLocked(k, as)
	}
	m.cmu.Unlock()
	return nil
}

// reloadTable reads one table again (the kernel filters the dump) and
// installs it, recording every key that differs from the cache.
func (m *Manager) reloadTable(table uint32) error {
	c, err := m.dumpRoutesOf(table)
	if err != nil {
		return err
	}
	m.cmu.Lock()
	defer m.cmu.Unlock()
	for k, as := range c {
		if !sameAliases(m.cache[k], as) {
			m.changedLocked(k, m.cache[k], as)
			m.cache[k] = m.internLocked(as)
			m.indexLocked(k, as)
		}
	}
	for k, as := range m.cache {
		if _, ok := c[k]; !ok && k.table == table {
			m.changedLocked(k, as, nil)
			delete(m.cache, k)
			m.indexLocked(k, nil)
		}
	}
	return nil
}

// internMax bounds the interned values: beyond it (a host with more
// distinct routes than that, say many foreign gateways) values are kept
// unshared.
const internMax = 4096

// internLocked returns the cache's shared copy of as when it is one route
// with a few next hops, the common case: a large import is thousands of
// routes with the same few next hops, and shared they cost the cache's
// map entry only (64 bytes less per route). Values in the cache are never
// changed in place (mergeEvent and the dumps make new ones), so sharing is
// safe. The caller holds cmu.
func (m *Manager) internLocked(as []alias) []alias {
	if len(as) != 1 || len(as[0].hops) > 8 {
		return as
	}
	b := append(m.internBuf[:0], as[0].proto, as[0].typ)
	for _, h := range as[0].hops {
		a16 := h.gw.As16()
		b = append(b, a16[:]...)
		b = binary.NativeEndian.AppendUint32(b, uint32(h.ifindex))
		b = append(b, h.hops)
		switch {
		case h.gw.Is4():
			b = append(b, 4)
		case h.gw.Is6():
			b = append(b, 6)
		default:
			b = append(b, 0) // no gateway
		}
	}
	m.internBuf = b
	if v, ok := m.interned[string(b)]; ok {
		return v
	}
	as = slices.Clip(as) // an append to a shared value must copy
	if len(m.interned) < internMax {
		m.interned[string(b)] = as
	}
	return as
}

// changedLocked records a change at k (from old to now) for TakeChanges
// and reports whether it is one notify is for: in a watched table, or a
// route of ours. A table where ours appear becomes watched.
func (m *Manager) changedLocked(k rkey, old, now []alias) bool {
	ours := m.hasOurs(old) || m.hasOurs(now)
	if ours {
		m.tables[int(k.table)] = true
	}
	if !ours && !m.tables[int(k.table)] {
		return false
	}
	m.changed[model.KernelRouteKey{Table: k.table, Prefix: k.prefix}] = struct{}{}
	return true
}

func (m *Manager) hasOurs(as []alias) bool {
	return slices.ContainsFunc(as, func(a alias) bool { return int(a.proto) == m.protocol })
}

// indexLocked records in alt whether the cache holds a route of ours at
// k (as), for a key at another metric than the default (a route of an
// accept entry with a metric, issue 21): Routes and dropOtherMetrics find
// ours at any metric of a table and prefix without a walk of the cache.
// The caller holds cmu.
func (m *Manager) indexLocked(k rkey, as []alias) {
	if k.metric == defaultMetric(k.prefix) {
		return
	}
	mk := model.KernelRouteKey{Table: k.table, Prefix: k.prefix}
	list := m.alt[mk]
	i := slices.Index(list, k.metric)
	switch ours := m.hasOurs(as); {
	case ours && i < 0:
		if m.alt == nil {
			m.alt = map[model.KernelRouteKey][]uint32{}
		}
		m.alt[mk] = append(slices.Clip(list), k.metric)
	case !ours && i >= 0:
		list = slices.Delete(slices.Clone(list), i, i+1)
		if len(list) == 0 {
			delete(m.alt, mk)
		} else {
			m.alt[mk] = list
		}
	}
}

// oursAt are the metrics at which the cache holds a route of ours at
// table and prefix k.
func (m *Manager) oursAt(k model.KernelRouteKey) []uint32 {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	var out []uint32
	if d := (rkey{table: k.Table, prefix: k.Prefix, metric: defaultMetric(k.Prefix)}); m.hasOurs(m.cache[d]) {
		out = append(out, d.metric)
	}
	return append(out, m.alt[k]...)
}

func sameAliases(a, b []alias) bool {
	return slices.EqualFunc(a, b, func(x, y alias) bool {
		return x.proto == y.proto && x.typ == y.typ && slices.Equal(x.hops, y.hops)
	})
}

// onRouteEvent applies one route event to the cache; it reports whether
// notify is due (something changed where it matters). An event that does
// not apply cleanly (the cache cannot tell what it did to the key) makes
// the cache read the event's table again. own says the event is the echo
// of our own write (it names our batch socket's port): it changes the
// cache but is not reported by TakeChanges, since the caller of Apply
// knows what it wrote (re-diffing every key it just wrote cost a large
// import a third of its passes).
func (m *Manager) onRouteEvent(u netlink.RouteUpdate, own bool) bool {
	k, a, ok := m.fromRoute(u.Route)
	if !ok {
		return false
	}
	m.cmu.Lock()
	old := m.cache[k]
	now, clean := mergeEvent(old, u.Type, u.NlFlags, a, k.prefix.Addr().Is6())
	if !clean {
		m.cmu.Unlock()
		if err := m.reloadTable(k.table); err != nil {
			m.log.Warn("route dump failed, everything is read again", zap.Uint32("table", k.table), zap.Error(err))
			m.requestReload()
		}
		m.cmu.Lock()
		n := len(m.changed)
		m.cmu.Unlock()
		return n > 0
	}
	defer m.cmu.Unlock()
	if sameAliases(old, now) {
		return false // e.g. the echo of our own write
	}
	if len(now) == 0 {
		delete(m.cache, k)
	} else {
		m.cache[k] = m.internLocked(now)
	}
	m.indexLocked(k, now)
	if own {
		m.tables[int(k.table)] = true
		return false
	}
	return m.changedLocked(k, old, now)
}

// mergeEvent returns the routes at a key after an event, as the kernel
// changed them, and false when it cannot tell. IPv4 keeps a list of routes
// at a key (replace changes the first, append adds one last, a plain create
// adds one first); IPv6 one route with all its next hops (siblings), which
// an event carries whole, except a delete of some of them.
func mergeEvent(old []alias, typ uint16, flags uint16, a alias, v6 bool) ([]alias, bool) {
	now := slices.Clone(old)
	same := func(o alias) bool { return sameAliases([]alias{o}, []alias{a}) }
	if len(old) > 1 || (len(old) == 1 && typ == unix.RTM_NEWROUTE && !v6 && flags&unix.NLM_F_REPLACE == 0 && !same(old[0])) {
		// Several IPv4 routes at one key (ip route append or prepend):
		// which one an event names is not certain; read the table again.
		// Rare: nobody appends to ovnbgp's keys in normal operation.
		return nil, false
	}
	switch typ {
	case unix.RTM_NEWROUTE:
		switch {
		case v6 && (flags&unix.NLM_F_REPLACE != 0 || len(now) == 0):
			return []alias{a}, true
		case v6 && len(now) == 1 && now[0].proto == a.proto:
			return []alias{a}, true // a next hop added, or the echo of our write
		case v6:
			// A next hop of another protocol joined the route: the kernel
			// reports the route with its first sibling's protocol.
			return nil, false
		case flags&unix.NLM_F_REPLACE != 0 && len(now) > 0:
			now[0] = a
			return now, true
		case slices.ContainsFunc(now, same):
			// The kernel never holds the same route twice at a key: this
			// is the echo of a write the cache has already.
			return now, true
		case flags&unix.NLM_F_APPEND != 0:
			return append(now, a), true
		}
		return append([]alias{a}, now...), true
	case unix.RTM_DELROUTE:
		if i := slices.IndexFunc(now, same); i >= 0 {
			return slices.Delete(now, i, i+1), true
		}
		if v6 && len(now) == 1 && now[0].proto == a.proto && len(a.hops) > 0 && containsAll(now[0].hops, a.hops) {
			// Some next hops of a multipath route deleted.
			o := now[0]
			o.hops = slices.DeleteFunc(slices.Clone(o.hops), func(h nlHop) bool { return slices.Contains(a.hops, h) })
			if len(o.hops) == 0 {
				return nil, true
			}
			return []alias{o}, true
		}
		if len(now) == 0 {
			return nil, true // already gone (our own delete came first)
		}
		return nil, false
	}
	return now, true
}

func containsAll(hops, sub []nlHop) bool {
	for _, h := range sub {
		if !slices.Contains(hops, h) {
			return false
		}
	}
	return true
}

// wrote records our own successful write at k: its table is watched from
// now on. It does not touch the cache: the write's echo does, in order
// with every other event of the key. (Changing the cache here raced with
// the consumer: an echo, or someone else's change, handled before wrote
// ran was overwritten by what the write alone implied, and no later event
// corrected it.) Apply syncs before it reads the cache, so the next Apply
// sees this write.
func (m *Manager) wrote(k rkey) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	m.tables[int(k.table)] = true
}

// owner says who holds the key k now, from the cache: ours, foreign (a
// route not ours), both false if nobody.
func (m *Manager) owner(k rkey) (ours bool, foreign uint8, taken bool) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	for _, a := range m.cache[k] {
		if int(a.proto) == m.protocol {
			ours = true
		} else if !taken {
			foreign, taken = a.proto, true
		}
	}
	return ours, foreign, taken
}

// TakeChanges returns what changed since the previous call and starts
// over: the keys where someone else changed a route (in a watched table,
// or of ovnbgp's protocol; the writes of Apply are not reported, except
// where the cache had to read a table again to follow one), whether
// links, addresses or VRFs changed, and All when events may have been
// lost (a subscription was renewed).
func (m *Manager) TakeChanges() model.HostChanges {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	hc := model.HostChanges{Links: m.linksChanged, All: m.all}
	for k := range m.changed {
		hc.Routes = append(hc.Routes, k)
	}
	slices.SortFunc(hc.Routes, compareKey)
	m.changed = map[model.KernelRouteKey]struct{}{}
	m.linksChanged, m.all = false, false
	return hc
}

func compareKey(a, b model.KernelRouteKey) int {
	return cmp.Or(cmp.Compare(a.Table, b.Table), model.ComparePrefix(a.Prefix, b.Prefix))
}

// Routes returns the current state of these keys from the cache: ovnbgp's
// routes at them (at the default metric, 0 and 1024 for IPv6, else at
// another: KernelRoute.Metric) and the keys held by routes
// that are not ovnbgp's (never reported in local, main and default, where
// ovnbgp never writes). Their tables are watched from then on.
func (m *Manager) Routes(keys []model.KernelRouteKey) (ours []model.KernelRoute, foreign []model.KernelRouteKey, err error) {
	if m.closed() {
		return nil, nil, errors.New("kernel target closed")
	}
	m.sync()
	ls, err := m.linkSet()
	if err != nil {
		return nil, nil, err
	}
	m.cmu.Lock()
	defer m.cmu.Unlock()
	for _, key := range keys {
		if !key.Prefix.IsValid() {
			return nil, nil, fmt.Errorf("routes of table %d: invalid prefix", key.Table)
		}
		m.tables[int(key.Table)] = true
		k := rkey{table: key.Table, prefix: key.Prefix.Masked(), metric: defaultMetric(key.Prefix)}
		r, isOurs, isForeign := m.modelLocked(k, ls)
		if !isOurs {
			// ours at another metric (issue 21): the first found
			for _, metric := range m.alt[model.KernelRouteKey{Table: k.table, Prefix: k.prefix}] {
				if r, isOurs, _ = m.modelLocked(rkey{table: k.table, prefix: k.prefix, metric: metric}, ls); isOurs {
					break
				}
			}
		}
		if isOurs {
			ours = append(ours, r)
		}
		if isForeign && !kernelTable(k.table) {
			foreign = append(foreign, model.KernelRouteKey{Table: k.table, Prefix: k.prefix})
		}
	}
	return ours, foreign, nil
}

// modelLocked is the model route of ours at k (all our unicast next hops
// merged), and whether a route not ours holds k.
func (m *Manager) modelLocked(k rkey, ls *linkSet) (r model.KernelRoute, ours, foreign bool) {
	for _, a := range m.cache[k] {
		if int(a.proto) != m.protocol {
			foreign = true
			continue
		}
		if a.typ != unix.RTN_UNICAST {
			continue
		}
		if !ours {
			r = model.KernelRoute{Table: k.table, Prefix: k.prefix, Protocol: m.protocol, VRF: ls.vrfOfTable(k.table)}
			if k.metric != defaultMetric(k.prefix) {
				r.Metric = k.metric
			}
			ours = true
		}
		for _, h := range a.hops {
			r.NextHops = append(r.NextHops, model.NextHop{Addr: h.gw, Dev: ls.name(h.ifindex), Weight: int(h.hops) + 1})
		}
	}
	if ours {
		slices.SortFunc(r.NextHops, compareNextHop)
		r.NextHops = slices.Compact(r.NextHops)
		model.CanonicalWeights(r.NextHops)
	}
	return r, ours, foreign
}

// cachedRoutes is Snapshot's view of the cache: every route of ours (any
// table, any metric) and the keys held by routes not ours outside local,
// main and default, both sorted.
func (m *Manager) cachedRoutes(ls *linkSet) ([]model.KernelRoute, []model.KernelRouteKey) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	var routes []model.KernelRoute
	var foreign []model.KernelRouteKey
	seen := map[model.KernelRouteKey]bool{}
	for k := range m.cache {
		r, ours, isForeign := m.modelLocked(k, ls)
		if ours {
			routes = append(routes, r)
			m.tables[int(k.table)] = true
		}
		mk := model.KernelRouteKey{Table: k.table, Prefix: k.prefix}
		if isForeign && !kernelTable(k.table) && k.metric == defaultMetric(k.prefix) && !seen[mk] {
			seen[mk] = true
			foreign = append(foreign, mk)
		}
	}
	slices.SortFunc(routes, func(a, b model.KernelRoute) int { return compareKey(a.Key(), b.Key()) })
	slices.SortFunc(foreign, compareKey)
	return routes, foreign
}

// parseRoute decodes an RTM_NEWROUTE / RTM_DELROUTE event into the fields
// the cache keeps: family, destination, table, protocol, type, flags,
// metric, and the next hops (gateway or via and device, or RTA_MULTIPATH).
func parseRoute(b []byte) (netlink.Route, bool) {
	var r netlink.Route
	if len(b) < unix.SizeofRtMsg {
		return r, false
	}
	r.Family = int(b[0])
	dstLen := int(b[1])
	r.Table = int(b[4])
	r.Protocol = netlink.RouteProtocol(b[5])
	r.Scope = netlink.Scope(b[6])
	r.Type = int(b[7])
	r.Flags = int(binary.NativeEndian.Uint32(b[8:12]))
	bits := 32
	if r.Family == unix.AF_INET6 {
		bits = 128
	} else if r.Family != unix.AF_INET {
		return r, false
	}
	for a := range attrs(b[unix.SizeofRtMsg:]) {
		switch a.typ {
		case unix.RTA_DST:
			r.Dst = &net.IPNet{IP: net.IP(slices.Clone(a.data)), Mask: net.CIDRMask(dstLen, bits)}
		case unix.RTA_TABLE:
			if len(a.data) >= 4 {
				r.Table = int(binary.NativeEndian.Uint32(a.data))
			}
		case unix.RTA_PRIORITY:
			if len(a.data) >= 4 {
				r.Priority = int(binary.NativeEndian.Uint32(a.data))
			}
		case unix.RTA_GATEWAY:
			r.Gw = net.IP(slices.Clone(a.data))
		case unix.RTA_VIA:
			r.Via = decodeVia(a.data)
		case unix.RTA_OIF:
			if len(a.data) >= 4 {
				r.LinkIndex = int(binary.NativeEndian.Uint32(a.data))
			}
		case unix.RTA_MULTIPATH:
			mp := a.data
			for len(mp) >= 8 {
				l := int(binary.NativeEndian.Uint16(mp[0:2]))
				if l < 8 || l > len(mp) {
					break
				}
				nh := &netlink.NexthopInfo{LinkIndex: int(int32(binary.NativeEndian.Uint32(mp[4:8]))), Hops: int(mp[3])}
				for na := range attrs(mp[8:l]) {
					switch na.typ {
					case unix.RTA_GATEWAY:
						nh.Gw = net.IP(slices.Clone(na.data))
					case unix.RTA_VIA:
						nh.Via = decodeVia(na.data)
					}
				}
				r.MultiPath = append(r.MultiPath, nh)
				mp = mp[(l+3)&^3:]
			}
		}
	}
	return r, true
}

// decodeVia decodes an RTA_VIA (struct rtvia: family, then the address),
// nil if it is not an IPv4 or IPv6 address.
func decodeVia(d []byte) netlink.Destination {
	if len(d) < 2 {
		return nil
	}
	switch fam := int(binary.NativeEndian.Uint16(d[0:2])); {
	case fam == unix.AF_INET && len(d) >= 6:
		return &netlink.Via{AddrFamily: fam, Addr: net.IP(slices.Clone(d[2:6]))}
	case fam == unix.AF_INET6 && len(d) >= 18:
		return &netlink.Via{AddrFamily: fam, Addr: net.IP(slices.Clone(d[2:18]))}
	}
	return nil
}

type rtattr struct {
	typ  uint16
	data []byte
}

// attrs iterates over netlink attributes.
func attrs(b []byte) func(yield func(rtattr) bool) {
	return func(yield func(rtattr) bool) {
		for len(b) >= 4 {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			if l < 4 || l > len(b) {
				return
			}
			if !yield(rtattr{typ: binary.NativeEndian.Uint16(b[2:4]) &^ unix.NLA_F_NESTED, data: b[4:l]}) {
				return
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}
