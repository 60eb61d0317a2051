package plan

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// advWorld is a node's egress IPs, Service VIPs and workload addresses
// that random changes are made to, and the snapshot of it in
// model.Snapshot's order.
type advWorld struct {
	base      model.Snapshot
	vips      map[string]model.ServiceVIP // by network, VIP, Service
	eips      map[string]model.EgressIP   // by network, IP
	wips      map[string]model.WorkloadIP // by network, IP, port
	nodeExtra bool                        // 192.0.2.55 is a node address too
	protExtra bool                        // NB protects 192.0.2.57 (a VIP of a row with a bad owner)
	// others are another node's egress IPs: NB protects them, and only
	// SnapshotDelta.Protected says when one comes or goes.
	others map[netip.Addr]bool
}

func (w *advWorld) snapshot() model.Snapshot {
	s := w.base
	s.NodeAddresses = slices.Clone(w.base.NodeAddresses)
	if w.nodeExtra {
		s.NodeAddresses = append(s.NodeAddresses, netip.MustParseAddr("192.0.2.55"))
		slices.SortFunc(s.NodeAddresses, netip.Addr.Compare)
	}
	net := func(a, b string) int {
		return cmp.Or(cmp.Compare(boolInt(a != model.DefaultNetwork), boolInt(b != model.DefaultNetwork)), cmp.Compare(a, b))
	}
	s.ServiceVIPs = nil
	for _, v := range w.vips {
		s.ServiceVIPs = append(s.ServiceVIPs, v)
	}
	slices.SortFunc(s.ServiceVIPs, func(a, b model.ServiceVIP) int {
		return cmp.Or(net(a.Network, b.Network), a.VIP.Compare(b.VIP), cmp.Compare(a.Service, b.Service))
	})
	s.EgressIPs = nil
	for _, e := range w.eips {
		s.EgressIPs = append(s.EgressIPs, e)
	}
	slices.SortFunc(s.EgressIPs, func(a, b model.EgressIP) int { return cmp.Or(net(a.Network, b.Network), a.IP.Compare(b.IP)) })
	s.WorkloadIPs = nil
	for _, w := range w.wips {
		s.WorkloadIPs = append(s.WorkloadIPs, &w)
	}
	slices.SortFunc(s.WorkloadIPs, func(a, b *model.WorkloadIP) int {
		return cmp.Or(net(a.Network, b.Network), a.IP.Compare(b.IP), cmp.Compare(a.Port, b.Port))
	})
	// What NB protects, as ovn builds it: every VIP and egress IP,
	// another node's pod subnet; sorted by prefix, each once.
	s.Protected = []model.ProtectedPrefix{{Prefix: pfx("10.128.2.0/23"), Why: "pod subnet (Logical_Switch node2)"}}
	if w.protExtra {
		s.Protected = append(s.Protected, model.ProtectedPrefix{Prefix: pfx("192.0.2.57/32"), Why: "Load_Balancer bad-owner vips"})
	}
	for _, v := range s.ServiceVIPs {
		s.Protected = append(s.Protected, model.ProtectedPrefix{Prefix: hostPrefix(v.VIP), Why: "Load_Balancer vips"})
	}
	for _, e := range s.EgressIPs {
		s.Protected = append(s.Protected, model.ProtectedPrefix{Prefix: hostPrefix(e.IP), Why: "NAT external_ip"})
	}
	for a := range w.others {
		s.Protected = append(s.Protected, model.ProtectedPrefix{Prefix: hostPrefix(a), Why: "egress IP x (NAT on GR_node2 external_ip)"})
	}
	slices.SortStableFunc(s.Protected, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
	s.Protected = slices.CompactFunc(s.Protected, func(a, b model.ProtectedPrefix) bool { return a.Prefix == b.Prefix })
	return s
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var (
	// VIP addresses: external ones, ClusterIPs (cluster.serviceCIDRs),
	// node addresses (NodePorts), IPv6, one that sorts before the pod
	// subnets, and two that are egress IPs too.
	randVIPs = addrs("192.0.2.50", "192.0.2.51", "192.0.2.52", "192.0.2.53", "192.0.2.54", "192.0.2.55", "192.0.2.56",
		"172.30.0.10", "172.30.0.11", "172.18.0.2", "172.18.0.3", "2001:db8:50::1", "2001:db8:50::2", "fd02::10",
		"198.51.100.7", "198.51.100.8", "10.1.0.1", "192.0.2.200", "192.0.2.57")
	randEIPs = addrs("172.18.0.100", "172.18.0.101", "fc00::100", "fc00::101", "172.19.0.100", "192.0.2.200", "192.0.2.50",
		"198.51.100.7")
	// randOthers are other nodes' egress IPs: inside the aggregates of
	// randConfig's rules, between this node's addresses.
	randOthers   = addrs("192.0.2.58", "172.18.0.5", "fc00::102", "198.51.100.9")
	randServices = []string{"web/front", "web/front2", "web/host", "db/pg", "blue-ns/app", "prod-a/api", "other/x"}
	randNetworks = []string{"default", "blue", "cluster_udn_red"}
	// Backends: pods on this node (default, blue, red, IPv6), a pod
	// elsewhere, this node's own address (a host-network endpoint).
	randBackends   = addrs("10.128.0.5", "10.128.2.5", "172.18.0.2", "10.200.0.4", "fd00:10:128:1::5", "10.250.0.9")
	randNamespaces = [][]string{nil, {"prod-a"}, {"web"}, {"prod-a", "web"}, {"blue-ns"}}
	// Workload addresses: in this node's pod subnets (default, red,
	// blue, IPv6), inside another node's (NB protects 10.128.2.0/23), and
	// some that are VIPs, egress IPs, node addresses or NB-protected too.
	randWIPs = addrs("10.128.0.10", "10.128.0.11", "10.128.0.12", "10.250.0.5", "10.250.0.6", "10.200.0.7", "fd00:10:128:1::10",
		"fd00:10:128:1::11", "10.128.2.9", "192.0.2.50", "192.0.2.55", "192.0.2.57", "172.18.0.100")
	randWNamespaces = []string{"prod-a", "web", "blue-ns", "other"}
	randWNames      = []string{"db-1", "db-2", "api"}
	randHandovers   = []model.Handover{model.HandoverNone, model.HandoverLeaving, model.HandoverLeft, model.HandoverLeft, model.HandoverArriving}
)

// randConfig: two peers, tor-a (eBGP) with a small export cap, tor-b
// (iBGP) with both families and no cap; rules of every kind that overlap,
// so the first rule wins often, workloadIP rules with pods and namespaces
// globs and handovers of different holds and attributes;
// 198.51.100.7/32 in protectedPrefixes. aggregate: VIPs, egress IPs and
// workload addresses are aggregated by some rules, in both families, and
// some aggregates would cover node addresses, NB's protected prefixes or
// protectedPrefixes, depending on what else is there.
func randConfig(aggregate bool) *config.Config {
	torA := peer("tor-a", "192.0.2.1")
	torA.MaxAdvertised = 5
	torB := peer("tor-b", "192.0.2.3", config.IPv4, config.IPv6)
	torB.ASN = 64512
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{torA, torB}},
		Advertise: []config.AdvertiseRule{
			{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("*")},
			{Name: "front", Kind: config.KindLoadBalancerIP, Services: globs("web/front*"), Peers: []string{"tor-a"}, MED: 5, WeightByEndpoints: true},
			{Name: "eip-prod", Kind: config.KindEgressIP, Namespaces: globs("prod-*"), Communities: []model.Community{65001<<16 | 7}},
			{Name: "local", Kind: config.KindLoadBalancerIP, LocalEndpointsOnly: true, WeightByEndpoints: true, Namespaces: globs("web", "db", "blue-ns")},
			{Name: "vips", Kind: config.KindLoadBalancerIP, Networks: globs("default")},
			{Name: "eips", Kind: config.KindEgressIP},
			{Name: "all-vips", Kind: config.KindLoadBalancerIP, Peers: []string{"tor-b"}, ASPathPrepend: 1},
			{Name: "wl-web", Kind: config.KindWorkloadIP, Networks: globs("*"), Namespaces: globs("web", "blue-ns"), Peers: []string{"tor-b"},
				Handover: config.Handover{HoldTime: 7 * time.Second, LocalPreference: 30, ASPathPrepend: 1}},
			{Name: "wl-all", Kind: config.KindWorkloadIP, Networks: globs("*"), ASPathPrepend: 1,
				Handover: config.Handover{HoldTime: 2 * time.Second, LocalPreference: 60}},
		},
		ProtectedPrefixes: []netip.Prefix{pfx("198.51.100.7/32")},
		Cluster:           config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16"), pfx("fd02::/112")}}}
	// Before the VIP rules: it wins the addresses that are VIPs too.
	cfg.Advertise = slices.Insert(cfg.Advertise, 2, config.AdvertiseRule{Name: "vms", Kind: config.KindWorkloadIP,
		Networks: globs("default", "cluster_udn_red"), Pods: globs("prod-a/db-*", "web/virt-launcher-*"), MED: 3,
		Handover: config.Handover{HoldTime: 4 * time.Second, LocalPreference: 50, ASPathPrepend: 2, MED: 9}})
	if aggregate {
		rule := func(name string) *config.AdvertiseRule {
			return &cfg.Advertise[slices.IndexFunc(cfg.Advertise, func(r config.AdvertiseRule) bool { return r.Name == name })]
		}
		rule("vips").AggregateLength = 24
		rule("eips").AggregateLength = 16
		rule("all-vips").AggregateLengthV6 = 112
		rule("vms").AggregateLength = 28
		rule("wl-all").AggregateLength = 16
		rule("wl-all").AggregateLengthV6 = 120
	}
	return cfg
}

// changeWorkload adds, changes or removes one workload entry at now and
// returns its address: a pod, or a VM's virt-launcher pod, in a random
// handover state, since a random time in the last 10 s (left: now and
// then unknown).
func (w *advWorld) changeWorkload(r *rand.Rand, now time.Time) netip.Addr {
	nw, a, port := randNetworks[r.IntN(len(randNetworks))], randWIPs[r.IntN(len(randWIPs))], fmt.Sprintf("p%d", r.IntN(2))
	k := nw + " " + a.String() + " " + port
	if _, ok := w.wips[k]; ok && r.IntN(3) == 0 {
		delete(w.wips, k)
		return a
	}
	ns, name := randWNamespaces[r.IntN(len(randWNamespaces))], randWNames[r.IntN(len(randWNames))]
	e := model.WorkloadIP{IP: a, Network: nw, Namespace: ns, Pod: name, Port: port, Handover: randHandovers[r.IntN(len(randHandovers))],
		Source: fmt.Sprintf("lsp %s %d", port, r.IntN(2))}
	if r.IntN(2) == 0 {
		e.Pod, e.VM = "virt-launcher-"+name+"-x", ns+"/"+name
	}
	if e.Handover != model.HandoverNone && r.IntN(6) > 0 {
		e.Since = now.Add(-time.Duration(r.IntN(10000)) * time.Millisecond)
	}
	w.wips[k] = e
	return a
}

// change makes one random change and returns the address changed, and
// whether it is a VIP's (else an egress IP's).
func (w *advWorld) change(r *rand.Rand) (netip.Addr, bool) {
	backends := func() []netip.Addr {
		var bs []netip.Addr
		for _, b := range randBackends {
			if r.IntN(4) == 0 {
				bs = append(bs, b)
			}
		}
		if bs == nil {
			bs = []netip.Addr{} // no endpoint
		}
		return bs
	}
	if r.IntN(3) > 0 {
		nw, a, svc := randNetworks[r.IntN(len(randNetworks))], randVIPs[r.IntN(len(randVIPs))], randServices[r.IntN(len(randServices))]
		k := nw + " " + a.String() + " " + svc
		if _, ok := w.vips[k]; ok && r.IntN(2) == 0 {
			delete(w.vips, k)
		} else {
			w.vips[k] = model.ServiceVIP{Service: svc, Network: nw, VIP: a, Backends: backends(), Source: fmt.Sprintf("lb %s %d", svc, r.IntN(3))}
		}
		return a, true
	}
	nw, a := randNetworks[r.IntN(2)], randEIPs[r.IntN(len(randEIPs))]
	k := nw + " " + a.String()
	if _, ok := w.eips[k]; ok && r.IntN(2) == 0 {
		delete(w.eips, k)
	} else {
		w.eips[k] = model.EgressIP{IP: a, Network: nw, Router: "GR_node1", Name: "eip", Namespaces: randNamespaces[r.IntN(len(randNamespaces))],
			Source: fmt.Sprintf("nat %d", r.IntN(3))}
	}
	return a, false
}

// advView is CappedAdvertisements' result by key.
func advView(sent, held []model.Advertisement) map[model.Key]model.Advertisement {
	m := map[model.Key]model.Advertisement{}
	for _, a := range slices.Concat(sent, held) {
		m[a.Key()] = a
	}
	return m
}

// TestAdvertStateEqualsFull: after every random sequence of changes (VIPs,
// egress IPs and workload addresses in every handover state added, changed
// and removed, one address at a time or several, now and then a node
// address or everything) while time moves past handover holds (and now
// and then back), Update leaves Sent and Held equal to
// CappedAdvertisements of the same snapshot and time, and returns exactly
// the keys whose advertisement differs from the step before, whether or
// not the delta names the addresses whose hold ended; Lookup agrees, for
// every key selected and every key touched, and NextHandoverEnd with
// HandoverEnds.
func TestAdvertStateEqualsFull(t *testing.T) {
	for _, aggregate := range []bool{false, true} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("aggregate=%v/seed=%d", aggregate, seed), func(t *testing.T) {
				cfg := randConfig(aggregate)
				r := rand.New(rand.NewPCG(seed, 1))
				base := advSnapshot()
				base.EgressIPs, base.ServiceVIPs = nil, nil
				// A pod subnet that is a VIP's host prefix too: the
				// podNetwork rule, first, wins it.
				base.Networks[1].Subnets = append(base.Networks[1].Subnets, model.Subnet{Prefix: pfx("192.0.2.56/32"), Source: "blue /32"})
				w := &advWorld{base: base, vips: map[string]model.ServiceVIP{}, eips: map[string]model.EgressIP{}, wips: map[string]model.WorkloadIP{}, others: map[netip.Addr]bool{}}
				now := testNow
				for range 15 {
					w.change(r)
					w.changeWorkload(r, now)
				}
				snap := w.snapshot()
				st := NewAdvertState(cfg, snap, now)
				prev := advView(CappedAdvertisements(cfg, snap, now))
				checkAdvertState(t, cfg, snap, st, prev, nil, now, "start")
				for step := range 150 {
					// Time moves on (past holds, now and then),
					// stands, or now and then goes back.
					was := now
					switch n := r.IntN(20); {
					case n < 12:
						now = now.Add(time.Duration(r.IntN(2500)) * time.Millisecond)
					case n == 12:
						now = now.Add(-time.Duration(r.IntN(2000)) * time.Millisecond)
					}
					var d model.SnapshotDelta
					switch n := r.IntN(40); {
					case n == 0:
						d.All = true
						w.change(r)
					case n == 1:
						d.Context = true
						w.nodeExtra = !w.nodeExtra
					case n == 3 || n == 4:
						d.Context = true
						w.protExtra = !w.protExtra
					case n == 2:
						d.OwnedRoutes = true
					case n == 5 || n == 6:
						// Another node's egress IP comes or goes.
						a := randOthers[r.IntN(len(randOthers))]
						if w.others[a] {
							delete(w.others, a)
						} else {
							w.others[a] = true
						}
						d.Protected = []netip.Addr{a}
					case n < 10:
						// Nothing changes in NB: only time moves.
					default:
						for range 1 + r.IntN(3) {
							if r.IntN(3) == 0 {
								d.WorkloadIPs = append(d.WorkloadIPs, w.changeWorkload(r, now))
								continue
							}
							a, vip := w.change(r)
							if vip {
								d.ServiceVIPs = append(d.ServiceVIPs, a)
							} else {
								d.EgressIPs = append(d.EgressIPs, a)
							}
						}
					}
					snap = w.snapshot()
					if r.IntN(2) == 0 && now.After(was) {
						// As the daemon's timer does: the holds that
						// ended, named (Update finds them anyway).
						ended, _ := HandoverEnds(cfg, snap, was, now)
						d.WorkloadIPs = append(d.WorkloadIPs, ended...)
					}
					touched := st.Update(snap, d, now)
					prev = checkAdvertState(t, cfg, snap, st, prev, touched, now, fmt.Sprintf("step %d at %v (%+v)", step, now.Sub(testNow), d))
					if _, next := HandoverEnds(cfg, snap, now, now); !st.NextHandoverEnd().Equal(next) {
						t.Errorf("step %d: NextHandoverEnd() = %v, HandoverEnds says %v", step, st.NextHandoverEnd(), next)
					}
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// checkAdvertState compares st with CappedAdvertisements(cfg, snap, now), and
// touched with the keys that differ from prev; it returns the new view.
func checkAdvertState(t *testing.T, cfg *config.Config, snap model.Snapshot, st *AdvertState,
	prev map[model.Key]model.Advertisement, touched []model.Key, at time.Time, step string) map[model.Key]model.Advertisement {
	t.Helper()
	wantSent, wantHeld := CappedAdvertisements(cfg, snap, at)
	if got := st.Sent(); !slices.EqualFunc(wantSent, got, sameAdv) {
		t.Errorf("%s: Sent() differs from CappedAdvertisements (-full +state):\n%s", step, gocmp.Diff(wantSent, got, cmpAddrs, cmpopts.EquateEmpty()))
	}
	if got := st.Held(); !slices.EqualFunc(wantHeld, got, sameAdv) {
		t.Errorf("%s: Held() differs from CappedAdvertisements (-full +state):\n%s", step, gocmp.Diff(wantHeld, got, cmpAddrs, cmpopts.EquateEmpty()))
	}
	now := advView(wantSent, wantHeld)
	if touched != nil || prev != nil {
		var differ []model.Key
		for k, a := range now {
			if b, ok := prev[k]; !ok || !sameAdv(a, b) {
				differ = append(differ, k)
			}
		}
		for k := range prev {
			if _, ok := now[k]; !ok {
				differ = append(differ, k)
			}
		}
		slices.SortFunc(differ, func(a, b model.Key) int {
			return cmp.Or(cmp.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
		})
		if !slices.Equal(differ, touched) {
			t.Errorf("%s: touched keys differ from the keys whose advertisement changed (-changed +touched):\n%s",
				step, gocmp.Diff(differ, touched, cmpAddrs, cmpopts.EquateEmpty()))
		}
	}
	keys := slices.Clone(touched)
	for k := range now {
		keys = append(keys, k)
	}
	for _, k := range keys {
		want, ok := now[k]
		adv, sent, held := st.Lookup(k)
		switch {
		case !ok && (sent || held):
			t.Errorf("%s: Lookup(%v) = %+v sent=%v held=%v, want nothing", step, k, adv, sent, held)
		case ok && (sent != (want.State == "") || held != (want.State == model.AdvHeldBack)):
			t.Errorf("%s: Lookup(%v): sent=%v held=%v, want state %q", step, k, sent, held, want.State)
		case ok && !sameAdv(want, adv):
			t.Errorf("%s: Lookup(%v) = %+v, want %+v", step, k, adv, want)
		}
	}
	return now
}

// sameAdv says whether a and b are equal in every field (go-cmp's
// Equal, which says so too, is most of the random test's time).
func sameAdv(a, b model.Advertisement) bool {
	la, lb := a.Attrs.LocalPreference, b.Attrs.LocalPreference
	return a.Peer == b.Peer && a.Prefix == b.Prefix && a.Rule == b.Rule && a.Network == b.Network && a.Source == b.Source &&
		a.Drain == b.Drain && a.State == b.State && a.Reason == b.Reason && a.Problem == b.Problem &&
		slices.Equal(a.Attrs.Communities, b.Attrs.Communities) && slices.Equal(a.Attrs.LargeCommunities, b.Attrs.LargeCommunities) &&
		(la == nil) == (lb == nil) && (la == nil || *la == *lb) && a.Attrs.MED == b.Attrs.MED &&
		a.Attrs.ASPathPrepend == b.Attrs.ASPathPrepend && sameLinkBandwidth(a.Attrs.LinkBandwidth, b.Attrs.LinkBandwidth) &&
		slices.Equal(a.Members, b.Members)
}

// TestAdvertStateUnsortedSnapshot: a snapshot out of model.Snapshot's
// order (advSnapshot's VIPs are: networks and addresses mixed) is still
// right: every Update is then a full pass. Each VIP address in turn gets
// a new source, then loses its endpoints.
func TestAdvertStateUnsortedSnapshot(t *testing.T) {
	cfg := randConfig(false)
	for _, v := range advSnapshot().ServiceVIPs {
		snap := advSnapshot()
		st := NewAdvertState(cfg, snap, testNow)
		if st.unsorted == "" {
			t.Fatal("advSnapshot's VIPs are not sorted, and the state did not notice")
		}
		prev := checkAdvertState(t, cfg, snap, st, nil, nil, testNow, "start")
		for i := range snap.ServiceVIPs {
			if snap.ServiceVIPs[i].VIP == v.VIP {
				snap.ServiceVIPs[i].Source += " (changed)"
			}
		}
		touched := st.Update(snap, model.SnapshotDelta{ServiceVIPs: []netip.Addr{v.VIP}}, testNow)
		prev = checkAdvertState(t, cfg, snap, st, prev, touched, testNow, v.VIP.String()+" with a new source")
		for i := range snap.ServiceVIPs {
			if snap.ServiceVIPs[i].VIP == v.VIP {
				snap.ServiceVIPs[i].Backends = nil
			}
		}
		touched = st.Update(snap, model.SnapshotDelta{ServiceVIPs: []netip.Addr{v.VIP}}, testNow)
		checkAdvertState(t, cfg, snap, st, prev, touched, testNow, v.VIP.String()+" without endpoints")
	}
}

// advAtScale is BenchmarkAdvertisementsAtScale's fixture: 10,000 Service
// VIPs with 10 backends each and 1,000 egress IPs, selected by a
// loadBalancerIP rule with localEndpointsOnly and an egressIP rule, for
// two peers.
func advAtScale() (*config.Config, model.Snapshot) {
	snap := snapshot()
	snap.Routers = []model.GatewayRouter{{Network: "default", Name: "GR_node1", ExternalNetworks: []netip.Prefix{pfx("172.18.0.2/16")}}}
	for i := range 250 {
		snap.NodeAddresses = append(snap.NodeAddresses, netip.AddrFrom4([4]byte{172, 18, byte(i >> 8), byte(i)}))
	}
	for i := range 10000 {
		v := model.ServiceVIP{Service: fmt.Sprintf("ns%d/svc%d", i%100, i), Network: "default",
			VIP: netip.AddrFrom4([4]byte{192, 168, byte(i >> 8), byte(i)}), Source: "lb"}
		for j := range 10 {
			v.Backends = append(v.Backends, netip.AddrFrom4([4]byte{10, 128, byte(j), byte(i)}))
		}
		snap.ServiceVIPs = append(snap.ServiceVIPs, v)
	}
	for i := range 1000 {
		snap.EgressIPs = append(snap.EgressIPs, model.EgressIP{IP: netip.AddrFrom4([4]byte{172, 19, byte(i >> 8), byte(i)}),
			Network: "default", Namespaces: []string{fmt.Sprintf("ns%d", i%100)}, Source: "nat"})
	}
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1"), peer("tor-b", "192.0.2.3")}},
		Advertise: []config.AdvertiseRule{
			{Name: "vips", Kind: config.KindLoadBalancerIP, Namespaces: globs("ns*"), LocalEndpointsOnly: true},
			{Name: "eips", Kind: config.KindEgressIP},
		},
		Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}}}
	return cfg, snap
}

// BenchmarkAdvertStateUpdate: one Service VIP among 10,000 changes (its
// local endpoints go, then come back: withdrawn, then announced again),
// on BenchmarkAdvertisementsAtScale's fixture. capped: tor-a with
// maxAdvertised 1,000, so ~10,000 of its prefixes are held back (a
// change touches the one changed, and one moved across the cap). aggregate: the
// VIP rule has aggregateLength 24 (40 aggregates of 256 members) and NB
// protects every VIP and egress IP, as it does: one aggregate is
// recomputed. full is CappedAdvertisements on the same config, for
// comparison.
func BenchmarkAdvertStateUpdate(b *testing.B) {
	for _, tc := range []struct {
		name      string
		capped    bool
		aggregate bool
		full      bool
	}{
		{name: "plain"}, {name: "plain-full", full: true},
		{name: "capped", capped: true}, {name: "capped-full", capped: true, full: true},
		{name: "aggregate", aggregate: true}, {name: "aggregate-full", aggregate: true, full: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, snap := advAtScale()
			if tc.capped {
				cfg.BGP.Peers[0].MaxAdvertised = 1000
			}
			if tc.aggregate {
				cfg.Advertise[0].AggregateLength = 24
				for _, v := range snap.ServiceVIPs {
					snap.Protected = append(snap.Protected, model.ProtectedPrefix{Prefix: hostPrefix(v.VIP), Why: "Load_Balancer vips"})
				}
				for _, e := range snap.EgressIPs {
					snap.Protected = append(snap.Protected, model.ProtectedPrefix{Prefix: hostPrefix(e.IP), Why: "NAT external_ip"})
				}
				slices.SortFunc(snap.Protected, func(a, b model.ProtectedPrefix) int { return model.ComparePrefix(a.Prefix, b.Prefix) })
			}
			st := NewAdvertState(cfg, snap, testNow)
			const i = 5000
			v := &snap.ServiceVIPs[i]
			local, remote := v.Backends, addrs("10.129.0.1")
			d := model.SnapshotDelta{ServiceVIPs: []netip.Addr{v.VIP}}
			var n int
			for b.Loop() {
				if len(v.Backends) == 1 {
					v.Backends = local
				} else {
					v.Backends = remote
				}
				if tc.full {
					sent, held := CappedAdvertisements(cfg, snap, testNow)
					n = len(sent) + len(held)
				} else {
					n = len(st.Update(snap, d, testNow))
				}
			}
			if tc.full {
				b.ReportMetric(float64(n), "advertisements")
			} else {
				b.ReportMetric(float64(n), "touched")
				b.ReportMetric(float64(len(st.Sent())+len(st.Held())), "advertisements")
			}
		})
	}
}

// BenchmarkAdvertStateContext: Update with Context (a full pass and the
// keys that differ) on the same fixture, one VIP changed.
func BenchmarkAdvertStateContext(b *testing.B) {
	cfg, snap := advAtScale()
	st := NewAdvertState(cfg, snap, testNow)
	v := &snap.ServiceVIPs[5000]
	local, remote := v.Backends, addrs("10.129.0.1")
	var n int
	for b.Loop() {
		if len(v.Backends) == 1 {
			v.Backends = local
		} else {
			v.Backends = remote
		}
		n = len(st.Update(snap, model.SnapshotDelta{Context: true}, testNow))
	}
	b.ReportMetric(float64(n), "touched")
}

// BenchmarkNewAdvertState: the full pass (NewAdvertState, and Update on
// All or Context) on the same fixture.
func BenchmarkNewAdvertState(b *testing.B) {
	cfg, snap := advAtScale()
	var st *AdvertState
	for b.Loop() {
		st = NewAdvertState(cfg, snap, testNow)
	}
	b.ReportMetric(float64(len(st.Sent())), "advertisements")
}

// TestAdvertStateKeepsUnchangedAdvertisements (issue 18, item 5): the
// daemon's tree of desired advertisements holds the state's own (SentRef),
// so an update that leaves an advertisement as it was keeps it in place,
// whether it names its address (a VIP row rewritten as it was) or
// recomputes everything (Context): otherwise the tree keeps the old one
// and the state a new one, two copies of every unchanged advertisement
// until the next whole pass. A changed one is a new advertisement, never
// the old one changed (the tree may hold it).
func TestAdvertStateKeepsUnchangedAdvertisements(t *testing.T) {
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1")}},
		Advertise: []config.AdvertiseRule{{Name: "vips", Kind: config.KindLoadBalancerIP, Communities: []model.Community{65001<<16 | 100}}}}
	snap := snapshot()
	for i := range 3 {
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: fmt.Sprintf("ns/s%d", i), Network: "default",
			VIP: netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), Backends: addrs("10.128.0.10"), Source: "lb"})
	}
	st := NewAdvertState(cfg, snap, testNow)
	keys := []model.Key{{Peer: "tor-a", Prefix: pfx("198.18.0.0/32")}, {Peer: "tor-a", Prefix: pfx("198.18.0.1/32")}}
	was := []*model.Advertisement{st.SentRef(keys[0]), st.SentRef(keys[1])}
	if was[0] == nil || was[1] == nil {
		t.Fatalf("not sent: %v", was)
	}
	if &was[0].Attrs.Communities[0] != &cfg.Advertise[0].Communities[0] {
		t.Errorf("the advertisement's communities are a copy of the rule's, not the rule's own")
	}
	same := func(what string) {
		t.Helper()
		for i, k := range keys {
			if got := st.SentRef(k); got != was[i] {
				t.Errorf("%s: %v is another advertisement (%p, was %p)", what, k.Prefix, got, was[i])
			}
		}
	}
	if got := st.Update(snap, model.SnapshotDelta{ServiceVIPs: []netip.Addr{keys[0].Prefix.Addr()}}, testNow); len(got) != 0 {
		t.Errorf("an update of an unchanged VIP changed %v", got)
	}
	same("the VIP named, unchanged")
	if got := st.Update(snap, model.SnapshotDelta{Context: true}, testNow); len(got) != 0 {
		t.Errorf("a context update of unchanged VIPs changed %v", got)
	}
	same("everything recomputed, unchanged")
	old := *was[0]
	snap.ServiceVIPs[0].Source = "lb again"
	if got := st.Update(snap, model.SnapshotDelta{ServiceVIPs: []netip.Addr{keys[0].Prefix.Addr()}}, testNow); !slices.Equal(got, keys[:1]) {
		t.Errorf("a changed VIP's update changed %v, want %v", got, keys[:1])
	}
	if !advEqual(*was[0], old) {
		t.Errorf("the advertisement the tree may hold was changed in place: %+v, was %+v", *was[0], old)
	}
	if got := st.SentRef(keys[0]); got == was[0] || got.Source != "lb again" {
		t.Errorf("after the change: %+v (the old one: %v)", got, got == was[0])
	}
}

// TestAdvertStateHeldChangeIsConstant (issue 18, item 2): a capped peer
// holding 10,000 prefixes back, and one VIP added, removed or changed
// among those held or sent: Update names the keys whose advertisement or
// sent/held state changed (the one changed, and one moved across the
// cap), not every held one (the count of what the peer selected belongs
// to the peer, not to each held Reason). HeldBack reads the count.
func TestAdvertStateHeldChangeIsConstant(t *testing.T) {
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1")}},
		Advertise: []config.AdvertiseRule{{Name: "vips", Kind: config.KindLoadBalancerIP}}}
	cfg.BGP.Peers[0].MaxAdvertised = 100
	snap := snapshot()
	vip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}) }
	for i := range 10100 {
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: fmt.Sprintf("ns/s%d", i), Network: "default",
			VIP: vip(i), Backends: addrs("10.128.0.10"), Source: "lb"})
	}
	st := NewAdvertState(cfg, snap, testNow)
	if n := st.HeldBack().Count("tor-a"); n != 10000 {
		t.Fatalf("HeldBack().Count = %d, want 10000", n)
	}
	one := func(what string, i int, change func()) {
		t.Helper()
		change()
		slices.SortFunc(snap.ServiceVIPs, func(a, b model.ServiceVIP) int { return a.VIP.Compare(b.VIP) })
		got := st.Update(snap, model.SnapshotDelta{ServiceVIPs: []netip.Addr{vip(i)}}, testNow)
		if len(got) > 3 {
			t.Errorf("%s: Update named %d keys, want at most 3 (the changed one, one moved across the cap)", what, len(got))
		}
		checkAdvertState(t, cfg, snap, st, nil, nil, testNow, what)
		sent, held := CappedAdvertisements(cfg, snap, testNow)
		h := st.HeldBack()
		if h.Count("tor-a") != len(held) || h.Selected("tor-a") != len(sent)+len(held) {
			t.Errorf("%s: HeldBack counts %d held of %d selected, want %d of %d", what, h.Count("tor-a"), h.Selected("tor-a"), len(held), len(sent)+len(held))
		}
	}
	at := func(i int) int {
		j, _ := slices.BinarySearchFunc(snap.ServiceVIPs, vip(i), func(v model.ServiceVIP, a netip.Addr) int { return v.VIP.Compare(a) })
		return j
	}
	one("a held VIP removed", 5000, func() { snap.ServiceVIPs = slices.Delete(snap.ServiceVIPs, at(5000), at(5000)+1) })
	one("a held VIP added", 5000, func() {
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: "ns/s5000", Network: "default", VIP: vip(5000), Backends: addrs("10.128.0.10"), Source: "lb"})
	})
	one("a held VIP changed", 6000, func() { snap.ServiceVIPs[at(6000)].Source = "lb again" })
	one("a sent VIP removed", 10, func() { snap.ServiceVIPs = slices.Delete(snap.ServiceVIPs, at(10), at(10)+1) })
	one("a sent VIP added", 10, func() {
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: "ns/s10", Network: "default", VIP: vip(10), Backends: addrs("10.128.0.10"), Source: "lb"})
	})
}

// TestHeldBackIsASnapshot: a HeldBack stays as it was taken while the
// state's updates go on, and another goroutine may read it meanwhile (run
// with -race).
func TestHeldBackIsASnapshot(t *testing.T) {
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1")}},
		Advertise: []config.AdvertiseRule{{Name: "vips", Kind: config.KindLoadBalancerIP}}}
	cfg.BGP.Peers[0].MaxAdvertised = 10
	snap := snapshot()
	vip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}) }
	for i := range 2000 {
		snap.ServiceVIPs = append(snap.ServiceVIPs, model.ServiceVIP{Service: fmt.Sprintf("ns/s%d", i), Network: "default",
			VIP: vip(i), Backends: addrs("10.128.0.10"), Source: "lb"})
	}
	st := NewAdvertState(cfg, snap, testNow)
	h := st.HeldBack()
	want := st.Held()
	done := make(chan []model.Advertisement)
	go func() {
		var got []model.Advertisement
		for range 20 {
			got = h.List("")
		}
		done <- got
	}()
	for i := range 500 {
		// VIPs go, held and sent alike (one in 4 of them sent).
		snap.ServiceVIPs[i*4].Backends = nil
		st.Update(snap, model.SnapshotDelta{ServiceVIPs: []netip.Addr{vip(i * 4)}}, testNow)
	}
	got := <-done
	if !slices.EqualFunc(got, want, sameAdv) || h.Count("tor-a") != len(want) || h.Selected("tor-a") != 2000 {
		t.Errorf("the HeldBack taken before the updates lists %d (counts %d of %d), want the %d held then", len(got), h.Count("tor-a"), h.Selected("tor-a"), len(want))
	}
	if n := st.HeldBack().Count("tor-a"); n != 1500-10 {
		t.Errorf("after the updates %d held back, want %d", n, 1500-10)
	}
	if a, ok := h.Lookup(model.Key{Peer: "tor-a", Prefix: hostPrefix(vip(12))}); !ok || a.State != model.AdvHeldBack {
		t.Errorf("Lookup of a VIP held then: %+v, %v", a, ok)
	}
}
