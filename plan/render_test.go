package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestPlanTable renders a plan with every kind of operation.
func TestPlanTable(t *testing.T) {
	in := buildFixture()
	in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue", Table: 100, CreateVRF: true}
	in.Adverts = []model.Advertisement{adv("tor-a", "10.128.0.0/23", "pods", "default", "s", model.PathAttrs{})}
	imp := importFixture()
	imp.Config = in.Config
	imp.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
	in.Import = Import(imp)
	got := Build(in).Table()
	want := `plan for node n1 at 2026-11-30T21:00:00Z (format 1)
OVN: 1 add, 0 replace, 0 delete; kernel: 0 add, 0 replace, 0 delete, 1 VRF create, 0 ip rule add, 0 ip rule delete; advertise: 1 announce, 0 change, 0 withdraw; held: 3
TARGET       OP        WHERE                  PREFIX         VIA                 RULE
ovn          add       GR_n1 port rtoe-GR_n1  10.1.0.0/16    192.0.2.1           up
kernel vrf   add       VRF blue table 100
advertise    announce  peer tor-a             10.128.0.0/23                      pods
held ovn     delete    GR_n1 port rtoe-GR_n1  10.2.0.0/16    192.0.2.1           up
held kernel  replace   table 100 (VRF blue)   10.1.0.0/16    192.0.2.1 dev eth0  up
held kernel  delete    table 100              10.2.0.0/16    192.0.2.1 dev eth0
held: OVN delete 10.2.0.0/16 on GR_n1: adopted at start and not announced again: waiting for End-of-RIB from tor-a, tor-b, tor-6 or bgp.gracefulRestart.deferralTime (120s) (fail static)
held: kernel replace 10.1.0.0/16 in table 100: adopted at start and not announced again: waiting for End-of-RIB from tor-a, tor-b, tor-6 or bgp.gracefulRestart.deferralTime (120s) (fail static)
held: kernel delete 10.2.0.0/16 in table 100: adopted at start and not announced again: waiting for End-of-RIB from tor-a, tor-b, tor-6 or bgp.gracefulRestart.deferralTime (120s) (fail static)
`
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Table (-want +got):\n%s", d)
	}
	if got := (Plan{Node: "n1", Version: 1}).Table(); got != "plan for node n1 at 0001-01-01T00:00:00Z (format 1)\n"+(Counts{}).String()+"\nno changes\n" {
		t.Errorf("empty plan:\n%s", got)
	}
}
