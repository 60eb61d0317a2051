package bgp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// These tests walk what config.Parse accepts against a real in-process
// speaker: whatever the validator lets through, the speaker must apply as
// written (config and runtime must not disagree).

// parseConfig parses a whole configuration document as the daemon does.
func parseConfig(t *testing.T, doc string) (*config.Config, error) {
	t.Helper()
	return config.Parse([]byte(doc), "config.yaml")
}

// configDoc is a configuration with the given bgp keys (indented under
// bgp:) and advertise rules.
func configDoc(bgp, advertise string) string {
	return "node: {name: n1}\nbgp:\n  routerID: 127.0.30.1\n" + bgp + "advertise:\n" + advertise
}

// TestEveryAcceptedCommunityIsSent: every community form the validator
// accepts (each well-known name, ASN:VALUE at its bounds, a large
// community) reaches the peer as the value config parsed it to. Before,
// config accepted graceful-shutdown and the speaker refused it, so the
// rule's prefixes were withdrawn instead of de-preferenced.
func TestEveryAcceptedCommunityIsSent(t *testing.T) {
	parallel(t)
	// IANA's values, written out here rather than taken from the table
	// under test.
	want := map[string]uint32{
		"graceful-shutdown": 0xFFFF0000, "accept-own": 0xFFFF0001,
		"no-llgr": 0xFFFF0007, "blackhole": 0xFFFF029A, "no-export": 0xFFFFFF01,
		"no-advertise": 0xFFFFFF02, "no-export-subconfed": 0xFFFFFF03, "no-peer": 0xFFFFFF04,
		"65001:100": 65001<<16 | 100, "0:1": 1, "65535:65534": 0xFFFFFFFE,
	}
	// llgr-stale is the one name config refuses in advertise rules (a
	// speaker does not send such a route to a peer without LLGR).
	if len(model.WellKnownCommunities())-1+3 != len(want) {
		t.Fatalf("model.WellKnownCommunities has %d names; this test knows %d: add the new ones", len(model.WellKnownCommunities()), len(want)-3+1)
	}
	if _, err := parseConfig(t, configDoc("  asn: 64512\n  listenPort: -1\n  peers: [{name: tor, address: 127.0.30.3, asn: 65001}]\n",
		"  - {name: pods, kind: podNetwork, networks: [\"*\"], communities: [llgr-stale]}\n")); err == nil || !strings.Contains(err.Error(), "llgr-stale marks a stale route") {
		t.Errorf("config accepted llgr-stale in an advertise rule: %v", err)
	}
	var forms []string
	for s := range want {
		forms = append(forms, `"`+s+`"`)
	}
	slices.Sort(forms)
	doc := configDoc("  asn: 64512\n  listenPort: -1\n  peers: [{name: tor, address: 127.0.30.3, asn: 65001}]\n",
		"  - {name: pods, kind: podNetwork, networks: [\"*\"], communities: ["+strings.Join(forms, ", ")+
			"], largeCommunities: [\"4294967295:0:7\"]}\n")
	cfg, err := parseConfig(t, doc)
	if err != nil {
		t.Fatalf("config refused every accepted form: %v", err)
	}
	rule := cfg.Advertise[0]
	for i, f := range forms {
		if got, w := uint32(rule.Communities[i]), want[strings.Trim(f, `"`)]; got != w {
			t.Errorf("config parsed %s to %#x, want %#x", f, got, w)
		}
	}

	l := newLab(t, 30)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	a := adv("tor", "10.30.0.0/24", model.PathAttrs{Communities: rule.Communities, LargeCommunities: rule.LargeCommunities})
	if err := setAll(context.Background(), node, []model.Advertisement{a}); err != nil {
		t.Fatalf("the speaker refused what config accepted: %v", err)
	}
	waitEstablished(t, node, "tor")
	got := waitLearned(t, prov, "node", a.Prefix)[a.Prefix]
	var wantSeen []string
	for _, v := range want {
		wantSeen = append(wantSeen, fmt.Sprintf("%d:%d", v>>16, v&0xffff))
	}
	wantSeen = append(wantSeen, "4294967295:0:7")
	var seen []string
	for _, c := range got.Communities {
		if v, err := model.ParseCommunity(c); err == nil {
			c = fmt.Sprintf("%d:%d", uint32(v)>>16, uint32(v)&0xffff)
		}
		seen = append(seen, c)
	}
	if !sameSet(seen, wantSeen) {
		t.Errorf("the peer received communities %v, want %v", seen, wantSeen)
	}
	if diff := slices.Compare(model.Strings(node.Advertised()[0].Attrs.Communities), model.Strings(rule.Communities)); diff != 0 {
		// Advertised lists them in canonical (numeric) order.
		if !sameSet(model.Strings(node.Advertised()[0].Attrs.Communities), model.Strings(rule.Communities)) {
			t.Errorf("Advertised communities %v, want %v", node.Advertised()[0].Attrs.Communities, rule.Communities)
		}
	}
}

// TestConfigSpaceAgainstSpeaker: each peer option at its edge values, as
// config accepts it, is applied by a real speaker without a peer error;
// what config refuses is refused with a reason (holdTime 0, which gobgp
// would turn into 90s; passive without a listener).
func TestConfigSpaceAgainstSpeaker(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "md5")
	if err := os.WriteFile(pw, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw80 := filepath.Join(dir, "md5-80")
	if err := os.WriteFile(pw80, []byte(strings.Repeat("k", 80)), 0o640); err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name string
		// global holds bgp keys besides asn, routerID and peers;
		// peer is the inside of the flow mapping of one peer.
		global, peer string
		refused      string // "" = config accepts it
	}
	cases := []tc{
		{name: "minimal", peer: "asn: 65001"},
		{name: "ibgp", peer: "asn: 64512"},
		{name: "asn 1", peer: "asn: 1"},
		{name: "asn 4294967294", peer: "asn: 4294967294"},
		{name: "port 1", peer: "asn: 65001, port: 1"},
		{name: "port 65535", peer: "asn: 65001, port: 65535"},
		{name: "sourceAddress", peer: "asn: 65001, sourceAddress: 127.0.30.1"},
		{name: "interface lo", peer: "asn: 65001, interface: lo"},
		{name: "interface 15 characters", peer: "asn: 65001, interface: abcdefghijklmno"},
		{name: "passive with a listener", global: "  listenPort: LISTEN\n", peer: "asn: 65001, passive: true"},
		{name: "ebgpMultihop 1", peer: "asn: 65001, ebgpMultihop: 1"},
		{name: "ebgpMultihop 255", peer: "asn: 65001, ebgpMultihop: 255"},
		{name: "ttlSecurity", peer: "asn: 65001, ttlSecurity: true"},
		{name: "passwordFile", peer: "asn: 65001, passwordFile: " + pw},
		{name: "passwordFile 80 bytes, group-readable", peer: "asn: 65001, passwordFile: " + pw80},
		{name: "holdTime 3s", peer: "asn: 65001, holdTime: 3s, keepaliveTime: 1s"},
		{name: "holdTime 3s derived keepalive", peer: "asn: 65001, holdTime: 3s"},
		{name: "holdTime 65535s", peer: "asn: 65001, holdTime: 65535s, keepaliveTime: 65534s"},
		{name: "connectRetry 1s", peer: "asn: 65001, connectRetry: 1s"},
		{name: "connectRetry 3600s", peer: "asn: 65001, connectRetry: 3600s"},
		{name: "bfd edges, disabled", peer: "asn: 65001, bfd: {enabled: false, minTx: 10ms, minRx: 60s, multiplier: 255}"},
		{name: "families ipv4", peer: "asn: 65001, families: [ipv4]"},
		{name: "ipv6 peer", peer: "asn: 65001, address: \"::1\", families: [ipv6]"},
		{name: "maxPrefixes 0 (no limit)", peer: "asn: 65001, maxPrefixes: 0"},
		{name: "maxPrefixes 1", peer: "asn: 65001, maxPrefixes: 1"},
		{name: "maxPrefixes max", peer: "asn: 65001, maxPrefixes: 4294967295"},
		{name: "graceful restart 1s", global: "  gracefulRestart: {enabled: true, restartTime: 1s}\n", peer: "asn: 65001"},
		{name: "graceful restart 4095s", global: "  gracefulRestart: {enabled: true, restartTime: 4095s}\n", peer: "asn: 65001"},
		{name: "everything", global: "  listenPort: LISTEN\n  gracefulRestart: {enabled: true}\n",
			peer: "asn: 65001, port: 1790, sourceAddress: 127.0.30.1, interface: lo, passive: true, ebgpMultihop: 2, passwordFile: " + pw +
				", holdTime: 9s, keepaliveTime: 3s, connectRetry: 2s, families: [ipv4], maxPrefixes: 10"},

		{name: "holdTime 0", peer: "asn: 65001, holdTime: 0, keepaliveTime: 0", refused: "bgp.peers[0].holdTime: 0 (no keepalives) is not supported"},
		{name: "passive without a listener", global: "  listenPort: -1\n", peer: "asn: 65001, passive: true",
			refused: "bgp.peers[0].passive: a passive peer waits for the peer to connect, but bgp.listenPort is -1"},
		{name: "ttlSecurity with multihop", peer: "asn: 65001, ttlSecurity: true, ebgpMultihop: 2", refused: "cannot be combined with ebgpMultihop"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			global := tt.global
			if !strings.Contains(global, "listenPort:") {
				// No listener unless the case is about one: port 179
				// is root's (make test runs this without root too).
				global += "  listenPort: -1\n"
			}
			global = strings.ReplaceAll(global, "LISTEN", fmt.Sprint(freePort(t)))
			peer := tt.peer
			if !strings.Contains(peer, "address:") {
				peer = "address: 127.0.30.3, " + peer
			}
			doc := configDoc("  asn: 64512\n"+global+"  peers:\n    - {name: tor, "+peer+"}\n",
				"  - {name: pods, kind: podNetwork, networks: [\"*\"]}\n")
			cfg, err := parseConfig(t, doc)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("config: %v, want it refused with %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("config refused a case meant to be valid: %v\n%s", err, doc)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := New(ctx, cfg.BGP, nil, nil)
			if err != nil {
				t.Fatalf("the speaker refused the global settings config accepted: %v", err)
			}
			defer func() { _ = s.Stop(context.Background(), false) }()
			if err := s.SetPeers(ctx, cfg.BGP.Peers); err != nil {
				t.Fatalf("the speaker refused a peer config accepted: %v\n%s", err, doc)
			}
			st, err := s.Peers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != 1 || st[0].Name != "tor" || strings.Contains(st[0].LastError, "not configured") || strings.Contains(st[0].LastError, "not applied") {
				t.Fatalf("peers after SetPeers: %+v", st)
			}
		})
	}
}
