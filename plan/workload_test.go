package plan

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// testNow is the time of the tests' advertisements that do not depend on
// it (no workload address is handed over), and of those that do.
var testNow = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// ago is testNow less d.
func ago(d time.Duration) time.Time { return testNow.Add(-d) }

// workloadConfig: rr is an iBGP peer (IPv4), tor an eBGP one (both
// families). Rule db selects the VMs prod/db-* (and the virt-launcher
// pods of prod/cache-*) on two networks, with a handover that sets MED;
// rule web the namespace web on every network, for rr only, with its own
// LOCAL_PREF and a handover that does not set MED.
func workloadConfig() *config.Config {
	rr := peer("rr", "192.0.2.10")
	rr.ASN = 64512
	tor := peer("tor", "192.0.2.1", config.IPv4, config.IPv6)
	return &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{rr, tor}},
		Advertise: []config.AdvertiseRule{
			{Name: "db", Kind: config.KindWorkloadIP, Networks: globs("default", "cluster_udn_red"), Pods: globs("prod/db-*", "prod/virt-launcher-cache-*"),
				Communities: []model.Community{65001<<16 | 7}, MED: 10, ASPathPrepend: 1,
				Handover: config.Handover{HoldTime: 5 * time.Second, LocalPreference: 50, ASPathPrepend: 2, MED: 20}},
			{Name: "web", Kind: config.KindWorkloadIP, Networks: globs("*"), Namespaces: globs("web"), Peers: []string{"rr"}, LocalPreference: 200,
				Handover: config.Handover{HoldTime: 10 * time.Second, LocalPreference: 40, ASPathPrepend: 3}},
		}}
}

// workloadSnapshot has a workload address in every handover state, some
// not selected, in model.Snapshot's order.
func workloadSnapshot() model.Snapshot {
	s := snapshot()
	a := netip.MustParseAddr
	vm := func(ip, network, name, port string, h model.Handover, since time.Time) *model.WorkloadIP {
		return &model.WorkloadIP{IP: a(ip), Network: network, Namespace: "prod", Pod: "virt-launcher-" + name + "-x", VM: "prod/" + name,
			Port: port, Handover: h, Since: since, Source: "lsp " + port}
	}
	pod := func(ip, network, ns, name string, h model.Handover, since time.Time) *model.WorkloadIP {
		return &model.WorkloadIP{IP: a(ip), Network: network, Namespace: ns, Pod: name, Port: ns + "_" + name, Handover: h, Since: since, Source: "lsp " + ns + "_" + name}
	}
	s.WorkloadIPs = []*model.WorkloadIP{
		vm("10.128.0.10", "default", "db-1", "p10", model.HandoverNone, time.Time{}),
		vm("10.128.0.11", "default", "db-2", "p11", model.HandoverLeaving, ago(time.Second)),
		vm("10.128.0.12", "default", "db-3", "p12", model.HandoverLeft, ago(2*time.Second)),
		vm("10.128.0.13", "default", "db-4", "p13", model.HandoverLeft, ago(5*time.Second)), // the hold ends now
		vm("10.128.0.14", "default", "db-5", "p14", model.HandoverLeft, time.Time{}),
		vm("10.128.0.15", "default", "db-6", "p15", model.HandoverArriving, ago(time.Second)),
		pod("10.128.0.16", "default", "prod", "other", model.HandoverNone, time.Time{}),
		pod("10.128.0.17", "default", "web", "front-1", model.HandoverNone, time.Time{}),
		pod("10.128.0.18", "default", "web", "api", model.HandoverLeft, ago(7*time.Second)), // db's hold would be over
		vm("10.128.0.19", "default", "cache-1", "p19", model.HandoverNone, time.Time{}),     // by its pod's name
		vm("10.128.0.20", "default", "db-9", "p20", model.HandoverArriving, ago(time.Second)),
		vm("fd00:10:128:1::10", "default", "db-1", "p10", model.HandoverNone, time.Time{}),
		vm("10.200.0.5", "blue", "db-8", "p5", model.HandoverNone, time.Time{}),
		vm("10.128.0.20", "cluster_udn_red", "db-9", "r20", model.HandoverNone, time.Time{}), // the first entry db selects
		vm("10.250.0.5", "cluster_udn_red", "db-7", "r5", model.HandoverLeaving, ago(time.Second)),
	}
	return s
}

// TestAdvertiseWorkloadIPs: what workloadIP rules select (networks,
// namespaces, pods by the pod's or the VM's name, families, the first
// entry of an address a rule selects), and with which attributes in each
// handover state: none, the rule's; leaving, and left within the hold,
// the handover's (LOCAL_PREF to iBGP peers only, the prepends added,
// handover.med when set); left with the hold over or at an unknown time,
// and arriving, nothing.
func TestAdvertiseWorkloadIPs(t *testing.T) {
	cfg := workloadConfig()
	comm := []model.Community{65001<<16 | 7}
	db := model.PathAttrs{Communities: comm, MED: 10, ASPathPrepend: 1}
	dbHandIBGP := model.PathAttrs{Communities: comm, MED: 20, ASPathPrepend: 3, LocalPreference: new(uint32(50))}
	dbHandEBGP := model.PathAttrs{Communities: comm, MED: 20, ASPathPrepend: 3}
	web := model.PathAttrs{LocalPreference: new(uint32(200))}
	webHand := model.PathAttrs{ASPathPrepend: 3, LocalPreference: new(uint32(40))}
	src := map[string]string{
		"10": "vm prod/db-1, lsp p10",
		"11": "vm prod/db-2 (handover leaving), lsp p11",
		"12": "vm prod/db-3 (handover left, held until 2026-12-03T10:00:03Z), lsp p12",
		"17": "pod web/front-1, lsp web_front-1",
		"18": "pod web/api (handover left, held until 2026-12-03T10:00:03Z), lsp web_api",
		"19": "vm prod/cache-1, lsp p19",
		"20": "vm prod/db-9, lsp r20",
		"r5": "vm prod/db-7 (handover leaving), lsp r5",
	}
	want := []model.Advertisement{
		adv("rr", "10.128.0.10/32", "db", "default", src["10"], db),
		adv("rr", "10.128.0.11/32", "db", "default", src["11"], dbHandIBGP),
		adv("rr", "10.128.0.12/32", "db", "default", src["12"], dbHandIBGP),
		adv("rr", "10.128.0.17/32", "web", "default", src["17"], web),
		adv("rr", "10.128.0.18/32", "web", "default", src["18"], webHand),
		adv("rr", "10.128.0.19/32", "db", "default", src["19"], db),
		adv("rr", "10.128.0.20/32", "db", "cluster_udn_red", src["20"], db),
		adv("rr", "10.250.0.5/32", "db", "cluster_udn_red", src["r5"], dbHandIBGP),
		adv("tor", "10.128.0.10/32", "db", "default", src["10"], db),
		adv("tor", "10.128.0.11/32", "db", "default", src["11"], dbHandEBGP),
		adv("tor", "10.128.0.12/32", "db", "default", src["12"], dbHandEBGP),
		adv("tor", "10.128.0.19/32", "db", "default", src["19"], db),
		adv("tor", "10.128.0.20/32", "db", "cluster_udn_red", src["20"], db),
		adv("tor", "10.250.0.5/32", "db", "cluster_udn_red", src["r5"], dbHandEBGP),
		adv("tor", "fd00:10:128:1::10/128", "db", "default", src["10"], db),
	}
	got := Advertisements(cfg, workloadSnapshot(), testNow)
	if d := cmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("Advertisements mismatch (-want +got):\n%s", d)
	}
	st := NewAdvertState(cfg, workloadSnapshot(), testNow)
	if d := cmp.Diff(want, st.Sent(), cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("AdvertState.Sent mismatch (-want +got):\n%s", d)
	}
}

// TestWorkloadHandoverStates: one VM address through a live migration
// away from this node, each state in turn with the rule's and the
// handover's attributes to an iBGP and an eBGP peer, and the hold's edge:
// sent a nanosecond before Since + holdTime, withdrawn at it.
func TestWorkloadHandoverStates(t *testing.T) {
	rr := peer("rr", "192.0.2.10")
	rr.ASN = 64512
	tor := peer("tor", "192.0.2.1")
	hand := config.Handover{HoldTime: 5 * time.Second, LocalPreference: 50, ASPathPrepend: 2}
	cfg := &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{rr, tor}},
		Advertise: []config.AdvertiseRule{{Name: "vms", Kind: config.KindWorkloadIP, Networks: globs("default"), MED: 7, Handover: hand}}}
	left := testNow.Add(-5 * time.Second)
	rule := model.PathAttrs{MED: 7}
	tests := []struct {
		name   string
		state  model.Handover
		since  time.Time
		now    time.Time
		rr, tr *model.PathAttrs // nil: not advertised
	}{
		{"none", model.HandoverNone, time.Time{}, testNow, &rule, &rule},
		{"leaving", model.HandoverLeaving, left, testNow, &model.PathAttrs{MED: 7, ASPathPrepend: 2, LocalPreference: new(uint32(50))}, &model.PathAttrs{MED: 7, ASPathPrepend: 2}},
		{"left, hold running", model.HandoverLeft, left, testNow.Add(-time.Nanosecond), &model.PathAttrs{MED: 7, ASPathPrepend: 2, LocalPreference: new(uint32(50))}, &model.PathAttrs{MED: 7, ASPathPrepend: 2}},
		{"left, hold over", model.HandoverLeft, left, testNow, nil, nil},
		{"left, hold long over", model.HandoverLeft, left, testNow.Add(time.Hour), nil, nil},
		{"left, since unknown", model.HandoverLeft, time.Time{}, testNow, nil, nil},
		{"arriving", model.HandoverArriving, left, testNow, nil, nil},
		{"unknown state", model.Handover("sideways"), left, testNow, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot()
			snap.WorkloadIPs = []*model.WorkloadIP{{IP: netip.MustParseAddr("10.128.0.10"), Network: "default", Namespace: "prod", Pod: "virt-launcher-db-1-x",
				VM: "prod/db-1", Port: "p", Handover: tt.state, Since: tt.since, Source: "lsp p"}}
			got := map[string]model.PathAttrs{}
			for _, a := range Advertisements(cfg, snap, tt.now) {
				got[a.Peer] = a.Attrs
			}
			for peer, want := range map[string]*model.PathAttrs{"rr": tt.rr, "tor": tt.tr} {
				a, ok := got[peer]
				switch {
				case want == nil && ok:
					t.Errorf("%s: advertised with %v, want not advertised", peer, a)
				case want != nil && !ok:
					t.Errorf("%s: not advertised, want %v", peer, *want)
				case want != nil && a.String() != want.String():
					t.Errorf("%s: attributes %q, want %q", peer, a, *want)
				}
			}
		})
	}
}

// TestWorkloadAggregates: aggregateLength makes one prefix of a rule's
// workload addresses, leaving and left ones included, sent with the
// rule's attributes; when the aggregate would cover what the node must not
// draw traffic for, each member goes as itself, a handed over one with the
// handover attributes.
func TestWorkloadAggregates(t *testing.T) {
	cfg := workloadConfig()
	cfg.Advertise[0].AggregateLength = 24
	snap := workloadSnapshot()
	comm := []model.Community{65001<<16 | 7}
	db := model.PathAttrs{Communities: comm, MED: 10, ASPathPrepend: 1}
	var got []model.Advertisement
	for _, a := range Advertisements(cfg, snap, testNow) {
		if a.Peer == "tor" && a.Rule == "db" && a.Prefix.Addr().Is4() {
			got = append(got, a)
		}
	}
	want := []model.Advertisement{
		{Peer: "tor", Prefix: pfx("10.128.0.0/24"), Attrs: db, Rule: "db", Network: "default and other networks",
			Source:  "aggregate of 5 selected by rule db: 10.128.0.10/32, 10.128.0.11/32, 10.128.0.12/32, 10.128.0.19/32, 10.128.0.20/32",
			Members: []netip.Prefix{pfx("10.128.0.10/32"), pfx("10.128.0.11/32"), pfx("10.128.0.12/32"), pfx("10.128.0.19/32"), pfx("10.128.0.20/32")}},
		{Peer: "tor", Prefix: pfx("10.250.0.0/24"), Attrs: db, Rule: "db", Network: "cluster_udn_red",
			Source: "aggregate of 1 selected by rule db: 10.250.0.5/32", Members: []netip.Prefix{pfx("10.250.0.5/32")}},
	}
	if d := cmp.Diff(want, got, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("aggregates mismatch (-want +got):\n%s", d)
	}

	// Another node's egress IP inside 10.250.0.0/24: its member goes
	// alone, handed over.
	snap.Protected = []model.ProtectedPrefix{{Prefix: pfx("10.250.0.77/32"), Why: "NAT external_ip"}}
	var alone *model.Advertisement
	for _, a := range Advertisements(cfg, snap, testNow) {
		if a.Peer == "tor" && a.Prefix == pfx("10.250.0.5/32") {
			alone = &a
		}
	}
	wantAttrs := model.PathAttrs{Communities: comm, MED: 20, ASPathPrepend: 3}
	switch {
	case alone == nil:
		t.Fatal("10.250.0.5/32 is not sent alone with 10.250.0.0/24 covering another node's egress IP")
	case alone.Attrs.String() != wantAttrs.String():
		t.Errorf("10.250.0.5/32 sent alone with %q, want the handover attributes %q", alone.Attrs, wantAttrs)
	case !strings.Contains(alone.Source, "not aggregated: 10.250.0.0/24 would cover 10.250.0.77/32"):
		t.Errorf("10.250.0.5/32: source %q does not say why it is not aggregated", alone.Source)
	}
	st := NewAdvertState(cfg, snap, testNow)
	if d := cmp.Diff(Advertisements(cfg, snap, testNow), st.Sent(), cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("AdvertState.Sent differs from Advertisements (-full +state):\n%s", d)
	}
}

// TestHandoverEnds: the holds of workloadSnapshot end for db at Since+5s
// (10.128.0.12 at 10:00:03, 10.128.0.13 at 10:00:00) and for web at
// Since+10s (10.128.0.18 at 10:00:03); db's hold of 10.128.0.18 is not
// one (db does not select web/api), nor are 10.128.0.14's (no Since).
// A rule of another kind holds nothing, whatever its handover says.
// AdvertState.NextHandoverEnd agrees, and an Update past an end withdraws
// the address without the delta naming it.
func TestHandoverEnds(t *testing.T) {
	cfg := workloadConfig()
	cfg.Advertise = append(cfg.Advertise, config.AdvertiseRule{Name: "vips", Kind: config.KindLoadBalancerIP, Networks: globs("*"),
		Handover: config.Handover{HoldTime: time.Hour}})
	snap := workloadSnapshot()
	a := netip.MustParseAddr
	at := func(s string) time.Time { return testNow.Add(mustDuration(t, s)) }
	tests := []struct {
		after, now string
		ended      []netip.Addr
		next       string // "" none
	}{
		{"-1s", "-1ms", nil, "0s"},
		{"-1s", "0s", []netip.Addr{a("10.128.0.13")}, "3s"},
		{"0s", "2.9s", nil, "3s"},
		{"0s", "3s", []netip.Addr{a("10.128.0.12"), a("10.128.0.18")}, ""},
		{"3s", "1h", nil, ""},
	}
	for _, tt := range tests {
		ended, next := HandoverEnds(cfg, snap, at(tt.after), at(tt.now))
		wantNext := time.Time{}
		if tt.next != "" {
			wantNext = at(tt.next)
		}
		if !slices.Equal(ended, tt.ended) || !next.Equal(wantNext) {
			t.Errorf("HandoverEnds(%s, %s) = %v, %v; want %v, %v", tt.after, tt.now, ended, next, tt.ended, wantNext)
		}
	}

	st := NewAdvertState(cfg, snap, testNow)
	if got := st.NextHandoverEnd(); !got.Equal(at("3s")) {
		t.Errorf("NextHandoverEnd() = %v, want %v", got, at("3s"))
	}
	keys := st.Update(snap, model.SnapshotDelta{}, at("3s"))
	want := []model.Key{
		{Peer: "rr", Prefix: pfx("10.128.0.12/32")}, {Peer: "rr", Prefix: pfx("10.128.0.18/32")},
		{Peer: "tor", Prefix: pfx("10.128.0.12/32")},
	}
	if d := cmp.Diff(want, keys, cmpAddrs); d != "" {
		t.Errorf("Update at the hold end: keys (-want +got):\n%s", d)
	}
	if d := cmp.Diff(Advertisements(cfg, snap, at("3s")), st.Sent(), cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("after the hold end, Sent differs from Advertisements (-full +state):\n%s", d)
	}
	if got := st.NextHandoverEnd(); !got.IsZero() {
		t.Errorf("NextHandoverEnd() = %v after every hold ended, want zero", got)
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestExplainWorkload: explain names the workload of an address, each
// rule's verdict (not selected by networks, namespaces or pods; arriving;
// the hold over) and, handed over, the attributes and the time left.
func TestExplainWorkload(t *testing.T) {
	cfg := workloadConfig()
	snap := workloadSnapshot()
	adverts := Advertisements(cfg, snap, testNow)
	explain := func(p string) Explanation {
		return Explain(cfg, pfx(p), ImportResult{}, adverts, Plan{}, snap, model.Host{}, testNow)
	}
	tests := []struct {
		prefix  string
		summary string            // a line of the summary
		want    map[string]string // rule -> a part of its verdict ("+" prefix: selects)
	}{
		{"10.128.0.10/32", "workload: 10.128.0.10 is vm prod/db-1 (pod prod/virt-launcher-db-1-x, port p10, network default)",
			map[string]string{"db": "+from vm prod/db-1, lsp p10; sent to rr, tor", "web": "vm prod/db-1: namespace prod is not in the rule's namespaces"}},
		{"10.128.0.11/32", "live migration: leaving since 2026-12-03T09:59:59Z",
			map[string]string{"db": "+handover leaving: the live migration target shows on another node: sent with the handover attributes (localpref 50 to iBGP peers, asPathPrepend 3 (1 + handover 2), med 20)"}},
		{"10.128.0.12/32", "live migration: left since 2026-12-03T09:59:58Z",
			map[string]string{"db": "+handover left: the VM left this node at 2026-12-03T09:59:58Z: sent with the handover attributes (localpref 50 to iBGP peers, asPathPrepend 3 (1 + handover 2), med 20) until 2026-12-03T10:00:03Z (3s left, of a hold of 5s), then withdrawn"}},
		{"10.128.0.13/32", "", map[string]string{"db": "vm prod/db-4: left: the VM left this node at 2026-12-03T09:59:55Z; the handover hold of 5s is over"}},
		{"10.128.0.14/32", "", map[string]string{"db": "when it left this node is unknown"}},
		{"10.128.0.15/32", "live migration: arriving", map[string]string{"db": "vm prod/db-6: arriving: the live migration target is not active here yet"}},
		{"10.128.0.16/32", "workload: 10.128.0.16 is pod prod/other (port prod_other, network default)",
			map[string]string{"db": "pod prod/other is not in the rule's pods"}},
		{"10.200.0.5/32", "", map[string]string{"db": "vm prod/db-8: network blue is not in the rule's networks", "web": "namespace prod"}},
		{"10.128.0.20/32", "", map[string]string{"db": "+from vm prod/db-9, lsp r20"}},
		{"10.128.0.99/32", "", map[string]string{"db": "not an address of a pod or VM whose port is this node's"}},
	}
	for _, tt := range tests {
		e := explain(tt.prefix)
		if tt.summary != "" && !slices.ContainsFunc(e.Summary, func(s string) bool { return strings.Contains(s, tt.summary) }) {
			t.Errorf("%s: no summary line has %q: %q", tt.prefix, tt.summary, e.Summary)
		}
		for _, v := range e.AdvertiseRules {
			want, ok := tt.want[v.Rule]
			if !ok {
				continue
			}
			selects := strings.HasPrefix(want, "+")
			if v.Selects != selects || !strings.Contains(v.Why, strings.TrimPrefix(want, "+")) {
				t.Errorf("%s: rule %s: selects %v, %q; want selects %v and %q", tt.prefix, v.Rule, v.Selects, v.Why, selects, strings.TrimPrefix(want, "+"))
			}
		}
	}
}
