package ovn

import (
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
)

func TestBackoffMax(t *testing.T) {
	for _, tt := range []struct {
		endpoints []string
		want      time.Duration
	}{
		{[]string{"unix:/var/run/ovn/ovnnb_db.sock"}, backoffMaxLocal},
		{[]string{"tcp:192.0.2.5:6641"}, backoffMax},
		{[]string{"unix:/run/nb.sock", "ssl:192.0.2.5:6641"}, backoffMax},
		{nil, backoffMaxLocal}, // unset: the node's own socket is looked for
	} {
		target, err := config.OVN{Northbound: strings.Join(tt.endpoints, ",")}.Target()
		if err != nil {
			t.Fatal(err)
		}
		if got := (&Client{target: target}).backoffMax(); got != tt.want {
			t.Errorf("backoffMax(%v) = %v, want %v", tt.endpoints, got, tt.want)
		}
	}
}
