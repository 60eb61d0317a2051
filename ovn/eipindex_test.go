package ovn

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// TestEIPIndexRandom: after every step of a random sequence of NAT rows
// added, changed and removed (egress IP SNATs and others, external IPs
// shared by several rows, bad and special-purpose addresses, odd names)
// and of routers' nat sets, names and networks changed (gateway routers of
// two nodes on two networks, a NAT held by two routers, routers gone), the
// index holds exactly what buildEgressIPs (for each node) and natProtected
// build over all the rows with their routers, as the whole read finds
// them, problems included; and the addresses it says changed for a node
// are exactly those whose entries differ between the full builds before
// and after.
func TestEIPIndexRandom(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { eipIndexRandom(t, seed) })
	}
}

func eipIndexRandom(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	ips := []string{"172.18.0.100", "172.18.0.101", "172.18.0.102", "fd00:18::5", "::ffff:172.18.0.101", "127.0.0.1", "bogus", "", "0.0.0.0"}
	names := []string{"eip1_ns1/pod1", "eip1_ns1/pod2", "eip2_ns2/pod1", "eip2_ns1/pod3", "badname", "eip3_/x", ""}
	types := []string{ovnk.OwnerTypeEgressIP, ovnk.OwnerTypeEgressIP, ovnk.OwnerTypeEgressIP, "Other"}
	routerNames := []string{"GR_node1", "GR_node2", "GR_node1", "net1_GR_node1", "ovn_cluster_router"}
	networks := []string{"", "", "net1", "default"}
	nodes := []string{"node1", "node2", "node3"}
	nats := map[string]*nbdb.NAT{}
	routers := map[string]*nbdb.LogicalRouter{}
	natUUIDs := func() []string { return slices.Sorted(maps.Keys(nats)) }

	// full is the rows as the whole read (readRouters before the index)
	// made them: with the router of the least UUID holding each.
	full := func() []natRow {
		var out []natRow
		for _, n := range nats {
			row, ok := natRowOf(n)
			if !ok {
				continue
			}
			for _, ru := range slices.Sorted(maps.Keys(routers)) {
				if lr := routers[ru]; slices.Contains(lr.Nat, n.UUID) {
					row.Router, row.RouterNetwork = lr.Name, lr.ExternalIDs[extIDNetwork]
					break
				}
			}
			out = append(out, row)
		}
		slices.SortFunc(out, func(a, b natRow) int { return cmpString(a.UUID, b.UUID) })
		return out
	}
	m := newNATMemo(newEIPIndex())
	before := map[string][]model.EgressIP{}
	for _, node := range nodes {
		before[node], _ = buildEgressIPs(nil, node)
	}
	var prevProt []model.ProtectedPrefix
	for step := range 400 {
		affected := map[string]struct{}{}
		for range 1 + r.IntN(3) {
			switch r.IntN(3) {
			case 0, 1: // a NAT row
				uuid := fmt.Sprintf("n%d", r.IntN(10))
				if r.IntN(4) == 0 {
					delete(nats, uuid)
					m.setNAT(uuid, nil, affected)
					continue
				}
				n := &nbdb.NAT{UUID: uuid, Type: "snat", ExternalIP: pick(ips), LogicalIP: "10.128.0.5",
					ExternalIDs: map[string]string{ovnk.ExtIDOwnerType: pick(types), ovnk.ExtIDName: pick(names),
						ovnk.ExtIDOwnerController: pick([]string{"default-network-controller", "c2"})}}
				nats[uuid] = n
				m.setNAT(uuid, n, affected)
			default: // a router
				uuid := fmt.Sprintf("r%d", r.IntN(5))
				if r.IntN(6) == 0 {
					delete(routers, uuid)
					m.setRouter(uuid, nil, affected)
					continue
				}
				lr := routers[uuid]
				var set []string
				if lr == nil || r.IntN(3) == 0 {
					lr = &nbdb.LogicalRouter{UUID: uuid, Name: pick(routerNames), ExternalIDs: map[string]string{}}
					if nw := pick(networks); nw != "" {
						lr.ExternalIDs[extIDNetwork] = nw
					}
				} else {
					set = lr.Nat
					lr = &nbdb.LogicalRouter{UUID: uuid, Name: lr.Name, ExternalIDs: lr.ExternalIDs}
				}
				// Some NATs added, some removed (some of no row).
				set = slices.Clone(set)
				for range r.IntN(4) {
					id := fmt.Sprintf("n%d", r.IntN(12))
					if i := slices.Index(set, id); i >= 0 {
						set = slices.Delete(set, i, i+1)
					} else {
						set = append(set, id)
					}
				}
				lr.Nat = set
				routers[uuid] = lr
				m.setRouter(uuid, lr, affected)
			}
		}
		_ = natUUIDs
		changes, _ := m.flush(affected)
		rows := full()
		view := m.idx.snapshot()
		for _, node := range nodes {
			want, wantProblems := buildEgressIPs(rows, node)
			got, gotProblems := view.forNode(node)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d node %s: the index holds\n%+v\nthe full build\n%+v", step, node, got, want)
			}
			gotProblems, wantProblems = slices.Sorted(slices.Values(gotProblems)), slices.Sorted(slices.Values(wantProblems))
			if !slices.Equal(gotProblems, wantProblems) {
				t.Fatalf("step %d node %s: problems\n%q\nwant\n%q", step, node, gotProblems, wantProblems)
			}
			if d, w := changedFor(changes, node), egressIPsDiffer(before[node], want); !slices.Equal(d, w) {
				t.Fatalf("step %d node %s: changed %v, want %v", step, node, d, w)
			}
			before[node] = want
		}
		wantProt := natProtected(rows)
		slices.Sort(wantProt.problems)
		// Every address whose protected entry changed is a change (of a
		// group, or of no group for a row on no router): the delta leaves
		// exactly those out of Context.
		changedIPs := map[netip.Addr]bool{}
		for _, c := range changes {
			changedIPs[c.ip] = true
		}
		for _, a := range protDiffer(prevProt, wantProt.prot) {
			if !changedIPs[a] {
				t.Fatalf("step %d: the protected entry of %s changed, but no change names it (%v)", step, a, changes)
			}
		}
		prevProt = wantProt.prot
		if !reflect.DeepEqual(view.prot, append([]model.ProtectedPrefix{}, wantProt.prot...)) {
			t.Fatalf("step %d: protected\n%+v\nnatProtected\n%+v", step, view.prot, wantProt.prot)
		}
		if !slices.Equal(view.protProblems, wantProt.problems) {
			t.Fatalf("step %d: protected problems\n%q\nwant\n%q", step, view.protProblems, wantProt.problems)
		}
	}
	_ = netip.Addr{}
}

// protDiffer is the addresses of the host entries that differ between a
// and b.
func protDiffer(a, b []model.ProtectedPrefix) []netip.Addr {
	m := map[netip.Prefix]string{}
	for _, p := range a {
		m[p.Prefix] = p.Why
	}
	var out []netip.Addr
	for _, p := range b {
		if why, ok := m[p.Prefix]; !ok || why != p.Why {
			out = append(out, p.Prefix.Addr())
		}
		delete(m, p.Prefix)
	}
	for p := range m {
		out = append(out, p.Addr())
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
