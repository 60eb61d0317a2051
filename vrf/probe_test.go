package vrf_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/vrf"
)

// TestProbe: doctor's read-only lookups in a namespace the test made: the
// device toward an address (directly connected, through a gateway, and
// unreachable), the routes of a table counted by protocol (a foreign
// table that does not exist holds nothing), and the VRF devices (none here:
// this kernel has no VRF driver; vrf/vmtest covers real ones).
func TestProbe(t *testing.T) {
	n := newNS(t)
	n.ip("route", "add", "203.0.113.0/24", "via", "198.51.100.2")
	n.ip("route", "add", "10.9.0.0/16", "dev", "a0", "table", "100", "proto", "186")
	n.ip("route", "add", "10.8.0.0/16", "dev", "a0", "table", "100", "proto", "186")
	n.ip("route", "add", "10.7.0.0/16", "dev", "b0", "table", "100", "proto", "200")
	n.ip("-6", "route", "add", "2001:db8:9::/48", "dev", "a0", "table", "100", "proto", "3")

	p, err := vrf.OpenProbeAt(n.h)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for dst, want := range map[string]string{"192.0.2.9": "a0", "203.0.113.7": "b0", "2001:db8:b::9": "b0"} {
		if got, err := p.RouteTo(netip.MustParseAddr(dst)); err != nil || got != want {
			t.Errorf("RouteTo(%s) = %q, %v; want %q", dst, got, err, want)
		}
	}
	if got, err := p.RouteTo(netip.MustParseAddr("100.64.1.1")); err == nil || !strings.Contains(err.Error(), "100.64.1.1") {
		t.Errorf("RouteTo(an unrouted address) = %q, %v; want an error naming it", got, err)
	}
	counts, err := p.TableProtocols(100)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 3 || counts[186] != 2 || counts[200] != 1 || counts[3] != 1 {
		t.Errorf("TableProtocols(100) = %v, want map[3:1 186:2 200:1]", counts)
	}
	if counts, err := p.TableProtocols(4242); err != nil || len(counts) != 0 {
		t.Errorf("TableProtocols(4242) = %v, %v; want nothing", counts, err)
	}
	if vrfs, err := p.VRFs(); err != nil || len(vrfs) != 0 {
		t.Errorf("VRFs() = %v, %v; want none", vrfs, err)
	}
}
