package daemon

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// uplinkPath is tor's path for the i-th /24 of 198.51.100.0/22 (i < 4) or,
// beyond, of 198.51.0.0/16, which no rule of importRule accepts.
func uplinkPath(i int, nh string) model.LearnedPath {
	p := learnedUplink
	p.Prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100 + byte(i), 0}), 24)
	if nh != "" {
		p.NextHop = netip.MustParseAddr(nh)
	}
	return p
}

func (h *harness) walks() int {
	h.sp.mu.Lock()
	defer h.sp.mu.Unlock()
	return h.sp.walks
}

func (h *harness) lastKernelOps() []model.KernelOp {
	h.host.mu.Lock()
	defer h.host.mu.Unlock()
	if len(h.host.ops) == 0 {
		return nil
	}
	return h.host.ops[len(h.host.ops)-1]
}

// TestIncrementalPass: once the table is built, an UPDATE (a new path, a
// withdrawal, a changed next hop) is applied from the speaker's delta alone:
// no peer is walked again, and the kernel apply holds exactly the changed
// routes. A route someone deletes comes back the same way.
func TestIncrementalPass(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.sp.setLearned(uplinkPath(0, "192.0.2.1"), uplinkPath(1, "192.0.2.1"))
	h.d.poke()
	h.eventually("two routes in table 100", func() bool { return len(h.kernelPrefixes()) == 2 })
	walks := h.walks()

	h.sp.change([]model.LearnedPath{uplinkPath(2, "192.0.2.1"), uplinkPath(1, "192.0.2.2")},
		[]model.Key{{Peer: "tor", Prefix: uplinkPath(0, "").Prefix}})
	h.d.poke()
	want := []string{"198.51.101.0/24 via 192.0.2.2@eth0", "198.51.102.0/24 via 192.0.2.1@eth0"}
	h.eventually("the delta applied", func() bool { return slices.Equal(h.kernelPrefixes(), want) })
	h.eventually("OVN too", func() bool {
		return slices.Equal(h.ovnPrefixes(), []string{"GR_node1 198.51.101.0/24 via 192.0.2.2", "GR_node1 198.51.102.0/24 via 192.0.2.1"})
	})
	if got := h.walks(); got != walks {
		t.Errorf("the speaker was walked %d more times: an UPDATE must not cost a walk of the table", got-walks)
	}
	counts := map[model.OpKind]int{}
	h.host.mu.Lock()
	for _, ops := range h.host.ops {
		for _, op := range ops {
			if op.Route != nil && op.Route.Prefix != uplinkPath(0, "").Prefix || op.Op != model.OpDelete {
				continue
			}
			counts[op.Op]++
		}
	}
	h.host.mu.Unlock()
	if counts[model.OpDelete] != 1 {
		t.Errorf("198.51.100.0/24 deleted %d times, want once", counts[model.OpDelete])
	}

	h.host.deleteByHand(uplinkPath(2, "").Prefix)
	h.d.poke()
	h.eventually("the deleted route back", func() bool { return slices.Equal(h.kernelPrefixes(), want) })
	ops := h.lastKernelOps()
	if len(ops) != 1 || ops[0].Op != model.OpAdd || ops[0].Route.Prefix != uplinkPath(2, "").Prefix {
		t.Errorf("last kernel apply %v, want only the add of 198.51.102.0/24", ops)
	}
	if got := h.walks(); got != walks {
		t.Errorf("the speaker was walked %d more times for a kernel event", got-walks)
	}

	// What only advertising reads (egress IPs, Service VIPs and their
	// backends) changes often; it must not cost import a full pass.
	h.nb.mu.Lock()
	h.nb.snap.EgressIPs = []model.EgressIP{{IP: netip.MustParseAddr("203.0.113.50"), Network: "default", Router: "GR_node1"}}
	h.nb.snap.ServiceVIPs = []model.ServiceVIP{{Service: "ns1/web", Network: "default", VIP: netip.MustParseAddr("203.0.113.60"),
		Backends: []netip.Addr{netip.MustParseAddr("10.128.0.5")}}}
	h.nb.mu.Unlock()
	reads := h.nb.reads()
	h.d.poke()
	h.eventually("a pass over the new snapshot", func() bool { return h.nb.reads() > reads })
	if got := h.walks(); got != walks {
		t.Errorf("the speaker was walked %d more times for an egress IP and a Service VIP", got-walks)
	}
}

// TestIncrementalStateWalk walks random changes (announcements, next-hop
// changes, withdrawals, kernel routes and OVN rows deleted by hand, links
// changing) through
// the daemon's incremental passes; after each settles, OVN and the kernel
// hold exactly what a whole plan of the same state wants.
func TestIncrementalStateWalk(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.sp.setLearned()
	rng := rand.New(rand.NewPCG(3, 3))
	nhs := []string{"192.0.2.1", "192.0.2.2", "192.0.2.10", "203.0.113.1"}
	for step := range 40 {
		var announce []model.LearnedPath
		var withdraw []model.Key
		for range 1 + rng.IntN(4) {
			i := rng.IntN(6)
			switch rng.IntN(5) {
			case 0:
				withdraw = append(withdraw, model.Key{Peer: "tor", Prefix: uplinkPath(i, "").Prefix})
			case 1:
				if owned := h.host.routes(); len(owned) > 0 {
					h.host.deleteByHand(owned[rng.IntN(len(owned))].Prefix)
				}
			case 2:
				if owned := h.nb.ownedRoutes(); len(owned) > 0 {
					h.nb.deleteOwnedByHand(owned[rng.IntN(len(owned))].Prefix)
				}
			default:
				announce = append(announce, uplinkPath(i, nhs[rng.IntN(len(nhs))]))
			}
		}
		if step%10 == 9 {
			h.host.setLinks([]model.Link{uplinkLink})
		}
		h.sp.change(announce, withdraw)
		h.d.poke()
		h.sp.mu.Lock()
		learned := slices.Clone(h.sp.learned)
		h.sp.mu.Unlock()
		cfg := h.d.config()
		want := plan.Import(plan.ImportInput{Config: cfg, Snapshot: h.nb.snapshotNow(), Host: model.Host{Links: []model.Link{uplinkLink}}, Learned: learned})
		wantKernel := map[string]bool{}
		for _, r := range want.Kernel {
			wantKernel[fmt.Sprint(r.Prefix, r.NextHops)] = true
		}
		wantOVN := map[string]bool{}
		for _, r := range want.OVN {
			wantOVN[fmt.Sprint(r.Prefix, r.NextHop)] = true
		}
		h.eventually(fmt.Sprintf("step %d: kernel and OVN as a whole plan wants", step), func() bool {
			got := map[string]bool{}
			for _, r := range h.host.routes() {
				got[fmt.Sprint(r.Prefix, r.NextHops)] = true
			}
			gotOVN := map[string]bool{}
			for _, r := range h.nb.ownedRoutes() {
				gotOVN[fmt.Sprint(r.Prefix, r.NextHop)] = true
			}
			return fmt.Sprint(got) == fmt.Sprint(wantKernel) && fmt.Sprint(gotOVN) == fmt.Sprint(wantOVN)
		})
	}
}

// TestTrackLearnedFollowsImportRules: without import rules the loop asks
// the speaker to keep no delta of what peers send (nothing takes one, and a
// ToR reflecting every advertised prefix made it a copy of each); a reload
// that adds an import rule turns it on, and the import table starts from a
// walk; one that removes the rules turns it off again.
func TestTrackLearnedFollowsImportRules(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.passDone()
	if on, called := h.sp.trackingLearned(); on || !called {
		t.Fatalf("without import rules: TrackLearned(%v) called %v, want TrackLearned(false)", on, called)
	}

	h.sp.setLearned(uplinkPath(0, "192.0.2.1"))
	h.host.mu.Lock()
	h.host.host = model.Host{Links: []model.Link{uplinkLink}}
	h.host.mu.Unlock()
	h.nb.mu.Lock()
	h.nb.snap.Routers = []model.GatewayRouter{gr}
	h.nb.mu.Unlock()
	walks := h.walks()
	c := h.cfg
	c.extra = importRule("auto")
	h.writeConfig(c)
	h.d.reload <- struct{}{}
	h.eventually("TrackLearned(true) after the reload", func() bool { on, _ := h.sp.trackingLearned(); return on })
	h.eventually("a walk of the learned paths", func() bool { return h.walks() > walks })

	h.writeConfig(h.cfg)
	h.d.reload <- struct{}{}
	h.eventually("TrackLearned(false) after the rules went", func() bool { on, _ := h.sp.trackingLearned(); return !on })
}

// capPath is tor's path for 198.51.i.0/24 (i < 256).
func capPath(i int) model.LearnedPath {
	p := learnedUplink
	p.Prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i), 0}), 24)
	return p
}

// TestLargeDropInParts (issue 17, item 7: no loop stall when a large peer
// drops): a change of far more paths than limits.passChunk is decided and
// applied a part at a time, yet ends as one pass would: a peer with 200
// prefixes over a rule's maxRoutes 20 withdraws two thirds of them
// (among them most of the kept ones), then the rest. No kernel apply holds
// more than passChunk routes (one pass of 133 withdrawals applied 28
// operations at once), every route installed after the withdrawal is one
// of the 20 the cap lets in then (the first in prefix order, as one Update
// decides: TestChangeQueueEqualsOneUpdate), no route is deleted that
// stays, and each route goes once.
func TestLargeDropInParts(t *testing.T) {
	const chunk, n, maxRoutes = 16, 200, 20
	h := startImport(t, "auto", nil, nil, func(h *harness) {
		h.lim.passChunk = chunk
		h.cfg.extra = fmt.Sprintf(`import:
  - name: uplink
    peers: [tor]
    network: default
    accept: [{prefix: 198.51.0.0/16, maxLength: 24}]
    maxRoutes: %d
    targets: {ovn: true, kernel: {table: 100}}
`, maxRoutes)
	})
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	var all []model.LearnedPath
	for i := range n {
		all = append(all, capPath(i))
	}
	h.sp.setLearned(all...)
	h.d.poke()
	kernelOf := func(is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, capPath(i).Prefix.String()+" via 192.0.2.1@eth0")
		}
		slices.Sort(out)
		return out
	}
	var first []int
	for i := range maxRoutes {
		first = append(first, i)
	}
	h.eventually("the first 20 in table 100", func() bool { return slices.Equal(h.kernelPrefixes(), kernelOf(first...)) })
	h.host.mu.Lock()
	mark := len(h.host.ops)
	h.host.mu.Unlock()

	// Two thirds withdrawn: those with i%3 != 2. The cap then keeps the
	// first 20 of the others in prefix order.
	var gone []model.Key
	var stay, want []int
	for i := range n {
		if i%3 == 2 {
			stay = append(stay, i)
			continue
		}
		gone = append(gone, model.Key{Peer: "tor", Prefix: capPath(i).Prefix})
	}
	rand.Shuffle(len(gone), func(i, j int) { gone[i], gone[j] = gone[j], gone[i] })
	want = stay[:maxRoutes]
	h.sp.change(nil, gone)
	h.d.poke()
	h.eventually("the first 20 of those left in table 100", func() bool { return slices.Equal(h.kernelPrefixes(), kernelOf(want...)) })
	h.eventually("and in OVN", func() bool { return len(h.ovnPrefixes()) == maxRoutes })
	wanted := map[netip.Prefix]bool{}
	for _, i := range want {
		wanted[capPath(i).Prefix] = true
	}
	check := func(what string, keep map[netip.Prefix]bool) {
		t.Helper()
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		deleted := map[netip.Prefix]int{}
		for _, ops := range h.host.ops[mark:] {
			if len(ops) > chunk {
				t.Errorf("%s: one kernel apply of %d operations, want at most %d (limits.passChunk)", what, len(ops), chunk)
			}
			for _, op := range ops {
				if op.Route == nil {
					continue
				}
				switch {
				case op.Op == model.OpDelete && keep[op.Route.Prefix]:
					t.Errorf("%s: %s deleted, though it stays", what, op.Route.Prefix)
				case op.Op == model.OpDelete:
					deleted[op.Route.Prefix]++
				case !keep[op.Route.Prefix]:
					t.Errorf("%s: %s %s, though it does not stay", what, op.Route.Prefix, op.Op)
				}
			}
		}
		for p, k := range deleted {
			if k != 1 {
				t.Errorf("%s: %s deleted %d times", what, p, k)
			}
		}
		mark = len(h.host.ops)
	}
	check("two thirds withdrawn", wanted)

	// The rest withdrawn: all go, each once.
	gone = gone[:0]
	for _, i := range stay {
		gone = append(gone, model.Key{Peer: "tor", Prefix: capPath(i).Prefix})
	}
	h.sp.change(nil, gone)
	h.d.poke()
	h.eventually("table 100 empty", func() bool { return len(h.kernelPrefixes()) == 0 })
	h.eventually("OVN empty", func() bool { return len(h.ovnPrefixes()) == 0 })
	check("the rest withdrawn", nil)
	h.eventually("the daemon's table empty", func() bool {
		st := h.d.status()
		return st.Import != nil && st.Import.Accepted+st.Import.Rejected == 0
	})
}

// TestProtectedChangeIsIncremental (issue 18, items 1-2): a Service VIP
// added or removed in NB puts its host prefix into, or takes it out of,
// the protected set; with import rules that must not cost a full pass
// (a walk of every learned path, a rebuild, a read of the whole kernel).
// A VIP outside every learned prefix changes nothing; one equal to a
// learned /32 the rule accepts rejects it (its routes go), and removed, the
// /32 comes back; the /24 covering the VIP stays throughout. The speaker
// is never walked again, and OVN and the kernel end as a whole plan of
// the same state wants.
func TestProtectedChangeIsIncremental(t *testing.T) {
	h := startImport(t, "auto", nil, nil, func(h *harness) {
		h.cfg.extra = `import:
  - name: uplink
    peers: [tor]
    network: default
    accept: [{prefix: 198.51.100.0/22, maxLength: 32}]
    targets: {ovn: true, kernel: {table: 100}}
`
	})
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	host := learnedUplink
	host.Prefix = netip.MustParsePrefix("198.51.100.7/32")
	h.sp.setLearned(uplinkPath(0, "192.0.2.1"), uplinkPath(1, "192.0.2.1"), host)
	h.d.poke()
	both := []string{"198.51.100.0/24 via 192.0.2.1@eth0", "198.51.100.7/32 via 192.0.2.1@eth0", "198.51.101.0/24 via 192.0.2.1@eth0"}
	h.eventually("three routes in table 100", func() bool { return slices.Equal(h.kernelPrefixes(), both) })
	walks := h.walks()
	base := h.nb.snapshotNow().Protected

	wholePlan := func(step string) {
		t.Helper()
		h.sp.mu.Lock()
		learned := slices.Clone(h.sp.learned)
		h.sp.mu.Unlock()
		want := plan.Import(plan.ImportInput{Config: h.d.config(), Snapshot: h.nb.snapshotNow(),
			Host: model.Host{Links: []model.Link{uplinkLink}}, Learned: learned})
		var wantKernel, wantOVN []string
		for _, r := range want.Kernel {
			wantKernel = append(wantKernel, fmt.Sprint(r.Prefix, r.NextHops))
		}
		for _, r := range want.OVN {
			wantOVN = append(wantOVN, fmt.Sprint(r.Prefix, r.NextHop))
		}
		h.eventually(step+": kernel and OVN as a whole plan wants", func() bool {
			var gotKernel, gotOVN []string
			for _, r := range h.host.routes() {
				gotKernel = append(gotKernel, fmt.Sprint(r.Prefix, r.NextHops))
			}
			for _, r := range h.nb.ownedRoutes() {
				gotOVN = append(gotOVN, fmt.Sprint(r.Prefix, r.NextHop))
			}
			slices.Sort(gotKernel)
			slices.Sort(gotOVN)
			slices.Sort(wantKernel)
			slices.Sort(wantOVN)
			return slices.Equal(gotKernel, wantKernel) && slices.Equal(gotOVN, wantOVN)
		})
		if got := h.walks(); got != walks {
			t.Fatalf("%s: the speaker was walked %d more times: a protected prefix that comes or goes must not cost a full pass", step, got-walks)
		}
	}
	// setVIPs puts the Service VIPs into NB as the NB client does: each a
	// ServiceVIP and its host prefix in Protected, sorted by prefix.
	setVIPs := func(vips ...string) {
		h.nb.mu.Lock()
		defer h.nb.mu.Unlock()
		h.nb.snap.ServiceVIPs = nil
		h.nb.snap.Protected = slices.Clone(base)
		for _, v := range vips {
			a := netip.MustParseAddr(v)
			h.nb.snap.ServiceVIPs = append(h.nb.snap.ServiceVIPs, model.ServiceVIP{Service: "ns1/web-" + v, Network: "default", VIP: a})
			h.nb.snap.Protected = append(h.nb.snap.Protected, model.ProtectedPrefix{Prefix: netip.PrefixFrom(a, a.BitLen()), Why: "Service VIP of ns1/web-" + v})
		}
		slices.SortStableFunc(h.nb.snap.Protected, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
	}
	pass := func(step string, vips ...string) {
		t.Helper()
		setVIPs(vips...)
		reads := h.nb.reads()
		h.d.poke()
		h.eventually(step+": a pass over the new snapshot", func() bool { return h.nb.reads() > reads })
		h.passDone()
	}

	pass("a VIP outside every learned prefix", "203.0.113.60")
	wholePlan("a VIP outside")
	if !slices.Equal(h.kernelPrefixes(), both) {
		t.Fatalf("a VIP outside every learned prefix changed table 100: %v", h.kernelPrefixes())
	}
	pass("a VIP equal to a learned /32", "203.0.113.60", "198.51.100.7")
	h.eventually("the /32 gone from table 100", func() bool {
		return slices.Equal(h.kernelPrefixes(), []string{"198.51.100.0/24 via 192.0.2.1@eth0", "198.51.101.0/24 via 192.0.2.1@eth0"})
	})
	h.eventually("and from OVN", func() bool {
		return slices.Equal(h.ovnPrefixes(), []string{"GR_node1 198.51.100.0/24 via 192.0.2.1", "GR_node1 198.51.101.0/24 via 192.0.2.1"})
	})
	wholePlan("a VIP equal to a learned /32")
	var reason string
	h.d.mu.Lock()
	h.d.pl.imp.table.Each(func(p model.LearnedPath) bool {
		if p.Prefix == host.Prefix {
			reason = p.Reason
		}
		return true
	})
	h.d.mu.Unlock()
	if want := "198.51.100.7/32 is protected: Service VIP of ns1/web-198.51.100.7 (rule uplink)"; reason != want {
		t.Errorf("the /32's reason %q, want %q", reason, want)
	}
	pass("the VIP removed", "203.0.113.60")
	h.eventually("the /32 back in table 100", func() bool { return slices.Equal(h.kernelPrefixes(), both) })
	h.eventually("and in OVN", func() bool { return len(h.ovnPrefixes()) == 3 })
	wholePlan("the VIP removed")
	pass("every VIP removed")
	wholePlan("every VIP removed")
}

// TestNorthdChangeIsFull: a new northd version changes what OVN takes (an
// IPv4 prefix via an IPv6 next hop from OVN 25.03 on): the import
// environment differs, and the next pass is full.
func TestNorthdChangeIsFull(t *testing.T) {
	snap := model.Snapshot{Node: "node1", Routers: []model.GatewayRouter{gr}}
	env := importEnv(snap)
	if !sameImportEnv(snap, env) {
		t.Fatal("a snapshot is not its own import environment")
	}
	snap.Northd = model.NorthdVersion{Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"}
	if sameImportEnv(snap, env) {
		t.Error("a new northd version is the same import environment")
	}
}
