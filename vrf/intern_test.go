package vrf

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInternAliases: equal single-route values share one copy, values that
// differ in any part do not, and the shared set stays bounded.
func TestInternAliases(t *testing.T) {
	m := &Manager{interned: map[string][]alias{}}
	one := func(gw string, ifindex int) []alias {
		h := nlHop{ifindex: ifindex}
		if gw != "" {
			h.gw = netip.MustParseAddr(gw)
		}
		return []alias{{proto: 200, typ: unix.RTN_UNICAST, hops: []nlHop{h}}}
	}
	a := m.internLocked(one("192.0.2.2", 3))
	if b := m.internLocked(one("192.0.2.2", 3)); &b[0] != &a[0] {
		t.Error("two equal values are not shared")
	}
	for _, c := range []struct {
		why string
		as  []alias
	}{
		{"another device", one("192.0.2.2", 4)},
		{"another gateway", one("192.0.2.3", 3)},
		{"IPv4-mapped IPv6 gateway", one("::ffff:192.0.2.2", 3)},
		{"no gateway", one("", 3)},
	} {
		if got := m.internLocked(c.as); &got[0] == &a[0] {
			t.Errorf("%s: shares the value of 192.0.2.2 dev 3", c.why)
		}
	}
	if x, y := m.internLocked(one("", 5)), m.internLocked(one("::", 5)); &x[0] == &y[0] {
		t.Error("a route without gateway shares the value of gateway ::")
	}
	for i := range internMax + 10 {
		m.internLocked(one("10.0.0.1", 100+i))
	}
	if len(m.interned) > internMax {
		t.Errorf("%d values interned, bound %d", len(m.interned), internMax)
	}
}
