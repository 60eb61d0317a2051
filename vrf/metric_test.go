package vrf_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/model"
)

// withMetric is r at metric m.
func withMetric(r model.KernelRoute, m uint32) model.KernelRoute {
	r.Metric = m
	return r
}

// TestRouteMetric (issue 21, item 4): a route of an accept entry with a
// metric is written at that metric (RTA_PRIORITY) and read back with it;
// a replace at another metric moves the route, leaving none at the old
// one; Routes finds ours at any metric; a delete removes it; a route not
// ours at that metric is left alone and the write refused.
func TestRouteMetric(t *testing.T) {
	n := newNS(t)
	addForeign(n)
	before := n.foreign()
	m := n.open(nil)

	v4 := route(100, "10.1.0.0/16", hop("192.0.2.2", "a0"))
	v6 := route(100, "2001:db8:1::/48", hop("2001:db8:a::2", "a0"))
	steps := []struct {
		name string
		ops  []model.KernelOp
		want []model.KernelRoute
		ip   []string // lines `ip route show table 100 proto 200` must hold
	}{
		{"add at 10", []model.KernelOp{add(withMetric(v4, 10)), add(withMetric(v6, 10))},
			[]model.KernelRoute{withMetric(v4, 10), withMetric(v6, 10)}, []string{"10.1.0.0/16 via 192.0.2.2 dev a0 metric 10", "2001:db8:1::/48 via 2001:db8:a::2 dev a0 metric 10"}},
		{"replace at 20", []model.KernelOp{rep(withMetric(v4, 20)), rep(withMetric(v6, 20))},
			[]model.KernelRoute{withMetric(v4, 20), withMetric(v6, 20)}, []string{"10.1.0.0/16 via 192.0.2.2 dev a0 metric 20", "2001:db8:1::/48 via 2001:db8:a::2 dev a0 metric 20"}},
		{"back to the default", []model.KernelOp{rep(v4), rep(v6)},
			[]model.KernelRoute{v4, v6}, []string{"10.1.0.0/16 via 192.0.2.2 dev a0", "2001:db8:1::/48 via 2001:db8:a::2 dev a0 metric 1024"}},
		{"to 30 again", []model.KernelOp{rep(withMetric(v4, 30)), rep(withMetric(v6, 30))},
			[]model.KernelRoute{withMetric(v4, 30), withMetric(v6, 30)}, []string{"metric 30"}},
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
		shown := n.ip("route", "show", "table", "100", "proto", "200") + n.ip("-6", "route", "show", "table", "100", "proto", "200")
		if diff := cmp.Diff(s.want, host.Routes, sortRoutes); diff != "" {
			t.Errorf("%s: Snapshot().Routes (-want +got):\n%s\nip route:\n%s", s.name, diff, shown)
		}
		for _, l := range s.ip {
			if !strings.Contains(shown, l) {
				t.Errorf("%s: ip route lacks %q:\n%s", s.name, l, shown)
			}
		}
		if c := strings.Count(shown, "\n"); c != 2 {
			t.Errorf("%s: %d routes of ours, want 2 (one per table and prefix):\n%s", s.name, c, shown)
		}
		ours, _, err := m.Routes([]model.KernelRouteKey{v4.Key(), v6.Key()})
		if err != nil || cmp.Diff(s.want, ours, sortRoutes) != "" {
			t.Errorf("%s: Routes = %+v, %v, want %+v", s.name, ours, err, s.want)
		}
		if after := n.foreign(); after != before {
			t.Fatalf("%s: foreign routes changed:\nbefore:\n%s\nafter:\n%s", s.name, before, after)
		}
	}
	mustApply(t, m, del(withMetric(v4, 30)), del(withMetric(v6, 30)))
	if shown := n.ip("route", "show", "table", "100", "proto", "200") + n.ip("-6", "route", "show", "table", "100", "proto", "200"); shown != "" {
		t.Errorf("after delete: %s", shown)
	}
	// addForeign holds 10.1.0.0/16 at metric 50 in table 100 (proto kernel)
	if _, err := m.Apply(t.Context(), []model.KernelOp{add(withMetric(v4, 50))}); err == nil || !strings.Contains(err.Error(), "not ovnbgp's") {
		t.Errorf("add onto a foreign route's metric: %v, want refused", err)
	}
	if after := n.foreign(); after != before {
		t.Fatalf("foreign routes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
