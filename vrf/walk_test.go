package vrf_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// TestStateWalk walks 250 random desired states (tables, IPv4 and IPv6
// prefixes, ECMP sets) through the one diff and the kernel writer: each step
// is plan.DiffKernel(desired, Snapshot().Routes), then Apply, then
// Snapshot().Routes must equal desired exactly, the diff must be empty, and
// the foreign routes (same table, same destinations in other tables and
// metrics) must be byte-identical. OVNBGP_WALK_SEED replays a walk.
func TestStateWalk(t *testing.T) {
	n := newNS(t)
	addForeign(n)
	before := n.foreign()
	m := n.open(nil)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OVNBGP_WALK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("OVNBGP_WALK_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (OVNBGP_WALK_SEED=%d replays this walk)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	tables := []uint32{100, 101, 102, 1000}
	// 10.1.0.0/16 and 2001:db8:1::/48 are foreign in table 101 (and at
	// metric 50 in table 100, another key): desired states never put
	// them in table 101, where the add would rightly be refused.
	v4 := []string{"0.0.0.0/0", "10.1.0.0/16", "10.2.0.0/16", "10.2.0.0/24", "10.2.1.0/24", "10.3.0.0/16",
		"172.16.0.0/12", "192.168.7.0/24", "198.18.0.0/15", "10.4.4.4/32"}
	v6 := []string{"::/0", "2001:db8:1::/48", "2001:db8:2::/48", "2001:db8:2::/64", "2001:db8:3::/48",
		"fd00::/8", "fd10:1::/64", "2001:db8:4::4/128"}
	hops4 := []model.NextHop{hop("192.0.2.2", "a0"), hop("192.0.2.3", "a0"), hop("198.51.100.2", "b0"), hop("198.51.100.3", "b0")}
	hops6 := []model.NextHop{hop("2001:db8:a::2", "a0"), hop("2001:db8:a::3", "a0"), hop("2001:db8:b::2", "b0"), hop("2001:db8:b::3", "b0")}
	pick := func(all []model.NextHop) []model.NextHop {
		k := 1 + rng.IntN(len(all))
		perm := rng.Perm(len(all))
		out := make([]model.NextHop, 0, k)
		for _, i := range perm[:k] {
			out = append(out, all[i])
		}
		return out
	}

	const steps = 250
	var adds, replaces, deletes int
	for step := range steps {
		var desired []model.KernelRoute
		for _, table := range tables {
			for _, p := range v4 {
				if (table == 101 && p == "10.1.0.0/16") || rng.IntN(3) != 0 {
					continue
				}
				desired = append(desired, route(table, p, pick(hops4)...))
			}
			for _, p := range v6 {
				if (table == 101 && p == "2001:db8:1::/48") || rng.IntN(3) != 0 {
					continue
				}
				desired = append(desired, route(table, p, pick(hops6)...))
			}
		}
		if step%50 == 49 {
			desired = nil // now and then, everything goes
		}
		host, err := m.Snapshot()
		if err != nil {
			t.Fatalf("step %d: Snapshot: %v", step, err)
		}
		ops := plan.DiffKernel(desired, host.Routes)
		for _, op := range ops {
			switch op.Op {
			case model.OpAdd:
				adds++
			case model.OpReplace:
				replaces++
			case model.OpDelete:
				deletes++
			}
		}
		applied, err := m.Apply(context.Background(), ops)
		if err != nil {
			t.Fatalf("step %d: Apply(%d ops): %v", step, len(ops), err)
		}
		if len(applied) != len(ops) {
			t.Fatalf("step %d: applied %d of %d operations", step, len(applied), len(ops))
		}
		host, err = m.Snapshot()
		if err != nil {
			t.Fatalf("step %d: Snapshot: %v", step, err)
		}
		if diff := cmp.Diff(desired, host.Routes, sortRoutes); diff != "" {
			t.Fatalf("step %d: Snapshot().Routes != desired (-desired +got):\n%s", step, diff)
		}
		if left := plan.DiffKernel(desired, host.Routes); len(left) != 0 {
			t.Fatalf("step %d: %d operations left after Apply: %+v", step, len(left), left)
		}
		if after := n.foreign(); after != before {
			t.Fatalf("step %d: foreign routes changed:\nbefore:\n%s\nafter:\n%s", step, before, after)
		}
	}
	t.Logf("%d steps: %d adds, %d replaces, %d deletes", steps, adds, replaces, deletes)
	if adds == 0 || replaces == 0 || deletes == 0 {
		t.Fatalf("the walk did not exercise every kind: %d adds, %d replaces, %d deletes", adds, replaces, deletes)
	}
}
