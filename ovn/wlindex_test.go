package ovn

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// wlTestContext is node1's context in the random test: the default
// network (10.128.0.0/24 on node1), a primary layer2 network blue and a
// secondary layer2 network red; a VM route of each zone; interconnect
// mode is the tstor- ports'.
func wlTestRows() ([]switchRow, []vmRouteRow) {
	sw := []switchRow{
		{UUID: "s1", Name: "node1", Subnet: "10.128.0.0/24"},
		{UUID: "s2", Name: "node2", Subnet: "10.128.1.0/24"},
		{UUID: "s3", Name: "blue_ovn_layer2_switch", Network: "blue", Topology: "layer2", Role: "primary", Subnet: "10.200.0.0/16"},
		{UUID: "s4", Name: "red_ovn_layer2_switch", Network: "red", Topology: "layer2", Role: "secondary", Subnet: "10.201.0.0/16"},
	}
	routes := []vmRouteRow{
		{UUID: "r1", IPPrefix: "10.128.1.7", Zone: zoneLocal, VM: "vm7"},
		{UUID: "r2", IPPrefix: "10.128.0.8/32", Zone: zoneRemote, VM: "vm8"},
	}
	return sw, routes
}

// TestWLIndexRandom: after every step of a random sequence of switch
// ports added, changed and removed (pods of three networks, local,
// remote, disabled, with other nodes' chassis or none, sharing addresses
// as a live migration's two sides do, with bad addresses, pods on a
// primary network beside their default-network port) and of DHCP options
// and tstor- ports, the index's list is exactly what computing every
// address again gives, problems included; and the keys it says changed
// are exactly those whose entries differ between the lists before and
// after.
func TestWLIndexRandom(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { wlIndexRandom(t, seed) })
	}
}

func wlIndexRandom(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	networks := []string{"", "", "blue", "red", "green"}
	ips := []string{"10.128.0.5", "10.128.0.8", "10.128.1.7", "10.200.0.5", "10.201.0.5", "fd00::5", "bogus"}
	chassis := []string{"", "", "node1", "node2", "ch-node2", "ch-node3", "unknown"}
	pods := []string{"a", "b", "virt-launcher-vm-x"}
	dhcps := []string{"", "d1", "d2"}
	clock := time.Unix(1e9, 0)
	x := newWLIndex()
	x.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	sw, routes := wlTestRows()
	x.noteRoutes(routes)
	x.rebuild(x.context("node1", sw, nil, routes))
	x.first = false

	full := func() ([]*model.WorkloadIP, map[wlKey][]model.WorkloadIP) {
		var l []*model.WorkloadIP
		byKey := map[wlKey][]model.WorkloadIP{}
		for k := range x.byKey {
			e := x.compute(x.ctx, k)
			if len(e) > 0 {
				byKey[k] = e
			}
			for i := range e {
				l = append(l, &e[i])
			}
		}
		slices.SortFunc(l, compareWorkloadRef)
		return l, byKey
	}
	for step := range 300 {
		affected := map[wlKey]struct{}{}
		ctxChanged := false
		switch n := r.IntN(10); {
		case n < 6:
			uuid := fmt.Sprintf("p%d", r.IntN(12))
			if r.IntN(4) == 0 {
				ctxChanged = x.setPort(uuid, nil, affected) || ctxChanged
				break
			}
			en := r.IntN(3) != 0
			typ := ""
			if r.IntN(4) == 0 {
				typ = "remote"
			}
			p := &nbdb.LogicalSwitchPort{UUID: uuid, Name: "ns_" + pick(pods), Type: typ, Enabled: &en,
				ExternalIDs: map[string]string{"pod": "true", "namespace": "ns"},
				Options:     map[string]string{"requested-chassis": pick(chassis)}}
			if nw := pick(networks); nw != "" {
				p.ExternalIDs[extIDNetwork] = nw
			}
			addr := "0a:58:0a:80:00:05 " + pick(ips)
			if r.IntN(3) == 0 {
				addr += " " + pick(ips)
			}
			p.PortSecurity = []string{addr}
			if en {
				p.Addresses = []string{addr}
			}
			if d := pick(dhcps); d != "" {
				p.Dhcpv4Options = &d
			}
			row := lspRowOf(p)
			if !x.samePort(uuid, row) {
				ctxChanged = x.setPort(uuid, row, affected) || ctxChanged
			}
		case n < 8:
			vm := ""
			if r.IntN(3) != 0 {
				vm = "ns/vm-" + pick([]string{"x", "y"})
			}
			x.setDHCP(pick(dhcps[1:]), vm, affected)
		default:
			uuid := fmt.Sprintf("t%d", r.IntN(2))
			var row *lspRow
			if r.IntN(3) != 0 {
				node := pick([]string{"node2", "node3", "node1"})
				row = lspRowOf(&nbdb.LogicalSwitchPort{UUID: uuid, Name: "tstor-" + node, Type: "remote",
					ExternalIDs: map[string]string{"node": node}, Options: map[string]string{"requested-chassis": "ch-" + node}})
			}
			if !x.samePort(uuid, row) {
				ctxChanged = x.setPort(uuid, row, affected) || ctxChanged
			}
		}
		before := slices.Clone(x.list)
		var keys []wlKey
		if c := x.context("node1", sw, nil, routes); ctxChanged || !sameWLContext(c, x.ctx) {
			keys = x.rebuild(c)
		} else {
			keys = x.update(affected)
		}
		want, _ := full()
		if !reflect.DeepEqual(x.list, want) && !(len(x.list) == 0 && len(want) == 0) {
			t.Fatalf("step %d: index\n%+v\nfull build\n%+v", step, x.list, want)
		}
		// The rows' problems, and those full's compute just made (a
		// layer2 address outside the network's subnets).
		wantProb := slices.Collect(maps.Values(x.problems))
		for _, m := range x.outside {
			wantProb = append(wantProb, slices.Collect(maps.Values(m))...)
		}
		slices.Sort(wantProb)
		if !slices.Equal(x.probList, wantProb) {
			t.Fatalf("step %d: problems %q, want %q", step, x.probList, wantProb)
		}
		var gotIPs []netip.Addr
		for _, k := range keys {
			if !sameWorkloads(workloadEntries(before, k), workloadEntries(x.list, k)) {
				gotIPs = append(gotIPs, k.ip)
			}
		}
		slices.SortFunc(gotIPs, netip.Addr.Compare)
		gotIPs = slices.Compact(gotIPs)
		if wantIPs := workloadIPsDiffer(before, x.list); !slices.Equal(gotIPs, wantIPs) {
			t.Fatalf("step %d: changed %v, the lists differ at %v", step, gotIPs, wantIPs)
		}
	}
}

// TestWLHandover: the handover states of docs/ovn-nb.md, "Workloads".
func TestWLHandover(t *testing.T) {
	sw, routes := wlTestRows()
	clock := time.Unix(1e9, 0)
	x := newWLIndex()
	x.now = func() time.Time { return clock }
	x.noteRoutes(routes)
	x.rebuild(x.context("node1", sw, nil, routes))
	x.first = false
	port := func(uuid, name, network, typ, ip string, enabled bool) {
		t.Helper()
		p := &nbdb.LogicalSwitchPort{UUID: uuid, Name: name, Type: typ, Enabled: &enabled,
			ExternalIDs: map[string]string{"pod": "true", "namespace": "ns"}, PortSecurity: []string{"0a:58:00:00:00:01 " + ip}}
		if enabled {
			p.Addresses = p.PortSecurity
		}
		if network != "" {
			p.ExternalIDs[extIDNetwork] = network
		}
		affected := map[wlKey]struct{}{}
		x.setPort(uuid, lspRowOf(p), affected)
		x.update(affected)
	}
	state := func(port string) (model.Handover, time.Time, bool) {
		for _, e := range x.list {
			if e.Port == port {
				return e.Handover, e.Since, true
			}
		}
		return "", time.Time{}, false
	}
	want := func(what, p string, h model.Handover, since time.Time, listed bool) {
		t.Helper()
		gh, gs, gl := state(p)
		if gh != h || !gs.Equal(since) || gl != listed {
			t.Errorf("%s: %s is (%q, %v, listed %v), want (%q, %v, listed %v)", what, p, gh, gs, gl, h, since, listed)
		}
	}
	t0 := clock
	// layer2: the source here, the target remote.
	port("src", "blue.blue_ns_virt-launcher-vm-a", "blue", "", "10.200.0.9", true)
	want("a VM", "blue.blue_ns_virt-launcher-vm-a", model.HandoverNone, time.Time{}, true)
	clock = clock.Add(time.Minute)
	port("dst", "blue.blue_ns_virt-launcher-vm-b", "blue", "remote", "10.200.0.9", false)
	want("target created", "blue.blue_ns_virt-launcher-vm-a", model.HandoverLeaving, t0.Add(time.Minute), true)
	clock = clock.Add(time.Minute)
	port("dst", "blue.blue_ns_virt-launcher-vm-b", "blue", "remote", "10.200.0.9", true)
	port("src", "blue.blue_ns_virt-launcher-vm-a", "blue", "", "10.200.0.9", false)
	want("target ready", "blue.blue_ns_virt-launcher-vm-a", model.HandoverLeft, t0.Add(2*time.Minute), true)
	// The source read disabled before the target's enable (libovsdb hands
	// a transaction over row by row): left all the same, held, never
	// withdrawn at once (a gap at the router).
	port("src2", "blue.blue_ns_virt-launcher-vm-s", "blue", "", "10.200.0.19", true)
	port("dst2", "blue.blue_ns_virt-launcher-vm-t", "blue", "remote", "10.200.0.19", false)
	clock = clock.Add(time.Minute)
	port("src2", "blue.blue_ns_virt-launcher-vm-s", "blue", "", "10.200.0.19", false)
	want("source disabled, target not read yet", "blue.blue_ns_virt-launcher-vm-s", model.HandoverLeft, clock, true)
	port("dst2", "blue.blue_ns_virt-launcher-vm-t", "blue", "remote", "10.200.0.19", true)
	want("then the target enabled", "blue.blue_ns_virt-launcher-vm-s", model.HandoverLeft, clock, true)
	// The target's address gone: the source, disabled, is still held.
	port("dst", "blue.blue_ns_virt-launcher-vm-b", "blue", "remote", "", true)
	want("target gone", "blue.blue_ns_virt-launcher-vm-a", model.HandoverLeft, t0.Add(2*time.Minute), true)
	// layer2: the target here, never seen enabled.
	port("rsrc", "blue.blue_ns_virt-launcher-vm-c", "blue", "remote", "10.200.0.10", true)
	port("tgt", "blue.blue_ns_virt-launcher-vm-d", "blue", "", "10.200.0.10", false)
	want("target here", "blue.blue_ns_virt-launcher-vm-d", model.HandoverArriving, clock, true)
	// The target ready (one transaction: the target enabled, the remote
	// source disabled, its addresses cleared): the VM runs here, and the
	// disabled source, seen enabled before, is no target (issue 19: it
	// was taken as one, so the target sent the handover attributes too
	// until the source's port was deleted).
	clock = clock.Add(time.Minute)
	port("tgt", "blue.blue_ns_virt-launcher-vm-d", "blue", "", "10.200.0.10", true)
	port("rsrc", "blue.blue_ns_virt-launcher-vm-c", "blue", "remote", "10.200.0.10", false)
	want("target active", "blue.blue_ns_virt-launcher-vm-d", model.HandoverNone, time.Time{}, true)
	// A later migration away from here: a new target, created disabled.
	port("tgt2", "blue.blue_ns_virt-launcher-vm-e", "blue", "remote", "10.200.0.10", false)
	want("migrating on", "blue.blue_ns_virt-launcher-vm-d", model.HandoverLeaving, clock, true)
	// default network: a remote-zone route (at the first read: Since zero).
	port("d8", "ns_vm8", "", "", "10.128.0.8", true)
	want("remote route", "ns_vm8", model.HandoverLeft, time.Time{}, true)
	port("d7", "ns_vm7", "", "", "10.128.1.7", true)
	want("outside the subnet, a local route", "ns_vm7", model.HandoverNone, time.Time{}, true)
	port("d9", "ns_vm9", "", "", "10.128.1.9", true)
	want("outside the subnet, no route", "ns_vm9", model.HandoverArriving, clock, true)
	// A route that appears later carries the time it was seen.
	clock = clock.Add(time.Minute)
	routes = append(routes, vmRouteRow{UUID: "r3", IPPrefix: "10.128.0.5", Zone: zoneRemote, VM: "vm5"})
	port("d5", "ns_vm5", "", "", "10.128.0.5", true)
	x.noteRoutes(routes)
	x.rebuild(x.context("node1", sw, nil, routes))
	want("a new remote route", "ns_vm5", model.HandoverLeft, clock, true)
	// The VM that ran here outside this node's subnets goes back to the
	// node that owns its subnet: OVN-Kubernetes deletes the VM's routes,
	// and this node, which advertised it, hands it over (left), not a
	// target (arriving) that withdraws at once.
	clock = clock.Add(time.Minute)
	routes = slices.DeleteFunc(routes, func(r vmRouteRow) bool { return r.UUID == "r1" })
	x.noteRoutes(routes)
	x.rebuild(x.context("node1", sw, nil, routes))
	want("the local route gone", "ns_vm7", model.HandoverLeft, clock, true)
}

// TestWLOutsideProblemGoes: a layer2 port whose address is outside the
// network's subnets is one problem while it is there, and none once it is
// gone or moved inside.
func TestWLOutsideProblemGoes(t *testing.T) {
	sw, routes := wlTestRows()
	x := newWLIndex()
	x.rebuild(x.context("node1", sw, nil, routes))
	set := func(ip string, gone bool) {
		t.Helper()
		var row *lspRow
		if !gone {
			enabled := true
			row = lspRowOf(&nbdb.LogicalSwitchPort{UUID: "p", Name: "blue.blue_ns_a", Enabled: &enabled,
				ExternalIDs: map[string]string{"pod": "true", "namespace": "ns", extIDNetwork: "blue"},
				Addresses:   []string{"0a:58:00:00:00:01 " + ip}, PortSecurity: []string{"0a:58:00:00:00:01 " + ip}})
		}
		affected := map[wlKey]struct{}{}
		x.setPort("p", row, affected)
		x.update(affected)
	}
	set("10.99.0.7", false)
	if len(x.probList) != 1 || len(x.list) != 0 {
		t.Fatalf("outside: problems %q, entries %+v; want one problem, no entry", x.probList, x.list)
	}
	set("10.200.0.7", false)
	if len(x.probList) != 0 || len(x.list) != 1 {
		t.Fatalf("moved inside: problems %q, entries %+v; want none, one entry", x.probList, x.list)
	}
	set("10.99.0.7", false)
	set("", true)
	if len(x.probList) != 0 || len(x.list) != 0 {
		t.Fatalf("gone: problems %q, entries %+v; want none", x.probList, x.list)
	}
}

// TestEditSortedRandom (issue 19): editSorted's binary-search edit gives
// what removing each dropped element (its first equal one; none if absent)
// and sorting the rest with the added ones gives, for random sorted lists
// with repeated elements, drops absent from the list and edits at both
// ends, up to 2,000 elements and 300 edits.
func TestEditSortedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 3))
	for round := range 500 {
		n, span := r.IntN(2000), 1+r.IntN(3000)
		if round%5 == 0 {
			n = r.IntN(8)
		}
		list := make([]int, n)
		for i := range list {
			list[i] = r.IntN(span)
		}
		slices.Sort(list)
		var drop, add []int
		for range r.IntN(300) {
			switch {
			case r.IntN(2) == 0 && len(list) > 0:
				drop = append(drop, list[r.IntN(len(list))])
			case r.IntN(3) == 0:
				drop = append(drop, r.IntN(span+2)-1) // likely absent
			default:
				add = append(add, r.IntN(span+2)-1)
			}
		}
		want := slices.Clone(list)
		for _, d := range drop {
			if i := slices.Index(want, d); i >= 0 {
				want = slices.Delete(want, i, i+1)
			}
		}
		want = append(want, add...)
		slices.Sort(want)
		orig := slices.Clone(list)
		got := editSorted(list, slices.Clone(drop), slices.Clone(add), func(a, b int) int { return a - b })
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: list %v drop %v add %v:\ngot  %v\nwant %v", round, list, drop, add, got, want)
		}
		if !slices.Equal(list, orig) {
			t.Fatalf("round %d: the list given was changed", round)
		}
	}
}
