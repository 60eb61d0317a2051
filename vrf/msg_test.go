package vrf

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRouteMsgRoundTrip: a request serialised by routeMsg reads back with
// the event parser as the same route (family, prefix, table above 255 in
// RTA_TABLE, protocol, single and multipath next hops, weights), and a delete
// carries no next hop, scope nowhere and no type, as `ip route del` sends.
func TestRouteMsgRoundTrip(t *testing.T) {
	for _, c := range []struct {
		prefix string
		table  uint32
		hops   []nlHop
	}{
		{"10.1.0.0/16", 100, []nlHop{{gw: netip.MustParseAddr("192.0.2.2"), ifindex: 3}}},
		{"0.0.0.0/0", 1000, []nlHop{{gw: netip.MustParseAddr("192.0.2.2"), ifindex: 3}, {gw: netip.MustParseAddr("198.51.100.2"), ifindex: 4}}},
		{"2001:db8:1::/48", 70000, []nlHop{{gw: netip.MustParseAddr("2001:db8:a::2"), ifindex: 3}, {gw: netip.MustParseAddr("2001:db8:b::2"), ifindex: 4}, {gw: netip.MustParseAddr("2001:db8:b::3"), ifindex: 4}}},
		{"10.4.4.4/32", 7, []nlHop{{ifindex: 9}}},
		// IPv4 prefixes with IPv6 next hops, as RTA_VIA (issue 20):
		// single, multipath, and mixed with an IPv4 gateway.
		{"10.5.0.0/24", 100, []nlHop{{gw: netip.MustParseAddr("fe80::1"), ifindex: 5}}},
		{"10.6.0.0/24", 100, []nlHop{{gw: netip.MustParseAddr("fe80::1"), ifindex: 5}, {gw: netip.MustParseAddr("fe80::2"), ifindex: 5}}},
		{"10.7.0.0/24", 1000, []nlHop{{gw: netip.MustParseAddr("192.0.2.2"), ifindex: 3}, {gw: netip.MustParseAddr("fe80::1"), ifindex: 5}}},
		// Weighted next hops: rtnexthop hops = weight - 1 (issue 21).
		{"10.8.0.0/24", 100, []nlHop{{gw: netip.MustParseAddr("192.0.2.2"), ifindex: 3}, {gw: netip.MustParseAddr("198.51.100.2"), ifindex: 4, hops: 2}}},
		{"2001:db8:8::/48", 100, []nlHop{{gw: netip.MustParseAddr("2001:db8:a::2"), ifindex: 3, hops: 255}, {gw: netip.MustParseAddr("2001:db8:b::2"), ifindex: 4, hops: 9}}},
	} {
		p := netip.MustParsePrefix(c.prefix)
		msg := routeMsg(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, 42, p, c.table, 200, defaultMetric(p), c.hops)
		if got := int(nativeLen(msg)); got != len(msg) || len(msg)%4 != 0 {
			t.Fatalf("%s: nlmsg_len %d, message %d bytes", c.prefix, got, len(msg))
		}
		if f := msgFlags(msg); f != unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL {
			t.Errorf("%s: flags %#x", c.prefix, f)
		}
		r, ok := parseRoute(msg[unix.SizeofNlMsghdr:])
		if !ok {
			t.Fatalf("%s: does not parse", c.prefix)
		}
		m := &Manager{protocol: 200}
		k, a, ok := m.fromRoute(r)
		if !ok {
			t.Fatalf("%s: not a cacheable route: %+v", c.prefix, r)
		}
		if k.table != c.table || k.prefix != p || a.proto != 200 || a.typ != unix.RTN_UNICAST {
			t.Errorf("%s: read back key %+v alias %+v", c.prefix, k, a)
		}
		if len(a.hops) != len(c.hops) {
			t.Fatalf("%s: hops %+v, want %+v", c.prefix, a.hops, c.hops)
		}
		for i := range c.hops {
			if a.hops[i] != c.hops[i] {
				t.Errorf("%s: hop %d = %+v, want %+v", c.prefix, i, a.hops[i], c.hops[i])
			}
		}
		for _, h := range c.hops {
			if h.gw.IsValid() && h.gw.Is4() != p.Addr().Is4() && bytesContain(msg, unix.RTA_GATEWAY, h.gw) {
				t.Errorf("%s: next hop %s of the other family sent as RTA_GATEWAY", c.prefix, h.gw)
			}
		}
		del := routeMsg(unix.RTM_DELROUTE, 0, 43, p, c.table, 200, defaultMetric(p), c.hops)
		r, _ = parseRoute(del[unix.SizeofNlMsghdr:])
		if r.Gw != nil || r.LinkIndex != 0 || len(r.MultiPath) != 0 || r.Scope != unix.RT_SCOPE_NOWHERE || r.Type != 0 || int(r.Protocol) != 200 {
			t.Errorf("%s: delete request %+v", c.prefix, r)
		}
	}
}

// bytesContain reports whether msg holds an attribute of type typ whose
// data is a's bytes, at any depth of RTA_MULTIPATH.
func bytesContain(msg []byte, typ uint16, a netip.Addr) bool {
	want := a.AsSlice()
	for i := 0; i+4+len(want) <= len(msg); i++ {
		if int(binary.NativeEndian.Uint16(msg[i:])) == 4+len(want) && binary.NativeEndian.Uint16(msg[i+2:]) == typ && string(msg[i+4:i+4+len(want)]) == string(want) {
			return true
		}
	}
	return false
}

func nativeLen(msg []byte) uint32 { return binary.NativeEndian.Uint32(msg[0:4]) }

// msgFlags are the netlink flags of a serialised request.
func msgFlags(msg []byte) uint16 { return binary.NativeEndian.Uint16(msg[6:8]) }
