package config

import (
	"net/netip"
	"testing"
	"time"
)

// TestBMPDefaults: a server with only a name and an address gets the
// default port and adjRibIn, and no statistics.
func TestBMPDefaults(t *testing.T) {
	c := mustParse(t, baseDoc+"bmp:\n  servers:\n    - {name: a, address: 192.0.2.50}\n    - {name: b, address: \"2001:db8::50\", port: 5000, routeMonitoring: all, statisticsInterval: 30s}\n")
	want := []BMPServer{
		{Name: "a", Address: netip.MustParseAddr("192.0.2.50"), Port: DefaultBMPPort, RouteMonitoring: BMPAdjRIBIn},
		{Name: "b", Address: netip.MustParseAddr("2001:db8::50"), Port: 5000, RouteMonitoring: BMPAll, StatisticsInterval: 30 * time.Second},
	}
	if len(c.BMP.Servers) != len(want) {
		t.Fatalf("bmp.servers = %+v, want %+v", c.BMP.Servers, want)
	}
	for i := range want {
		if c.BMP.Servers[i] != want[i] {
			t.Errorf("bmp.servers[%d] = %+v, want %+v", i, c.BMP.Servers[i], want[i])
		}
	}
	if c := mustParse(t, baseDoc); len(c.BMP.Servers) != 0 {
		t.Errorf("no bmp key: servers %+v, want none", c.BMP.Servers)
	}
}

// TestBMPProblems: each bad server key is named with how to fix it.
func TestBMPProblems(t *testing.T) {
	for _, tc := range []struct {
		name, servers string
		wants         []want
	}{
		{"host name", "    - {name: a, address: collector.example.com}\n",
			[]want{{"bmp.servers[0].address", "is not an IP address", 0}}},
		{"no address", "    - {name: a}\n",
			[]want{{"bmp.servers[0].address", "required", 0}}},
		{"unspecified", "    - {name: a, address: 0.0.0.0}\n",
			[]want{{"bmp.servers[0].address", "not a station's address", 0}}},
		{"no name", "    - {address: 192.0.2.50}\n",
			[]want{{"bmp.servers[0].name", "required", 0}}},
		{"same name", "    - {name: a, address: 192.0.2.50}\n    - {name: a, address: 192.0.2.51}\n",
			[]want{{"bmp.servers[1].name", "", 0}}},
		{"same station", "    - {name: a, address: 192.0.2.50}\n    - {name: b, address: 192.0.2.50, port: 11019}\n",
			[]want{{"bmp.servers[1].address", "also bmp.servers[0]", 0}}},
		{"port", "    - {name: a, address: 192.0.2.50, port: 70000}\n",
			[]want{{"bmp.servers[0].port", "not a TCP port", 0}}},
		{"monitoring", "    - {name: a, address: 192.0.2.50, routeMonitoring: post-policy}\n",
			[]want{{"bmp.servers[0].routeMonitoring", "not adjRibIn, locRib or all", 0}}},
		{"interval fraction", "    - {name: a, address: 192.0.2.50, statisticsInterval: 1500ms}\n",
			[]want{{"bmp.servers[0].statisticsInterval", "whole number of seconds", 0}}},
		{"interval range", "    - {name: a, address: 192.0.2.50, statisticsInterval: 20h}\n",
			[]want{{"bmp.servers[0].statisticsInterval", "out of range", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := parseErrors(t, baseDoc+"bmp:\n  servers:\n"+tc.servers, fakeHost(nil))
			checkErrors(t, errs, tc.wants...)
		})
	}
}
