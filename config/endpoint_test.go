package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseNorthbound is the one NB endpoint parser (package ovn dials
// what it returns).
func TestParseNorthbound(t *testing.T) {
	good := map[string][]Endpoint{
		"unix:/var/run/ovn/ovnnb_db.sock": {{Scheme: SchemeUnix, Path: "/var/run/ovn/ovnnb_db.sock"}},
		"tcp:127.0.0.1:6641":              {{Scheme: SchemeTCP, Host: "127.0.0.1", Port: 6641}},
		"ssl:10.0.0.1:9641, ssl:10.0.0.2:9641,ssl:[::1]:96": {
			{Scheme: SchemeSSL, Host: "10.0.0.1", Port: 9641}, {Scheme: SchemeSSL, Host: "10.0.0.2", Port: 9641}, {Scheme: SchemeSSL, Host: "::1", Port: 96}},
	}
	for in, want := range good {
		got, err := ParseNorthbound(in)
		if err != nil {
			t.Errorf("ParseNorthbound(%q): %v", in, err)
			continue
		}
		if d := cmp.Diff(Endpoints(want), got); d != "" {
			t.Errorf("ParseNorthbound(%q) (-want +got):\n%s", in, d)
		}
	}
	if got, _ := ParseNorthbound("ssl:[::1]:96,unix:/x"); got.String() != "ssl:[::1]:96,unix:/x" || !got.NeedTLS() {
		t.Errorf("String %q NeedTLS %v, want the input back and true", got.String(), got.NeedTLS())
	}
	for _, in := range []string{"", " , ", "/var/run/ovn.sock", "unix:", "tcp:127.0.0.1", "tcp::6641", "http:x:1", "ssl:::1:6641", "tcp:h:0", "tcp:h:65536"} {
		if got, err := ParseNorthbound(in); err == nil {
			t.Errorf("ParseNorthbound(%q) = %v, no error", in, got)
		}
	}
}
