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
func (m *Manager) Apply(ctx context.Context, ops []model.KernelOp) (applied []model.KernelOp, err error) {
	m.hmu.Lock()
	defer m.hmu.Unlock()
	var errs []error
	var ls *linkSet
	for i, op := range ops {
		if cerr := ctx.Err(); cerr != nil {
			errs = append(errs, fmt.Errorf("apply stopped before operation %d of %d: %w", i+1, len(ops), cerr))
			break
		}
		if ls == nil {
			if ls, err = m.links(); err != nil {
				errs = append(errs, err)
				break
			}
		}
		var done bool
		var oerr error
		switch {
		case op.Route != nil && op.VRF == nil && op.PolicyRule == nil:
			done, oerr = m.applyRoute(op.Op, *op.Route, ls)
		case op.VRF != nil && op.Route == nil && op.PolicyRule == nil:
			done, oerr = m.applyVRF(op.Op, *op.VRF, ls)
			if done {
				ls = nil // a new device: read the links again
			}
		case op.PolicyRule != nil && op.Route == nil && op.VRF == nil:
			done, oerr = m.applyRule(op.Op, *op.PolicyRule)
		default:
			oerr = fmt.Errorf("kernel operation %d (%s): exactly one of route, vrf and policyRule must be set", i+1, op.Op)
		}
		if oerr != nil {
			m.log.Warn("kernel operation failed", zap.Error(oerr))
			errs = append(errs, oerr)
		}
		if done {
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

func (m *Manager) applyRoute(kind model.OpKind, r model.KernelRoute, ls *linkSet) (bool, error) {
	if r.Table == 0 && r.VRF != "" {
		v, ok := ls.byName[r.VRF].(*netlink.Vrf)
		if !ok {
			return false, fmt.Errorf("%s %s: no VRF device %q: create it first or fix the import rule's targets.kernel.vrf", kind, describe(r), r.VRF)
		}
		r.Table = v.Table
	}
	if err := checkRoute(r); err != nil {
		return false, fmt.Errorf("%s %s: %w", kind, describe(r), err)
	}
	family := unix.AF_INET
	if r.Prefix.Addr().Is6() {
		family = unix.AF_INET6
	}
	dst := ipNet(r.Prefix)
	switch kind {
	case model.OpDelete:
		// Name our protocol, table and destination: the kernel then
		// removes only a route carrying our protocol (all its next hops).
		nr := &netlink.Route{Family: family, Dst: dst, Table: int(r.Table), Protocol: netlink.RouteProtocol(m.protocol)}
		err := m.h.RouteDel(nr)
		if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete %s (protocol %d): %w", describe(r), m.protocol, err)
		}
		m.log.Debug("deleted kernel route", zap.String("route", describe(r)))
		return true, nil
	case model.OpAdd, model.OpReplace:
	default:
		return false, fmt.Errorf("%s: unknown operation %q (add, replace or delete)", describe(r), kind)
	}

	nr := &netlink.Route{Family: family, Dst: dst, Table: int(r.Table), Protocol: netlink.RouteProtocol(m.protocol),
		Type: unix.RTN_UNICAST}
	if err := setNextHops(nr, r.NextHops, ls); err != nil {
		return false, fmt.Errorf("%s %s: %w", kind, describe(r), err)
	}
	m.watch1(int(r.Table))
	var err error
	if kind == model.OpAdd {
		// Create only (NLM_F_EXCL): the kernel refuses (EEXIST) to touch
		// a key that is taken, ours or not. Only then is the key looked
		// up: a lookup dumps the whole table (netlink filters the
		// destination in user space), and one per add made importing a
		// large table quadratic (bench: 47,698 of 100k routes in 15 min).
		err = m.h.RouteAdd(nr)
		if errors.Is(err, unix.EEXIST) {
			err = m.replaceOurs(nr, r)
		}
	} else {
		err = m.replaceOurs(nr, r)
	}
	if err != nil {
		return false, fmt.Errorf("%s %s via %s: %w", kind, describe(r), hopsString(r.NextHops), err)
	}
	m.log.Debug("programmed kernel route", zap.String("op", string(kind)), zap.String("route", describe(r)),
		zap.String("via", hopsString(r.NextHops)))
	return true, nil
}

// keyOwner looks at the routes holding the key (table, dst, metric 0) of
// nr: it reports whether one of ours is there, and refuses when a route
// that is not ours holds it.
// replaceOurs replaces the route at nr's key if it carries our protocol;
// a route that is not ours is refused, and a missing one is created.
// Netlink has no compare-and-swap: a process that deletes our route and
// adds its own at the same key in the microseconds between the lookup and
// the replace would be overwritten. Deleting ours first and adding
// exclusively would close that window but open a gap in forwarding for
// every replace; ovnbgp keeps forwarding and accepts the race.
func (m *Manager) replaceOurs(nr *netlink.Route, r model.KernelRoute) error {
	ours, err := m.keyOwner(nr, r)
	if err != nil {
		return err
	}
	if ours {
		return m.h.RouteReplace(nr)
	}
	// Create only: if a foreign route took the key since we looked, the
	// kernel refuses (EEXIST) rather than replacing it.
	return m.h.RouteAdd(nr)
}

func (m *Manager) keyOwner(nr *netlink.Route, r model.KernelRoute) (bool, error) {
	m.lookups.Add(1)
	filter := &netlink.Route{Table: nr.Table, Dst: nr.Dst}
	list, err := retryDump("routes", func() ([]netlink.Route, error) {
		return m.h.RouteListFiltered(nr.Family, filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	})
	if err != nil {
		return false, fmt.Errorf("%s: %w", describe(r), err)
	}
	ours := false
	for _, e := range list {
		if e.Priority != 0 && !(nr.Family == unix.AF_INET6 && e.Priority == ipv6DefaultMetric) {
			continue // another metric: another key
		}
		if int(e.Protocol) != m.protocol {
			return false, fmt.Errorf("table %d already has %s from protocol %s: not ovnbgp's, left alone",
				r.Table, r.Prefix, protoName(e.Protocol))
		}
		ours = true
	}
	return ours, nil
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

// setNextHops fills a single next hop, or a multipath route for several.
func setNextHops(nr *netlink.Route, hops []model.NextHop, ls *linkSet) error {
	if len(hops) == 0 {
		return errors.New("no next hop")
	}
	var infos []*netlink.NexthopInfo
	for _, h := range hops {
		if !h.Addr.IsValid() && h.Dev == "" {
			return errors.New("a next hop has neither an address nor a device")
		}
		if h.Addr.IsValid() && h.Addr.Is4() != (nr.Family == unix.AF_INET) {
			return fmt.Errorf("next hop %s is not of the prefix's address family", h.Addr)
		}
		idx := 0
		if h.Dev != "" {
			l, ok := ls.byName[h.Dev]
			if !ok {
				return fmt.Errorf("next hop %s: no device %q", hopString(h), h.Dev)
			}
			idx = l.Attrs().Index
		}
		var gw net.IP
		if h.Addr.IsValid() {
			gw = net.IP(h.Addr.AsSlice())
		}
		infos = append(infos, &netlink.NexthopInfo{LinkIndex: idx, Gw: gw})
	}
	if len(infos) == 1 {
		nr.Gw, nr.LinkIndex = infos[0].Gw, infos[0].LinkIndex
		return nil
	}
	nr.MultiPath = infos
	return nil
}

func hopString(h model.NextHop) string {
	switch {
	case h.Dev == "":
		return h.Addr.String()
	case !h.Addr.IsValid():
		return "dev " + h.Dev
	}
	return h.Addr.String() + " dev " + h.Dev
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
