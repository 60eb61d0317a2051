package plan

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestExplain asks about an accepted prefix (through a covering path), an
// installed one whose delete is held, and a protected one that is
// advertised.
func TestExplain(t *testing.T) {
	in := importFixture()
	in.Learned = []model.LearnedPath{
		path("tor-a", "10.1.0.0/16", "192.0.2.1"),
		path("tor-b", "10.128.0.0/24", "192.0.2.2"),
		path("tor-a", "10.1.2.0/25", "192.0.2.1"), // too long: not covering 10.1.2.0/24
	}
	in.Snapshot.OwnedRoutes = []model.OVNRoute{
		{UUID: "u2", Router: "GR_n1", Prefix: pfx("10.2.0.0/16"), NextHop: addr("192.0.2.1"), OutputPort: "rtoe-GR_n1", Rule: "up"},
	}
	res := Import(in)
	adverts := []model.Advertisement{adv("tor-a", "10.128.0.0/23", "pods", "default", "Logical_Switch n1 other_config:subnet", model.PathAttrs{})}
	p := Build(BuildInput{Node: "n1", Config: in.Config, Import: res, Adverts: adverts, Snapshot: in.Snapshot, Host: in.Host,
		Adopted: NewAdopted(in.Snapshot.OwnedRoutes, in.Host.Routes)})

	tests := []struct {
		prefix string
		want   []string
	}{
		{"10.1.2.0/24", []string{
			"import: peer tor-a sent 10.1.0.0/16 via 192.0.2.1: accepted: accepted by rule up (10.0.0.0/8 length 8..24)",
			"installed: nowhere (no owned OVN row nor kernel route for 10.1.2.0/24 or a prefix covering it)",
			"pending: OVN add 10.1.0.0/16 on GR_n1 via 192.0.2.1 (rule up)",
			"pending: kernel add 10.1.0.0/16 in table 100 via 192.0.2.1 dev eth0",
			"advertise: no rule advertises 10.1.2.0/24 or a prefix covering it",
		}},
		{"10.2.0.0/16", []string{
			"import: no peer sent 10.2.0.0/16 or a prefix covering it",
			"installed in OVN: 10.2.0.0/16 on GR_n1 via 192.0.2.1, output port rtoe-GR_n1 (rule up, row u2)",
			"held: OVN delete 10.2.0.0/16 on GR_n1 via 192.0.2.1: adopted at start and not announced again: waiting for End-of-RIB from tor-a, tor-b, tor-6 or bgp.gracefulRestart.deferralTime (0s) (fail static)",
			"advertise: no rule advertises 10.2.0.0/16 or a prefix covering it",
		}},
		{"10.128.0.7/24", []string{
			"import: peer tor-b sent 10.128.0.0/24 via 192.0.2.2: rejected: 10.128.0.0/24 is inside protected 10.128.0.0/14: cluster subnet (ovn_cluster_router static routes) (rule up)",
			"protected: 10.128.0.0/14 (cluster subnet (ovn_cluster_router static routes))",
			"protected: 10.128.0.0/23 (pod subnet of default on node n1 (Logical_Switch n1 other_config:subnet))",
			"installed: nowhere (no owned OVN row nor kernel route for 10.128.0.0/24 or a prefix covering it)",
			"advertise: 10.128.0.0/23 to peer tor-a by rule pods (network default, Logical_Switch n1 other_config:subnet)",
			"pending: announce 10.128.0.0/23 to peer tor-a",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			e := Explain(in.Config, pfx(tt.prefix), res, adverts, p, in.Snapshot, in.Host, testNow)
			if d := cmp.Diff(tt.want, e.Summary); d != "" {
				t.Errorf("summary (-want +got):\n%s", d)
			}
			data, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var back Explanation
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(e, back, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("JSON round trip (-want +got):\n%s", d)
			}
		})
	}
	// A problem of the deciding rule is shown.
	in.Snapshot.Routers[0].ForeignImport = "RouteImport owns 10.9.0.0/16"
	res = Import(in)
	e := Explain(in.Config, pfx("10.1.0.0/16"), res, nil, Build(BuildInput{Config: in.Config, Import: res, Snapshot: in.Snapshot, Host: in.Host}), in.Snapshot, in.Host, testNow)
	if len(e.Problems) != 1 || e.Problems[0] != "rule up: refusing to import into GR_n1, which OVN-Kubernetes' own route import manages: RouteImport owns 10.9.0.0/16" {
		t.Errorf("problems %q", e.Problems)
	}
}

// TestExplainAdvertiseRules: explain's per-rule advertise verdicts say
// which rule selects a prefix and why the others do not, with the checks
// Advertisements makes.
func TestExplainAdvertiseRules(t *testing.T) {
	cfg := &config.Config{
		BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1"), peer("tor-b", "192.0.2.3", config.IPv4, config.IPv6)}},
		Advertise: []config.AdvertiseRule{
			{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("default")},
			{Name: "front", Kind: config.KindLoadBalancerIP, Services: globs("web/front"), Peers: []string{"tor-a"}},
			{Name: "local", Kind: config.KindLoadBalancerIP, LocalEndpointsOnly: true},
			{Name: "eips", Kind: config.KindEgressIP, Namespaces: globs("web")},
		},
		Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}},
	}
	snap := advSnapshot()
	adverts := Advertisements(cfg, snap, testNow)
	tests := []struct {
		prefix string
		want   map[string]string // rule -> a part of its verdict ("+" prefix: selects)
	}{
		{"10.128.0.0/23", map[string]string{"pods": "+from Logical_Switch node1", "front": "not a VIP of a Service in NB", "eips": "not an egress IP this node holds"}},
		{"172.30.0.10/32", map[string]string{"front": "a ClusterIP (inside cluster.serviceCIDRs 172.30.0.0/16)", "pods": "not a pod subnet of this node"}},
		{"192.0.2.50/32", map[string]string{"front": "+sent to tor-a", "local": "Service web/front: localEndpointsOnly: no endpoint of the service runs on this node"}},
		{"192.0.2.51/32", map[string]string{"front": "+sent to tor-a", "local": "+an earlier rule sends it to tor-a"}},
		{"192.0.2.54/32", map[string]string{"front": "Service db/pg: service db/pg is not in the rule's services", "local": "+sent to tor-a, tor-b"}},
		{"fc00::100/128", map[string]string{"eips": "+sent to tor-b; not to tor-a (their sessions do not carry this address family)"}},
		{"172.18.0.100/32", map[string]string{"eips": "+from nat eip1"}},
		{"172.19.0.100/32", map[string]string{"eips": "egress IP eip2: no namespace of its pods (blue-ns) is in the rule's namespaces"}},
	}
	for _, tt := range tests {
		e := Explain(cfg, pfx(tt.prefix), ImportResult{}, adverts, Plan{}, snap, model.Host{}, testNow)
		if len(e.AdvertiseRules) != len(cfg.Advertise) {
			t.Fatalf("%s: %d verdicts for %d rules", tt.prefix, len(e.AdvertiseRules), len(cfg.Advertise))
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
		if !slices.ContainsFunc(e.Summary, func(s string) bool { return strings.HasPrefix(s, "advertise rule ") }) {
			t.Errorf("%s: summary has no advertise rule lines: %q", tt.prefix, e.Summary)
		}
	}
}
