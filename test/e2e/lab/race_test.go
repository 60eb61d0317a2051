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
