package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestLastErrorIsDated: a peer's last error shows its age, and one older
// than the Established session is marked as past (issue 5 item 14).
func TestLastErrorIsDated(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		p    model.PeerStatus
		want []string
		not  []string
	}{
		{"none", model.PeerStatus{State: model.StateEstablished}, []string{"-"}, []string{"ago"}},
		{"current", model.PeerStatus{State: model.StateActive, Since: now.Add(-time.Minute),
			LastError: "received NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS", LastErrorAt: now.Add(-30 * time.Second)},
			[]string{"Bad Peer AS", "ago)"}, []string{"before this session"}},
		{"past", model.PeerStatus{State: model.StateEstablished, Since: now.Add(-time.Minute),
			LastError: "hold timer expired", LastErrorAt: now.Add(-2 * time.Minute)},
			[]string{"before this session: hold timer expired (2m"}, nil},
	} {
		got := lastError(tc.p)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lastError = %q, want %q in it", tc.name, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: lastError = %q, must not contain %q", tc.name, got, n)
			}
		}
	}
}

// TestAdvStateColumn: routes advertised says what is on the wire and why
// not (issue 5 items 8 and 13).
func TestAdvStateColumn(t *testing.T) {
	for _, tc := range []struct {
		a    model.Advertisement
		want string
	}{
		{model.Advertisement{State: model.AdvSent}, "sent"},
		{model.Advertisement{State: model.AdvPending, Reason: "session active"}, "pending (session active)"},
		{model.Advertisement{State: model.AdvNotSent, Reason: "family ipv6 not negotiated"}, "not sent (family ipv6 not negotiated)"},
		{model.Advertisement{State: model.AdvNotApplied, Problem: "refused; not sent"}, "not applied; problem: refused; not sent"},
	} {
		if got := advState(tc.a); got != tc.want {
			t.Errorf("advState(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
}
