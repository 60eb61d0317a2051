package nd

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// LinkLocal is one IPv6 link-local address of a link.
type LinkLocal struct {
	// Addr carries the link's name as zone (fe80::1%eth1).
	Addr netip.Addr
	// Tentative: duplicate address detection is still running; the
	// address cannot be used yet.
	Tentative bool
	// DADFailed: another host on the link has the address.
	DADFailed bool
}

// Usable is an address a session can use.
func (l LinkLocal) Usable() bool { return !l.Tentative && !l.DADFailed }

// Neighbour is one link-local entry of the kernel's neighbour table.
type Neighbour struct {
	// Addr carries the link's name as zone.
	Addr netip.Addr
	// Router: the kernel learned that the neighbour is a router (it
	// received its router advertisement: NTF_ROUTER).
	Router bool
	// State is the NUD state ("reachable", "stale", ...).
	State string
}

// LinkFacts is what the kernel says about one link.
type LinkFacts struct {
	Name  string
	Index int
	// Up: administratively up and not operationally down.
	Up bool
	// HardwareAddr is the link's MAC address (empty on a link without one).
	HardwareAddr net.HardwareAddr
	// LinkLocals are its IPv6 link-local addresses.
	LinkLocals []LinkLocal
	// Neighbours are its link-local neighbours that are neither failed,
	// incomplete nor one of the node's own addresses.
	Neighbours []Neighbour
}

// Usable is the first usable link-local address (invalid when none).
func (f LinkFacts) Usable() netip.Addr {
	for _, l := range f.LinkLocals {
		if l.Usable() {
			return l.Addr
		}
	}
	return netip.Addr{}
}

// Reader reads links, addresses and neighbours over one netlink socket,
// in one network namespace. It never writes.
type Reader struct {
	h *netlink.Handle
}

// NewReader opens a Reader in namespace ns (nil: the current one).
func NewReader(ns *netns.NsHandle) (*Reader, error) {
	h, err := newHandle(ns)
	if err != nil {
		return nil, err
	}
	return &Reader{h: h}, nil
}

func newHandle(ns *netns.NsHandle) (*netlink.Handle, error) {
	var h *netlink.Handle
	var err error
	if ns == nil {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandleAt(*ns, unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	return h, nil
}

// Close releases the netlink socket.
func (r *Reader) Close() { r.h.Close() }

// Link reads the facts of link dev.
func (r *Reader) Link(dev string) (LinkFacts, error) { return readLink(r.h, dev) }

// Own is every IPv6 address of the node (zone-less).
func (r *Reader) Own() (map[netip.Addr]bool, error) { return ownAddrs(r.h) }

func readLink(h *netlink.Handle, dev string) (LinkFacts, error) {
	l, err := h.LinkByName(dev)
	if err != nil {
		return LinkFacts{}, fmt.Errorf("link %s: %w", dev, err)
	}
	a := l.Attrs()
	f := LinkFacts{Name: dev, Index: a.Index, HardwareAddr: a.HardwareAddr,
		Up: a.Flags&net.FlagUp != 0 && a.OperState != netlink.OperDown && a.OperState != netlink.OperLowerLayerDown}
	addrs, err := h.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return f, fmt.Errorf("addresses of %s: %w", dev, err)
	}
	for _, ad := range addrs {
		ip, ok := netip.AddrFromSlice(ad.IP)
		if !ok || !ip.IsLinkLocalUnicast() {
			continue
		}
		f.LinkLocals = append(f.LinkLocals, LinkLocal{Addr: ip.WithZone(dev),
			Tentative: ad.Flags&unix.IFA_F_TENTATIVE != 0, DADFailed: ad.Flags&unix.IFA_F_DADFAILED != 0})
	}
	own, err := ownAddrs(h)
	if err != nil {
		return f, err
	}
	ns, err := h.NeighList(a.Index, netlink.FAMILY_V6)
	if err != nil {
		return f, fmt.Errorf("neighbours of %s: %w", dev, err)
	}
	for _, n := range ns {
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || !ip.IsLinkLocalUnicast() || own[ip] ||
			n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE|netlink.NUD_NOARP) != 0 {
			continue
		}
		f.Neighbours = append(f.Neighbours, Neighbour{Addr: ip.WithZone(dev), Router: n.Flags&netlink.NTF_ROUTER != 0, State: nudState(n.State)})
	}
	slices.SortFunc(f.Neighbours, func(a, b Neighbour) int { return a.Addr.Compare(b.Addr) })
	return f, nil
}

// ownAddrs is every IPv6 address of the node, without zone.
func ownAddrs(h *netlink.Handle) (map[netip.Addr]bool, error) {
	addrs, err := h.AddrList(nil, netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("list the node's addresses: %w", err)
	}
	own := map[netip.Addr]bool{}
	for _, ad := range addrs {
		if ip, ok := netip.AddrFromSlice(ad.IP); ok {
			own[ip] = true
		}
	}
	return own, nil
}

// nudState names the NUD state bits (netlink v1.3.1 has no such function).
func nudState(s int) string {
	var out []string
	for _, b := range []struct {
		bit  int
		name string
	}{
		{netlink.NUD_INCOMPLETE, "incomplete"}, {netlink.NUD_REACHABLE, "reachable"}, {netlink.NUD_STALE, "stale"},
		{netlink.NUD_DELAY, "delay"}, {netlink.NUD_PROBE, "probe"}, {netlink.NUD_FAILED, "failed"},
		{netlink.NUD_NOARP, "noarp"}, {netlink.NUD_PERMANENT, "permanent"},
	} {
		if s&b.bit != 0 {
			out = append(out, b.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}
