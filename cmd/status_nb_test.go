package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
)

// TestNBErrorWording: the NB error line says when it happened and never
// "(0 attempts)" (issue 5 item 14).
func TestNBErrorWording(t *testing.T) {
	at := time.Now().Add(-90 * time.Second)
	for _, tt := range []struct {
		nb   api.NBStatus
		want string
	}{
		{api.NBStatus{LastError: "connection closed", LastErrorAt: at}, "connection closed (1m30s ago)"},
		{api.NBStatus{LastError: "connect: refused", LastErrorAt: at, Attempts: 1}, "connect: refused (1m30s ago); 1 failed attempt since the last session"},
		{api.NBStatus{LastError: "connect: refused", LastErrorAt: at, Attempts: 7}, "connect: refused (1m30s ago); 7 failed attempts since the last session"},
		{api.NBStatus{LastError: "old daemon"}, "old daemon"},
	} {
		got := nbError(tt.nb)
		if got != tt.want {
			t.Errorf("nbError(%+v) = %q, want %q", tt.nb, got, tt.want)
		}
		if strings.Contains(got, "0 attempts") {
			t.Errorf("nbError(%+v) = %q says 0 attempts", tt.nb, got)
		}
	}
}
