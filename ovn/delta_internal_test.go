package ovn

import (
	"net/netip"
	"slices"
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

// TestSameRoutersBut: the routers' static routes (an import's OVN write)
// are not Context; anything else of a router is.
func TestSameRoutersBut(t *testing.T) {
	gr := model.GatewayRouter{Network: "default", Name: "GR_node1", UUID: "u1", ExternalPort: "rtoe-GR_node1",
		ExternalNetworks: []netip.Prefix{netip.MustParsePrefix("172.18.0.2/16")}, StaticRoutes: []string{"r1"}}
	other := gr
	other.StaticRoutes = []string{"r1", "r2"}
	moved := gr
	moved.ExternalNetworks = []netip.Prefix{netip.MustParsePrefix("172.18.0.3/16")}
	if !sameRoutersBut([]model.GatewayRouter{gr}, []model.GatewayRouter{other}) {
		t.Error("a new static route made the routers differ")
	}
	if sameRoutersBut([]model.GatewayRouter{gr}, []model.GatewayRouter{moved}) {
		t.Error("a new external address did not")
	}
	if sameRoutersBut([]model.GatewayRouter{gr}, nil) {
		t.Error("a router gone did not")
	}
}

// TestProtectedChanged: of the candidate addresses (egress IP rows of no
// group of this node's that changed), those whose host entries differ,
// sorted and once, and never one the delta lists as an entry.
func TestProtectedChanged(t *testing.T) {
	pp := func(p, why string) model.ProtectedPrefix {
		return model.ProtectedPrefix{Prefix: netip.MustParsePrefix(p), Why: why}
	}
	a := []model.ProtectedPrefix{pp("10.0.0.0/8", "x"), pp("172.19.0.1/32", "egress IP a (NAT on no router)"), pp("172.19.0.2/32", "egress IP b"), pp("172.19.0.3/32", "egress IP c")}
	b := []model.ProtectedPrefix{pp("10.0.0.0/8", "x"), pp("172.19.0.1/32", "egress IP a (NAT on GR_node1)"), pp("172.19.0.3/32", "egress IP c"), pp("172.19.0.4/32", "egress IP d")}
	addr := netip.MustParseAddr
	cands := []netip.Addr{addr("172.19.0.4"), addr("172.19.0.1"), addr("172.19.0.3"), addr("172.19.0.2"), addr("172.19.0.1"), addr("172.19.0.9")}
	got := protectedChanged(a, b, cands, []netip.Addr{addr("172.19.0.2")})
	want := []netip.Addr{addr("172.19.0.1"), addr("172.19.0.4")}
	if !slices.Equal(got, want) {
		t.Fatalf("protectedChanged: %v, want %v", got, want)
	}
	if got := protectedChanged(a, b, nil, nil); got != nil {
		t.Fatalf("no candidates: %v", got)
	}
}
