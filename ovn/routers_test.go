package ovn

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestBuildImport: node1's gateway routers (not node2's, not duplicated
// ones), their external ports, the routes node1 owns (not node2's, not
// OVN-Kubernetes', not on another router), ForeignImport, and the live
// join and transit subnets (issue 6 item 3).
func TestBuildImport(t *testing.T) {
	in := nbRows{
		Ports: []routerPortRow{
			{UUID: "p1", Name: "rtoe-GR_node1", Networks: []string{"172.18.0.2/16"}},
			{UUID: "p2", Name: "rtoj-GR_node1", Networks: []string{"100.64.0.2/16", "fd98::2/64"}},
			{UUID: "p3", Name: "rtoj-GR_node2", Networks: []string{"100.64.0.3/16"}},
			{UUID: "p4", Name: "red_rtots-node1", Networks: []string{"100.89.0.2/16"}},
			{UUID: "p5", Name: "rtots-node1", Networks: []string{"100.88.0.2/16", "fd97::2/64", "junk"}},
		},
		Routers: []routerRow{
			{UUID: "r1", Name: "GR_node1", StaticRoutes: []string{"s1", "s2", "s3", "s4"}},
			{UUID: "r2", Name: "GR_node2", StaticRoutes: []string{"s5"}},
			{UUID: "r3", Name: "GR_red_node1", Network: "red", StaticRoutes: []string{"s6"}},
			{UUID: "r4", Name: "GR_dup_node1", Network: "dup"},
			{UUID: "r5", Name: "GR_dup_node1", Network: "dup"},
			// Named like node1's GR of "blue", but of network "green".
			{UUID: "r6", Name: "GR_blue_node1", Network: "green"},
		},
		Routes: []routeRow{
			{UUID: "s1", Router: "GR_node1", IPPrefix: "192.0.2.0/24", Nexthop: "172.18.0.10", OutputPort: "rtoe-GR_node1", Owner: "node1", Rule: "up"},
			{UUID: "s2", Router: "GR_node1", IPPrefix: "192.0.2.0/24", Nexthop: "172.18.0.11", OutputPort: "rtoe-GR_node1", Owner: "node1", Rule: "up"},
			{UUID: "s3", Router: "GR_node1", IPPrefix: "198.51.100.0/24", Nexthop: "172.18.0.12", Owner: "node2"},
			{UUID: "s4", Router: "GR_node1", IPPrefix: "198.51.100.0/24", Nexthop: "bogus", Owner: "node1"},
			{UUID: "s5", Router: "GR_node2", IPPrefix: "203.0.113.0/24", Nexthop: "172.18.0.13", Owner: "node1"},
			{UUID: "s6", Router: "GR_red_node1", IPPrefix: "203.0.113.0/24", Nexthop: "172.18.0.1", OwnerController: "RouteImport"},
		},
	}
	got := buildImport(in, "node1")

	if len(got.Routers) != 2 {
		t.Fatalf("routers: want GR_node1 and GR_red_node1, got %+v", got.Routers)
	}
	gr := got.Routers[0]
	if gr.Name != "GR_node1" || gr.Network != "default" || gr.UUID != "r1" || gr.ExternalPort != "rtoe-GR_node1" ||
		len(gr.ExternalNetworks) != 1 || gr.ExternalNetworks[0] != netip.MustParsePrefix("172.18.0.2/16") ||
		strings.Join(gr.StaticRoutes, ",") != "s1,s2,s3,s4" || gr.ForeignImport != "" {
		t.Errorf("GR_node1: %+v", gr)
	}
	red := got.Routers[1]
	if red.Name != "GR_red_node1" || red.Network != "red" || !strings.Contains(red.ForeignImport, "k8s.ovn.org/owner-controller=RouteImport") {
		t.Errorf("GR_red_node1: %+v", red)
	}

	wantOwned := []model.OVNRoute{
		{UUID: "s1", Router: "GR_node1", Prefix: netip.MustParsePrefix("192.0.2.0/24"), NextHop: netip.MustParseAddr("172.18.0.10"), OutputPort: "rtoe-GR_node1", Rule: "up", Network: "default"},
		{UUID: "s2", Router: "GR_node1", Prefix: netip.MustParsePrefix("192.0.2.0/24"), NextHop: netip.MustParseAddr("172.18.0.11"), OutputPort: "rtoe-GR_node1", Rule: "up", Network: "default"},
	}
	if len(got.Owned) != len(wantOwned) {
		t.Fatalf("owned: %+v", got.Owned)
	}
	for i := range wantOwned {
		if got.Owned[i] != wantOwned[i] {
			t.Errorf("owned[%d] = %+v, want %+v", i, got.Owned[i], wantOwned[i])
		}
	}

	var prot []string
	for _, p := range sortProtected(got.Protected) {
		prot = append(prot, p.Prefix.String()+" "+p.Why)
	}
	wantProt := []string{
		"100.64.0.0/16 join subnet (Logical_Router_Port rtoj-GR_node1 networks)",
		"100.88.0.0/16 transit subnet (Logical_Router_Port rtots-node1 networks)",
		"100.89.0.0/16 transit subnet (Logical_Router_Port red_rtots-node1 networks)",
		"fd97::/64 transit subnet (Logical_Router_Port rtots-node1 networks)",
		"fd98::/64 join subnet (Logical_Router_Port rtoj-GR_node1 networks)",
	}
	if strings.Join(prot, "\n") != strings.Join(wantProt, "\n") {
		t.Errorf("protected:\n%s\nwant:\n%s", strings.Join(prot, "\n"), strings.Join(wantProt, "\n"))
	}

	wantProblems := []string{
		`Logical_Router_Port rtots-node1 networks "junk": not an address/length; not protected`,
		`Logical_Router GR_dup_node1: 2 rows have this name; all skipped, nothing is imported there`,
		`Logical_Router_Static_Route s4 on GR_node1 (ovnbgp.io/owner=node1): nexthop "bogus" is not an address; left alone`,
		`Logical_Router_Static_Route s5 (ovnbgp.io/owner=node1) is on router "GR_node2", not a gateway router of this node; left alone`,
	}
	if strings.Join(got.Problems, "\n") != strings.Join(wantProblems, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got.Problems, "\n"), strings.Join(wantProblems, "\n"))
	}
}

// TestSortProtectedKeepsFirstReason: sortProtected sorts by prefix (IPv4
// first) and, of repeated prefixes, keeps the first one's reason, as a
// stable sort does, whatever the order and number of repeats.
func TestSortProtectedKeepsFirstReason(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 50 {
		n := 1 + rng.IntN(3000)
		in := make([]model.ProtectedPrefix, n)
		for i := range in {
			var p netip.Prefix
			if rng.IntN(4) == 0 {
				p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.IntN(50))}), 128)
			} else {
				p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(3)), byte(rng.IntN(200))}), 32-rng.IntN(2)*8)
			}
			in[i] = model.ProtectedPrefix{Prefix: p, Why: fmt.Sprintf("row %d", i)}
		}
		// The reference: the first of each prefix, in prefix order.
		first := map[netip.Prefix]model.ProtectedPrefix{}
		var want []model.ProtectedPrefix
		for _, p := range in {
			if _, ok := first[p.Prefix]; !ok {
				first[p.Prefix] = p
				want = append(want, p)
			}
		}
		slices.SortFunc(want, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
		orig := slices.Clone(in)
		got := sortProtected(in)
		if !slices.Equal(want, got) {
			t.Fatalf("round %d (%d entries): got %d entries, want %d\n got %v\nwant %v", round, n, len(got), len(want), got, want)
		}
		if !slices.Equal(in, orig) {
			t.Fatalf("round %d: sortProtected changed its input", round)
		}
	}
}

// TestRouteImportMarkers: OVN-Kubernetes' route import is recognised by
// both markers it has written: external_ids k8s.ovn.org/owner-controller=
// RouteImport (current), and controller=routeimport (its first releases),
// so ovnbgp refuses to share a gateway router with either.
func TestRouteImportMarkers(t *testing.T) {
	for _, tc := range []struct {
		ids  map[string]string
		want string
	}{
		{map[string]string{"k8s.ovn.org/owner-controller": "RouteImport"}, "RouteImport"},
		{map[string]string{"controller": "routeimport"}, "RouteImport"},
		{map[string]string{"k8s.ovn.org/owner-controller": "EgressIP"}, "EgressIP"},
		{map[string]string{"controller": "something-else"}, ""},
		{nil, ""},
	} {
		if got := ownerController(tc.ids); got != tc.want {
			t.Errorf("ownerController(%v) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}
