package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
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

// TestNorthdText: status names northd's release and the option it comes
// from, and where an IPv4 route via an IPv6 next hop goes.
func TestNorthdText(t *testing.T) {
	for _, tt := range []struct {
		v    model.NorthdVersion
		want string
	}{
		{model.NorthdVersion{Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"},
			"25.03 (options:northd_internal_version 25.03.0-20.41.0-77.1); OVN takes IPv4 routes via IPv6 next hops"},
		{model.NorthdVersion{Major: 24, Minor: 9, Raw: "24.09.2-20.37.0-73.4"},
			"24.09 (options:northd_internal_version 24.09.2-20.37.0-73.4); IPv4 routes via IPv6 next hops go to a kernel target only (northd before OVN 25.03 ignores them)"},
		{model.NorthdVersion{},
			"unknown (NB_Global has no options:northd_internal_version); IPv4 routes via IPv6 next hops go to a kernel target only (northd before OVN 25.03 ignores them)"},
		{model.NorthdVersion{Raw: "garbage"},
			`unknown (options:northd_internal_version "garbage"); IPv4 routes via IPv6 next hops go to a kernel target only (northd before OVN 25.03 ignores them)`},
	} {
		if got := northdText(tt.v); got != tt.want {
			t.Errorf("northdText(%+v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
