package nd

import (
	"net"
	"strings"
	"testing"

	"golang.org/x/net/ipv6"
)

// TestMessages: our RA says router lifetime 0 (never a default router)
// and carries the Source Link-Layer Address option; our RS carries it too.
func TestMessages(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	ra := routerAdvertisement(mac)
	if len(ra) != 24 || ra[0] != 134 || ra[1] != 0 || ra[6] != 0 || ra[7] != 0 || ra[16] != 1 || ra[17] != 1 || net.HardwareAddr(ra[18:24]).String() != mac.String() {
		t.Errorf("RA % x", ra)
	}
	rs := routerSolicitation(mac)
	if len(rs) != 16 || rs[0] != 133 || rs[8] != 1 || rs[9] != 1 || net.HardwareAddr(rs[10:16]).String() != mac.String() {
		t.Errorf("RS % x", rs)
	}
	if ra := routerAdvertisement(nil); len(ra) != 16 {
		t.Errorf("RA without a MAC: % x", ra)
	}
}

// TestAccept: only RS and RA with hop limit 255, from a link-local source,
// on the link's own ifindex, are taken (RFC 4861 6.1).
func TestAccept(t *testing.T) {
	ll := &net.IPAddr{IP: net.ParseIP("fe80::1")}
	ra, rs := routerAdvertisement(nil), routerSolicitation(nil)
	ok := &ipv6.ControlMessage{HopLimit: 255, IfIndex: 3}
	for _, tc := range []struct {
		name string
		b    []byte
		cm   *ipv6.ControlMessage
		src  net.Addr
		want string // "" = accepted
	}{
		{"RA", ra, ok, ll, ""},
		{"RS", rs, ok, ll, ""},
		{"forwarded", ra, &ipv6.ControlMessage{HopLimit: 254, IfIndex: 3}, ll, "hop limit 254"},
		{"other link", ra, &ipv6.ControlMessage{HopLimit: 255, IfIndex: 4}, ll, "ifindex 4"},
		{"global source", ra, ok, &net.IPAddr{IP: net.ParseIP("2001:db8::1")}, "not link-local"},
		{"no control message", ra, nil, ll, "no control message"},
		{"echo request", []byte{128, 0, 0, 0, 0, 0, 0, 0}, ok, ll, "type 128"},
	} {
		p, err := accept(tc.b, tc.cm, tc.src, 3)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && (p.from.String() != "fe80::1" || p.rs != (tc.b[0] == 133)):
			t.Errorf("%s: %+v", tc.name, p)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
