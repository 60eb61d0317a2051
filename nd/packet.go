package nd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

var (
	allNodes   = net.ParseIP("ff02::1")
	allRouters = net.ParseIP("ff02::2")
)

// routerAdvertisement is an RA body (RFC 4861 4.2): cur hop limit 0 and no
// flags, router lifetime 0 (not a default router: the peer must never
// route through the node by default), reachable and retrans timers 0
// (unspecified), then the Source Link-Layer Address option when the link
// has one.
func routerAdvertisement(mac net.HardwareAddr) []byte {
	return marshal(ipv6.ICMPTypeRouterAdvertisement, append(make([]byte, 12), slla(mac)...))
}

// routerSolicitation is an RS body (RFC 4861 4.1): 4 reserved bytes and
// the Source Link-Layer Address option.
func routerSolicitation(mac net.HardwareAddr) []byte {
	return marshal(ipv6.ICMPTypeRouterSolicitation, append(make([]byte, 4), slla(mac)...))
}

// slla is the Source Link-Layer Address option (type 1), padded to 8-byte
// units.
func slla(mac net.HardwareAddr) []byte {
	if len(mac) == 0 {
		return nil
	}
	n := (2 + len(mac) + 7) / 8 * 8
	o := make([]byte, n)
	o[0], o[1] = 1, byte(n/8)
	copy(o[2:], mac)
	return o
}

func marshal(t ipv6.ICMPType, body []byte) []byte {
	// The kernel fills in the checksum of a raw ICMPv6 socket.
	b, _ := (&icmp.Message{Type: t, Body: &icmp.RawBody{Data: body}}).Marshal(nil)
	return b
}

// packet is one RS or RA that passed the checks of accept.
type packet struct {
	from netip.Addr // zone-less
	rs   bool       // a solicitation (else an advertisement)
}

// accept checks a received ICMPv6 message: an RS or RA (code 0) with hop
// limit 255 (RFC 4861: it was not forwarded), from a link-local source, on
// link ifindex.
func accept(b []byte, cm *ipv6.ControlMessage, src net.Addr, ifindex int) (packet, error) {
	if len(b) < 4 || b[1] != 0 {
		return packet{}, errors.New("too short or code not 0")
	}
	var p packet
	switch ipv6.ICMPType(b[0]) {
	case ipv6.ICMPTypeRouterSolicitation:
		p.rs = true
	case ipv6.ICMPTypeRouterAdvertisement:
	default:
		return packet{}, fmt.Errorf("ICMPv6 type %d", b[0])
	}
	if cm == nil {
		return packet{}, errors.New("no control message")
	}
	if cm.HopLimit != 255 {
		return packet{}, fmt.Errorf("hop limit %d, not 255", cm.HopLimit)
	}
	if cm.IfIndex != ifindex {
		return packet{}, fmt.Errorf("arrived on ifindex %d, not %d", cm.IfIndex, ifindex)
	}
	a, ok := src.(*net.IPAddr)
	if !ok {
		return packet{}, fmt.Errorf("source %v", src)
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok || !ip.Unmap().IsLinkLocalUnicast() {
		return packet{}, fmt.Errorf("source %s is not link-local", a.IP)
	}
	p.from = ip.Unmap()
	return p, nil
}

// sock is the raw ICMPv6 socket of one link.
type sock struct {
	c       net.PacketConn
	p       *ipv6.PacketConn
	ifindex int
	src     netip.Addr // our link-local, zone-less
}

// openSock opens a raw ICMPv6 socket bound to device dev (SO_BINDTODEVICE)
// in namespace ns, that receives only RS and RA, joins all-routers (to
// hear the peer's solicitations), and sends with hop limit 255 and without
// looping its own multicast back (else our own RA lands in our neighbour
// table as a router).
func openSock(ns *netns.NsHandle, dev string, ifindex int, src netip.Addr) (*sock, error) {
	var c net.PacketConn
	err := inNetns(ns, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, dev)
			}); err != nil {
				return err
			}
			return serr
		}}
		var err error
		c, err = lc.ListenPacket(context.Background(), "ip6:ipv6-icmp", "::")
		return err
	})
	if err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("open a raw ICMPv6 socket on %s: %w (it needs CAP_NET_RAW: run as root or add the capability)", dev, err)
		}
		return nil, fmt.Errorf("open a raw ICMPv6 socket on %s: %w", dev, err)
	}
	s := &sock{c: c, p: ipv6.NewPacketConn(c), ifindex: ifindex, src: src}
	ifi := &net.Interface{Index: ifindex, Name: dev}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	for _, step := range []struct {
		what string
		err  func() error
	}{
		{"set the ICMPv6 filter", func() error { return s.p.SetICMPFilter(&f) }},
		{"ask for hop limit and ifindex", func() error {
			return s.p.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagInterface, true)
		}},
		{"set the multicast hop limit", func() error { return s.p.SetMulticastHopLimit(255) }},
		{"set the hop limit", func() error { return s.p.SetHopLimit(255) }},
		{"set the multicast interface", func() error { return s.p.SetMulticastInterface(ifi) }},
		{"turn multicast loopback off", func() error { return s.p.SetMulticastLoopback(false) }},
		{"join ff02::2", func() error { return s.p.JoinGroup(ifi, &net.IPAddr{IP: allRouters}) }},
	} {
		if err := step.err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("raw ICMPv6 socket on %s: %s: %w", dev, step.what, err)
		}
	}
	return s, nil
}

// send sends b to the multicast group dst, from our link-local, on the
// link (hop limit 255).
func (s *sock) send(b []byte, dst net.IP) error {
	cm := &ipv6.ControlMessage{HopLimit: 255, IfIndex: s.ifindex, Src: net.IP(s.src.WithZone("").AsSlice())}
	_, err := s.p.WriteTo(b, cm, &net.IPAddr{IP: dst})
	return err
}

func (s *sock) close() { s.c.Close() }

// inNetns runs f with the calling goroutine's thread in namespace ns (nil:
// f runs as is): sockets f opens live in ns. If switching back fails, the
// thread stays locked and Go ends it with the goroutine.
func inNetns(ns *netns.NsHandle, f func() error) error {
	if ns == nil {
		return f()
	}
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(*ns); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			ch <- errors.Join(ferr, fmt.Errorf("leave network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		ch <- ferr
	}()
	return <-ch
}

// sysctl reads an integer under /proc/sys/net/ipv6/conf/<dev>/ in ns.
func sysctl(ns *netns.NsHandle, dev, key string) (int, error) {
	var n int
	err := inNetns(ns, func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + dev + "/" + key)
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), &n)
		return err
	})
	return n, err
}
