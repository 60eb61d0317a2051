package bgp

import (
	"os"
	"regexp"
	"testing"
)

// TestGobgpInternalsPinned: the writes into gobgp's unexported fields
// (gobgpinternals.go) were checked against gobgpVersion; a go.mod that
// asks for another gobgp fails here, so that whoever upgrades reads them
// (and TestHandoffField, TestBFDResetterField) again.
func TestGobgpInternalsPinned(t *testing.T) {
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/osrg/gobgp/v4 (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod requires no github.com/osrg/gobgp/v4")
	}
	if got := string(m[1]); got != gobgpVersion {
		t.Errorf("go.mod requires gobgp %s; bgp/gobgpinternals.go was checked against %s: check handoffTo and bfdTo against the new gobgp's fields (acceptCh, bfdServer.peerState), then update gobgpVersion", got, gobgpVersion)
	}
}
