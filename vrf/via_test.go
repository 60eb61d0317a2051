package vrf_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
)

// addUnnumbered adds a veth pair u0/u1 to n that carries only the IPv6
// link-local addresses the kernel gives it, as an unnumbered BGP link does
// (issue 20), and waits for them.
func addUnnumbered(n *testNS) {
	n.ip("link", "add", "u0", "type", "veth", "peer", "name", "u1")
	n.sysctl("net.ipv6.conf.u0.accept_dad", "0")
	n.sysctl("net.ipv6.conf.u1.accept_dad", "0")
	n.ip("link", "set", "u0", "up")
	n.ip("link", "set", "u1", "up")
	n.settle("u0", "u1")
	if out := n.ip("-4", "addr", "show", "dev", "u0"); strings.Contains(out, "inet ") {
		n.t.Fatalf("u0 has an IPv4 address:\n%s", out)
	}
}

// TestIPv4ViaIPv6 (issue 20, RFC 8950): IPv4 routes with IPv6 link-local
// next hops go into the kernel as `via inet6 fe80::… dev u0` (RTA_VIA) on a
// link without IPv4 addresses, single, multipath, and mixed with an IPv4
// gateway in one multipath route; they read back the same from the events
// (Snapshot of the manager that wrote them), from a dump (a manager opened
// afterwards) and from iproute2; a change of only a via address by someone
// else is seen as a change (TakeChanges), and they are deleted.
func TestIPv4ViaIPv6(t *testing.T) {
	n := newNS(t)
	addUnnumbered(n)
	addForeign(n)
	before := n.foreign()
	m := n.open(nil)

	single := route(100, "10.40.0.0/24", hop("fe80::1", "u0"))
	ecmp := route(100, "10.41.0.0/24", hop("fe80::1", "u0"), hop("fe80::2", "u0"))
	mixed := route(100, "10.42.0.0/24", hop("192.0.2.2", "a0"), hop("fe80::1", "u0"))
	tables := []uint32{100}
	keys := []model.KernelRouteKey{single.Key(), ecmp.Key(), mixed.Key()}
	// waitCache's universe: ours and addForeign's keys in table 100.
	universe := append(slices.Clone(keys), model.KernelRouteKey{Table: 100, Prefix: pfx("203.0.113.0/24")},
		model.KernelRouteKey{Table: 100, Prefix: pfx("2001:db8:f::/48")}, model.KernelRouteKey{Table: 100, Prefix: pfx("10.1.0.0/16")},
		model.KernelRouteKey{Table: 100, Prefix: pfx("2001:db8:1::/48")})

	applied := mustApply(t, m, add(single), add(ecmp), add(mixed))
	if len(applied) != 3 {
		t.Fatalf("applied %d of 3 adds", len(applied))
	}
	out := n.ip("-d", "route", "show", "table", "100")
	for _, want := range []string{
		"10.40.0.0/24 via inet6 fe80::1 dev u0 proto 200",
		"nexthop via inet6 fe80::1 dev u0",
		"nexthop via inet6 fe80::2 dev u0",
		"nexthop via 192.0.2.2 dev a0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ip route show table 100 lacks %q:\n%s", want, out)
		}
	}
	want := []model.KernelRoute{single, ecmp, mixed}
	check := func(why string, m interface {
		Snapshot() (model.Host, error)
	}, want []model.KernelRoute) {
		t.Helper()
		host, err := m.Snapshot()
		if err != nil {
			t.Fatalf("%s: Snapshot: %v", why, err)
		}
		var got []model.KernelRoute
		for _, r := range host.Routes {
			if slices.Contains(keys, r.Key()) {
				got = append(got, r)
			}
		}
		if diff := cmp.Diff(want, got, sortRoutes); diff != "" {
			t.Errorf("%s: Snapshot().Routes (-want +got):\n%s\nip route:\n%s", why, diff, n.ip("-d", "route", "show", "table", "100"))
		}
	}
	check("after the adds (events)", m, want)
	waitCache(t, n, m, tables, universe, "after the adds")
	check("a manager opened afterwards (dump)", n.open(nil), want)

	// Someone else changes only a via address, of a single and of a
	// multipath route: both are changes, and the cache follows.
	m.TakeChanges()
	n.ip("route", "replace", "10.40.0.0/24", "table", "100", "proto", "200", "via", "inet6", "fe80::3", "dev", "u0")
	n.ip("route", "replace", "10.41.0.0/24", "table", "100", "proto", "200",
		"nexthop", "via", "inet6", "fe80::1", "dev", "u0", "nexthop", "via", "inet6", "fe80::4", "dev", "u0")
	want = []model.KernelRoute{route(100, "10.40.0.0/24", hop("fe80::3", "u0")),
		route(100, "10.41.0.0/24", hop("fe80::1", "u0"), hop("fe80::4", "u0")), mixed}
	waitCache(t, n, m, tables, universe, "after ip route replace of the via addresses")
	check("after ip route replace (events)", m, want)
	hc := m.TakeChanges()
	for _, k := range keys[:2] {
		if !hc.All && !slices.Contains(hc.Routes, k) {
			t.Errorf("TakeChanges = %+v does not report %v, whose via address changed", hc, k)
		}
	}

	// Our own replace puts the via addresses back.
	mustApply(t, m, rep(single), rep(ecmp))
	check("after our replace", m, []model.KernelRoute{single, ecmp, mixed})

	mustApply(t, m, del(single), del(ecmp), del(mixed))
	check("after the deletes", m, nil)
	waitCache(t, n, m, tables, universe, "after the deletes")
	if out := n.ip("route", "show", "table", "100", "proto", "200"); out != "" {
		t.Errorf("routes of ours left in table 100:\n%s", out)
	}
	if after := n.foreign(); after != before {
		t.Fatalf("foreign routes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
