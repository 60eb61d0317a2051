package ovn

import (
	"net/netip"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestSameProtectedBut: the protected prefixes compare equal when they
// differ only by host prefixes of the listed addresses.
func TestSameProtectedBut(t *testing.T) {
	pp := func(s, why string) model.ProtectedPrefix {
		return model.ProtectedPrefix{Prefix: netip.MustParsePrefix(s), Why: why}
	}
	base := []model.ProtectedPrefix{pp("10.128.0.0/14", "pods"), pp("172.30.0.5/32", "vip a"), pp("172.30.0.9/32", "vip b")}
	own := []netip.Addr{netip.MustParseAddr("172.30.0.7"), netip.MustParseAddr("172.30.0.9")}
	for _, c := range []struct {
		name string
		b    []model.ProtectedPrefix
		want bool
	}{
		{"equal", base, true},
		{"a listed VIP gone", base[:2], true},
		{"a listed VIP added", []model.ProtectedPrefix{base[0], base[1], pp("172.30.0.7/32", "vip c"), base[2]}, true},
		{"an unlisted VIP gone", []model.ProtectedPrefix{base[0], base[2]}, false},
		{"another reason", []model.ProtectedPrefix{base[0], pp("172.30.0.5/32", "vip z"), base[2]}, false},
		{"a subnet of a listed address", []model.ProtectedPrefix{base[0], base[1], pp("172.30.0.9/31", "x"), base[2]}, false},
		{"nothing", nil, false},
	} {
		if got := sameProtectedBut(base, c.b, own); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if got := sameProtectedBut(c.b, base, own); got != c.want {
			t.Errorf("%s, the other way: %v, want %v", c.name, got, c.want)
		}
	}
}
