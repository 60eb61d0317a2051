package vrf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
)

// Probe answers one-shot, read-only questions about the host's routing for
// `ovnbgp doctor`: which device a destination is routed through, which VRF
// devices exist, and which route protocols a table holds. Unlike Manager it
// keeps no cache and subscribes to nothing; it never writes.
type Probe struct {
	h *netlink.Handle
}

// OpenProbe opens a Probe in the current network namespace.
func OpenProbe() (*Probe, error) { return OpenProbeAt(netns.None()) }

// OpenProbeAt opens a Probe in the network namespace ns (netns.None():
// the current one).
func OpenProbeAt(ns netns.NsHandle) (*Probe, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle: %w", err)
	}
	return &Probe{h: h}, nil
}

// Close releases the netlink socket.
func (p *Probe) Close() { p.h.Close() }

// RouteTo is the kernel's route lookup for dst (`ip route get`): the
// device the packet leaves through, or an error when dst is unreachable.
func (p *Probe) RouteTo(dst netip.Addr) (device string, err error) {
	rs, err := p.h.RouteGet(net.IP(dst.AsSlice()))
	if err != nil {
		return "", fmt.Errorf("route lookup of %s: %w", dst, err)
	}
	for _, r := range rs {
		if r.LinkIndex <= 0 {
			continue
		}
		l, err := p.h.LinkByIndex(r.LinkIndex)
		if err != nil {
			return "", fmt.Errorf("route lookup of %s: device %d: %w", dst, r.LinkIndex, err)
		}
		return l.Attrs().Name, nil
	}
	return "", fmt.Errorf("route lookup of %s: no route through a device", dst)
}

// VRFs lists the host's VRF devices with their tables, sorted by name.
func (p *Probe) VRFs() ([]model.VRFDevice, error) {
	links, err := p.h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []model.VRFDevice
	for _, l := range links {
		if v, ok := l.(*netlink.Vrf); ok {
			out = append(out, model.VRFDevice{Name: v.Name, Table: v.Table})
		}
	}
	slices.SortFunc(out, func(a, b model.VRFDevice) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// TableProtocols counts the routes of table by route protocol (both
// families). A table that does not exist holds nothing.
func (p *Probe) TableProtocols(table uint32) (map[int]int, error) {
	rs, err := p.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: int(table)}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("list routes of table %d: %w", table, err)
	}
	out := map[int]int{}
	for _, r := range rs {
		if uint32(r.Table) != table {
			continue
		}
		out[int(r.Protocol)]++
	}
	return out, nil
}
