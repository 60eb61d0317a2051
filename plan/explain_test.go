package plan

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

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
	p := Build(BuildInput{Node: "n1", Config: in.Config, Import: res, Adverts: adverts, Snapshot: in.Snapshot, Host: in.Host})

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
			"held: OVN delete 10.2.0.0/16 on GR_n1 via 192.0.2.1: waiting for End-of-RIB from tor-a, tor-b, tor-6 or bgp.gracefulRestart.deferralTime (0s) since start (fail static)",
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
			e := Explain(pfx(tt.prefix), res, adverts, p, in.Snapshot, in.Host)
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
	e := Explain(pfx("10.1.0.0/16"), res, nil, Build(BuildInput{Config: in.Config, Import: res, Snapshot: in.Snapshot, Host: in.Host}), in.Snapshot, in.Host)
	if len(e.Problems) != 1 || e.Problems[0] != "rule up: refusing to import into GR_n1, which OVN-Kubernetes' own route import manages: RouteImport owns 10.9.0.0/16" {
		t.Errorf("problems %q", e.Problems)
	}
}
