package ovn_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// TestSnapshotDeltaMemoryServer: SnapshotDelta against labnb's in-memory
// server (deltaScenario).
func TestSnapshotDeltaMemoryServer(t *testing.T) {
	srv, err := labnb.NewMemoryServer(zaptest.NewLogger(t), filepath.Join(shortDir(t), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	deltaScenario(t, srv.Endpoint(), nil)
}

// TestSnapshotDeltaRealServer: SnapshotDelta against a real ovsdb-server
// with OVN's NB schema (deltaScenario), and a restart of the server: the
// new session's snapshot comes with All.
func TestSnapshotDeltaRealServer(t *testing.T) {
	s := ovsdbtest.Start(t, "")
	deltaScenario(t, s.Endpoint(), s.Restart)
}

// deltaScenario: the first SnapshotDelta says All; with nothing changed,
// the same generation and an empty delta; after one Service's backends
// change, that VIP alone and nothing else; a new Service, its VIP (its
// protected entry is not Context: it comes and goes with the VIP); two
// changes between calls, both; an egress IP moving away, that address; 120
// egress IPs added in one transaction, then moved away one by one, those
// addresses; another node, a stale generation
// or (restart, if given) a new session: All. Every delta is checked
// against the difference of the two snapshots computed here.
func deltaScenario(t *testing.T, endpoint string, restart func()) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := zaptest.NewLogger(t)
	if err := labnb.Topology(ctx, endpoint, "node1", log); err != nil {
		t.Fatal(err)
	}
	c, _ := dial(t, endpoint, log)
	var s0 model.Snapshot
	eventually(t, 10*time.Second, func() (bool, string) {
		var ok bool
		s0, ok = c.Snapshot("node1")
		return ok && len(s0.ServiceVIPs) == 4 && len(s0.EgressIPs) == 1, "not synced"
	})
	snap, d, gen, ok := c.SnapshotDelta("node1", 0)
	if !ok || !d.All || gen == 0 {
		t.Fatalf("first call: ok %v, delta %+v, generation %d; want ok, All, a generation", ok, d, gen)
	}
	if !reflect.DeepEqual(snap, s0) {
		t.Fatalf("SnapshotDelta's snapshot differs from Snapshot's:\n%+v\n%+v", snap, s0)
	}
	if _, d, g, _ := c.SnapshotDelta("node1", gen); g != gen || !d.Empty() {
		t.Fatalf("nothing changed: generation %d -> %d, delta %+v", gen, g, d)
	}

	// step writes ops, waits until Snapshot shows done, then checks
	// SnapshotDelta since the last generation against the snapshots.
	step := func(what, ops string, done func(model.Snapshot) bool, want model.SnapshotDelta) {
		t.Helper()
		if ops != "" {
			if err := labnb.Transact(ctx, endpoint, []byte(ops), log); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		eventually(t, 10*time.Second, func() (bool, string) {
			s, _ := c.Snapshot("node1")
			return done(s), what + ": not in the snapshot"
		})
		s, d, g, ok := c.SnapshotDelta("node1", gen)
		if !ok || g <= gen {
			t.Fatalf("%s: ok %v, generation %d -> %d", what, ok, gen, g)
		}
		if brute := differ(snap, s); !reflect.DeepEqual(d, brute) {
			t.Errorf("%s: delta %+v, the snapshots differ by %+v", what, d, brute)
		}
		if !reflect.DeepEqual(d, want) {
			t.Errorf("%s: delta %+v, want %+v", what, d, want)
		}
		snap, gen = s, g
	}
	vipOf := func(s model.Snapshot, a string) *model.ServiceVIP {
		for i, v := range s.ServiceVIPs {
			if v.VIP.String() == a {
				return &s.ServiceVIPs[i]
			}
		}
		return nil
	}
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}

	step("one Service's backends", `[{"op":"update","table":"Load_Balancer","where":[["name","==","Service_default/web_TCP_cluster"]],
	  "row":{"vips":["map",[["10.96.100.10:80","10.128.0.5:8080,10.128.0.9:8080"],["192.0.2.50:80","10.128.0.5:8080,10.128.2.7:8080"]]]}}]`,
		func(s model.Snapshot) bool {
			v := vipOf(s, "10.96.100.10")
			return v != nil && slices.Contains(v.Backends, netip.MustParseAddr("10.128.0.9"))
		},
		model.SnapshotDelta{ServiceVIPs: addrs("10.96.100.10")})

	step("a new Service", `[{"op":"insert","table":"Load_Balancer","row":{"name":"Service_ns1/db_TCP_cluster","protocol":"tcp",
	  "vips":["map",[["10.96.200.1:5432","10.128.0.6:5432"]]],
	  "external_ids":["map",[["k8s.ovn.org/kind","Service"],["k8s.ovn.org/owner","ns1/db"]]]}}]`,
		func(s model.Snapshot) bool { return vipOf(s, "10.96.200.1") != nil },
		model.SnapshotDelta{ServiceVIPs: addrs("10.96.200.1")})

	if err := labnb.Transact(ctx, endpoint, []byte(`[{"op":"delete","table":"Load_Balancer","where":[["name","==","Service_ns1/db_TCP_cluster"]]}]`), log); err != nil {
		t.Fatal(err)
	}
	step("two changes between calls", `[{"op":"update","table":"Load_Balancer","where":[["name","==","Service_blue/web_TCP_cluster"]],
	  "row":{"vips":["map",[["10.96.10.10:80","10.200.0.6:8080"]]]}}]`,
		func(s model.Snapshot) bool {
			v := vipOf(s, "10.96.10.10")
			return vipOf(s, "10.96.200.1") == nil && v != nil && v.Backends[0] == netip.MustParseAddr("10.200.0.6")
		},
		model.SnapshotDelta{ServiceVIPs: addrs("10.96.10.10", "10.96.200.1")})

	if err := labnb.MoveNATs(ctx, endpoint, "172.18.0.100", "GR_node1", "GR_node2", log); err != nil {
		t.Fatal(err)
	}
	step("an egress IP moved away", "", func(s model.Snapshot) bool { return len(s.EgressIPs) == 0 },
		model.SnapshotDelta{EgressIPs: addrs("172.18.0.100")})

	// 120 egress IPs on node1 in one transaction, then moved away to
	// node2 one transaction each: each time exactly those addresses.
	var many []string
	var ops, refs []string
	for i := range 120 {
		a := fmt.Sprintf("172.19.%d.%d", i/100, 1+i%100)
		many = append(many, a)
		ops = append(ops, fmt.Sprintf(`{"op":"insert","table":"NAT","uuid-name":"n%d","row":{"type":"snat","external_ip":%q,"logical_ip":"10.128.0.%d",
		  "external_ids":["map",[["k8s.ovn.org/owner-type","EgressIP"],["k8s.ovn.org/owner-controller","default-network-controller"],["k8s.ovn.org/name","eip%d_ns1/pod%d"]]]}}`, i, a, 2+i%200, i, i))
		refs = append(refs, fmt.Sprintf(`["named-uuid","n%d"]`, i))
	}
	ops = append(ops, `{"op":"mutate","table":"Logical_Router","where":[["name","==","GR_node1"]],"mutations":[["nat","insert",["set",[`+strings.Join(refs, ",")+`]]]]}`)
	slices.SortFunc(many, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	step("120 egress IPs added", "["+strings.Join(ops, ",")+"]", func(s model.Snapshot) bool { return len(s.EgressIPs) == 120 },
		model.SnapshotDelta{EgressIPs: addrs(many...)})
	for _, a := range many {
		if err := labnb.MoveNATs(ctx, endpoint, a, "GR_node1", "GR_node2", log); err != nil {
			t.Fatal(err)
		}
	}
	step("120 egress IPs moved away", "", func(s model.Snapshot) bool { return len(s.EgressIPs) == 0 },
		model.SnapshotDelta{EgressIPs: addrs(many...)})

	if _, d, _, _ := c.SnapshotDelta("node1", gen-1); !d.All {
		t.Errorf("a stale generation: delta %+v, want All", d)
	}
	_, _, gen, _ = c.SnapshotDelta("node1", gen-1)
	_, d2, g2, _ := c.SnapshotDelta("node2", gen)
	if !d2.All {
		t.Errorf("another node: delta %+v, want All", d2)
	}
	if _, d, _, _ := c.SnapshotDelta("node1", g2); !d.All {
		t.Errorf("back to node1 with node2's generation: delta %+v, want All", d)
	}

	if restart == nil {
		return
	}
	_, _, gen, _ = c.SnapshotDelta("node1", 0)
	restart()
	// The first call that sees the new session's rows says All.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, d, g, _ := c.SnapshotDelta("node1", gen)
		if g != gen {
			if !d.All {
				t.Errorf("after a restart: generation %d -> %d, delta %+v, want All", gen, g, d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new generation after the restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// differ is what differs between two snapshots of one node, computed
// entry by entry, as SnapshotDelta should say it.
func differ(a, b model.Snapshot) model.SnapshotDelta {
	var d model.SnapshotDelta
	type vk struct {
		net, svc string
		ip       netip.Addr
	}
	vips := map[vk][2]*model.ServiceVIP{}
	for i, v := range a.ServiceVIPs {
		k := vk{v.Network, v.Service, v.VIP}
		e := vips[k]
		e[0] = &a.ServiceVIPs[i]
		vips[k] = e
	}
	for i, v := range b.ServiceVIPs {
		k := vk{v.Network, v.Service, v.VIP}
		e := vips[k]
		e[1] = &b.ServiceVIPs[i]
		vips[k] = e
	}
	for k, e := range vips {
		if e[0] == nil || e[1] == nil || !reflect.DeepEqual(*e[0], *e[1]) {
			d.ServiceVIPs = append(d.ServiceVIPs, k.ip)
		}
	}
	eips := map[vk][2]*model.EgressIP{}
	for i, v := range a.EgressIPs {
		k := vk{net: v.Network, ip: v.IP}
		e := eips[k]
		e[0] = &a.EgressIPs[i]
		eips[k] = e
	}
	for i, v := range b.EgressIPs {
		k := vk{net: v.Network, ip: v.IP}
		e := eips[k]
		e[1] = &b.EgressIPs[i]
		eips[k] = e
	}
	for k, e := range eips {
		if e[0] == nil || e[1] == nil || !reflect.DeepEqual(*e[0], *e[1]) {
			d.EgressIPs = append(d.EgressIPs, k.ip)
		}
	}
	type wk struct {
		net, port string
		ip        netip.Addr
	}
	wls := map[wk][2]*model.WorkloadIP{}
	for _, v := range a.WorkloadIPs {
		k := wk{v.Network, v.Port, v.IP}
		e := wls[k]
		e[0] = v
		wls[k] = e
	}
	for _, v := range b.WorkloadIPs {
		k := wk{v.Network, v.Port, v.IP}
		e := wls[k]
		e[1] = v
		wls[k] = e
	}
	for k, e := range wls {
		if e[0] == nil || e[1] == nil || !reflect.DeepEqual(*e[0], *e[1]) {
			d.WorkloadIPs = append(d.WorkloadIPs, k.ip)
		}
	}
	for _, l := range []*[]netip.Addr{&d.ServiceVIPs, &d.EgressIPs, &d.WorkloadIPs} {
		slices.SortFunc(*l, netip.Addr.Compare)
		*l = slices.Compact(*l)
	}
	d.OwnedRoutes = !reflect.DeepEqual(a.OwnedRoutes, b.OwnedRoutes)
	// The protected entry of a listed address comes and goes with it.
	own := map[netip.Prefix]bool{}
	for _, a := range slices.Concat(d.ServiceVIPs, d.EgressIPs) {
		own[netip.PrefixFrom(a, a.BitLen())] = true
	}
	// So does an egress IP's (any node's: natProtected lists them all).
	prot := func(ps []model.ProtectedPrefix) []model.ProtectedPrefix {
		return slices.DeleteFunc(slices.Clone(ps), func(p model.ProtectedPrefix) bool {
			return own[p.Prefix] || strings.HasPrefix(p.Why, "egress IP ")
		})
	}
	// Those not of a listed address are Protected.
	eipProt := func(ps []model.ProtectedPrefix) map[netip.Addr][]model.ProtectedPrefix {
		m := map[netip.Addr][]model.ProtectedPrefix{}
		for _, p := range ps {
			if strings.HasPrefix(p.Why, "egress IP ") && p.Prefix.IsSingleIP() && !own[p.Prefix] {
				m[p.Prefix.Addr()] = append(m[p.Prefix.Addr()], p)
			}
		}
		return m
	}
	pa, pb := eipProt(a.Protected), eipProt(b.Protected)
	for addr, e := range pa {
		if !slices.Equal(e, pb[addr]) {
			d.Protected = append(d.Protected, addr)
		}
	}
	for addr := range pb {
		if _, ok := pa[addr]; !ok {
			d.Protected = append(d.Protected, addr)
		}
	}
	slices.SortFunc(d.Protected, netip.Addr.Compare)
	routers := func(rs []model.GatewayRouter) []model.GatewayRouter {
		rs = slices.Clone(rs)
		for i := range rs {
			rs[i].StaticRoutes = nil
		}
		return rs
	}
	d.Context = !reflect.DeepEqual(a.Networks, b.Networks) || !reflect.DeepEqual(routers(a.Routers), routers(b.Routers)) ||
		!reflect.DeepEqual(prot(a.Protected), prot(b.Protected)) || !reflect.DeepEqual(a.NodeAddresses, b.NodeAddresses)
	return d
}
