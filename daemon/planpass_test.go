package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestPlanIsTheNextPass: what `ovnbgp plan` prints in auto mode is the
// operation list the loop applies next, operation by operation, and the
// loop applies nothing else. The world changes behind the loop's back
// first: five new paths (more than a pass's chunk, so an incremental pass
// would apply them in parts), a kernel route deleted with no event (drift
// only a full diff sees) and a new subnet to advertise.
func TestPlanIsTheNextPass(t *testing.T) {
	const chunk = 2
	h := startImport(t, "auto", nil, nil, func(h *harness) {
		h.lim.passChunk = chunk
		h.cfg.networks = `"*"`
		h.cfg.extra = `import:
  - name: uplink
    peers: [tor]
    network: default
    accept: [{prefix: 198.51.0.0/16, maxLength: 24}]
    targets: {ovn: true, kernel: {table: 100}}
`
	})
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.sp.setLearned(capPath(0), capPath(1))
	h.d.poke()
	h.eventually("two routes in table 100", func() bool { return len(h.kernelPrefixes()) == 2 })
	h.passDone()

	h.host.mu.Lock()
	kMark := len(h.host.ops)
	// Deleted with no netlink event: only a full diff sees it.
	h.host.host.Routes = slices.DeleteFunc(h.host.host.Routes, func(r model.KernelRoute) bool { return r.Prefix == capPath(0).Prefix })
	h.host.mu.Unlock()
	h.nb.mu.Lock()
	oMark := len(h.nb.applies)
	h.nb.snap.Networks = append(slices.Clone(h.nb.snap.Networks), network("blue", "10.200.0.0/24"))
	h.nb.mu.Unlock()
	h.sp.mu.Lock()
	aMark := len(h.sp.applies)
	h.sp.mu.Unlock()
	var more []model.LearnedPath
	for i := 2; i < 7; i++ {
		more = append(more, capPath(i))
	}
	h.sp.change(more, nil) // no poke: the plan comes first

	var pr api.PlanResponse
	getJSON(t, h.sock, api.PathPlan, &pr)
	if pr.Counts.KernelAdd != 6 || pr.Counts.OVNAdd != 5 || pr.Counts.Announce != 1 {
		t.Fatalf("plan counts %+v, want 6 kernel adds (5 new, 1 deleted by hand), 5 OVN adds, 1 announce", pr.Counts)
	}
	h.d.poke()
	h.passDone()
	h.passDone()

	h.host.mu.Lock()
	var kernel []model.KernelOp
	for _, ops := range h.host.ops[kMark:] {
		kernel = append(kernel, ops...)
	}
	h.host.mu.Unlock()
	h.nb.mu.Lock()
	var ovn []model.OVNOp
	for _, ops := range h.nb.applies[oMark:] {
		ovn = append(ovn, ops...)
	}
	h.nb.mu.Unlock()
	h.sp.mu.Lock()
	var adv model.AdvertDiff
	for _, d := range h.sp.applies[aMark:] {
		adv.Announce = append(adv.Announce, d.Announce...)
		adv.Change = append(adv.Change, d.Change...)
		adv.Withdraw = append(adv.Withdraw, d.Withdraw...)
	}
	h.sp.mu.Unlock()

	opByOp(t, "kernel", pr.Plan.Kernel, kernel)
	opByOp(t, "OVN", pr.Plan.OVN, ovn)
	opByOp(t, "announce", pr.Plan.Advertise.Announce, adv.Announce)
	opByOp(t, "change", pr.Plan.Advertise.Change, adv.Change)
	opByOp(t, "withdraw", pr.Plan.Advertise.Withdraw, adv.Withdraw)
	if got := h.kernelPrefixes(); len(got) != 7 {
		t.Errorf("table 100 holds %v, want the 7 routes", got)
	}
}

// TestDroppedPlanMakesTheNextPassFull: a pending pass dropped unapplied
// (an apply, a drain or a reload came between) took the speaker's and the
// kernel's changes with it; the next pass is full and applies them.
func TestDroppedPlanMakesTheNextPassFull(t *testing.T) {
	h := startImport(t, "auto", nil, nil, func(h *harness) { h.lim.passChunk = 2 })
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.sp.setLearned(uplinkPath(0, "192.0.2.1"))
	h.d.poke()
	h.eventually("a route in table 100", func() bool { return len(h.kernelPrefixes()) == 1 })
	h.passDone()

	h.sp.change([]model.LearnedPath{uplinkPath(1, "192.0.2.1"), uplinkPath(2, "192.0.2.1"), uplinkPath(3, "192.0.2.1")}, nil)
	cfg := h.d.config()
	var perr error
	if err := h.d.onLoop(t.Context(), func(ctx context.Context) {
		var v planView
		v, perr = h.d.nextPass(ctx, cfg)
		if perr == nil && v.plan.Counts().KernelAdd != 3 {
			perr = fmt.Errorf("the pending pass adds %d kernel routes, want 3", v.plan.Counts().KernelAdd)
		}
		h.d.pl.dropPending("the test drops it")
	}); err != nil || perr != nil {
		t.Fatal(err, perr)
	}
	h.d.poke()
	h.eventually("the four routes in table 100", func() bool { return len(h.kernelPrefixes()) == 4 })
	h.eventually("and in OVN", func() bool { return len(h.ovnPrefixes()) == 4 })
}

// opByOp compares what the plan printed with what was applied, one
// operation at a time (as JSON: the plan went through it).
func opByOp[T any](t *testing.T, what string, planned, applied []T) {
	t.Helper()
	text := func(op T) string {
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for i := range max(len(planned), len(applied)) {
		var p, a string
		if i < len(planned) {
			p = text(planned[i])
		}
		if i < len(applied) {
			a = text(applied[i])
		}
		if p != a {
			t.Errorf("%s operation %d: planned %s, applied %s", what, i, orNone(p), orNone(a))
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// TestFullPassDiffsWhatNoPathNames: a full pass (here the one `ovnbgp
// plan` computes) is the incremental pass from an empty table, and
// diffs the prefixes that no path names as well: an owned kernel route
// and an owned OVN row put there with no event (a crash between a write
// and its record, a restore of the host's routes) are planned for deletion
// and deleted, and the routes the peer sends stay as they are.
func TestFullPassDiffsWhatNoPathNames(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.sp.setLearned(uplinkPath(0, "192.0.2.1"), uplinkPath(1, "192.0.2.1"))
	h.d.poke()
	h.eventually("two routes in table 100 and OVN", func() bool {
		return len(h.kernelPrefixes()) == 2 && len(h.ovnPrefixes()) == 2
	})
	h.passDone()

	stray := uplinkPath(3, "").Prefix
	h.host.mu.Lock()
	r := h.host.host.Routes[0]
	r.Prefix = stray
	h.host.host.Routes = append(slices.Clone(h.host.host.Routes), r) // no event
	h.host.mu.Unlock()
	h.nb.mu.Lock()
	o := h.nb.snap.OwnedRoutes[0]
	o.UUID, o.Prefix = "stray-row", stray
	h.nb.snap.OwnedRoutes = append(slices.Clone(h.nb.snap.OwnedRoutes), o)
	h.nb.syncRouters()
	h.nb.mu.Unlock()

	var pr api.PlanResponse
	getJSON(t, h.sock, api.PathPlan, &pr)
	if pr.Counts.KernelDelete != 1 || pr.Counts.OVNDelete != 1 || pr.Counts.KernelAdd+pr.Counts.OVNAdd != 0 {
		t.Fatalf("plan counts %+v, want the stray kernel route and OVN row deleted, nothing added", pr.Counts)
	}
	for _, op := range pr.Plan.Kernel {
		if op.Route == nil || op.Route.Prefix != stray {
			t.Errorf("kernel op %+v, want only the delete of %s", op, stray)
		}
	}
	h.d.poke()
	want := []string{"198.51.100.0/24 via 192.0.2.1@eth0", "198.51.101.0/24 via 192.0.2.1@eth0"}
	h.eventually("the strays deleted", func() bool {
		return slices.Equal(h.kernelPrefixes(), want) && len(h.ovnPrefixes()) == 2
	})
}
