package lab

import (
	"strings"
	"testing"
)

func TestRaceReports(t *testing.T) {
	log := `{"msg":"start"}
==================
WARNING: DATA RACE
Write at 0x00c000 by goroutine 7:
  main.f()
==================
{"msg":"go on"}
==================
WARNING: DATA RACE
Read at 0x00c001 by goroutine 9:
  main.g()
==================
`
	got := raceReports(log)
	if len(got) != 2 || !strings.Contains(got[0], "main.f()") || strings.Contains(got[0], "main.g()") || !strings.Contains(got[1], "main.g()") {
		t.Fatalf("raceReports = %q", got)
	}
	if got := raceReports(`{"msg":"clean"}`); len(got) != 0 {
		t.Fatalf("clean log: %q", got)
	}
	if got := raceReports("WARNING: DATA RACE\ncut short"); len(got) != 1 {
		t.Fatalf("unterminated report: %q", got)
	}
}

// TestUpstreamRace: a race between two gobgp goroutines (the one CI met,
// trimmed) is upstream; one with an ovnbgp frame in an access is ours,
// even if only the creating stacks differ; a report cut short is ours.
func TestUpstreamRace(t *testing.T) {
	gobgpOnly := `WARNING: DATA RACE
Write at 0x00c00116aca8 by goroutine 40:
  github.com/osrg/gobgp/v4/pkg/server.(*BgpServer).handleFSMMessage()
      github.com/osrg/gobgp/v4@v4.8.0/pkg/server/server.go:1679 +0xc6f

Previous read at 0x00c00116aca8 by goroutine 36:
  github.com/osrg/gobgp/v4/pkg/server.(*BgpServer).prePolicyFilterpath()
      github.com/osrg/gobgp/v4@v4.8.0/pkg/server/server.go:630 +0xfc

Goroutine 40 (running) created at:
  github.com/ovnbgp/ovnbgp/bgp.(*Speaker).Start()
      /src/bgp/speaker.go:200 +0x44
`
	if !upstreamRace(gobgpOnly) {
		t.Error("a race between two gobgp stacks (created by ovnbgp) is not upstream")
	}
	ours := strings.Replace(gobgpOnly, "  github.com/osrg/gobgp/v4/pkg/server.(*BgpServer).prePolicyFilterpath()",
		"  github.com/ovnbgp/ovnbgp/bgp.(*Speaker).onPaths()", 1)
	if upstreamRace(ours) {
		t.Error("a race with an ovnbgp frame in an access counts as upstream")
	}
	if upstreamRace("WARNING: DATA RACE\nWrite at 0x00c0 by goroutine 7:\n  github.com/osrg/gobgp/v4/pkg/server.f()\n") {
		t.Error("a report with one access stack (cut short) counts as upstream")
	}
}
