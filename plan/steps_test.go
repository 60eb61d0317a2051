package plan

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvertSteps: a capped peer that gets new prefixes has its
// withdrawals in a first step that holds it; all else is one step.
func TestAdvertSteps(t *testing.T) {
	a := func(peer, prefix string) model.Advertisement {
		return model.Advertisement{Peer: peer, Prefix: netip.MustParsePrefix(prefix)}
	}
	cfg := &config.Config{BGP: config.BGP{Peers: []config.Peer{
		{Name: "tor", MaxAdvertised: 2}, {Name: "tor2"}, {Name: "tor3", MaxAdvertised: 5}}}}
	show := func(steps []AdvertStep) string {
		var out []string
		for _, st := range steps {
			var s []string
			for _, x := range st.Diff.Withdraw {
				s = append(s, "-"+x.Peer+" "+x.Prefix.String())
			}
			for _, x := range st.Diff.Announce {
				s = append(s, "+"+x.Peer+" "+x.Prefix.String())
			}
			for _, x := range st.Diff.Change {
				s = append(s, "~"+x.Peer+" "+x.Prefix.String())
			}
			if len(st.Holds) > 0 {
				s = append(s, fmt.Sprint("holds ", st.Holds))
			}
			out = append(out, strings.Join(s, ", "))
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range []struct {
		name string
		diff AdvertDiff
		want string
	}{
		{"nothing", AdvertDiff{}, ""},
		{"uncapped peer: one step, announce with its withdrawal",
			AdvertDiff{Withdraw: []model.Advertisement{a("tor2", "10.0.0.1/32")}, Announce: []model.Advertisement{a("tor2", "10.0.0.2/32")}},
			"-tor2 10.0.0.1/32, +tor2 10.0.0.2/32"},
		{"capped peer that gets a prefix: its withdrawals first",
			AdvertDiff{Withdraw: []model.Advertisement{a("tor", "10.0.0.1/32"), a("tor2", "10.0.0.3/32")},
				Announce: []model.Advertisement{a("tor", "10.0.0.2/32"), a("tor2", "10.0.0.4/32")}},
			"-tor 10.0.0.1/32, holds [tor] | -tor2 10.0.0.3/32, +tor 10.0.0.2/32, +tor2 10.0.0.4/32"},
		{"a changed prefix counts as getting one",
			AdvertDiff{Withdraw: []model.Advertisement{a("tor3", "10.0.0.1/32")}, Change: []model.Advertisement{a("tor3", "10.0.0.2/32")}},
			"-tor3 10.0.0.1/32, holds [tor3] | ~tor3 10.0.0.2/32"},
		{"capped peer that only loses prefixes: one step",
			AdvertDiff{Withdraw: []model.Advertisement{a("tor", "10.0.0.1/32")}, Announce: []model.Advertisement{a("tor2", "10.0.0.2/32")}},
			"-tor 10.0.0.1/32, +tor2 10.0.0.2/32"},
		{"two capped peers: both in the first step, the rest after",
			AdvertDiff{Withdraw: []model.Advertisement{a("tor", "10.0.0.1/32"), a("tor3", "10.0.0.1/32")},
				Announce: []model.Advertisement{a("tor", "10.0.0.2/32"), a("tor3", "10.0.0.2/32")}},
			"-tor 10.0.0.1/32, -tor3 10.0.0.1/32, holds [tor tor3] | +tor 10.0.0.2/32, +tor3 10.0.0.2/32"},
		{"only withdrawals of a capped peer that gets some: no empty second step",
			AdvertDiff{Withdraw: []model.Advertisement{a("tor", "10.0.0.1/32")}, Announce: []model.Advertisement{}},
			"-tor 10.0.0.1/32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(AdvertSteps(cfg, tc.diff)); got != tc.want {
				t.Errorf("steps:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	held := Without(AdvertDiff{Announce: []model.Advertisement{a("tor", "10.0.0.2/32"), a("tor2", "10.0.0.4/32")},
		Withdraw: []model.Advertisement{a("tor", "10.0.0.1/32")}}, map[string]bool{"tor": true})
	if got := show([]AdvertStep{{Diff: held}}); got != "-tor 10.0.0.1/32, +tor2 10.0.0.4/32" {
		t.Errorf("Without: %s", got)
	}
}
