package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The race detector on the real daemon (issue 17 item 6): `make test`
// builds a second binary with -race (bin/ovnbgp-race, cgo on) and passes it
// as $OVNBGP_RACE_BIN. A test that sets DaemonConfig.Race runs the daemon
// from it, with GORACE=halt_on_error=0 so that a race is reported in full
// and the daemon goes on (a halted daemon would fail the test for the wrong
// reason). Every daemon's log is read at the end of its test: any
// "WARNING: DATA RACE" there fails the test, with the report.

// RaceMarker starts every report of the race detector.
const RaceMarker = "WARNING: DATA RACE"

// raceEnv is what the race-built daemon gets in its environment: the whole
// report of every race (not only the first), and the daemon keeps running.
const raceEnv = "GORACE=halt_on_error=0"

// RaceBinary returns the race-built daemon, $OVNBGP_RACE_BIN, and true; or,
// when that is not set, the binary of Binary and false, with a log line
// saying that this run has no race detector on the daemon. Under CI=true
// an unset $OVNBGP_RACE_BIN fails the test: CI must run the race build.
func RaceBinary(t testing.TB) (string, bool) {
	t.Helper()
	bin := os.Getenv("OVNBGP_RACE_BIN")
	if bin == "" {
		if InCI() {
			t.Fatal("OVNBGP_RACE_BIN is not set (make test builds bin/ovnbgp-race and sets it); CI=true: failing instead of running the daemon without the race detector")
		}
		t.Log("OVNBGP_RACE_BIN not set: the daemon runs without the race detector (make test builds bin/ovnbgp-race and sets it)")
		return Binary(t), false
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatalf("OVNBGP_RACE_BIN: %v", err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("OVNBGP_RACE_BIN: %v (make build-race builds it)", err)
	}
	return abs, true
}

// RaceReports returns the race detector's reports in the daemon's log (of
// every run), each from its "WARNING: DATA RACE" to the closing line of
// "=" signs; none for a clean run or a binary built without -race.
func (d *Daemon) RaceReports() []string {
	b, err := os.ReadFile(d.Log)
	if err != nil {
		return nil
	}
	return raceReports(string(b))
}

// raceReports cuts the race reports out of text.
func raceReports(text string) []string {
	var res []string
	for {
		i := strings.Index(text, RaceMarker)
		if i < 0 {
			return res
		}
		text = text[i:]
		end := strings.Index(text, "\n==================")
		if end < 0 {
			return append(res, text)
		}
		res = append(res, text[:end])
		text = text[end+1:]
	}
}

// checkRaces fails the test when the daemon's log has a race report in
// which ovnbgp's code takes part, and prints every report. A race whose
// two accesses are both inside gobgp (upstreamRace: gobgp v4.8.0 has such
// races among its own goroutines, e.g. handleFSMMessage against
// processOutgoingPaths at a peer's down; see docs/architecture.md,
// "Inside the speaker") is printed as upstream and does not fail the
// test: ovnbgp cannot fix it, and failing on it would fail the run at
// random.
func (d *Daemon) checkRaces() {
	var ours, upstream []string
	for _, r := range d.RaceReports() {
		if upstreamRace(r) {
			upstream = append(upstream, r)
		} else {
			ours = append(ours, r)
		}
	}
	if len(upstream) > 0 {
		d.t.Logf("the race detector found %d data race(s) inside gobgp alone (upstream, not failing; log %s):\n%s",
			len(upstream), d.Log, strings.Join(upstream, "\n==================\n"))
	}
	if len(ours) > 0 {
		d.t.Errorf("the race detector found %d data race(s) in the ovnbgp daemon (%s, log %s):\n%s",
			len(ours), d.Bin, d.Log, strings.Join(ours, "\n==================\n"))
	}
}

// ownModule names ovnbgp's own frames in a stack.
const ownModule = "github.com/ovnbgp/ovnbgp"

// upstreamRace reports whether a race report's two accesses (the "Read
// at"/"Write at" stacks and their "Previous" ones, not the stacks that
// created the goroutines) run only gobgp and runtime code: no frame of
// ovnbgp's module. A report cut short counts as ovnbgp's.
func upstreamRace(report string) bool {
	access, stacks := false, 0
	for _, line := range strings.Split(report, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.Contains(l, " at 0x") && strings.Contains(l, " by goroutine") || strings.Contains(l, " at 0x") && strings.Contains(l, " by main goroutine"):
			access = true
			stacks++
		case strings.HasPrefix(l, "Goroutine ") && strings.HasSuffix(l, "created at:"):
			access = false
		case access && strings.Contains(l, ownModule):
			return false
		}
	}
	return stacks >= 2 && strings.Contains(report, "github.com/osrg/gobgp")
}
