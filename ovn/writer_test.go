package ovn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
	"github.com/ovnbgp/ovnbgp/plan"
)

// writerLab is a real ovsdb-server holding node1's gateway routers as
// OVN-Kubernetes writes them, plus rows ovnbgp must never change:
//   - GR_node1 (default network, rtoe-GR_node1 172.18.0.2/16 and
//     fc00:f853:ccd:e793::2/64) with a route `ovn-nbctl lr-route-add` added
//     and a route owned by node2;
//   - GR_blue_node1 (network blue, rtoe-GR_blue_node1 172.19.0.2/16);
//   - GR_red_node1 (network red) where OVN-Kubernetes' route import owns a
//     route (k8s.ovn.org/owner-controller=RouteImport);
//   - GR_node2, another node's gateway router.
type writerLab struct {
	s       *ovsdbtest.Server
	c       *ovn.Client
	foreign []string // UUIDs of the rows ovnbgp does not own
}

func newWriterLab(t *testing.T) *writerLab {
	t.Helper()
	s := ovsdbtest.Start(t, "")
	blue := []string{"external_ids:k8s.ovn.org/network=blue", "external_ids:k8s.ovn.org/topology=layer3", "external_ids:k8s.ovn.org/role=primary"}
	red := []string{"external_ids:k8s.ovn.org/network=red", "external_ids:k8s.ovn.org/topology=layer3", "external_ids:k8s.ovn.org/role=primary"}
	for _, args := range [][]string{
		{"ls-add", "node1", "--", "set", "logical_switch", "node1", "other_config:subnet=10.128.0.0/23"},
		{"lr-add", "GR_node1", "--", "set", "logical_router", "GR_node1", "options:chassis=chassis-node1"},
		{"lrp-add", "GR_node1", "rtoe-GR_node1", "02:42:ac:12:00:02", "172.18.0.2/16", "fc00:f853:ccd:e793::2/64"},
		{"lrp-add", "GR_node1", "rtoj-GR_node1", "0a:58:64:40:00:02", "100.64.0.2/16", "fd98::2/64"},
		{"lr-route-add", "GR_node1", "10.128.0.0/14", "100.64.0.1"},
		append([]string{"lr-add", "GR_blue_node1", "--", "set", "logical_router", "GR_blue_node1"}, blue...),
		{"lrp-add", "GR_blue_node1", "rtoe-GR_blue_node1", "02:42:ac:13:00:02", "172.19.0.2/16"},
		append([]string{"lr-add", "GR_red_node1", "--", "set", "logical_router", "GR_red_node1"}, red...),
		{"lrp-add", "GR_red_node1", "rtoe-GR_red_node1", "02:42:ac:14:00:02", "172.20.0.2/16"},
		{"lr-add", "GR_node2"},
		{"lrp-add", "GR_node2", "rtoe-GR_node2", "02:42:ac:12:00:03", "172.18.0.3/16"},
		{"--", "--id=@r", "create", "Logical_Router_Static_Route", "ip_prefix=198.51.100.0/24", "nexthop=172.18.0.12",
			"output_port=rtoe-GR_node1", `external_ids:"ovnbgp.io/owner"=node2`, `external_ids:"ovnbgp.io/rule"=uplink`,
			"--", "add", "Logical_Router", "GR_node1", "static_routes", "@r"},
		{"--", "--id=@r", "create", "Logical_Router_Static_Route", "ip_prefix=203.0.113.0/24", "nexthop=172.20.0.1",
			"output_port=rtoe-GR_red_node1", `external_ids:"k8s.ovn.org/owner-controller"=RouteImport`,
			"--", "add", "Logical_Router", "GR_red_node1", "static_routes", "@r"},
	} {
		s.MustNBCtl(args...)
	}
	foreign := strings.Fields(s.MustNBCtl("--bare", "--columns=_uuid", "list", "Logical_Router_Static_Route"))
	if len(foreign) != 3 {
		t.Fatalf("want 3 foreign static routes, got %v", foreign)
	}
	slices.Sort(foreign)
	c, _ := dial(t, s.Endpoint(), zaptest.NewLogger(t))
	eventually(t, 10*time.Second, func() (bool, string) {
		snap, ok := c.Snapshot("node1")
		return ok && len(snap.Routers) == 3, fmt.Sprintf("routers: %+v", snap.Routers)
	})
	return &writerLab{s: s, c: c, foreign: foreign}
}

// foreignRows is `ovn-nbctl --format=json list` of every row ovnbgp does
// not own: what must be byte-identical before and after every write.
func (l *writerLab) foreignRows(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, id := range l.foreign {
		b.WriteString(l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route", id))
	}
	for _, r := range []string{"GR_red_node1", "GR_node2"} {
		b.WriteString(l.s.MustNBCtl("--format=json", "list", "Logical_Router", r))
	}
	return b.String()
}

func (l *writerLab) snap(t *testing.T) model.Snapshot {
	t.Helper()
	snap, ok := l.c.Snapshot("node1")
	if !ok {
		t.Fatal("snapshot not ok")
	}
	return snap
}

func (l *writerLab) router(t *testing.T, name string) model.GatewayRouter {
	t.Helper()
	for _, r := range l.snap(t).Routers {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no router %s in the snapshot", name)
	return model.GatewayRouter{}
}

// ownedIs waits until the snapshot's owned routes are want (UUIDs aside).
func (l *writerLab) ownedIs(t *testing.T, want []model.OVNRoute) []model.OVNRoute {
	t.Helper()
	want = withoutUUIDs(want)
	slices.SortFunc(want, cmpRoute)
	var got []model.OVNRoute
	eventually(t, 10*time.Second, func() (bool, string) {
		got = l.snap(t).OwnedRoutes
		norm := withoutUUIDs(got)
		slices.SortFunc(norm, cmpRoute)
		d := diff(want, norm)
		return d == "", "owned routes (-want +got):\n" + d
	})
	return got
}

func withoutUUIDs(rs []model.OVNRoute) []model.OVNRoute {
	out := []model.OVNRoute{}
	for _, r := range rs {
		r.UUID = ""
		out = append(out, r)
	}
	return out
}

func cmpRoute(a, b model.OVNRoute) int {
	return strings.Compare(fmt.Sprint(a.Router, a.Prefix, a.NextHop), fmt.Sprint(b.Router, b.Prefix, b.NextHop))
}

func route(router, prefix, nh, port, rule, network string) model.OVNRoute {
	return model.OVNRoute{Router: router, Prefix: netip.MustParsePrefix(prefix), NextHop: netip.MustParseAddr(nh),
		OutputPort: port, Rule: rule, Network: network}
}

func apply(t *testing.T, l *writerLab, ops []model.OVNOp, guards []model.OVNGuard) ([]model.OVNOp, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return l.c.ApplyRoutes(ctx, "node1", ops, guards)
}

// TestApplyRoutes: add (ECMP, IPv4 and IPv6, two routers), replace and
// delete owned static routes on a real ovsdb-server; the rows carry
// ovnbgp.io/owner and ovnbgp.io/rule and no k8s.ovn.org/* key; rows ovnbgp
// does not own stay byte-identical (issue 6 item 3).
func TestApplyRoutes(t *testing.T) {
	l := newWriterLab(t)
	before := l.foreignRows(t)

	desired := []model.OVNRoute{
		route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default"),
		route("GR_node1", "192.0.2.0/24", "172.18.0.11", "rtoe-GR_node1", "uplink", "default"),
		route("GR_node1", "2001:db8:1::/48", "fc00:f853:ccd:e793::10", "rtoe-GR_node1", "uplink6", "default"),
		route("GR_blue_node1", "192.0.2.0/24", "172.19.0.10", "rtoe-GR_blue_node1", "blue", "blue"),
	}
	ops := plan.DiffOVN(desired, l.snap(t).OwnedRoutes)
	applied, err := apply(t, l, ops, nil)
	if err != nil || len(applied) != 4 {
		t.Fatalf("add: applied %d of 4, err %v", len(applied), err)
	}
	got := l.ownedIs(t, desired)
	// Exactly our markers, nothing else.
	for _, r := range got {
		ids := l.s.MustNBCtl("--bare", "--columns=external_ids", "list", "Logical_Router_Static_Route", r.UUID)
		if want := "ovnbgp.io/owner=node1 ovnbgp.io/rule=" + r.Rule; ids != want {
			t.Errorf("row %s external_ids %q, want %q", r.UUID, ids, want)
		}
	}
	if after := l.foreignRows(t); after != before {
		t.Fatalf("foreign rows changed by add:\n%s\n---\n%s", before, after)
	}

	// Replace: another rule and output port, same row.
	var ecmp0 model.OVNRoute
	for _, r := range got {
		if r.NextHop == netip.MustParseAddr("172.18.0.10") {
			ecmp0 = r
		}
	}
	desired[0].Rule, desired[0].OutputPort = "uplink-b", "rtoe-GR_node1"
	desired[2].OutputPort = ""
	ops = plan.DiffOVN(desired, got)
	if len(ops) != 2 || ops[0].Op != model.OpReplace {
		t.Fatalf("want 2 replaces, plan is %+v", ops)
	}
	if applied, err := apply(t, l, ops, nil); err != nil || len(applied) != 2 {
		t.Fatalf("replace: applied %d of 2, err %v", len(applied), err)
	}
	got = l.ownedIs(t, desired)
	if !slices.ContainsFunc(got, func(r model.OVNRoute) bool { return r.UUID == ecmp0.UUID && r.Rule == "uplink-b" }) {
		t.Errorf("replace did not keep the row %s: %+v", ecmp0.UUID, got)
	}
	if after := l.foreignRows(t); after != before {
		t.Fatalf("foreign rows changed by replace:\n%s\n---\n%s", before, after)
	}

	// A replace whose row no longer has the plan's prefix and next hop is
	// refused; the row is left as it is.
	stale := model.OVNOp{Op: model.OpReplace, Route: ecmp0}
	stale.Route.NextHop = netip.MustParseAddr("172.18.0.99")
	if applied, err := apply(t, l, []model.OVNOp{stale}, nil); err == nil || len(applied) != 0 || !strings.Contains(err.Error(), "is now 192.0.2.0/24 via 172.18.0.10") {
		t.Fatalf("replace of a changed row: applied %+v, err %v", applied, err)
	}
	l.ownedIs(t, desired)

	// Delete one ECMP leg and the blue route.
	desired = slices.Delete(desired, 3, 4)
	desired = slices.Delete(desired, 1, 2)
	ops = plan.DiffOVN(desired, got)
	if applied, err := apply(t, l, ops, nil); err != nil || len(applied) != 2 {
		t.Fatalf("delete: applied %d of 2, err %v (plan %+v)", len(applied), err, ops)
	}
	l.ownedIs(t, desired)
	if after := l.foreignRows(t); after != before {
		t.Fatalf("foreign rows changed:\n%s\n---\n%s", before, after)
	}
	// Nothing left behind: the deleted rows are gone from NB.
	if n := len(strings.Fields(l.s.MustNBCtl("--bare", "--columns=_uuid", "list", "Logical_Router_Static_Route"))); n != 3+2 {
		t.Errorf("NB holds %d static routes, want 3 foreign + 2 owned", n)
	}
}

// TestApplyRoutesRefused: ovnbgp never writes to a router OVN-Kubernetes'
// route import manages, nor to another node's or a non-gateway router, and
// never replaces or deletes a row it does not own. Refused operations write
// nothing; the others still apply.
func TestApplyRoutesRefused(t *testing.T) {
	l := newWriterLab(t)
	before := l.foreignRows(t)
	snapBefore := l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route")

	byPrefix := map[string]string{}
	for _, id := range l.foreign {
		byPrefix[l.s.MustNBCtl("--bare", "--columns=ip_prefix", "list", "Logical_Router_Static_Route", id)] = id
	}
	node2Row := route("GR_node1", "198.51.100.0/24", "172.18.0.12", "rtoe-GR_node1", "uplink", "default")
	node2Row.UUID = byPrefix["198.51.100.0/24"]
	nbctlRow := route("GR_node1", "10.128.0.0/14", "100.64.0.1", "", "", "default")
	nbctlRow.UUID = byPrefix["10.128.0.0/14"]
	importRow := route("GR_red_node1", "203.0.113.0/24", "172.20.0.1", "rtoe-GR_red_node1", "", "red")
	importRow.UUID = byPrefix["203.0.113.0/24"]

	for _, tc := range []struct {
		name string
		op   model.OVNOp
		want string
	}{
		{"add on ForeignImport router", model.OVNOp{Op: model.OpAdd, Route: route("GR_red_node1", "192.0.2.0/24", "172.20.0.1", "rtoe-GR_red_node1", "r", "red")}, "RouteImport"},
		{"add on another node's router", model.OVNOp{Op: model.OpAdd, Route: route("GR_node2", "192.0.2.0/24", "172.18.0.1", "rtoe-GR_node2", "r", "default")}, "not a gateway router of node node1"},
		{"add on an unknown router", model.OVNOp{Op: model.OpAdd, Route: route("ovn_cluster_router", "192.0.2.0/24", "172.18.0.1", "", "r", "default")}, "not a gateway router of node node1"},
		{"replace a row of node2", model.OVNOp{Op: model.OpReplace, Route: node2Row}, "not owned by node1"},
		{"delete a row of node2", model.OVNOp{Op: model.OpDelete, Route: node2Row}, "not owned by node1"},
		{"delete an ovn-nbctl row", model.OVNOp{Op: model.OpDelete, Route: nbctlRow}, "not owned by node1"},
		{"delete a RouteImport row", model.OVNOp{Op: model.OpDelete, Route: importRow}, "RouteImport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			applied, err := apply(t, l, []model.OVNOp{tc.op}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || len(applied) != 0 {
				t.Fatalf("applied %+v, err %v; want an error containing %q", applied, err, tc.want)
			}
			if after := l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route"); after != snapBefore {
				t.Fatalf("NB changed:\n%s\n---\n%s", snapBefore, after)
			}
		})
	}

	// A refused op beside a good one: the good one applies.
	good := route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")
	applied, err := apply(t, l, []model.OVNOp{
		{Op: model.OpAdd, Route: route("GR_red_node1", "192.0.2.0/24", "172.20.0.1", "rtoe-GR_red_node1", "r", "red")},
		{Op: model.OpAdd, Route: good},
	}, nil)
	if err == nil || len(applied) != 1 || applied[0].Route.Router != "GR_node1" {
		t.Fatalf("applied %+v, err %v; want the GR_node1 add applied and an error for GR_red_node1", applied, err)
	}
	l.ownedIs(t, []model.OVNRoute{good})
	if after := l.foreignRows(t); after != before {
		t.Fatalf("foreign rows changed:\n%s\n---\n%s", before, after)
	}

	// The same pair in a manual (guarded) apply: nothing at all.
	applied, err = apply(t, l, []model.OVNOp{
		{Op: model.OpAdd, Route: route("GR_red_node1", "192.0.2.0/24", "172.20.0.1", "rtoe-GR_red_node1", "r", "red")},
		{Op: model.OpAdd, Route: route("GR_node1", "192.0.2.0/24", "172.18.0.11", "rtoe-GR_node1", "uplink", "default")},
	}, []model.OVNGuard{guardOf(l.router(t, "GR_node1"))})
	if err == nil || len(applied) != 0 {
		t.Fatalf("guarded: applied %+v, err %v; want nothing applied", applied, err)
	}
	l.ownedIs(t, []model.OVNRoute{good})
}

func guardOf(r model.GatewayRouter) model.OVNGuard {
	return model.OVNGuard{Router: r.Name, RouterUUID: r.UUID, StaticRoutes: slices.Clone(r.StaticRoutes)}
}

// TestApplyRoutesGuardedStale: a manual plan carries OVSDB waits on what it
// read. When the router got another route, or an owned row was edited, the
// apply changes nothing and says the plan is stale.
func TestApplyRoutesGuardedStale(t *testing.T) {
	l := newWriterLab(t)
	a := route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")
	b := route("GR_node1", "192.0.2.0/24", "172.18.0.11", "rtoe-GR_node1", "uplink", "default")
	if _, err := apply(t, l, []model.OVNOp{{Op: model.OpAdd, Route: a}, {Op: model.OpAdd, Route: b}}, nil); err != nil {
		t.Fatal(err)
	}
	owned := l.ownedIs(t, []model.OVNRoute{a, b})

	// A plan: delete b, add c. A guarded apply of a fresh plan works.
	c := route("GR_node1", "192.0.2.128/25", "172.18.0.12", "rtoe-GR_node1", "uplink", "default")
	guards := []model.OVNGuard{guardOf(l.router(t, "GR_node1"))}
	ops := plan.DiffOVN([]model.OVNRoute{a, c}, owned)
	if applied, err := apply(t, l, ops, guards); err != nil || len(applied) != len(ops) {
		t.Fatalf("fresh guarded plan: applied %d of %d, err %v", len(applied), len(ops), err)
	}
	owned = l.ownedIs(t, []model.OVNRoute{a, c})

	// Stale 1: someone adds a route to the router after the plan.
	guards = []model.OVNGuard{guardOf(l.router(t, "GR_node1"))}
	ops = plan.DiffOVN([]model.OVNRoute{a, b}, owned)
	l.s.MustNBCtl("lr-route-add", "GR_node1", "10.99.0.0/16", "172.18.0.1")
	eventually(t, 10*time.Second, func() (bool, string) {
		return len(l.router(t, "GR_node1").StaticRoutes) == len(guards[0].StaticRoutes)+1, "the new route is not in the cache"
	})
	nbBefore := l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route")
	applied, err := apply(t, l, ops, guards)
	if err == nil || len(applied) != 0 || !strings.Contains(err.Error(), "router GR_node1 no longer has the static routes the plan read: make a new plan") {
		t.Fatalf("stale router: applied %+v, err %v", applied, err)
	}
	if after := l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route"); after != nbBefore {
		t.Fatalf("stale plan changed NB:\n%s\n---\n%s", nbBefore, after)
	}

	// Stale 2: an owned row is edited behind the plan's back (the router's
	// set of routes is unchanged).
	guards = []model.OVNGuard{guardOf(l.router(t, "GR_node1"))}
	owned = l.snap(t).OwnedRoutes
	ops = plan.DiffOVN([]model.OVNRoute{a}, owned) // delete c
	var cRow model.OVNRoute
	for _, r := range owned {
		if r.Prefix == c.Prefix {
			cRow = r
		}
	}
	l.s.MustNBCtl("set", "Logical_Router_Static_Route", cRow.UUID, "nexthop=172.18.0.99")
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, r := range l.snap(t).OwnedRoutes {
			if r.UUID == cRow.UUID {
				return r.NextHop == netip.MustParseAddr("172.18.0.99"), "edit not in the cache"
			}
		}
		return false, "row gone"
	})
	nbBefore = l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route")
	applied, err = apply(t, l, ops, guards)
	if err == nil || len(applied) != 0 || !strings.Contains(err.Error(), "changed since the plan read it: make a new plan") ||
		!strings.Contains(err.Error(), cRow.UUID) {
		t.Fatalf("stale row: applied %+v, err %v", applied, err)
	}
	if after := l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route"); after != nbBefore {
		t.Fatalf("stale plan changed NB:\n%s\n---\n%s", nbBefore, after)
	}
}

// TestApplyRoutesStaleRace: the cache may lag the database. When NB changed
// but the client has not heard yet, the OVSDB wait in the transaction
// itself refuses the stale plan. The change is made by a hook right before
// the transaction is sent, on the real server, so the cache cannot know.
func TestApplyRoutesStaleRace(t *testing.T) {
	l := newWriterLab(t)
	guards := []model.OVNGuard{guardOf(l.router(t, "GR_node1"))}
	ops := []model.OVNOp{{Op: model.OpAdd, Route: route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")}}
	ovn.SetTxnHook(l.c, func(_ int, ops []ovsdb.Operation) []ovsdb.Operation {
		l.s.MustNBCtl("lr-route-add", "GR_node1", "10.99.0.0/16", "172.18.0.1")
		return ops
	})
	applied, err := apply(t, l, ops, guards)
	if err == nil || len(applied) != 0 || !strings.Contains(err.Error(), "no longer has the static routes the plan read: make a new plan") {
		t.Fatalf("applied %+v, err %v", applied, err)
	}
	ovn.SetTxnHook(l.c, nil)
	eventually(t, 10*time.Second, func() (bool, string) {
		return len(l.router(t, "GR_node1").StaticRoutes) == 3, "the hook's route is not in the cache"
	})
	if owned := l.snap(t).OwnedRoutes; len(owned) != 0 {
		t.Fatalf("a stale plan wrote %+v", owned)
	}
}

// TestApplyRoutesOwnershipRace: the cache said a row was ours, but by the
// time the transaction reaches the server it is not (edited behind our
// back). The OVSDB wait in the same transaction refuses the write, in auto
// mode (the row now belongs to node2) and in manual mode (its next hop
// changed), and the row is left exactly as the other writer left it.
func TestApplyRoutesOwnershipRace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   string
		guard  bool
		op     model.OpKind
		errMsg string
	}{
		{"auto delete, row given to node2", `external_ids:"ovnbgp.io/owner"=node2`, false, model.OpDelete, "is no longer owned by node1"},
		{"auto replace, row given to node2", `external_ids:"ovnbgp.io/owner"=node2`, false, model.OpReplace, "is no longer owned by node1"},
		{"manual delete, next hop edited", "nexthop=172.18.0.99", true, model.OpDelete, "changed since the plan read it: make a new plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newWriterLab(t)
			a := route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")
			if _, err := apply(t, l, []model.OVNOp{{Op: model.OpAdd, Route: a}}, nil); err != nil {
				t.Fatal(err)
			}
			row := l.ownedIs(t, []model.OVNRoute{a})[0]
			var guards []model.OVNGuard
			if tc.guard {
				guards = []model.OVNGuard{guardOf(l.router(t, "GR_node1"))}
			}
			op := model.OVNOp{Op: tc.op, Route: row}
			if tc.op == model.OpReplace {
				op.Route.Rule = "other"
			}
			var edited string
			ovn.SetTxnHook(l.c, func(_ int, ops []ovsdb.Operation) []ovsdb.Operation {
				l.s.MustNBCtl("set", "Logical_Router_Static_Route", row.UUID, tc.edit)
				edited = l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route")
				return ops
			})
			applied, err := apply(t, l, []model.OVNOp{op}, guards)
			if err == nil || len(applied) != 0 || !strings.Contains(err.Error(), tc.errMsg) {
				t.Fatalf("applied %+v, err %v; want an error containing %q", applied, err, tc.errMsg)
			}
			if after := l.s.MustNBCtl("--format=json", "list", "Logical_Router_Static_Route"); after != edited {
				t.Fatalf("the row was written after the other writer's edit:\n%s\n---\n%s", edited, after)
			}
		})
	}
}

// dbRecords counts the records of the standalone database file: each
// committed transaction appends exactly one.
func dbRecords(t *testing.T, s *ovsdbtest.Server) int {
	t.Helper()
	raw, err := os.ReadFile(s.DBPath())
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(raw, []byte("OVSDB JSON "))
}

// TestApplyRoutesBatches: N operations with a batch size of k make
// ceil(N/k) transactions, and a batch that fails does not stop the next.
func TestApplyRoutesBatches(t *testing.T) {
	l := newWriterLab(t)
	const n, k = 23, 5 // 5 batches: 5 5 5 5 3
	ovn.SetBatchSize(l.c, k)
	var sent atomic.Int32
	const bad = 2
	ovn.SetTxnHook(l.c, func(batch int, ops []ovsdb.Operation) []ovsdb.Operation {
		sent.Add(1)
		if batch != bad {
			return ops
		}
		// A batch the server refuses: it waits on a row that does not
		// exist.
		zero := 0
		return append([]ovsdb.Operation{{Op: ovsdb.OperationWait, Table: "Logical_Router", Timeout: &zero,
			Where:   []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: "no-such-router"}},
			Columns: []string{"name"}, Until: string(ovsdb.WaitConditionEqual), Rows: []ovsdb.Row{{"name": "no-such-router"}}}}, ops...)
	})
	var desired []model.OVNRoute
	for i := range n {
		desired = append(desired, route("GR_node1", fmt.Sprintf("192.0.%d.0/24", i), "172.18.0.10", "rtoe-GR_node1", "uplink", "default"))
	}
	ops := plan.DiffOVN(desired, nil)
	records := dbRecords(t, l.s)
	applied, err := apply(t, l, ops, nil)
	if err == nil {
		t.Fatal("a failed batch returned no error")
	}
	if got, want := int(sent.Load()), (n+k-1)/k; got != want {
		t.Errorf("%d transactions sent, want ceil(%d/%d) = %d", got, n, k, want)
	}
	if got, want := dbRecords(t, l.s)-records, (n+k-1)/k-1; got != want {
		t.Errorf("%d transactions committed, want %d (all but the bad batch)", got, want)
	}
	want := slices.Concat(desired[:bad*k], desired[(bad+1)*k:])
	if len(applied) != len(want) {
		t.Fatalf("applied %d ops, want %d", len(applied), len(want))
	}
	for i, op := range applied {
		if op.Route.Prefix != want[i].Prefix {
			t.Errorf("applied[%d] = %v, want %v", i, op.Route.Prefix, want[i].Prefix)
		}
	}
	l.ownedIs(t, want)
}

// TestApplyRoutesDisconnected: without a live NB session ApplyRoutes fails
// at once and writes nothing.
func TestApplyRoutesDisconnected(t *testing.T) {
	l := newWriterLab(t)
	l.s.Stop()
	eventually(t, 10*time.Second, func() (bool, string) { return !l.c.Connected(), "still connected" })
	records := dbRecords(t, l.s)
	_, err := apply(t, l, []model.OVNOp{{Op: model.OpAdd, Route: route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("err %v, want not connected", err)
	}
	if dbRecords(t, l.s) != records {
		t.Fatal("the database changed")
	}
	l.s.Restart()
	eventually(t, 15*time.Second, func() (bool, string) { return l.c.Connected(), "not reconnected" })
	if owned := l.snap(t).OwnedRoutes; len(owned) != 0 {
		t.Fatalf("owned routes after reconnect: %+v", owned)
	}
}

// TestApplyRoutesStateWalk walks 200 random desired sets of owned routes
// on two gateway routers: plan.DiffOVN against the snapshot, ApplyRoutes,
// and the next snapshot's owned routes are exactly the desired ones, with
// the foreign rows unchanged, at every step (STYLE.md, tailscale's
// TestRouterStates).
func TestApplyRoutesStateWalk(t *testing.T) {
	l := newWriterLab(t)
	ovn.SetBatchSize(l.c, 7) // several batches per step
	before := l.foreignRows(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))

	type gw struct{ name, network, port, v4, v6 string }
	gws := []gw{
		{"GR_node1", "default", "rtoe-GR_node1", "172.18.0.", "fc00:f853:ccd:e793::"},
		{"GR_blue_node1", "blue", "rtoe-GR_blue_node1", "172.19.0.", "fd00:b::"},
	}
	prefixes := []string{"192.0.2.0/24", "198.18.0.0/15", "203.0.113.128/25", "10.200.0.0/16",
		"2001:db8:1::/48", "2001:db8:2::/64", "2001:db8:3::/56"}
	rules := []string{"uplink", "uplink-b"}
	const steps = 200
	for step := range steps {
		var desired []model.OVNRoute
		for _, g := range gws {
			for _, p := range prefixes {
				if rng.IntN(3) == 0 {
					continue
				}
				is6 := strings.Contains(p, ":")
				// 1 to 3 next hops (ECMP) out of 4.
				for _, h := range rng.Perm(4)[:1+rng.IntN(3)] {
					nh := g.v4 + fmt.Sprint(10+h)
					if is6 {
						nh = g.v6 + fmt.Sprint(10+h)
					}
					port := g.port
					if rng.IntN(5) == 0 {
						port = ""
					}
					desired = append(desired, route(g.name, p, nh, port, rules[rng.IntN(len(rules))], g.network))
				}
			}
		}
		snap := l.snap(t)
		ops := plan.DiffOVN(desired, snap.OwnedRoutes)
		var guards []model.OVNGuard
		if step%10 == 9 { // now and then a manual apply
			for _, r := range snap.Routers[:2] {
				guards = append(guards, guardOf(r))
			}
		}
		applied, err := apply(t, l, ops, guards)
		if err != nil || len(applied) != len(ops) {
			t.Fatalf("step %d: applied %d of %d: %v", step, len(applied), len(ops), err)
		}
		// No eventually: ApplyRoutes returns once its own snapshot
		// holds what it wrote.
		got := withoutUUIDs(l.snap(t).OwnedRoutes)
		slices.SortFunc(got, cmpRoute)
		want := withoutUUIDs(desired)
		slices.SortFunc(want, cmpRoute)
		if d := diff(want, got); d != "" {
			t.Fatalf("step %d: owned routes after apply (-want +got):\n%s", step, d)
		}
		if after := l.foreignRows(t); after != before {
			t.Fatalf("step %d: foreign rows changed:\n%s\n---\n%s", step, before, after)
		}
	}
}

// TestApplyRoutesMemoryServer: the writer against libovsdb's in-memory
// server with the lab topology (what `ovnbgp lab` serves): add, replace,
// delete, and a stale guarded apply that changes nothing.
func TestApplyRoutesMemoryServer(t *testing.T) {
	log := zaptest.NewLogger(t)
	srv, err := labnb.NewMemoryServer(log, shortDir(t)+"/nb.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := labnb.Topology(ctx, srv.Endpoint(), "node1", log); err != nil {
		t.Fatal(err)
	}
	c, _ := dial(t, srv.Endpoint(), log)
	var snap model.Snapshot
	eventually(t, 10*time.Second, func() (bool, string) {
		var ok bool
		snap, ok = c.Snapshot("node1")
		return ok && len(snap.Routers) == 2, fmt.Sprintf("routers %+v", snap.Routers)
	})
	gr := snap.Routers[0]
	if gr.Name != "GR_node1" || gr.ExternalPort != "rtoe-GR_node1" || len(gr.StaticRoutes) != 2 {
		t.Fatalf("lab GR_node1: %+v", gr)
	}
	a := route("GR_node1", "192.0.2.0/24", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")
	b := route("GR_node1", "2001:db8::/32", "fc00::10", "rtoe-GR_node1", "uplink", "default")
	if _, err := c.ApplyRoutes(ctx, "node1", plan.DiffOVN([]model.OVNRoute{a, b}, nil), nil); err != nil {
		t.Fatal(err)
	}
	snap, _ = c.Snapshot("node1")
	if len(snap.OwnedRoutes) != 2 {
		t.Fatalf("owned after add: %+v", snap.OwnedRoutes)
	}
	a.Rule = "other"
	ops := plan.DiffOVN([]model.OVNRoute{a}, snap.OwnedRoutes) // replace a, delete b
	if applied, err := c.ApplyRoutes(ctx, "node1", ops, nil); err != nil || len(applied) != 2 {
		t.Fatalf("replace+delete: %d applied, %v", len(applied), err)
	}
	snap, _ = c.Snapshot("node1")
	if d := diff([]model.OVNRoute{a}, withoutUUIDs(snap.OwnedRoutes)); d != "" {
		t.Fatalf("owned (-want +got):\n%s", d)
	}
	// A guard that does not match NB: nothing changes.
	g := guardOf(snap.Routers[0])
	g.StaticRoutes = g.StaticRoutes[1:]
	applied, err := c.ApplyRoutes(ctx, "node1", plan.DiffOVN(nil, snap.OwnedRoutes), []model.OVNGuard{g})
	if !errors.Is(err, ovn.ErrStale) || len(applied) != 0 {
		t.Fatalf("stale guard: applied %+v, err %v", applied, err)
	}
	if after, _ := c.Snapshot("node1"); len(after.OwnedRoutes) != 1 {
		t.Fatalf("a stale plan changed NB: %+v", after.OwnedRoutes)
	}
}

// TestApplyRoutesMixedFamily: an IPv4 prefix via an IPv6 next hop is
// written only while NB says its northd takes one (OVN 25.03 on); an IPv6
// prefix via an IPv4 next hop never; a written one is deleted whatever
// the version.
func TestApplyRoutesMixedFamily(t *testing.T) {
	l := newWriterLab(t)
	mixed := route("GR_node1", "192.0.2.0/24", "fc00:f853:ccd:e793::5", "rtoe-GR_node1", "uplink", "default")
	add := []model.OVNOp{{Op: model.OpAdd, Route: mixed}}
	applied, err := apply(t, l, add, nil)
	if want := "next hop fc00:f853:ccd:e793::5 is IPv6 but the prefix 192.0.2.0/24 is IPv4, and northd (version unknown) takes no such route (OVN 25.03 is the first that does)"; err == nil || !strings.Contains(err.Error(), want) || len(applied) != 0 {
		t.Fatalf("northd unknown: applied %+v, err %v; want an error containing %q", applied, err, want)
	}
	setNorthd(l.s, "24.09.2-20.37.0-73.4")
	eventually(t, 10*time.Second, func() (bool, string) {
		v := l.snap(t).Northd
		return v.Major == 24, fmt.Sprintf("northd %+v", v)
	})
	applied, err = apply(t, l, add, nil)
	if want := "and northd 24.09 takes no such route"; err == nil || !strings.Contains(err.Error(), want) || len(applied) != 0 {
		t.Fatalf("northd 24.09: applied %+v, err %v; want an error containing %q", applied, err, want)
	}
	l.ownedIs(t, nil)

	setNorthd(l.s, "25.03.0-20.41.0-77.1")
	eventually(t, 10*time.Second, func() (bool, string) {
		v := l.snap(t).Northd
		return v.MixedFamilyRoutes(), fmt.Sprintf("northd %+v", v)
	})
	applied, err = apply(t, l, add, nil)
	if err != nil || len(applied) != 1 {
		t.Fatalf("northd 25.03: applied %+v, err %v; want the add applied", applied, err)
	}
	got := l.ownedIs(t, []model.OVNRoute{mixed})
	if row := l.s.MustNBCtl("--bare", "--columns=ip_prefix,nexthop", "list", "Logical_Router_Static_Route", got[0].UUID); row != "192.0.2.0/24\nfc00:f853:ccd:e793::5" {
		t.Errorf("NB row: %q", row)
	}
	applied, err = apply(t, l, []model.OVNOp{{Op: model.OpAdd, Route: route("GR_node1", "2001:db8:1::/48", "172.18.0.10", "rtoe-GR_node1", "uplink", "default")}}, nil)
	if want := "next hop 172.18.0.10 is not of the family of 2001:db8:1::/48"; err == nil || !strings.Contains(err.Error(), want) || len(applied) != 0 {
		t.Fatalf("IPv6 via IPv4: applied %+v, err %v; want an error containing %q", applied, err, want)
	}

	// northd goes back to 24.09: the row is deleted.
	setNorthd(l.s, "24.09.2-20.37.0-73.4")
	eventually(t, 10*time.Second, func() (bool, string) {
		v := l.snap(t).Northd
		return v.Major == 24, fmt.Sprintf("northd %+v", v)
	})
	if applied, err := apply(t, l, []model.OVNOp{{Op: model.OpDelete, Route: got[0]}}, nil); err != nil || len(applied) != 1 {
		t.Fatalf("delete: applied %+v, err %v", applied, err)
	}
	l.ownedIs(t, nil)
}
