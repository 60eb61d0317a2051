package vrf_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
)

func whop(addr, dev string, w int) model.NextHop {
	h := hop(addr, dev)
	h.Weight = w
	return h
}

// ipWeights is `ip -j route` of prefix in table 100: each next hop's
// gateway and weight (1 for a single next hop).
func ipWeights(t *testing.T, n *testNS, family, prefix string) map[string]int {
	t.Helper()
	var rs []struct {
		Gateway  string `json:"gateway"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
			Weight  int    `json:"weight"`
		} `json:"nexthops"`
	}
	out := n.ip("-j", family, "route", "show", "table", "100", prefix)
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 1 {
		t.Fatalf("ip -j route %s: %v: %s", prefix, err, out)
	}
	w := map[string]int{}
	if rs[0].Gateway != "" {
		w[rs[0].Gateway] = 1
	}
	for _, h := range rs[0].Nexthops {
		w[h.Gateway] = h.Weight
	}
	return w
}

// TestWeightedMultipath: next-hop weights (issue 21) go to the kernel as
// rtnexthop hops = weight - 1 (`ip -j route` reads weights 1 and 3), read
// back from our writes' echoes, from a fresh dump and from someone else's
// change, compare in the cache (a replace that changes only the weights is
// applied and seen), and an equal-cost route reads back with weight 0.
func TestWeightedMultipath(t *testing.T) {
	n := newNS(t)
	pokes := make(chan struct{}, 1)
	m := n.open(pokes)
	w4 := route(100, "10.40.0.0/16", whop("192.0.2.2", "a0", 1), whop("198.51.100.2", "b0", 3))
	w6 := route(100, "2001:db8:40::/48", whop("2001:db8:a::2", "a0", 1), whop("2001:db8:b::2", "b0", 3))
	mustApply(t, m, add(w4), add(w6))
	if got, want := ipWeights(t, n, "-4", "10.40.0.0/16"), map[string]int{"192.0.2.2": 1, "198.51.100.2": 3}; !cmp.Equal(got, want) {
		t.Errorf("ip -j route 10.40.0.0/16 weights %v, want %v", got, want)
	}
	if got, want := ipWeights(t, n, "-6", "2001:db8:40::/48"), map[string]int{"2001:db8:a::2": 1, "2001:db8:b::2": 3}; !cmp.Equal(got, want) {
		t.Errorf("ip -j route 2001:db8:40::/48 weights %v, want %v", got, want)
	}
	snap := func(m interface{ Snapshot() (model.Host, error) }, why string, want ...model.KernelRoute) {
		t.Helper()
		host, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, host.Routes, sortRoutes); d != "" {
			t.Errorf("%s: Snapshot().Routes (-want +got):\n%s", why, d)
		}
	}
	snap(m, "after the add (echoes)", w4, w6)
	snap(n.open(nil), "a fresh dump", w4, w6)

	// Only the weights change: 3:3 is equal cost (0), then 2:1.
	eq4 := route(100, "10.40.0.0/16", hop("192.0.2.2", "a0"), hop("198.51.100.2", "b0"))
	eq6 := route(100, "2001:db8:40::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::2", "b0"))
	if applied := mustApply(t, m, rep(eq4), rep(eq6)); len(applied) != 2 {
		t.Errorf("replace to equal cost applied %d of 2", len(applied))
	}
	if got, want := ipWeights(t, n, "-4", "10.40.0.0/16"), map[string]int{"192.0.2.2": 1, "198.51.100.2": 1}; !cmp.Equal(got, want) {
		t.Errorf("after equal cost: weights %v, want %v", got, want)
	}
	snap(m, "after equal cost", eq4, eq6)
	r4 := route(100, "10.40.0.0/16", whop("192.0.2.2", "a0", 2), whop("198.51.100.2", "b0", 1))
	mustApply(t, m, rep(r4))
	snap(m, "after 2:1", r4, eq6)

	// Someone else re-weights our route: the event carries the weights.
	drain(pokes)
	n.ip("route", "replace", "10.40.0.0/16", "table", "100", "proto", "200",
		"nexthop", "via", "192.0.2.2", "dev", "a0", "weight", "5", "nexthop", "via", "198.51.100.2", "dev", "b0", "weight", "256")
	waitPoke(t, pokes, "ip route replace with weights 5 and 256")
	want := route(100, "10.40.0.0/16", whop("192.0.2.2", "a0", 5), whop("198.51.100.2", "b0", 256))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ours, _, err := m.Routes([]model.KernelRouteKey{want.Key()})
		if err != nil {
			t.Fatal(err)
		}
		if len(ours) == 1 && cmp.Equal(want.NextHops, ours[0].NextHops, sortRoutes) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Routes after someone's re-weighting = %+v, want %+v", ours, want)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A weight out of range is refused, naming it.
	bad := route(100, "10.41.0.0/16", whop("192.0.2.2", "a0", 257), whop("198.51.100.2", "b0", 1))
	if _, err := m.Apply(t.Context(), []model.KernelOp{add(bad)}); err == nil {
		t.Error("weight 257 accepted")
	}
}
