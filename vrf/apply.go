package vrf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
)

// ipv6DefaultMetric is the metric the kernel gives an IPv6 route added with
// metric 0 (IP6_RT_PRIO_USER).
const ipv6DefaultMetric = 1024

// Apply runs ops in order, going on after a failed one, and returns the
// operations really applied and the joined errors, each naming its route,
// VRF or rule. See the package doc for the ownership rules it keeps.
//
// Route operations go to the kernel in batches (batch.go): up to
// batchMessages requests in one sendmsg, each acked on its own. VRF and
// rule operations run one at a time, after the route operations before
// them.
func (m *Manager) Apply(ctx context.Context, ops []model.KernelOp) (applied []model.KernelOp, err error) {
	m.sync() // the cache, which replaces consult, has every change made so far
	m.hmu.Lock()
	defer m.hmu.Unlock()
	var errs []error
	done := make([]bool, len(ops))
	var run []routeOp
	size := 0
	flush := func() {
		m.applyRoutes(run, done, &errs)
		run, size = run[:0], 0
	}
	for i, op := range ops {
		if cerr := ctx.Err(); cerr != nil {
			first := i
			if len(run) > 0 {
				first = run[0].i
			}
			errs = append(errs, fmt.Errorf("apply stopped before operation %d of %d: %w", first+1, len(ops), cerr))
			run = nil
			break
		}
		ls, lerr := m.linkSetLocked()
		if lerr != nil {
			errs = append(errs, lerr)
			break
		}
		var ok bool
		var oerr error
		switch {
		case op.Route != nil && op.VRF == nil && op.PolicyRule == nil:
			ro, rerr := m.prepareRoute(i, op.Op, *op.Route, ls)
			if rerr != nil {
				oerr = rerr
				break
			}
			run = append(run, ro)
			size += 128
			if len(run) >= batchMessages || size >= batchBytes {
				flush()
			}
		case op.VRF != nil && op.Route == nil && op.PolicyRule == nil:
			flush()
			ok, oerr = m.applyVRF(op.Op, *op.VRF, ls)
			if ok {
				m.cmu.Lock()
				m.linksDirty = true // a new device: read the links again
				m.cmu.Unlock()
			}
		case op.PolicyRule != nil && op.Route == nil && op.VRF == nil:
			flush()
			ok, oerr = m.applyRule(op.Op, *op.PolicyRule)
		default:
			oerr = fmt.Errorf("kernel operation %d (%s): exactly one of route, vrf and policyRule must be set", i+1, op.Op)
		}
		if oerr != nil {
			m.log.Warn("kernel operation failed", zap.Error(oerr))
			errs = append(errs, oerr)
		}
		done[i] = done[i] || ok
	}
	flush()
	applied = make([]model.KernelOp, 0, len(ops))
	for i, op := range ops {
		if done[i] {
			applied = append(applied, op)
		}
	}
	return applied, errors.Join(errs...)
}

// describe names a route for errors and logs.
func describe(r model.KernelRoute) string {
	if r.VRF != "" {
		return fmt.Sprintf("route %s in table %d (vrf %s)", r.Prefix, r.Table, r.VRF)
	}
	return fmt.Sprintf("route %s in table %d", r.Prefix, r.Table)
}

func protoName(p netlink.RouteProtocol) string {
	return p.String()
}

// routeOp is a route operation checked and resolved for the kernel.
type routeOp struct {
	i    int // index in Apply's ops
	kind model.OpKind
	r    model.KernelRoute // Table resolved from the VRF
	k    rkey
	hops []nlHop
}

func (o routeOp) family() int {
	if o.r.Prefix.Addr().Is6() {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

// prepareRoute checks a route operation and resolves its table and
// devices.
func (m *Manager) prepareRoute(i int, kind model.OpKind, r model.KernelRoute, ls *linkSet) (routeOp, error) {
	if r.Table == 0 && r.VRF != "" {
		v, ok := ls.byName[r.VRF].(*netlink.Vrf)
		if !ok {
			return routeOp{}, fmt.Errorf("%s %s: no VRF device %q: create it first or fix the import rule's targets.kernel.vrf", kind, describe(r), r.VRF)
		}
		r.Table = v.Table
	}
	if err := checkRoute(r); err != nil {
		return routeOp{}, fmt.Errorf("%s %s: %w", kind, describe(r), err)
	}
	o := routeOp{i: i, kind: kind, r: r, k: rkey{table: r.Table, prefix: r.Prefix, metric: keyMetric(r)}}
	switch kind {
	case model.OpDelete:
		return o, nil
	case model.OpAdd, model.OpReplace:
	default:
		return routeOp{}, fmt.Errorf("%s: unknown operation %q (add, replace or delete)", describe(r), kind)
	}
	hops, err := resolveHops(r.NextHops, r.Prefix.Addr().Is4(), ls)
	if err != nil {
		return routeOp{}, fmt.Errorf("%s %s: %w", kind, describe(r), err)
	}
	o.hops = hops
	return o, nil
}

// resolveHops checks the next hops and names their devices by index.
func resolveHops(hops []model.NextHop, v4 bool, ls *linkSet) ([]nlHop, error) {
	if len(hops) == 0 {
		return nil, errors.New("no next hop")
	}
	out := make([]nlHop, 0, len(hops))
	for _, h := range hops {
		if !h.Addr.IsValid() && h.Dev == "" {
			return nil, errors.New("a next hop has neither an address nor a device")
		}
		if h.Addr.Zone() != "" {
			return nil, fmt.Errorf("next hop %s carries a zone: give the device as the next hop's dev, the address without it", h.Addr)
		}
		if h.Addr.IsValid() && h.Addr.Is4() != v4 {
			// An IPv4 route may have an IPv6 next hop (RTA_VIA, RFC
			// 8950; issue 20), through a device: the kernel refuses one
			// without. An IPv6 route's next hop is IPv6 (RTA_VIA is
			// EINVAL there).
			if !v4 {
				return nil, fmt.Errorf("next hop %s is not of the prefix's address family", h.Addr)
			}
			if h.Dev == "" {
				return nil, fmt.Errorf("IPv6 next hop %s of an IPv4 prefix needs a device", h.Addr)
			}
		}
		idx := 0
		if h.Dev != "" {
			l, ok := ls.byName[h.Dev]
			if !ok {
				return nil, fmt.Errorf("next hop %s: no device %q", hopString(h), h.Dev)
			}
			idx = l.Attrs().Index
		}
		if h.Weight < 0 || h.Weight > model.MaxWeight {
			return nil, fmt.Errorf("next hop %s: weight %d is not in 1..%d (0: equal cost)", hopString(h), h.Weight, model.MaxWeight)
		}
		out = append(out, nlHop{gw: h.Addr.Unmap(), ifindex: idx, hops: uint8(max(h.Weight, 1) - 1)})
	}
	return out, nil
}

// How a route request is sent.
const (
	flagsCreate  = unix.NLM_F_CREATE | unix.NLM_F_EXCL    // only onto a free key
	flagsReplace = unix.NLM_F_CREATE | unix.NLM_F_REPLACE // ours only
)

// applyRoutes sends one batch of route operations and records, per
// operation, whether it was applied (done) or why not (errs).
//
// Adds are create-exclusive: the kernel refuses (EEXIST) a key that is
// taken, ours or not. Only then is the key looked up, with one dump per
// table of the batch's refused adds (one lookup per add made a large
// import quadratic), and the add replaces the route if it is ours, is
// refused if it is not, and is created again if the key was freed since.
// A replace replaces only a route the cache says is ours, is refused if
// the cache says the key is held by a route not ours, and is
// create-exclusive if the key is free. A delete names our protocol.
//
// Netlink has no compare-and-swap: a process that deletes our route and
// adds its own at the same key between the cache's (or the lookup's) view
// and the replace would be overwritten. Deleting ours first and adding
// exclusively would close that window but open a gap in forwarding for
// every replace; ovnbgp keeps forwarding and accepts the race.
func (m *Manager) applyRoutes(run []routeOp, done []bool, errs *[]error) {
	if len(run) == 0 {
		return
	}
	// The batch's messages are built in one buffer kept for the next
	// batch (the caller holds hmu), and its slices are the batch's size:
	// nothing is allocated per route (issue 18, TestApplyAllocsPerRoute).
	sent := m.batch.sent[:0]
	msgs := m.batch.msgs[:0]
	buf := m.batch.buf[:0]
	ends := m.batch.ends[:0]
	for _, o := range run {
		switch o.kind {
		case model.OpDelete:
			buf = appendRouteMsg(buf, unix.RTM_DELROUTE, 0, m.sock.next(), o.r.Prefix, o.r.Table, uint8(m.protocol), o.k.metric, nil)
		case model.OpAdd:
			buf = appendRouteMsg(buf, unix.RTM_NEWROUTE, flagsCreate, m.sock.next(), o.r.Prefix, o.r.Table, uint8(m.protocol), o.k.metric, o.hops)
		default: // replace
			ours, fp, taken := m.owner(o.k)
			switch {
			case taken:
				*errs = append(*errs, m.fail(o, foreignErr(o.r, fp)))
				continue
			case ours:
				buf = appendRouteMsg(buf, unix.RTM_NEWROUTE, flagsReplace, m.sock.next(), o.r.Prefix, o.r.Table, uint8(m.protocol), o.k.metric, o.hops)
			default:
				buf = appendRouteMsg(buf, unix.RTM_NEWROUTE, flagsCreate, m.sock.next(), o.r.Prefix, o.r.Table, uint8(m.protocol), o.k.metric, o.hops)
			}
		}
		ends = append(ends, len(buf))
		sent = append(sent, o)
	}
	start := 0
	for _, end := range ends {
		msgs = append(msgs, buf[start:end:end])
		start = end
	}
	m.batch.buf, m.batch.ends, m.batch.msgs, m.batch.sent = buf, ends, msgs, sent
	var taken []routeOp
	written := m.batch.written[:0]
	defer func() { m.batch.written = written[:0] }()
	defer func() { m.dropOtherMetrics(written) }()
	for j, err := range m.sock.exchange(msgs) {
		o := sent[j]
		switch {
		case err == nil:
			m.applied(o, done)
			written = append(written, o)
		case o.kind == model.OpDelete && (errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)):
			// already gone: not applied, not an error
		case o.kind == model.OpDelete:
			*errs = append(*errs, m.fail(o, fmt.Errorf("delete %s (protocol %d): %w", describe(o.r), m.protocol, err)))
		case errors.Is(err, unix.EEXIST):
			taken = append(taken, o)
		default:
			*errs = append(*errs, m.fail(o, fmt.Errorf("%s %s via %s: %w", o.kind, describe(o.r), hopsString(o.r.NextHops), err)))
		}
	}
	if len(taken) == 0 {
		return
	}
	owners, lerrs := m.lookUp(taken)
	sent, msgs = sent[:0], msgs[:0]
	for _, o := range taken {
		if err := lerrs[o.k.table]; err != nil {
			*errs = append(*errs, m.fail(o, fmt.Errorf("%s %s: %w", o.kind, describe(o.r), err)))
			continue
		}
		own := owners[o.k]
		flags := uint16(flagsCreate)
		switch {
		case own.taken:
			*errs = append(*errs, m.fail(o, foreignErr(o.r, own.foreign)))
			continue
		case own.ours:
			flags = flagsReplace
		}
		msgs = append(msgs, routeMsg(unix.RTM_NEWROUTE, flags, m.sock.next(), o.r.Prefix, o.r.Table, uint8(m.protocol), o.k.metric, o.hops))
		sent = append(sent, o)
	}
	for j, err := range m.sock.exchange(msgs) {
		o := sent[j]
		if err != nil {
			*errs = append(*errs, m.fail(o, fmt.Errorf("%s %s via %s: %w", o.kind, describe(o.r), hopsString(o.r.NextHops), err)))
			continue
		}
		m.applied(o, done)
		written = append(written, o)
	}
}

// keyMetric is the kernel key's metric of route r: its Metric, or the
// kernel's default.
func keyMetric(r model.KernelRoute) uint32 {
	if r.Metric != 0 {
		return r.Metric
	}
	return defaultMetric(r.Prefix)
}

// dropOtherMetrics deletes, after adds and replaces were written, the
// routes of ours at the same table and prefix at another metric: ovnbgp
// keeps one route per table and prefix, so a route whose metric changed
// (import[].accept[].metric, issue 21) leaves none behind. The new one is
// written first: forwarding has no gap.
func (m *Manager) dropOtherMetrics(written []routeOp) {
	var msgs [][]byte
	var what []string
	for _, o := range written {
		if o.kind == model.OpDelete {
			continue
		}
		for _, metric := range m.oursAt(model.KernelRouteKey{Table: o.k.table, Prefix: o.k.prefix}) {
			if metric == o.k.metric {
				continue
			}
			msgs = append(msgs, routeMsg(unix.RTM_DELROUTE, 0, m.sock.next(), o.k.prefix, o.k.table, uint8(m.protocol), metric, nil))
			what = append(what, fmt.Sprintf("%s metric %d", describe(o.r), metric))
		}
	}
	if len(msgs) == 0 {
		return
	}
	for j, err := range m.sock.exchange(msgs) {
		if err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			m.log.Warn("kernel route at a former metric not deleted", zap.String("route", what[j]), zap.Error(err))
		}
	}
}

func foreignErr(r model.KernelRoute, proto uint8) error {
	return fmt.Errorf("table %d already has %s from protocol %s: not ovnbgp's, left alone",
		r.Table, r.Prefix, protoName(netlink.RouteProtocol(proto)))
}

func (m *Manager) fail(o routeOp, err error) error {
	m.log.Warn("kernel operation failed", zap.Error(err))
	return err
}

// applied records a successful write and the result. The debug line's
// text is made only when debug is on (at 100k routes it cost 17 MB).
func (m *Manager) applied(o routeOp, done []bool) {
	done[o.i] = true
	m.wrote(o.k)
	if o.kind == model.OpDelete {
		if ce := m.log.Check(zap.DebugLevel, "deleted kernel route"); ce != nil {
			ce.Write(zap.String("route", describe(o.r)))
		}
		return
	}
	if ce := m.log.Check(zap.DebugLevel, "programmed kernel route"); ce != nil {
		ce.Write(zap.String("op", string(o.kind)), zap.String("route", describe(o.r)), zap.String("via", hopsString(o.r.NextHops)))
	}
}

// keyOwner is who holds a key, as a lookup found it.
type keyOwner struct {
	ours    bool
	taken   bool  // by a route not ours
	foreign uint8 // its protocol
}

// lookUp reads the owners of the keys of ops from the kernel: one dump per
// table and family (the kernel filters the table with strict checking).
func (m *Manager) lookUp(ops []routeOp) (map[rkey]keyOwner, map[uint32]error) {
	type tf struct {
		table  uint32
		family int
	}
	want := map[rkey]bool{}
	var order []tf
	seen := map[tf]bool{}
	for _, o := range ops {
		want[o.k] = true
		t := tf{o.k.table, o.family()}
		if !seen[t] {
			seen[t] = true
			order = append(order, t)
		}
	}
	owners := map[rkey]keyOwner{}
	errs := map[uint32]error{}
	m.dmu.Lock()
	defer m.dmu.Unlock()
	for _, t := range order {
		m.lookups.Add(1)
		list, err := retryDump("routes", func() ([]netlink.Route, error) {
			return m.dh.RouteListFiltered(t.family, &netlink.Route{Table: int(t.table)}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			errs[t.table] = err
			continue
		}
		for _, r := range list {
			p, ok := routeDst(r)
			if !ok {
				continue
			}
			k := rkey{table: uint32(r.Table), prefix: p, metric: uint32(r.Priority)}
			if !want[k] {
				continue // another key, or another metric: another key
			}
			own := owners[k]
			if int(r.Protocol) == m.protocol {
				own.ours = true
			} else if !own.taken {
				own.taken, own.foreign = true, uint8(r.Protocol)
			}
			owners[k] = own
		}
	}
	return owners, errs
}

func checkRoute(r model.KernelRoute) error {
	switch {
	case r.Table == 0:
		return errors.New("no table: set the import rule's targets.kernel.table or targets.kernel.vrf")
	case r.Table >= unix.RT_TABLE_DEFAULT && r.Table <= unix.RT_TABLE_LOCAL:
		return fmt.Errorf("table %d is one of the kernel's default, main and local tables (253..255): ovnbgp never writes there; choose another table", r.Table)
	case !r.Prefix.IsValid():
		return errors.New("invalid prefix")
	case r.Prefix != r.Prefix.Masked():
		return fmt.Errorf("prefix %s has host bits set (use %s)", r.Prefix, r.Prefix.Masked())
	}
	return nil
}

func hopString(h model.NextHop) string {
	s := h.Addr.String() + " dev " + h.Dev
	switch {
	case h.Dev == "":
		s = h.Addr.String()
	case !h.Addr.IsValid():
		s = "dev " + h.Dev
	}
	if h.Weight > 0 {
		s += fmt.Sprintf(" weight %d", h.Weight)
	}
	return s
}

func hopsString(hops []model.NextHop) string {
	s := ""
	for i, h := range hops {
		if i > 0 {
			s += ", "
		}
		s += hopString(h)
	}
	return s
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// applyVRF adopts an existing VRF or creates a missing one; it never
// modifies nor deletes one.
func (m *Manager) applyVRF(kind model.OpKind, v model.VRFDevice, ls *linkSet) (bool, error) {
	if kind != model.OpAdd {
		return false, fmt.Errorf("%s vrf %s: ovnbgp only creates VRF devices; it never changes or deletes one", kind, v.Name)
	}
	if v.Name == "" || len(v.Name) >= unix.IFNAMSIZ {
		return false, fmt.Errorf("add vrf %q: a device name must be 1..%d characters", v.Name, unix.IFNAMSIZ-1)
	}
	if v.Table == 0 || (v.Table >= unix.RT_TABLE_DEFAULT && v.Table <= unix.RT_TABLE_LOCAL) {
		return false, fmt.Errorf("add vrf %s: table %d cannot be a VRF's table: choose another", v.Name, v.Table)
	}
	if l, ok := ls.byName[v.Name]; ok {
		existing, isVRF := l.(*netlink.Vrf)
		switch {
		case !isVRF:
			return false, fmt.Errorf("add vrf %s table %d: device %s exists and is a %s, not a VRF: left alone; rename the rule's vrf",
				v.Name, v.Table, v.Name, l.Type())
		case existing.Table != v.Table:
			return false, fmt.Errorf("add vrf %s table %d: VRF %s exists with table %d: left alone; set the rule's table to %d or choose another vrf",
				v.Name, v.Table, v.Name, existing.Table, existing.Table)
		}
		m.log.Debug("adopted existing VRF", zap.String("vrf", v.Name), zap.Uint32("table", v.Table))
		return false, nil
	}
	if other := ls.vrfOfTable(v.Table); other != "" {
		return false, fmt.Errorf("add vrf %s table %d: table %d already belongs to VRF %s: choose another table",
			v.Name, v.Table, v.Table, other)
	}
	dev := &netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: v.Name}, Table: v.Table}
	if err := m.h.LinkAdd(dev); err != nil {
		return false, fmt.Errorf("create vrf %s table %d: %w", v.Name, v.Table, err)
	}
	if err := m.h.LinkSetUp(dev); err != nil {
		return true, fmt.Errorf("set vrf %s up: %w", v.Name, err)
	}
	m.watch1(int(v.Table))
	m.log.Info("created VRF", zap.String("vrf", v.Name), zap.Uint32("table", v.Table))
	return true, nil
}

func describeRule(r model.KernelRule) string {
	return fmt.Sprintf("ip rule %d from %s lookup %d", r.Priority, r.Src, r.Table)
}

// applyRule adds or deletes one of our ip rules.
func (m *Manager) applyRule(kind model.OpKind, r model.KernelRule) (bool, error) {
	if !r.Src.IsValid() {
		return false, fmt.Errorf("%s %s: no source prefix (use 0.0.0.0/0 or ::/0 for all)", kind, describeRule(r))
	}
	if r.Table == 0 || r.Priority < 0 {
		return false, fmt.Errorf("%s %s: a rule needs a table and a priority >= 0", kind, describeRule(r))
	}
	r.Src = r.Src.Masked()
	nr := netlink.NewRule()
	nr.Priority = r.Priority
	nr.Table = int(r.Table)
	nr.Family = unix.AF_INET
	if r.Src.Addr().Is6() {
		nr.Family = unix.AF_INET6
	}
	if r.Src.Bits() > 0 {
		nr.Src = ipNet(r.Src)
	}
	nr.Protocol = uint8(m.protocol)

	switch kind {
	case model.OpDelete:
		err := m.h.RuleDel(nr)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete %s (protocol %d): %w", describeRule(r), m.protocol, err)
		}
		return true, nil
	case model.OpAdd, model.OpReplace:
	default:
		return false, fmt.Errorf("%s: unknown operation %q (add or delete)", describeRule(r), kind)
	}
	list, err := retryDump("ip rules", func() ([]netlink.Rule, error) { return m.h.RuleList(nr.Family) })
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", kind, describeRule(r), err)
	}
	for _, e := range list {
		have := ruleOf(e)
		if have.Priority != r.Priority || have.Src != r.Src || have.Table != r.Table {
			continue
		}
		if int(e.Protocol) != m.protocol {
			return false, fmt.Errorf("%s already exists with protocol %d: not ovnbgp's, left alone", describeRule(r), e.Protocol)
		}
		return false, nil // already there
	}
	if err := m.h.RuleAdd(nr); err != nil {
		return false, fmt.Errorf("add %s: %w", describeRule(r), err)
	}
	return true, nil
}
