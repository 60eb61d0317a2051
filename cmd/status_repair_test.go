package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestRepairText: status's session-start repair line says how many, and
// what the last one sent.
func TestRepairText(t *testing.T) {
	if got := repairText(model.SessionRepairs{Checks: 3}); got != "0 of 3 sessions checked" {
		t.Errorf("no repair: %q", got)
	}
	got := repairText(model.SessionRepairs{Checks: 3, Repairs: 1, Last: &model.SessionRepair{
		Peer: "tor", At: time.Now().Add(-time.Minute), PutBack: 2, SoftReset: true, Removed: 2}})
	for _, want := range []string{"1 of 3 sessions checked", "peer tor", "2 paths put back", "soft reset out true", "2 removed again"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
