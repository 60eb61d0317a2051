package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// buildFixture is importFixture with tor-a's 10.1.0.0/16 learned and
// accepted, 10.2.0.0/16 (OVN and table 100) and 10.3.0.0/16 (table 100,
// two next hops) installed but no longer learned, and 10.1.0.0/16 in
// table 100 with a second next hop that tor-b no longer sends.
func buildFixture() BuildInput {
	in := importFixture()
	in.Config.BGP.GracefulRestart.DeferralTime = 120 * time.Second
	in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
	in.Snapshot.Routers[0].StaticRoutes = []string{"u2", "u9"}
	in.Snapshot.OwnedRoutes = []model.OVNRoute{
		{UUID: "u2", Router: "GR_n1", Prefix: pfx("10.2.0.0/16"), NextHop: addr("192.0.2.1"), OutputPort: "rtoe-GR_n1", Rule: "up"},
	}
	in.Host.Routes = []model.KernelRoute{
		kroute(100, "10.1.0.0/16", "192.0.2.1", "192.0.2.2"),
		kroute(100, "10.2.0.0/16", "192.0.2.1"),
	}
	return BuildInput{
		Node: "n1", Now: time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC), Config: in.Config,
		Import:   Import(in),
		Snapshot: in.Snapshot, Host: in.Host,
		Adopted: NewAdopted(in.Snapshot.OwnedRoutes, in.Host.Routes),
	}
}

func opLines(p Plan) []string {
	var out []string
	for _, op := range p.OVN {
		out = append(out, "ovn "+string(op.Op)+" "+op.Route.Prefix.String()+" via "+op.Route.NextHop.String())
	}
	for _, op := range p.Kernel {
		switch {
		case op.Route != nil:
			var nhs []string
			for _, nh := range op.Route.NextHops {
				nhs = append(nhs, nh.Addr.String())
			}
			out = append(out, "kernel "+string(op.Op)+" "+op.Route.Prefix.String()+" via "+strings.Join(nhs, ","))
		case op.VRF != nil:
			out = append(out, "vrf "+string(op.Op)+" "+op.VRF.Name)
		}
	}
	for _, h := range p.Held {
		switch {
		case h.OVN != nil:
			out = append(out, "held ovn "+string(h.OVN.Op)+" "+h.OVN.Route.Prefix.String())
		case h.Kernel != nil:
			out = append(out, "held kernel "+string(h.Kernel.Op)+" "+h.Kernel.Route.Prefix.String())
		}
	}
	return out
}

// TestBuildFailStatic: until every peer of a rule is Synced, deletes of
// its adopted routes (and a multipath route losing an adopted next hop)
// are held; adds go ahead. Once Synced, they are in the plan.
func TestBuildFailStatic(t *testing.T) {
	in := buildFixture()
	p := Build(in)
	want := []string{
		"ovn add 10.1.0.0/16 via 192.0.2.1",
		"held ovn delete 10.2.0.0/16",
		"held kernel replace 10.1.0.0/16",
		"held kernel delete 10.2.0.0/16",
	}
	if d := cmp.Diff(want, opLines(p)); d != "" {
		t.Errorf("nothing synced (-want +got):\n%s", d)
	}
	for _, h := range p.Held {
		if h.Reason != "adopted at start and not announced again: waiting for End-of-RIB from tor-a, tor-b, tor-6 or bgp.gracefulRestart.deferralTime (120s) (fail static)" {
			t.Errorf("held reason %q", h.Reason)
		}
	}
	in.Synced = map[string]bool{"tor-a": true, "tor-b": true}
	if got := Build(in).Held; len(got) != 3 || !strings.Contains(got[0].Reason, "from tor-6 or") {
		t.Errorf("tor-6 not synced: held %+v", got)
	}
	in.Synced["tor-6"] = true
	p = Build(in)
	want = []string{
		"ovn add 10.1.0.0/16 via 192.0.2.1",
		"ovn delete 10.2.0.0/16 via 192.0.2.1",
		"kernel replace 10.1.0.0/16 via 192.0.2.1",
		"kernel delete 10.2.0.0/16 via 192.0.2.1",
	}
	if d := cmp.Diff(want, opLines(p)); d != "" {
		t.Errorf("all synced (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]model.OVNGuard{{Router: "GR_n1", RouterUUID: "gr-uuid", StaticRoutes: []string{"u2", "u9"}}}, p.Guards); d != "" {
		t.Errorf("guards (-want +got):\n%s", d)
	}
	c := p.Counts()
	if c.OVNAdd != 1 || c.OVNDelete != 1 || c.KernelReplace != 1 || c.KernelDelete != 1 || c.Held != 0 || p.Empty() {
		t.Errorf("counts %+v, empty %v", c, p.Empty())
	}
	// TestBuildFailStatic (orphans): a route whose rule is no longer
	// configured (renamed), or a kernel route in a table no rule maps to,
	// is held until EVERY configured peer is Synced, and the reason says
	// so; a renamed rule targeting the same table still holds its table's
	// routes by its own peers.
	in.Synced = map[string]bool{"tor-a": true, "tor-b": true, "tor-6": true}
	in.Config.Import[0].Name = "renamed"
	in.Import.OVN = nil
	in.Import.Kernel = nil
	in.Host.Routes = append(in.Host.Routes, kroute(999, "10.9.0.0/16", "192.0.2.1"))
	in.Adopted = NewAdopted(in.Snapshot.OwnedRoutes, in.Host.Routes)
	p = Build(in)
	type heldLine struct{ Op, Rules, Reason string }
	var held []heldLine
	for _, h := range p.Held {
		op := ""
		if h.OVN != nil {
			op = "ovn " + h.OVN.Route.Prefix.String()
		} else {
			op = fmt.Sprintf("kernel %d %s", h.Kernel.Route.Table, h.Kernel.Route.Prefix)
		}
		held = append(held, heldLine{op, strings.Join(h.Rules, ","), h.Reason})
	}
	orphan := "adopted at start and not announced again: waiting for End-of-RIB from tor-c or bgp.gracefulRestart.deferralTime (120s) (fail static): "
	want2 := []heldLine{
		{"ovn 10.2.0.0/16", "up", orphan + "its rule up is no longer configured, so it is held until every configured peer is synced"},
		{"kernel 999 10.9.0.0/16", "", orphan + "no configured import rule targets table 999, so it is held until every configured peer is synced"},
	}
	if d := cmp.Diff(want2, held); d != "" {
		t.Errorf("orphans, tor-c not synced: held (-want +got):\n%s", d)
	}
	if len(p.OVN) != 0 {
		t.Errorf("OVN ops %v, want none: the orphan delete is held", p.OVN)
	}
	// The renamed rule's own peers are synced: its table's deletes go.
	if n := p.Counts().KernelDelete; n != 2 {
		t.Errorf("kernel deletes %d, want 2 (table 100's routes of the renamed rule)", n)
	}
	in.Synced["tor-c"] = true
	p = Build(in)
	if len(p.Held) != 0 || p.Counts().OVNDelete != 1 || p.Counts().KernelDelete != 3 {
		t.Errorf("every peer synced: held %+v, counts %+v", p.Held, p.Counts())
	}
}

// TestBuildSteadyState: when the world is as desired, the plan is empty.
func TestBuildSteadyState(t *testing.T) {
	in := buildFixture()
	in.Snapshot.OwnedRoutes = in.Import.OVN
	in.Host.Routes = in.Import.Kernel
	in.Adverts = []model.Advertisement{adv("tor-a", "10.128.0.0/23", "pods", "default", "s", model.PathAttrs{})}
	in.Advertised = in.Adverts
	if p := Build(in); !p.Empty() || len(p.Held) != 0 || len(p.Guards) != 0 {
		t.Errorf("steady state: %+v", p)
	}
	in.Advertised = nil
	if p := Build(in); p.Empty() || len(p.Advertise.Announce) != 1 {
		t.Errorf("advertise diff missing: %+v", p.Advertise)
	}
}

// TestBuildVRF: a VRF asked for and missing is created before its routes.
func TestBuildVRF(t *testing.T) {
	in := importFixture()
	in.Config.Import[0].Targets.Kernel = config.KernelTarget{VRF: "blue", Table: 1000, CreateVRF: true}
	in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
	p := Build(BuildInput{Node: "n1", Config: in.Config, Import: Import(in), Snapshot: in.Snapshot, Host: in.Host})
	want := []string{"ovn add 10.1.0.0/16 via 192.0.2.1", "vrf add blue", "kernel add 10.1.0.0/16 via 192.0.2.1"}
	if d := cmp.Diff(want, opLines(p)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if p.Kernel[1].Route.VRF != "blue" || p.Kernel[1].Route.Table != 1000 {
		t.Errorf("route %+v, want VRF blue table 1000", p.Kernel[1].Route)
	}
}

// TestSplit: operations go to the part of their rule's mode; the guards
// follow the OVN operations; advertisements are auto.
func TestSplit(t *testing.T) {
	in := importFixture()
	in.Config.Import[0].Mode = "manual"
	in.Config.Import = append(in.Config.Import, config.ImportRule{Name: "kern", Peers: []string{"tor-a"}, Network: "default",
		Accept: []config.PrefixMatch{{Prefix: pfx("10.0.0.0/8"), MaxLength: 32}}, MaxRoutes: 10, Mode: "auto",
		Targets: config.ImportTargets{Kernel: config.KernelTarget{VRF: "blue", Table: 1000, CreateVRF: true}}})
	in.Learned = []model.LearnedPath{path("tor-a", "10.1.0.0/16", "192.0.2.1")}
	b := BuildInput{Node: "n1", Config: in.Config, Import: Import(in), Snapshot: in.Snapshot, Host: in.Host,
		Adverts: []model.Advertisement{adv("tor-a", "10.128.0.0/23", "pods", "default", "s", model.PathAttrs{})},
		Synced:  map[string]bool{"tor-a": true, "tor-b": true, "tor-6": true}}
	b.Host.Routes = []model.KernelRoute{kroute(1000, "10.9.0.0/16", "192.0.2.1")}
	b.Host.Routes[0].VRF = "blue"
	p := Build(b)
	auto, manual := p.Split(in.Config)
	if d := cmp.Diff([]string{"vrf add blue", "kernel add 10.1.0.0/16 via 192.0.2.1", "kernel delete 10.9.0.0/16 via 192.0.2.1"}, opLines(auto)); d != "" {
		t.Errorf("auto (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ovn add 10.1.0.0/16 via 192.0.2.1", "kernel add 10.1.0.0/16 via 192.0.2.1"}, opLines(manual)); d != "" {
		t.Errorf("manual (-want +got):\n%s", d)
	}
	if len(auto.Advertise.Announce) != 1 || !manual.Advertise.Empty() {
		t.Errorf("advertisements: auto %+v, manual %+v", auto.Advertise, manual.Advertise)
	}
	if len(manual.Guards) != 1 || len(auto.Guards) != 0 {
		t.Errorf("guards: auto %v, manual %v", auto.Guards, manual.Guards)
	}
	// A route of a rule no longer configured: the rules' shared mode, or
	// manual when they differ.
	orphan := Plan{OVN: []model.OVNOp{{Op: model.OpDelete, Route: model.OVNRoute{Router: "GR_n1", Prefix: pfx("10.5.0.0/16"), Rule: "gone"}}}}
	if _, m := orphan.Split(in.Config); len(m.OVN) != 1 {
		t.Errorf("orphan with mixed modes: manual %v", m.OVN)
	}
	in.Config.Import[0].Mode = "auto"
	if a, _ := orphan.Split(in.Config); len(a.OVN) != 1 {
		t.Errorf("orphan with all rules auto: auto %v", a.OVN)
	}
}

// TestPlanJSON: a plan survives a JSON round trip unchanged, and its
// version and counts read as documented.
func TestPlanJSON(t *testing.T) {
	in := buildFixture()
	in.Adverts = []model.Advertisement{adv("tor-a", "10.128.0.0/23", "pods", "default", "s",
		model.PathAttrs{Communities: []model.Community{65001<<16 | 100}, MED: 5})}
	p := Build(in)
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("unmarshal: %v\n%s", err, data)
	}
	if d := cmp.Diff(p, back, cmpAddrs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	for _, w := range []string{`"version":1`, `"node":"n1"`, `"createdAt":"2026-11-30T21:00:00Z"`, `"prefix":"10.1.0.0/16"`, `"reason":"adopted at start and not announced again: waiting for End-of-RIB`} {
		if !strings.Contains(string(data), w) {
			t.Errorf("JSON lacks %s:\n%s", w, data)
		}
	}
}
