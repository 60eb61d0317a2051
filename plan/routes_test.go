package plan

import (
	"net/netip"
	"reflect"
	"runtime"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

func ovnRoute(uuid, router, prefix, nh, port, rule string) model.OVNRoute {
	return model.OVNRoute{UUID: uuid, Router: router, Prefix: netip.MustParsePrefix(prefix),
		NextHop: netip.MustParseAddr(nh), OutputPort: port, Rule: rule}
}

func TestDiffOVN(t *testing.T) {
	gr := "GR_node1"
	desired := []model.OVNRoute{
		ovnRoute("", gr, "10.1.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"),
		ovnRoute("", gr, "10.1.0.0/16", "192.0.2.2", "rtoe-GR_node1", "up"), // ECMP: a second row
		ovnRoute("", gr, "10.2.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"), // rule changed
		ovnRoute("", gr, "10.3.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"), // unchanged
	}
	observed := []model.OVNRoute{
		ovnRoute("u1", gr, "10.1.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"),
		ovnRoute("u2", gr, "10.2.0.0/16", "192.0.2.1", "rtoe-GR_node1", "old"),
		ovnRoute("u3", gr, "10.3.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"),
		ovnRoute("u4", gr, "10.3.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"), // duplicate
		ovnRoute("u5", gr, "10.9.0.0/16", "192.0.2.1", "rtoe-GR_node1", "up"), // withdrawn
	}
	ops := DiffOVN(desired, observed)
	var got []string
	for _, op := range ops {
		got = append(got, string(op.Op)+" "+op.Route.Prefix.String()+" "+op.Route.NextHop.String()+" "+op.Route.UUID)
	}
	want := []string{
		"add 10.1.0.0/16 192.0.2.2 ",
		"replace 10.2.0.0/16 192.0.2.1 u2",
		"delete 10.3.0.0/16 192.0.2.1 u4",
		"delete 10.9.0.0/16 192.0.2.1 u5",
	}
	if len(got) != len(want) {
		t.Fatalf("ops = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("op %d = %q, want %q", i, got[i], want[i])
		}
	}
	if len(DiffOVN(desired[:1], observed[:1])) != 0 {
		t.Error("equal sets must give no operation")
	}
}

func kroute(table uint32, prefix string, nhs ...string) model.KernelRoute {
	r := model.KernelRoute{Table: table, Prefix: netip.MustParsePrefix(prefix), Protocol: 200}
	for _, nh := range nhs {
		r.NextHops = append(r.NextHops, model.NextHop{Addr: netip.MustParseAddr(nh), Dev: "eth0"})
	}
	return r
}

func TestDiffKernel(t *testing.T) {
	desired := []model.KernelRoute{
		kroute(100, "10.1.0.0/16", "192.0.2.2", "192.0.2.1"), // same set, other order
		kroute(100, "10.2.0.0/16", "192.0.2.1", "192.0.2.2"), // ECMP grows
		kroute(101, "10.1.0.0/16", "192.0.2.1"),              // other table: new
	}
	observed := []model.KernelRoute{
		kroute(100, "10.1.0.0/16", "192.0.2.1", "192.0.2.2"),
		kroute(100, "10.2.0.0/16", "192.0.2.1"),
		kroute(100, "10.9.0.0/16", "192.0.2.1"),
	}
	var got []string
	for _, op := range DiffKernel(desired, observed) {
		got = append(got, string(op.Op)+" "+op.Route.Prefix.String())
	}
	want := []string{"add 10.1.0.0/16", "replace 10.2.0.0/16", "delete 10.9.0.0/16"}
	if len(got) != len(want) {
		t.Fatalf("ops = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("op %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// TestDiffKernelAllocs (issue 18, import from a fast injector): diffing
// the table's desired routes (sorted by key) against the kernel's costs
// the operations it returns and the map of what is there, with no map of
// the desired keys: bytes per route at two sizes, all new (a table
// transfer's passes) and all there. Measured: 217-224 and 320 B; with the
// map, 329-336 and 432 B. Not under the race detector, which allocates
// too (264 B all new).
func TestDiffKernelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("byte bounds do not hold under the race detector")
	}
	for _, n := range []int{1024, 8192} {
		desired := make([]model.KernelRoute, n)
		for i := range desired {
			desired[i] = model.KernelRoute{Table: 100, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24),
				NextHops: []model.NextHop{{Addr: netip.MustParseAddr("192.0.2.1")}}, Protocol: 200}
		}
		for _, c := range []struct {
			name     string
			observed []model.KernelRoute
			max      float64
		}{{"all new", nil, 290}, {"all there", desired, 400}} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ops := DiffKernel(desired, c.observed)
			runtime.ReadMemStats(&after)
			per := float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
			t.Logf("%d routes, %s: %d operations, %.0f bytes per route", n, c.name, len(ops), per)
			if per > c.max {
				t.Errorf("%d routes, %s: %.0f bytes allocated per route, want at most %.0f", n, c.name, per, c.max)
			}
		}
	}
}

// TestDiffKernelDuplicateDesired: a key desired twice is diffed once, the
// first route winning, whether desired comes sorted (the table's) or not.
func TestDiffKernelDuplicateDesired(t *testing.T) {
	r := func(prefix, nh string) model.KernelRoute {
		return model.KernelRoute{Table: 100, Prefix: netip.MustParsePrefix(prefix), NextHops: []model.NextHop{{Addr: netip.MustParseAddr(nh)}}, Protocol: 200}
	}
	a, a2, b := r("10.1.0.0/24", "192.0.2.1"), r("10.1.0.0/24", "192.0.2.2"), r("10.2.0.0/24", "192.0.2.1")
	gone := r("10.3.0.0/24", "192.0.2.1")
	for _, desired := range [][]model.KernelRoute{{a, a2, b}, {b, a, a2}} {
		ops := DiffKernel(desired, []model.KernelRoute{gone, b})
		if len(ops) != 2 || ops[0].Op != model.OpAdd || !reflect.DeepEqual(*ops[0].Route, a) || ops[1].Op != model.OpDelete || ops[1].Route.Prefix != gone.Prefix {
			t.Errorf("desired %v: %d operations %+v, want an add of the first 10.1.0.0/24 and a delete of 10.3.0.0/24", desired, len(ops), ops)
		}
	}
}
