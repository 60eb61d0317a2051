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

const gshut = model.Community(0xFFFF0000)

func lp(v uint32) *uint32 { return &v }

// drainCfg: tor-a is eBGP (65001), tor-i iBGP (our ASN 64512) with the
// export cap 3; a pods rule with a community, an iBGP rule with a local
// preference, and an aggregated VIP rule.
func drainCfg() *config.Config {
	torI := peer("tor-i", "192.0.2.5")
	torI.ASN = 64512
	torI.MaxAdvertised = 3
	return &config.Config{BGP: config.BGP{ASN: 64512, Peers: []config.Peer{peer("tor-a", "192.0.2.1"), torI}},
		Advertise: []config.AdvertiseRule{
			{Name: "pods", Kind: config.KindPodNetwork, Networks: globs("default", "blue"), Communities: []model.Community{65001<<16 | 100}},
			{Name: "pods-i", Kind: config.KindPodNetwork, Networks: globs("*"), Peers: []string{"tor-i"}, LocalPreference: 200},
			{Name: "vips", Kind: config.KindLoadBalancerIP, AggregateLength: 24, Communities: []model.Community{gshut}},
		},
		Cluster: config.Cluster{ServiceCIDRs: []netip.Prefix{pfx("172.30.0.0/16")}}}
}

// TestDrain: drained peers get GRACEFUL_SHUTDOWN on every advertisement
// (subnets, aggregates), plus LOCAL_PREF 0 on iBGP, until withdrawAt; from
// withdrawAt on they get nothing, each advertisement held as drained with
// why; other peers are untouched; the export cap still decides what a
// tagged peer gets, and what it holds back stays held back as it is.
func TestDrain(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	wait := 30 * time.Second
	all := model.Drain{}.Add("", t0, wait)
	onlyA := model.Drain{}.Add("tor-a", t0, wait)
	cfg := drainCfg()
	sent0, held0 := CappedAdvertisements(cfg, advSnapshot(), testNow)
	if len(held0) == 0 {
		t.Fatal("the fixture holds nothing back from tor-i: the cap interaction is not tested")
	}

	type row struct {
		Peer, Prefix string
		Attrs        model.PathAttrs
		State        model.AdvState
	}
	rows := func(advs []model.Advertisement) []row {
		var out []row
		for _, a := range advs {
			out = append(out, row{a.Peer, a.Prefix.String(), a.Attrs, a.State})
		}
		return out
	}
	eb := model.PathAttrs{Communities: []model.Community{65001<<16 | 100}}
	ebDrained := model.PathAttrs{Communities: []model.Community{65001<<16 | 100, gshut}}
	vipAttrs := model.PathAttrs{Communities: []model.Community{gshut}}
	ib := model.PathAttrs{LocalPreference: lp(200)}
	ibDrained := model.PathAttrs{Communities: []model.Community{gshut}, LocalPreference: lp(0)}
	// tor-i gets the default and blue subnets from the first rule, pods.
	ibPodsDrained := model.PathAttrs{Communities: []model.Community{65001<<16 | 100, gshut}, LocalPreference: lp(0)}

	tests := []struct {
		name       string
		drain      model.Drain
		now        time.Time
		sent, held []row
	}{
		{name: "not drained", now: t0, sent: rows(sent0), held: rows(held0)},
		{name: "every peer, tagged", drain: all, now: t0.Add(wait - time.Nanosecond),
			sent: []row{
				{"tor-a", "10.128.0.0/23", ebDrained, ""},
				{"tor-a", "10.200.0.0/24", ebDrained, ""},
				{"tor-a", "192.0.2.0/24", vipAttrs, ""},
				{"tor-i", "10.128.0.0/23", ibPodsDrained, ""},
				{"tor-i", "10.200.0.0/24", ibPodsDrained, ""},
				{"tor-i", "10.250.0.0/16", ibDrained, ""},
			},
			held: rows(held0)},
		{name: "every peer, withdrawn at withdrawAt", drain: all, now: t0.Add(wait),
			held: []row{
				{"tor-a", "10.128.0.0/23", eb, model.AdvDrained},
				{"tor-a", "10.200.0.0/24", eb, model.AdvDrained},
				{"tor-a", "192.0.2.0/24", vipAttrs, model.AdvDrained},
				{"tor-i", "10.128.0.0/23", eb, model.AdvDrained},
				{"tor-i", "10.200.0.0/24", eb, model.AdvDrained},
				{"tor-i", "10.250.0.0/16", ib, model.AdvDrained},
				{"tor-i", "192.0.2.0/24", vipAttrs, model.AdvHeldBack},
			}},
		{name: "one peer, tagged", drain: onlyA, now: t0,
			sent: []row{
				{"tor-a", "10.128.0.0/23", ebDrained, ""},
				{"tor-a", "10.200.0.0/24", ebDrained, ""},
				{"tor-a", "192.0.2.0/24", vipAttrs, ""},
				{"tor-i", "10.128.0.0/23", eb, ""},
				{"tor-i", "10.200.0.0/24", eb, ""},
				{"tor-i", "10.250.0.0/16", ib, ""},
			},
			held: rows(held0)},
		{name: "one peer, withdrawn", drain: onlyA, now: t0.Add(time.Hour),
			sent: []row{
				{"tor-i", "10.128.0.0/23", eb, ""},
				{"tor-i", "10.200.0.0/24", eb, ""},
				{"tor-i", "10.250.0.0/16", ib, ""},
			},
			held: []row{
				{"tor-a", "10.128.0.0/23", eb, model.AdvDrained},
				{"tor-a", "10.200.0.0/24", eb, model.AdvDrained},
				{"tor-a", "192.0.2.0/24", vipAttrs, model.AdvDrained},
				{"tor-i", "192.0.2.0/24", vipAttrs, model.AdvHeldBack},
			}},
		{name: "wait 0 withdraws at once", drain: model.Drain{}.Add("tor-i", t0, 0), now: t0,
			sent: rows(slices.DeleteFunc(slices.Clone(sent0), func(a model.Advertisement) bool { return a.Peer == "tor-i" })),
			held: []row{
				{"tor-i", "10.128.0.0/23", eb, model.AdvDrained},
				{"tor-i", "10.200.0.0/24", eb, model.AdvDrained},
				{"tor-i", "10.250.0.0/16", ib, model.AdvDrained},
				{"tor-i", "192.0.2.0/24", vipAttrs, model.AdvHeldBack},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sent, held := NewDrain(cfg, tc.drain, tc.now).Apply(CappedAdvertisements(cfg, advSnapshot(), testNow))
			// Communities compare as sets, as on the wire.
			opts := []cmp.Option{cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b model.Community) bool { return a < b })}
			if d := cmp.Diff(tc.sent, rows(sent), opts...); d != "" {
				t.Errorf("sent (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.held, rows(held), opts...); d != "" {
				t.Errorf("held (-want +got):\n%s", d)
			}
			for _, a := range sent {
				_, drained := tc.drain.For(a.Peer)
				if drained != (a.Drain != "") || drained && !strings.Contains(a.Drain, "graceful-shutdown") {
					t.Errorf("%s to %s: drain note %q (peer drained: %v)", a.Prefix, a.Peer, a.Drain, drained)
				}
			}
			for _, a := range held {
				if a.State == model.AdvDrained && (!strings.HasPrefix(a.Reason, "withdrawn: node drained at 2026-12-01T06:00:00Z") ||
					!strings.Contains(a.Reason, "`ovnbgp undrain` restores it")) {
					t.Errorf("%s to %s: reason %q", a.Prefix, a.Peer, a.Reason)
				}
			}
			// The aggregate keeps its members whatever the drain does.
			for _, a := range slices.Concat(sent, held) {
				if a.Prefix == pfx("192.0.2.0/24") && len(a.Members) == 0 {
					t.Errorf("aggregate to %s lost its members", a.Peer)
				}
			}
		})
	}
	// The input is not changed (plan is pure: the daemon keeps its slices).
	if d := cmp.Diff(rows(sent0), rows(func() []model.Advertisement { s, _ := CappedAdvertisements(cfg, advSnapshot(), testNow); return s }())); d != "" {
		t.Errorf("CappedAdvertisements changed: %s", d)
	}
	s, h := CappedAdvertisements(cfg, advSnapshot(), testNow)
	NewDrain(cfg, all, t0).Apply(s, h)
	if d := cmp.Diff(rows(sent0), rows(s), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("Apply changed its input (-before +after):\n%s", d)
	}
}

// TestDrainExplain: explain says per peer that drain tags the prefix, and,
// once withdrawn, that it is not sent and why.
func TestDrainExplain(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	cfg := drainCfg()
	st := model.Drain{}.Add("tor-a", t0, time.Minute)
	explain := func(now time.Time) Explanation {
		sent, held := NewDrain(cfg, st, now).Apply(CappedAdvertisements(cfg, advSnapshot(), testNow))
		return Explain(cfg, pfx("10.128.0.0/23"), ImportResult{}, slices.Concat(sent, held), Plan{}, advSnapshot(), model.Host{}, testNow)
	}
	e := explain(t0)
	if v := e.AdvertiseRules[0]; !v.Selects || !strings.Contains(v.Why, "sent to tor-a (drained: tagged graceful-shutdown until 2026-12-01T06:01:00Z: node drained at 2026-12-01T06:00:00Z), tor-i") {
		t.Errorf("tagged, rule pods: %+v", v)
	}
	if !slices.ContainsFunc(e.Summary, func(s string) bool {
		return strings.HasPrefix(s, "advertise: 10.128.0.0/23 to peer tor-a by rule pods") && strings.Contains(s, "graceful-shutdown") &&
			strings.Contains(s, "; attributes: communities=65001:100,graceful-shutdown")
	}) {
		t.Errorf("tagged: summary %q does not say tor-a gets graceful-shutdown", e.Summary)
	}
	e = explain(t0.Add(time.Minute))
	if v := e.AdvertiseRules[0]; !v.Selects || !strings.Contains(v.Why, "withdrawn from tor-a: node drained") {
		t.Errorf("withdrawn, rule pods: %+v", v)
	}
	if !slices.ContainsFunc(e.Summary, func(s string) bool {
		return strings.HasPrefix(s, "advertise: 10.128.0.0/23 not to peer tor-a, rule pods: withdrawn: node drained")
	}) {
		t.Errorf("withdrawn: summary %q", e.Summary)
	}
}

// TestDrainState: the drain state's rules: the order for every peer and a
// peer's own merge (the earlier withdraw wins), draining again never
// delays the withdraw, undrain of one peer under the order for every peer
// is refused, NextWithdraw is the next deadline.
func TestDrainState(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	d := model.Drain{}.Add("tor-a", t0, 10*time.Minute)
	d = d.Add("tor-a", t0.Add(time.Minute), time.Hour) // later: ignored
	if p, _ := d.For("tor-a"); !p.Since.Equal(t0) || !p.WithdrawAt.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("drain again with a longer wait: %+v, want since and withdrawAt unchanged", p)
	}
	d = d.Add("tor-a", t0.Add(time.Minute), 0) // sooner: taken
	if p, _ := d.For("tor-a"); !p.WithdrawAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("drain again with --wait 0: %+v, want withdrawAt now", p)
	}
	d = d.Add("", t0.Add(2*time.Minute), 30*time.Second)
	if p, _ := d.For("tor-b"); !p.Since.Equal(t0.Add(2*time.Minute)) || !p.WithdrawAt.Equal(t0.Add(150*time.Second)) {
		t.Errorf("tor-b under the order for all: %+v", p)
	}
	if p, _ := d.For("tor-a"); !p.Since.Equal(t0) || !p.WithdrawAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("tor-a under both orders: %+v, want the earlier since and withdrawAt", p)
	}
	if next, ok := d.NextWithdraw(t0.Add(90 * time.Second)); !ok || !next.Equal(t0.Add(150*time.Second)) {
		t.Errorf("NextWithdraw = %v %v", next, ok)
	}
	if _, err := d.Remove("tor-a"); err == nil || !strings.Contains(err.Error(), "undrain` without --peer") {
		t.Errorf("undrain tor-a under the order for all: %v", err)
	}
	if got, _ := d.Remove(""); !got.Empty() {
		t.Errorf("undrain all: %+v", got)
	}
	one := model.Drain{}.Add("tor-a", t0, 0).Add("tor-b", t0, 0)
	if got, err := one.Remove("tor-a"); err != nil || len(got.Peers) != 1 || got.Peers[0].Peer != "tor-b" {
		t.Errorf("undrain tor-a: %+v %v", got, err)
	}
	if got := (model.Drain{}).Phase("x", t0); got != model.DrainNone {
		t.Errorf("phase of an undrained peer: %q", got)
	}
}
