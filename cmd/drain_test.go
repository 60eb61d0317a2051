package cmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestDrainVerbs: drain refuses a negative --wait before it asks the
// daemon; its table says when the withdraw happens or happened; peers has
// a DRAIN column.
func TestDrainVerbs(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	if _, err := run(t, "--socket", sock, "drain", "--wait", "-1s"); err == nil || !strings.Contains(err.Error(), "--wait -1s is negative") {
		t.Errorf("drain --wait -1s: %v", err)
	}
	if _, err := run(t, "--socket", sock, "undrain", "--peer", "tor"); err == nil || !strings.Contains(err.Error(), "no ovnbgp daemon is listening") {
		t.Errorf("undrain without a daemon: %v", err)
	}
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	st := api.DrainStatus{Now: now, File: "/var/lib/ovnbgp/drain.json", Peers: []api.DrainedPeer{
		{DrainedPeer: model.DrainedPeer{Peer: "tor-a", Since: now, WithdrawAt: now.Add(30 * time.Second)}, Phase: model.DrainTagged},
		{DrainedPeer: model.DrainedPeer{Peer: "tor-b", Since: now.Add(-time.Hour), WithdrawAt: now.Add(-time.Minute)}, Phase: model.DrainWithdrawn},
	}}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	drainTable(w, st)
	w.Flush()
	for _, want := range []string{"PEER   DRAIN", "tor-a  tagged", "(in 30s)", "tor-b  withdrawn", "withdrawn at"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("drain table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	drainTable(w, api.DrainStatus{File: "/var/lib/ovnbgp/drain.json"})
	w.Flush()
	if !strings.Contains(b.String(), "not drained") {
		t.Errorf("undrained: %q", b.String())
	}
	b.Reset()
	peersTable(w, []model.PeerStatus{{Name: "tor-a", State: model.StateEstablished, Drain: model.DrainTagged}, {Name: "tor-b"}})
	w.Flush()
	if !strings.Contains(b.String(), "DRAIN") || !strings.Contains(b.String(), "tagged") {
		t.Errorf("peers table:\n%s", b.String())
	}
}

// TestDrainTableUnconfiguredOrder: an order kept for a peer no longer
// configured is listed (with how to remove it), not hidden behind "not
// drained (drain.json absent)" while the file exists.
func TestDrainTableUnconfiguredOrder(t *testing.T) {
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	st := api.DrainStatus{Now: now, File: "/var/lib/ovnbgp/drain.json", Peers: []api.DrainedPeer{},
		Orders: []model.DrainedPeer{{Peer: "tor-old", Since: now, WithdrawAt: now.Add(time.Minute)}}}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	drainTable(w, st)
	w.Flush()
	out := b.String()
	if strings.Contains(out, "absent") || !strings.Contains(out, "tor-old") || !strings.Contains(out, "undrain --peer tor-old") {
		t.Errorf("drain table with an order for an unconfigured peer:\n%s", out)
	}
}
