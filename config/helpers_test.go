package config

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/ovnbgp/ovnbgp/model"
)

func TestPeer(t *testing.T) {
	c := mustParse(t, baseDoc)
	p, ok := c.Peer("tor-b")
	if !ok || p.Address != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("Peer(tor-b) = %v, %v", p, ok)
	}
	if _, ok := c.Peer("tor-z"); ok {
		t.Errorf("Peer(tor-z) found a peer")
	}
}

func TestSpeakerChanged(t *testing.T) {
	old := mustParse(t, baseDoc)
	tests := []struct {
		name  string
		edits []string
		want  bool
	}{
		{"same", nil, false},
		{"peer added", []string{afterPods, afterPods + "    med: 10\n", afterTorB, afterTorB + "    - {name: tor-c, address: 192.0.2.3, asn: 65003}\n"}, false},
		{"hold time", []string{afterTorA, afterTorA + "      holdTime: 30s\n"}, false},
		{"asn", []string{"  asn: 64512\n", "  asn: 64513\n", afterTorB, "      asn: 64513\n"}, true},
		{"router id", []string{"routerID: 192.0.2.10", "routerID: 192.0.2.11"}, true},
		{"listen port", []string{afterBGP, afterBGP + "  listenPort: -1\n"}, true},
		{"graceful restart", []string{afterBGP, afterBGP + "  gracefulRestart: {enabled: true}\n"}, true},
		{"restart time", []string{afterBGP, afterBGP + "  gracefulRestart: {restartTime: 60s}\n"}, true},
		{"deferral time: the loop's only", []string{afterBGP, afterBGP + "  gracefulRestart: {deferralTime: 30s}\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, edit(t, tt.edits...))
			if got := c.SpeakerChanged(old); got != tt.want {
				t.Errorf("SpeakerChanged = %v, want %v", got, tt.want)
			}
		})
	}
	if !old.SpeakerChanged(nil) {
		t.Errorf("SpeakerChanged(nil) = false, want true (first start)")
	}
}

// TestRedactedIsDeep changes every slice of the copy and checks that the
// original did not move.
func TestRedactedIsDeep(t *testing.T) {
	doc := edit(t, afterPods, afterPods+"    peers: [tor-a]\n    communities: [no-export]\n    largeCommunities: [\"1:2:3\"]\n    namespaces: [a]\n    services: [a/b]\n")
	c := mustParse(t, strings.Replace(doc, "namespaces: [a]\n    services: [a/b]\n", "", 1))
	c.Advertise[0].Namespaces = []Glob{mustGlob(t, "a")}
	c.Advertise[0].Services = []Glob{mustGlob(t, "a/b")}
	c.Import = []ImportRule{{Name: "i", Peers: []string{"tor-a"}, Accept: []PrefixMatch{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}}
	c.ProtectedPrefixes = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	before, _ := json.Marshal(c)

	r := c.Redacted()
	r.BGP.Peers[0].Name = "x"
	r.BGP.Peers[0].Families[0] = IPv6
	a := &r.Advertise[0]
	x := mustGlob(t, "x")
	a.Networks[0], a.Namespaces[0], a.Services[0], a.Peers[0] = x, x, x, "x"
	a.Communities[0], a.LargeCommunities[0] = 1, model.LargeCommunity{ASN: 9}
	r.Import[0].Peers[0] = "x"
	r.Import[0].Accept[0].MinLength = 9
	r.ProtectedPrefixes[0] = netip.Prefix{}
	r.Cluster.ServiceCIDRs[0] = netip.Prefix{}

	after, _ := json.Marshal(c)
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("changing the Redacted copy changed the original (-before +after):\n%s", diff)
	}
	if (*Config)(nil).Redacted() != nil {
		t.Errorf("nil.Redacted() != nil")
	}
}

// TestMarshal checks that durations and addresses marshal as text, and
// that `config show` output parses back to the same Config.
func TestMarshal(t *testing.T) {
	c := mustParse(t, edit(t, afterTorA, afterTorA+"      holdTime: 9s\n      bfd: {minTx: 1500ms}\n      sourceAddress: 192.0.2.7\n"))
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"holdTime":"9s"`, `"keepaliveTime":"3s"`, `"connectRetry":"5s"`, `"minTx":"1500ms"`,
		`"restartTime":"120s"`, `"routerID":"192.0.2.10"`, `"sourceAddress":"192.0.2.7"`, `"address":"2001:db8::1"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s:\n%s", want, j)
		}
	}
	var generic map[string]any
	if err := json.Unmarshal(j, &generic); err != nil {
		t.Errorf("JSON output is not valid JSON: %v\n%s", err, j)
	}

	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"holdTime: 9s", "minTx: 1500ms", "restartTime: 120s", "routerID: 192.0.2.10"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("YAML lacks %q:\n%s", want, y)
		}
	}
	back := mustParse(t, string(y))
	if diff := cmp.Diff(c, back, cmpNetip); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[string]string{"0s": "0s", "90s": "90s", "1h": "3600s", "300ms": "300ms", "1.5s": "1500ms", "1500us": "1.5ms", "-5s": "-5s"} {
		if got := durationText(mustDuration(t, d)); got != want {
			t.Errorf("durationText(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestValidateDirect validates a Config built in Go, as the lab does:
// Errors with paths but no file or line.
func TestValidateDirect(t *testing.T) {
	c := mustParse(t, baseDoc)
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.BGP.ASN = 23456
	c.BGP.Peers[1].ASN = 0
	c.Log.Format = "xml"
	err := c.Validate()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Validate() = %v (%T), want Errors", err, err)
	}
	want := "bgp.asn: 23456 is AS_TRANS (RFC 6793), not a real AS number\n" +
		"bgp.peers[1].asn: required (1..4294967294)\n" +
		`log.format: "xml" is not json or console`
	if err.Error() != want {
		t.Errorf("Validate():\n%v\nwant:\n%s", err, want)
	}
}

func TestErrorsSort(t *testing.T) {
	errs := Errors{
		{Path: "bgp.peers[10].asn", Msg: "m"},
		{Path: "bgp.peers[2].asn", Msg: "m"},
		{Line: 3, Path: "a", Msg: "m"},
		{Line: 1, Path: "z", Msg: "m"},
	}
	want := "bgp.peers[2].asn: m\nbgp.peers[10].asn: m\nline 1: z: m\nline 3: a: m"
	if got := errs.Error(); got != want {
		t.Errorf("Error():\n%s\nwant:\n%s", got, want)
	}
}
