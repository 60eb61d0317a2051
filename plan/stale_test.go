package plan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestStaleWindows: the receiving speaker's side of graceful restart, one
// case per row of the table in the plan package's doc and in
// docs/architecture.md ("Fail static and graceful restart").
func TestStaleWindows(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cfg := &config.Config{BGP: config.BGP{
		GracefulRestart: config.GracefulRestart{StalePathTime: 360 * time.Second},
		Peers:           []config.Peer{{Name: "tor", Families: []config.Family{config.IPv4, config.IPv6}}},
	}}
	gr := &model.PeerGR{RestartTime: 120 * time.Second, Families: map[string]bool{"ipv4": true, "ipv6": false}}
	tests := []struct {
		name      string
		ps        model.PeerSync
		keep4     bool
		until4    time.Time
		keep6     bool
		why4Parts []string
	}{
		{name: "no graceful restart negotiated", ps: model.PeerSync{Down: now.Add(-time.Second)},
			why4Parts: []string{"negotiated no graceful restart"}},
		{name: "down by a NOTIFICATION (not graceful)", ps: model.PeerSync{GR: gr, Down: now.Add(-time.Second)},
			why4Parts: []string{"did not end gracefully"}},
		{name: "down by hold timer: kept for the restart time (IPv6 too: listed, F bit matters only on return)",
			ps:    model.PeerSync{GR: gr, Down: now.Add(-10 * time.Second), Graceful: true},
			keep4: true, until4: now.Add(110 * time.Second), keep6: true,
			why4Parts: []string{"until it is back and sends End-of-RIB", "2026-12-02T10:01:50Z"}},
		{name: "down, restart time ran out", ps: model.PeerSync{GR: gr, Down: now.Add(-121 * time.Second), Graceful: true},
			why4Parts: []string{"restart time (2m0s) ran out"}},
		{name: "back with the F bit for IPv4 only: IPv4 kept until End-of-RIB or stalePathTime, IPv6 not",
			ps:    model.PeerSync{Established: true, Since: now.Add(-time.Minute), GR: gr},
			keep4: true, until4: now.Add(5 * time.Minute),
			why4Parts: []string{"it is back", "stalePathTime"}},
		{name: "back, End-of-RIB for IPv4: its stale routes go (those not sent again)",
			ps:        model.PeerSync{Established: true, Since: now.Add(-time.Minute), GR: gr, EndOfRIBFamilies: map[string]bool{"ipv4": true}},
			why4Parts: []string{"sent End-of-RIB for ipv4"}},
		{name: "back, stalePathTime passed", ps: model.PeerSync{Established: true, Since: now.Add(-7 * time.Minute), GR: gr},
			why4Parts: []string{"no End-of-RIB within bgp.gracefulRestart.stalePathTime"}},
		{name: "back without graceful restart", ps: model.PeerSync{Established: true, Since: now},
			why4Parts: []string{"negotiated no graceful restart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := StaleWindows(cfg, map[string]model.PeerSync{"tor": tt.ps}, now)
			w4, w6 := got["tor"][config.IPv4], got["tor"][config.IPv6]
			if w4.Keep != tt.keep4 || !w4.Until.Equal(tt.until4) || w6.Keep != tt.keep6 {
				t.Errorf("ipv4 %+v, ipv6 %+v; want keep %v until %s, ipv6 keep %v", w4, w6, tt.keep4, tt.until4, tt.keep6)
			}
			for _, part := range tt.why4Parts {
				if !strings.Contains(w4.Why, part) {
					t.Errorf("ipv4 why %q lacks %q", w4.Why, part)
				}
			}
			if w4.Away != (tt.keep4 && !tt.ps.Established) {
				t.Errorf("ipv4 away %v, want %v (kept while the session is down)", w4.Away, tt.keep4 && !tt.ps.Established)
			}
			if tt.keep4 && !next.Equal(tt.until4) {
				t.Errorf("next %s, want %s", next, tt.until4)
			}
		})
	}
}

// TestStalePathsFollowTheWindow: a stale path is imported while its
// peer's window keeps it, and refused with the window's reason once not.
func TestStalePathsFollowTheWindow(t *testing.T) {
	in := importFixture()
	p := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	p.Stale = true
	in.Learned = []model.LearnedPath{p}
	in.Stale = map[string]map[config.Family]StaleWindow{"tor-a": {config.IPv4: {Keep: true, Why: "kept"}}}
	if res := Import(in); !res.Paths[0].Accepted || len(res.OVN) != 1 {
		t.Fatalf("kept stale path not imported: %+v", res.Paths[0])
	}
	in.Stale["tor-a"][config.IPv4] = StaleWindow{Why: "stale ipv4 route of peer tor-a: not imported"}
	res := Import(in)
	if res.Paths[0].Accepted || res.Paths[0].Reason != "stale ipv4 route of peer tor-a: not imported" || len(res.OVN) != 0 {
		t.Errorf("stale path past its window: %+v, OVN %v", res.Paths[0], res.OVN)
	}
	p.Stale = false
	in.Learned = []model.LearnedPath{p}
	if res := Import(in); !res.Paths[0].Accepted {
		t.Errorf("a refreshed path is refused: %+v", res.Paths[0])
	}
}

// TestRetained: which paths the table keeps, stale, when the speaker no
// longer has them (gobgp dropped them with the session, or the peer
// withdrew them).
func TestRetained(t *testing.T) {
	fresh := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	stale := fresh
	stale.Stale = true
	fresh6 := path("tor-a", "2001:db8:1::/48", "2001:db8::1")
	away := map[string]map[config.Family]StaleWindow{"tor-a": {config.IPv4: {Keep: true, Away: true}, config.IPv6: {Why: "not listed"}}}
	back := map[string]map[config.Family]StaleWindow{"tor-a": {config.IPv4: {Keep: true}}}
	closed := map[string]map[config.Family]StaleWindow{"tor-a": {config.IPv4: {Why: "End-of-RIB"}}}
	tests := []struct {
		name    string
		old     model.LearnedPath
		windows map[string]map[config.Family]StaleWindow
		keep    bool
	}{
		{"session away: a fresh path is kept, stale from now on", fresh, away, true},
		{"session away: a stale one stays", stale, away, true},
		{"session away, family not kept (IPv6 not in the capability)", fresh6, away, false},
		{"back: a path stale since the restart stays until End-of-RIB", stale, back, true},
		{"back: a path sent again in this session and withdrawn goes", fresh, back, false},
		{"window closed (End-of-RIB, restart time, stalePathTime): nothing stays", stale, closed, false},
		{"peer without a window: nothing stays", fresh, nil, false},
		{"another peer's window does not count", path("tor-b", "10.1.0.0/16", "192.0.2.2"), away, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, keep := Retained(tt.old, tt.windows)
			if keep != tt.keep {
				t.Fatalf("kept %v, want %v", keep, tt.keep)
			}
			want := tt.old
			want.Stale = true
			if keep && !reflect.DeepEqual(got, want) {
				t.Errorf("kept %+v, want %+v (the same path, stale)", got, want)
			}
		})
	}
}

// TestExplainStaleDeadline: explain says why a stale path is still
// imported and until when, as `routes imported` does (issue 17 item 2).
func TestExplainStaleDeadline(t *testing.T) {
	in := importFixture()
	p := path("tor-a", "10.1.0.0/16", "192.0.2.1")
	p.Stale = true
	in.Learned = []model.LearnedPath{p}
	why := "kept stale through peer tor-a's graceful restart (RFC 4724): until it is back and sends End-of-RIB, at the latest 2026-12-02T10:02:00Z"
	in.Stale = map[string]map[config.Family]StaleWindow{"tor-a": {config.IPv4: {Keep: true, Away: true, Why: why}}}
	res := NewImportTable(in).Result()
	if got := res.StaleWhy[StaleKey("tor-a", p.Prefix)]; got != why {
		t.Fatalf("StaleWhy %q, want %q", got, why)
	}
	e := Explain(in.Config, p.Prefix, res, nil, Plan{}, in.Snapshot, in.Host, testNow)
	if s := strings.Join(e.Summary, "\n"); !strings.Contains(s, "stale: "+why) {
		t.Errorf("explain does not give the stale path's reason and deadline:\n%s", s)
	}
	if _, err := json.Marshal(e); err != nil {
		t.Errorf("the explanation is not JSON: %v", err)
	}
}
