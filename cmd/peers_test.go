package cmd

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/ovnbgp/ovnbgp/model"
)

// The BFD column: off without BFD, else the BFD session's state.
func TestPeersTableBFD(t *testing.T) {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	peersTable(w, []model.PeerStatus{
		{Name: "tor-a", State: model.StateEstablished, BFD: &model.BFDStatus{State: model.BFDUp}},
		{Name: "tor-b", State: model.StateEstablished},
		{Name: "tor-c", State: model.StateIdle, BFD: &model.BFDStatus{State: model.BFDDown}},
	})
	w.Flush()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("peers table:\n%s", b.String())
	}
	col := strings.Index(lines[0], "BFD ")
	if col < 0 {
		t.Fatalf("no BFD column:\n%s", b.String())
	}
	for i, want := range []string{"up", "off", "down"} {
		if got := strings.Fields(lines[i+1][col:])[0]; got != want {
			t.Errorf("%s: BFD column %q, want %q\n%s", strings.Fields(lines[i+1])[0], got, want, b.String())
		}
	}
}
