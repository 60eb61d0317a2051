package vrf_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
	"github.com/ovnbgp/ovnbgp/vrf"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func hop(addr, dev string) model.NextHop {
	return model.NextHop{Addr: netip.MustParseAddr(addr), Dev: dev}
}

func route(table uint32, prefix string, hops ...model.NextHop) model.KernelRoute {
	return model.KernelRoute{Table: table, Prefix: pfx(prefix), NextHops: hops, Protocol: proto}
}

func add(r model.KernelRoute) model.KernelOp { return model.KernelOp{Op: model.OpAdd, Route: &r} }
func rep(r model.KernelRoute) model.KernelOp { return model.KernelOp{Op: model.OpReplace, Route: &r} }
func del(r model.KernelRoute) model.KernelOp { return model.KernelOp{Op: model.OpDelete, Route: &r} }

// sortRoutes orders routes and their next hops like Snapshot does.
var sortRoutes = cmp.Options{
	cmpopts.SortSlices(func(a, b model.KernelRoute) bool {
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Prefix.String() < b.Prefix.String()
	}),
	cmpopts.SortSlices(func(a, b model.NextHop) bool {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c < 0
		}
		return a.Dev < b.Dev
	}),
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(model.KernelRoute{}, "Rule"),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
}

func mustApply(t *testing.T, m interface {
	Apply(context.Context, []model.KernelOp) ([]model.KernelOp, error)
}, ops ...model.KernelOp) []model.KernelOp {
	t.Helper()
	applied, err := m.Apply(context.Background(), ops)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return applied
}

// addForeign puts routes ovnbgp does not own into the namespace: one in the
// table the test uses, and one with the same destination as ovnbgp's in
// another table and protocol, and one with the same destination and table
// but another metric.
func addForeign(n *testNS) {
	n.ip("route", "add", "203.0.113.0/24", "via", "192.0.2.9", "table", "100", "proto", "static")
	n.ip("route", "add", "10.1.0.0/16", "via", "198.51.100.9", "table", "101", "proto", "bgp")
	n.ip("route", "add", "10.1.0.0/16", "via", "198.51.100.8", "table", "100", "proto", "kernel", "metric", "50")
	n.ip("-6", "route", "add", "2001:db8:f::/48", "via", "2001:db8:a::9", "table", "100", "proto", "static")
	n.ip("-6", "route", "add", "2001:db8:1::/48", "via", "2001:db8:b::9", "table", "101", "proto", "bgp")
	n.ip("-6", "route", "add", "2001:db8:1::/48", "via", "2001:db8:b::8", "table", "100", "proto", "kernel", "metric", "50")
	n.ip("route", "add", "10.1.0.0/16", "via", "192.0.2.7", "proto", "boot")
}

// TestRoutesAddReplaceDelete walks routes through add, replace (next hops
// change, single to multipath and back) and delete in table mode, IPv4 and
// IPv6, reading each step back with Snapshot, with foreign routes in the
// same table and with the same destinations byte-identical throughout.
func TestRoutesAddReplaceDelete(t *testing.T) {
	n := newNS(t)
	addForeign(n)
	before := n.foreign()
	m := n.open(nil)

	v4 := route(100, "10.1.0.0/16", hop("192.0.2.2", "a0"))
	v6 := route(100, "2001:db8:1::/48", hop("2001:db8:a::2", "a0"))
	ecmp4 := route(100, "10.2.0.0/16", hop("192.0.2.2", "a0"), hop("198.51.100.2", "b0"))
	ecmp6 := route(100, "2001:db8:2::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::2", "b0"))
	def4 := route(102, "0.0.0.0/0", hop("192.0.2.3", "a0"))
	def6 := route(102, "::/0", hop("2001:db8:a::3", "a0"), hop("2001:db8:b::3", "b0"), hop("2001:db8:b::4", "b0"))

	steps := []struct {
		name string
		ops  []model.KernelOp
		want []model.KernelRoute
	}{
		{"add", []model.KernelOp{add(v4), add(v6), add(ecmp4), add(ecmp6), add(def4), add(def6)},
			[]model.KernelRoute{v4, v6, ecmp4, ecmp6, def4, def6}},
		{"replace single to multipath and back",
			[]model.KernelOp{
				rep(route(100, "10.1.0.0/16", hop("192.0.2.2", "a0"), hop("192.0.2.4", "a0"))),
				rep(route(100, "2001:db8:1::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::5", "b0"))),
				rep(route(100, "10.2.0.0/16", hop("198.51.100.2", "b0"))),
				rep(route(100, "2001:db8:2::/48", hop("2001:db8:b::2", "b0"))),
			},
			[]model.KernelRoute{
				route(100, "10.1.0.0/16", hop("192.0.2.2", "a0"), hop("192.0.2.4", "a0")),
				route(100, "2001:db8:1::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::5", "b0")),
				route(100, "10.2.0.0/16", hop("198.51.100.2", "b0")),
				route(100, "2001:db8:2::/48", hop("2001:db8:b::2", "b0")),
				def4, def6,
			}},
		{"replace multipath to other multipath",
			[]model.KernelOp{rep(route(102, "::/0", hop("2001:db8:a::5", "a0"), hop("2001:db8:b::3", "b0")))},
			[]model.KernelRoute{
				route(100, "10.1.0.0/16", hop("192.0.2.2", "a0"), hop("192.0.2.4", "a0")),
				route(100, "2001:db8:1::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::5", "b0")),
				route(100, "10.2.0.0/16", hop("198.51.100.2", "b0")),
				route(100, "2001:db8:2::/48", hop("2001:db8:b::2", "b0")),
				def4, route(102, "::/0", hop("2001:db8:a::5", "a0"), hop("2001:db8:b::3", "b0")),
			}},
		{"delete", []model.KernelOp{del(v4), del(v6), del(ecmp4), del(ecmp6), del(def4), del(def6)}, nil},
	}
	for _, s := range steps {
		applied := mustApply(t, m, s.ops...)
		if len(applied) != len(s.ops) {
			t.Errorf("%s: applied %d of %d operations", s.name, len(applied), len(s.ops))
		}
		host, err := m.Snapshot()
		if err != nil {
			t.Fatalf("%s: Snapshot: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, host.Routes, sortRoutes); diff != "" {
			t.Errorf("%s: Snapshot().Routes (-want +got):\n%s\nip route:\n%s", s.name, diff, n.ip("-d", "route", "show", "table", "all"))
		}
		if after := n.foreign(); after != before {
			t.Fatalf("%s: foreign routes changed:\nbefore:\n%s\nafter:\n%s", s.name, before, after)
		}
	}
}

// TestIdempotentApply applies the same plan twice: the second time changes
// nothing, fails nothing, and a second delete is a no-op that is not
// reported as applied.
func TestIdempotentApply(t *testing.T) {
	n := newNS(t)
	addForeign(n)
	before := n.foreign()
	m := n.open(nil)
	routes := []model.KernelRoute{
		route(100, "10.5.0.0/16", hop("192.0.2.2", "a0"), hop("198.51.100.2", "b0")),
		route(100, "2001:db8:5::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::2", "b0")),
		route(100, "10.6.0.0/24", hop("192.0.2.2", "a0")),
	}
	ops := plan.DiffKernel(routes, nil)
	mustApply(t, m, ops...)
	first, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	shown := n.ip("-d", "route", "show", "table", "100")
	mustApply(t, m, ops...)
	second, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first.Routes, second.Routes, sortRoutes); diff != "" {
		t.Errorf("second Apply changed the routes (-first +second):\n%s", diff)
	}
	if again := n.ip("-d", "route", "show", "table", "100"); again != shown {
		t.Errorf("second Apply changed table 100:\nbefore:\n%s\nafter:\n%s", shown, again)
	}
	if ops := plan.DiffKernel(routes, second.Routes); len(ops) != 0 {
		t.Errorf("DiffKernel(desired, Snapshot) after Apply = %d operations, want 0: %+v", len(ops), ops)
	}
	var dels []model.KernelOp
	for _, r := range routes {
		dels = append(dels, del(r))
	}
	if applied := mustApply(t, m, dels...); len(applied) != len(dels) {
		t.Errorf("first delete applied %d of %d", len(applied), len(dels))
	}
	if applied := mustApply(t, m, dels...); len(applied) != 0 {
		t.Errorf("second delete applied %d, want 0 (nothing was left)", len(applied))
	}
	if after := n.foreign(); after != before {
		t.Fatalf("foreign routes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestForeignKeyRefused: an add or replace onto a key held by a foreign
// route is refused with an error naming it, and a delete of that
// destination leaves the foreign route alone; the other operations of the
// same Apply still happen.
func TestForeignKeyRefused(t *testing.T) {
	n := newNS(t)
	n.ip("route", "add", "10.9.0.0/16", "via", "192.0.2.2", "table", "100", "proto", "static")
	n.ip("-6", "route", "add", "2001:db8:9::/48", "via", "2001:db8:a::2", "table", "100", "proto", "bgp")
	before := n.foreign()
	m := n.open(nil)

	ok := route(100, "10.10.0.0/16", hop("192.0.2.3", "a0"))
	ops := []model.KernelOp{
		add(route(100, "10.9.0.0/16", hop("198.51.100.2", "b0"))),
		rep(route(100, "10.9.0.0/16", hop("198.51.100.2", "b0"), hop("192.0.2.5", "a0"))),
		add(route(100, "2001:db8:9::/48", hop("2001:db8:b::2", "b0"))),
		add(ok),
		del(route(100, "10.9.0.0/16", hop("192.0.2.2", "a0"))),
		del(route(100, "2001:db8:9::/48", hop("2001:db8:a::2", "a0"))),
	}
	applied, err := m.Apply(context.Background(), ops)
	if err == nil {
		t.Fatal("Apply onto foreign keys returned no error")
	}
	for _, want := range []string{
		"table 100 already has 10.9.0.0/16 from protocol static: not ovnbgp's, left alone",
		"table 100 already has 2001:db8:9::/48 from protocol bgp: not ovnbgp's, left alone",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Count(err.Error(), "not ovnbgp's") != 3 {
		t.Errorf("want 3 refusals (add, replace, add), got: %v", err)
	}
	if len(applied) != 1 || applied[0].Route.Prefix != ok.Prefix {
		t.Errorf("applied = %+v, want only the add of %s", applied, ok.Prefix)
	}
	if after := n.foreign(); after != before {
		t.Fatalf("foreign routes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	host, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]model.KernelRoute{ok}, host.Routes, sortRoutes); diff != "" {
		t.Errorf("Snapshot().Routes (-want +got):\n%s", diff)
	}
}

// TestBadOperations: bad input gets an error naming what is wrong, and the
// good operations around it still happen.
func TestBadOperations(t *testing.T) {
	n := newNS(t)
	m := n.open(nil)
	good := route(100, "10.20.0.0/16", hop("192.0.2.2", "a0"))
	ops := []model.KernelOp{
		add(route(0, "10.21.0.0/16", hop("192.0.2.2", "a0"))),
		add(route(254, "10.26.0.0/16", hop("192.0.2.2", "a0"))),
		add(model.KernelRoute{VRF: "nosuchvrf", Prefix: pfx("10.27.0.0/16"), NextHops: []model.NextHop{hop("192.0.2.2", "a0")}, Protocol: proto}),
		add(route(100, "10.22.0.0/16", hop("192.0.2.2", "nosuchdev"))),
		add(route(100, "2001:db8:23::/48", hop("192.0.2.2", "a0"))),
		add(route(100, "10.23.0.0/16", model.NextHop{Addr: netip.MustParseAddr("fe80::1")})),
		add(route(100, "10.28.0.0/16", hop("fe80::1%a0", "a0"))),
		add(route(100, "10.24.0.1/16", hop("192.0.2.2", "a0"))),
		add(route(100, "10.25.0.0/16")),
		{Op: model.OpAdd, Route: &good, VRF: &model.VRFDevice{Name: "x", Table: 5}},
		{Op: model.OpAdd, VRF: &model.VRFDevice{Name: "a0", Table: 1007}},
		{Op: model.OpDelete, VRF: &model.VRFDevice{Name: "a0", Table: 1007}},
		add(good),
	}
	applied, err := m.Apply(context.Background(), ops)
	for _, want := range []string{
		"no table",
		"table 254 is one of the kernel's default, main and local tables",
		`no VRF device "nosuchvrf"`,
		`no device "nosuchdev"`,
		"not of the prefix's address family",
		"IPv6 next hop fe80::1 of an IPv4 prefix needs a device",
		"next hop fe80::1%a0 carries a zone",
		"host bits set",
		"no next hop",
		"exactly one of route, vrf and policyRule",
		"device a0 exists and is a veth, not a VRF: left alone",
		"never changes or deletes",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if len(applied) != 1 || applied[0].Route == nil || applied[0].Route.Prefix != good.Prefix {
		t.Errorf("applied = %+v, want only the good add", applied)
	}
	if out := n.ip("-d", "link", "show", "a0"); !strings.Contains(out, "veth") {
		t.Errorf("a0 is no longer a veth:\n%s", out)
	}
}

// TestNotify: a route of ours deleted by hand, a foreign route changing in
// a table where we have routes, a link and an address change each call
// notify. Each case opens a fresh manager after its setup, so the only
// change it sees is the one the case makes (Open subscribes before it
// returns).
func TestNotify(t *testing.T) {
	n := newNS(t)
	for _, c := range []struct {
		why  string
		args []string
	}{
		{"ip route del of our IPv4 route", []string{"route", "del", "10.30.0.0/16", "table", "100"}},
		{"ip route del of our IPv6 multipath route", []string{"-6", "route", "del", "2001:db8:30::/48", "table", "100"}},
		{"a foreign route added to table 100", []string{"route", "add", "10.31.0.0/16", "via", "192.0.2.9", "table", "100", "proto", "static"}},
		{"an address added", []string{"addr", "add", "192.0.2.77/24", "dev", "a0"}},
		{"a link going down (last: the routes above need it)", []string{"link", "set", "b1", "down"}},
	} {
		n.ip("route", "replace", "10.30.0.0/16", "via", "192.0.2.2", "table", "100", "proto", "200")
		n.ip("-6", "route", "replace", "2001:db8:30::/48", "table", "100", "proto", "200",
			"nexthop", "via", "2001:db8:a::2", "dev", "a0", "nexthop", "via", "2001:db8:b::2", "dev", "b0")
		pokes := make(chan struct{}, 1)
		m := n.open(pokes)
		if _, err := m.Snapshot(); err != nil {
			t.Fatal(err)
		}
		n.ip(c.args...)
		waitPoke(t, pokes, c.why)
		m.Close()
	}
}

// TestSnapshotLinks: links with their addresses, state and index.
func TestSnapshotLinks(t *testing.T) {
	n := newNS(t)
	n.ip("link", "set", "b0", "down")
	m := n.open(nil)
	host, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]model.Link{}
	for _, l := range host.Links {
		byName[l.Name] = l
	}
	a0, ok := byName["a0"]
	if !ok || !a0.Up || a0.Index == 0 {
		t.Fatalf("a0 = %+v (ok %v), want up with an index", a0, ok)
	}
	for _, want := range []string{"192.0.2.1/24", "2001:db8:a::1/64"} {
		if !slices.Contains(a0.Addrs, pfx(want)) {
			t.Errorf("a0 addresses %v lack %s", a0.Addrs, want)
		}
	}
	if b0 := byName["b0"]; b0.Up {
		t.Errorf("b0 is down but Snapshot says up: %+v", b0)
	}
	if lo := byName["lo"]; !lo.Up || !slices.Contains(lo.Addrs, pfx("127.0.0.1/8")) {
		t.Errorf("lo = %+v, want up with 127.0.0.1/8", lo)
	}
	if len(host.VRFs) != 0 {
		t.Errorf("VRFs = %+v, want none", host.VRFs)
	}
}

// TestRules: ip rules are added and deleted with our protocol, a foreign
// rule with the same selector is refused and left alone, and Apply is
// idempotent.
func TestRules(t *testing.T) {
	n := newNS(t)
	n.ip("rule", "add", "priority", "1200", "from", "10.40.0.0/16", "lookup", "100", "proto", "static")
	n.ip("-6", "rule", "add", "priority", "1200", "from", "2001:db8:40::/48", "lookup", "100")
	before := n.foreignRules()
	m := n.open(nil)
	rules := []model.KernelRule{
		{Priority: 1100, Src: pfx("10.41.0.0/16"), Table: 100, Protocol: proto},
		{Priority: 1101, Src: pfx("0.0.0.0/0"), Table: 1000, Protocol: proto},
		{Priority: 1100, Src: pfx("2001:db8:41::/48"), Table: 100, Protocol: proto},
	}
	var ops []model.KernelOp
	for i := range rules {
		ops = append(ops, model.KernelOp{Op: model.OpAdd, PolicyRule: &rules[i]})
	}
	if applied := mustApply(t, m, ops...); len(applied) != len(ops) {
		t.Errorf("applied %d of %d rules", len(applied), len(ops))
	}
	if applied := mustApply(t, m, ops...); len(applied) != 0 {
		t.Errorf("second add applied %d rules, want 0", len(applied))
	}
	host, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rules, host.Rules, cmpopts.SortSlices(func(a, b model.KernelRule) bool {
		return a.Priority < b.Priority || a.Priority == b.Priority && a.Src.Addr().Less(b.Src.Addr())
	}), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Snapshot().Rules (-want +got):\n%s", diff)
	}
	foreign := []model.KernelRule{
		{Priority: 1200, Src: pfx("10.40.0.0/16"), Table: 100},
		{Priority: 1200, Src: pfx("2001:db8:40::/48"), Table: 100},
	}
	var fops []model.KernelOp
	for i := range foreign {
		fops = append(fops, model.KernelOp{Op: model.OpAdd, PolicyRule: &foreign[i]},
			model.KernelOp{Op: model.OpDelete, PolicyRule: &foreign[i]})
	}
	applied, err := m.Apply(context.Background(), fops)
	if err == nil || strings.Count(err.Error(), "not ovnbgp's, left alone") != 2 {
		t.Errorf("adding rules over foreign ones: error %v, want two refusals", err)
	}
	if len(applied) != 0 {
		t.Errorf("applied %+v over foreign rules", applied)
	}
	if after := n.foreignRules(); after != before {
		t.Fatalf("foreign rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var dels []model.KernelOp
	for i := range rules {
		dels = append(dels, model.KernelOp{Op: model.OpDelete, PolicyRule: &rules[i]})
	}
	if applied := mustApply(t, m, dels...); len(applied) != len(dels) {
		t.Errorf("deleted %d of %d rules", len(applied), len(dels))
	}
	if host, err = m.Snapshot(); err != nil || len(host.Rules) != 0 {
		t.Errorf("after delete: rules %+v, err %v", host.Rules, err)
	}
	if after := n.foreignRules(); after != before {
		t.Fatalf("foreign rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestAddsDoNotLookUp: adding routes to free keys dumps no table (a lookup
// per add made a 100k-route import quadratic); only an add that finds its
// key taken looks it up, to replace ours or refuse a foreign one.
func TestAddsDoNotLookUp(t *testing.T) {
	n := newNS(t)
	n.ip("route", "add", "10.9.0.0/16", "via", "192.0.2.2", "table", "100", "proto", "static")
	m := n.open(nil)
	var ops []model.KernelOp
	for i := range 200 {
		ops = append(ops, add(route(100, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 20, byte(i), 0}), 24).String(), hop("192.0.2.3", "a0"))))
	}
	mustApply(t, m, ops...)
	if got := vrf.Lookups(m); got != 0 {
		t.Fatalf("200 adds to free keys made %d table lookups, want 0", got)
	}
	// Our own key again (the plan did not see it yet): replaced.
	mustApply(t, m, ops[0])
	// A foreign key: looked up once, and refused.
	if _, err := m.Apply(context.Background(), []model.KernelOp{add(route(100, "10.9.0.0/16", hop("192.0.2.3", "a0")))}); err == nil ||
		!strings.Contains(err.Error(), "not ovnbgp's") {
		t.Fatalf("add onto a foreign key: %v, want it refused", err)
	}
	if got := vrf.Lookups(m); got != 2 {
		t.Errorf("%d lookups, want 2 (our key taken, a foreign key taken)", got)
	}
}

// TestSnapshotForeignKeys: Snapshot names the keys routes not ours hold
// outside local, main and default, so the plan never targets them; a route
// of another metric is another key.
func TestSnapshotForeignKeys(t *testing.T) {
	n := newNS(t)
	n.ip("route", "add", "10.9.0.0/16", "via", "192.0.2.2", "table", "100", "proto", "static")
	n.ip("route", "add", "10.8.0.0/16", "via", "192.0.2.2", "table", "100", "proto", "static", "metric", "5")
	n.ip("route", "add", "10.7.0.0/16", "via", "192.0.2.2", "proto", "static") // main
	m := n.open(nil)
	host, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := []model.KernelRouteKey{{Table: 100, Prefix: pfx("10.9.0.0/16")}}
	if !slices.Equal(host.Foreign, want) {
		t.Errorf("Foreign = %v, want %v", host.Foreign, want)
	}
}
