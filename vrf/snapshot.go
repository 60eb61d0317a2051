package vrf

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
)

// Snapshot reads the links, VRF devices, and the routes and rules that
// carry ovnbgp's protocol, IPv4 and IPv6.
//
// The routes come from the cache the route events keep (see cache.go);
// the links are read again only after a link or address event.
func (m *Manager) Snapshot() (model.Host, error) {
	var host model.Host
	m.sync()
	ls, err := m.linkSet()
	if err != nil {
		return host, err
	}
	host.Links, host.VRFs = ls.host()
	host.Routes, host.Foreign = m.cachedRoutes(ls)
	m.hmu.Lock()
	rules, err := m.ownRules()
	m.hmu.Unlock()
	if err != nil {
		return host, err
	}
	host.Rules = rules
	return host, nil
}

// linkSet is one dump of the links and their addresses.
type linkSet struct {
	byIndex map[int]netlink.Link
	byName  map[string]netlink.Link
	addrs   map[int][]netip.Prefix
	once    sync.Once
	vrfs    map[uint32]string // VRF name by table
}

// retryDump runs a netlink dump again when the kernel says it was
// interrupted by a concurrent change.
func retryDump[T any](what string, dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range 5 {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return v, fmt.Errorf("list %s: %w", what, err)
	}
	return v, nil
}

func (m *Manager) links() (*linkSet, error) {
	list, err := retryDump("links", m.h.LinkList)
	if err != nil {
		return nil, err
	}
	addrs, err := retryDump("addresses", func() ([]netlink.Addr, error) { return m.h.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	ls := &linkSet{byIndex: map[int]netlink.Link{}, byName: map[string]netlink.Link{}, addrs: map[int][]netip.Prefix{}}
	for _, l := range list {
		ls.byIndex[l.Attrs().Index] = l
		ls.byName[l.Attrs().Name] = l
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet, false); ok {
			ls.addrs[a.LinkIndex] = append(ls.addrs[a.LinkIndex], p)
		}
	}
	return ls, nil
}

// host turns the dump into the model's links and VRFs, sorted by index and
// name.
func (ls *linkSet) host() ([]model.Link, []model.VRFDevice) {
	var links []model.Link
	var vrfs []model.VRFDevice
	for idx, l := range ls.byIndex {
		a := l.Attrs()
		ml := model.Link{Name: a.Name, Index: idx, Up: isUp(a), Addrs: ls.addrs[idx]}
		slices.SortFunc(ml.Addrs, model.ComparePrefix)
		if master, ok := ls.byIndex[a.MasterIndex].(*netlink.Vrf); ok && a.MasterIndex != 0 {
			ml.Master = master.Name
		}
		links = append(links, ml)
		if v, ok := l.(*netlink.Vrf); ok {
			vrfs = append(vrfs, model.VRFDevice{Name: a.Name, Table: v.Table})
		}
	}
	slices.SortFunc(links, func(a, b model.Link) int { return cmp.Compare(a.Index, b.Index) })
	slices.SortFunc(vrfs, func(a, b model.VRFDevice) int { return cmp.Compare(a.Name, b.Name) })
	return links, vrfs
}

// vrfOfTable returns the name of the VRF device whose table is t, "" if
// none (the first by name if several). Computed once per read of the links:
// every cached route asks it.
func (ls *linkSet) vrfOfTable(t uint32) string {
	ls.once.Do(func() {
		ls.vrfs = map[uint32]string{}
		for _, l := range ls.byIndex {
			if v, ok := l.(*netlink.Vrf); ok {
				if cur, ok := ls.vrfs[v.Table]; !ok || v.Name < cur {
					ls.vrfs[v.Table] = v.Name
				}
			}
		}
	})
	return ls.vrfs[t]
}

func (ls *linkSet) name(index int) string {
	if l, ok := ls.byIndex[index]; ok {
		return l.Attrs().Name
	}
	return ""
}

// isUp: administratively up and not operationally down.
func isUp(a *netlink.LinkAttrs) bool {
	if a.Flags&net.FlagUp == 0 {
		return false
	}
	switch a.OperState {
	case netlink.OperDown, netlink.OperLowerLayerDown, netlink.OperNotPresent:
		return false
	}
	return true
}

// routeDst is the route's destination; a nil Dst is the default route.
func routeDst(r netlink.Route) (netip.Prefix, bool) {
	if r.Dst == nil {
		switch r.Family {
		case unix.AF_INET:
			return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
		case unix.AF_INET6:
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
		}
		return netip.Prefix{}, false
	}
	return prefixOf(r.Dst, true)
}

// prefixOf converts a net.IPNet; masked drops host bits (a route), else the
// address is kept with its length (an interface address).
func prefixOf(n *net.IPNet, masked bool) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 || (addr.Is4() && bits != 32) || (addr.Is6() && bits != 128) {
		return netip.Prefix{}, false
	}
	p := netip.PrefixFrom(addr, ones)
	if masked {
		p = p.Masked()
	}
	return p, true
}

// ownRules lists the ip rules carrying our protocol.
func (m *Manager) ownRules() ([]model.KernelRule, error) {
	list, err := retryDump("ip rules", func() ([]netlink.Rule, error) { return m.h.RuleList(netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	var out []model.KernelRule
	for _, r := range list {
		if int(r.Protocol) != m.protocol {
			continue
		}
		out = append(out, ruleOf(r))
	}
	slices.SortFunc(out, compareRule)
	return out, nil
}

func ruleOf(r netlink.Rule) model.KernelRule {
	kr := model.KernelRule{Priority: r.Priority, Table: uint32(r.Table), Protocol: int(r.Protocol)}
	if p, ok := prefixOf(r.Src, true); ok {
		kr.Src = p
	} else if r.Family == unix.AF_INET6 {
		kr.Src = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	} else {
		kr.Src = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	return kr
}

func compareRule(a, b model.KernelRule) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), model.ComparePrefix(a.Src, b.Src), cmp.Compare(a.Table, b.Table))
}

func compareNextHop(a, b model.NextHop) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Dev, b.Dev))
}
