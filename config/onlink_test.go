package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// TestPeerLink: a peer given by its interface alone is unnumbered; it and
// a peer at an IPv6 link-local address are on-link; both, and any IPv6
// peer, run over IPv6. An IPv4 link-local peer (169.254.0.0/16) is an
// ordinary IPv4 peer.
func TestPeerLink(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		p                              Peer
		unnumbered, onLink, transport6 bool
	}{
		{"unnumbered", Peer{Interface: "eth1"}, true, true, true},
		{"link-local with zone", Peer{Address: netip.MustParseAddr("fe80::1%eth1"), Interface: "eth1"}, false, true, true},
		{"link-local without zone", Peer{Address: netip.MustParseAddr("fe80::1")}, false, true, true},
		{"global IPv6", Peer{Address: netip.MustParseAddr("2001:db8::1"), Interface: "eth1"}, false, false, true},
		{"IPv4", Peer{Address: netip.MustParseAddr("192.0.2.1"), Interface: "eth1"}, false, false, false},
		{"IPv4 link-local", Peer{Address: netip.MustParseAddr("169.254.1.1")}, false, false, false},
		{"nothing", Peer{}, false, false, false},
	} {
		if got := tc.p.Unnumbered(); got != tc.unnumbered {
			t.Errorf("%s: Unnumbered() = %v, want %v", tc.name, got, tc.unnumbered)
		}
		if got := tc.p.OnLink(); got != tc.onLink {
			t.Errorf("%s: OnLink() = %v, want %v", tc.name, got, tc.onLink)
		}
		if got := tc.p.TransportIs6(); got != tc.transport6 {
			t.Errorf("%s: TransportIs6() = %v, want %v", tc.name, got, tc.transport6)
		}
		if got := tc.p.Link(); got != tc.p.Interface {
			t.Errorf("%s: Link() = %q, want %q", tc.name, got, tc.p.Interface)
		}
	}
}

// peersDoc is a valid document with these peers (YAML flow mappings, one
// a line, from line 6), an advertise rule and more appended.
func peersDoc(more string, peers ...string) string {
	doc := "node: {name: n1}\nbgp:\n  asn: 64512\n  routerID: 192.0.2.10\n  peers:\n"
	for _, p := range peers {
		doc += "    - " + p + "\n"
	}
	return doc + "advertise:\n  - {name: pods, kind: podNetwork, networks: [default]}\n" + more
}

// TestOnLinkDefaults: an unnumbered peer keeps the zero address; a zoned
// link-local address names the interface, and an interface gives a
// zone-less link-local address its zone, so that Address.Zone() ==
// Interface for every link-local peer. On-link peers speak both families
// by default; a numbered IPv6 peer its address's family only.
func TestOnLinkDefaults(t *testing.T) {
	c := mustParse(t, peersDoc("",
		"{name: a, interface: eth1, asn: 65001}",
		`{name: b, address: "fe80::2%eth2", asn: 65002}`,
		`{name: c, address: "fe80::3", interface: eth3, asn: 65003}`,
		`{name: d, address: "2001:db8::4", asn: 65004}`,
		`{name: e, interface: eth5, asn: 65005, families: [ipv6]}`,
	))
	both := []Family{IPv4, IPv6}
	want := []struct {
		addr, iface string
		families    []Family
	}{
		{"invalid IP", "eth1", both},
		{"fe80::2%eth2", "eth2", both},
		{"fe80::3%eth3", "eth3", both},
		{"2001:db8::4", "", []Family{IPv6}},
		{"invalid IP", "eth5", []Family{IPv6}},
	}
	for i, p := range c.BGP.Peers {
		if p.Address.String() != want[i].addr || p.Interface != want[i].iface || !reflect.DeepEqual(p.Families, want[i].families) {
			t.Errorf("%s: address %s interface %q families %v, want %s %q %v", p.Name, p.Address, p.Interface, p.Families, want[i].addr, want[i].iface, want[i].families)
		}
	}
}

// TestOnLinkValid: what on-link peers and one session for both families
// allow.
func TestOnLinkValid(t *testing.T) {
	for name, doc := range map[string]string{
		"both families over IPv6": peersDoc("", `{name: a, address: "2001:db8::1", asn: 65001, families: [ipv4, ipv6]}`),
		"unnumbered imported from, IPv4 only": peersDoc(importDoc(acceptTen, ""),
			"{name: tor-a, interface: eth1, asn: 65001, families: [ipv4]}"),
		"unnumbered imported from, default families": peersDoc(importDoc(acceptTen, ""),
			"{name: tor-a, interface: eth1, asn: 65001, ttlSecurity: true, bfd: {enabled: true}}"),
		"unnumbered on two links, link-local peers sharing a link": peersDoc("",
			"{name: a, interface: eth1, asn: 65001}",
			"{name: b, interface: eth2, asn: 65001}",
			`{name: c, address: "fe80::1%eth3", asn: 65003}`,
			`{name: d, address: "fe80::2%eth3", asn: 65003}`,
			`{name: e, address: "fe80::1", interface: eth4, asn: 65003}`),
		"interface on a numbered peer": peersDoc("", `{name: a, address: "2001:db8::1", interface: eth1, asn: 65001, ebgpMultihop: 2, sourceAddress: "2001:db8::2"}`),
	} {
		t.Run(name, func(t *testing.T) { mustParse(t, doc) })
	}
}

// TestOnLinkProblems: what on-link peers refuse, each with its key and
// the fix.
func TestOnLinkProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		peers []string
		wants []want
	}{
		{"neither address nor interface", []string{"{name: a, asn: 65001}"},
			[]want{{"bgp.peers[0].address", "required: the peer's address, or interface alone for an unnumbered peer", 6}}},
		{"link-local without its link", []string{`{name: a, address: "fe80::1", asn: 65001}`},
			[]want{{"bgp.peers[0].address", "fe80::1 is link-local: which link? write fe80::1%DEV or set interface", 6}}},
		{"zone on a global address", []string{`{name: a, address: "2001:db8::1%eth1", asn: 65001}`},
			[]want{{"bgp.peers[0].address", "only a link-local address (fe80::/10) has a zone: write 2001:db8::1 and interface: eth1", 6}}},
		{"zone an index", []string{`{name: a, address: "fe80::1%2", asn: 65001}`},
			[]want{{"bgp.peers[0].address", "write the interface's name, not its index", 6}}},
		{"zone and interface differ", []string{`{name: a, address: "fe80::1%eth1", interface: eth2, asn: 65001}`},
			[]want{{"bgp.peers[0].interface", "eth2, but address fe80::1%eth1 is on eth1", 6}}},
		{"unnumbered multihop", []string{"{name: a, interface: eth1, asn: 65001, ebgpMultihop: 2}"},
			[]want{{"bgp.peers[0].ebgpMultihop", "a link-local session is one hop", 6}}},
		{"link-local multihop", []string{`{name: a, address: "fe80::1%eth1", asn: 65001, ebgpMultihop: 2}`},
			[]want{{"bgp.peers[0].ebgpMultihop", "a link-local session is one hop", 6}}},
		{"unnumbered sourceAddress", []string{`{name: a, interface: eth1, asn: 65001, sourceAddress: "192.0.2.2"}`},
			[]want{{"bgp.peers[0].sourceAddress", "eth1's own link-local address is used", 6}}},
		{"link-local sourceAddress", []string{`{name: a, address: "fe80::1%eth1", asn: 65001, sourceAddress: "fe80::2"}`},
			[]want{{"bgp.peers[0].sourceAddress", "eth1's own link-local address is used", 6}}},
		{"two unnumbered peers on one link", []string{"{name: a, interface: eth1, asn: 65001}", "{name: b, interface: eth1, asn: 65002}"},
			[]want{{"bgp.peers[1].interface", "eth1 is also the interface of unnumbered peer bgp.peers[0]", 7}}},
		{"one link-local address twice", []string{`{name: a, address: "fe80::1%eth1", asn: 65001}`, `{name: b, address: "fe80::1", interface: eth1, asn: 65002}`},
			[]want{{"bgp.peers[1].address", "fe80::1%eth1 is also the address of bgp.peers[0]", 7}}},
		{"ipv6 over IPv4", []string{`{name: a, address: "192.0.2.1", asn: 65001, families: [ipv4, ipv6]}`},
			[]want{{"bgp.peers[0].families[1]", "FRR 8.4's zebra does not install", 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, parseErrors(t, peersDoc("", tc.peers...), fakeHost(nil)), tc.wants...)
		})
	}
}

// TestLinkLocalPasswords: Linux keys TCP MD5 by address, not by
// interface, so peers at one link-local address on different links must
// have the same password, or none.
func TestLinkLocalPasswords(t *testing.T) {
	dir := t.TempDir()
	one := writeSecret(t, dir, "one", "s3cret\n")
	same := writeSecret(t, dir, "same", "s3cret\n")
	other := writeSecret(t, dir, "other", "another\n")
	peers := func(a, b string) []string {
		pw := func(f string) string {
			if f == "" {
				return ""
			}
			return ", passwordFile: " + f
		}
		return []string{`{name: a, address: "fe80::1%eth1", asn: 65001` + pw(a) + "}", `{name: b, address: "fe80::1%eth2", asn: 65001` + pw(b) + "}"}
	}
	mustParse(t, peersDoc("", peers(one, same)...))
	mustParse(t, peersDoc("", peers("", "")...))
	const msg = "the same link-local address as bgp.peers[0] (fe80::1%eth1) but another password: Linux keys TCP MD5 by address, not by interface"
	for _, tc := range [][2]string{{one, other}, {one, ""}, {"", other}} {
		checkErrors(t, parseErrors(t, peersDoc("", peers(tc[0], tc[1])...), fakeHost(nil)), want{"bgp.peers[1].passwordFile", msg, 7})
	}
	// Unread, the secrets of two files cannot be compared: only a peer
	// with a passwordFile against one without is refused.
	skip := fakeHost(nil)
	skip.skipSecrets = true
	if _, err := parse([]byte(peersDoc("", peers(one, other)...)), "config.yaml", skip); err != nil {
		t.Errorf("two passwordFiles, not read: %v", err)
	}
	checkErrors(t, parseErrors(t, peersDoc("", peers(one, "")...), skip), want{"bgp.peers[1].passwordFile", msg, 7})
}

// TestOnLinkWarnings: a protected prefix holding link-local addresses
// refuses an on-link peer's routes through its own address.
func TestOnLinkWarnings(t *testing.T) {
	c := mustParse(t, peersDoc(importDoc(acceptTen, "")+"  - {name: up2, peers: [b, c], network: default, accept: [{prefix: 10.0.0.0/8, maxLength: 24}]}\nprotectedPrefixes: [\"fe80::/10\"]\n",
		"{name: tor-a, interface: eth1, asn: 65001}",
		`{name: b, address: "fe80::1%eth2", asn: 65001}`,
		`{name: c, address: "2001:db8::1", asn: 65001, families: [ipv4, ipv6]}`))
	got := map[string]string{}
	for _, w := range c.Warnings() {
		got[w.Path] = w.Msg
	}
	want := map[string]string{
		"bgp.peers[0].interface": "its link-local address on eth1 is inside fe80::/10, protectedPrefixes[0]",
		"bgp.peers[1].address":   "fe80::1%eth2 is inside fe80::/10, protectedPrefixes[0]",
	}
	for path, sub := range want {
		if !strings.Contains(got[path], sub) {
			t.Errorf("%s: warning %q, want one saying %q", path, got[path], sub)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected warning %s: %s", path, got[path])
		}
	}
}

// TestFamiliesReset: a reload adding ipv4 to an IPv6 session resets it,
// as `plan --config` predicts; an unnumbered peer's address given, or its
// link changed, resets it too.
func TestFamiliesReset(t *testing.T) {
	old := mustParse(t, peersDoc("",
		`{name: a, address: "2001:db8::1", asn: 65001}`,
		"{name: b, interface: eth1, asn: 65001}",
		"{name: c, interface: eth2, asn: 65001}",
		`{name: d, address: "fe80::1%eth3", asn: 65001}`))
	next := mustParse(t, peersDoc("",
		`{name: a, address: "2001:db8::1", asn: 65001, families: [ipv4, ipv6]}`,
		`{name: b, address: "fe80::1%eth1", asn: 65001}`,
		"{name: c, interface: eth4, asn: 65001}",
		`{name: d, address: "fe80::1", interface: eth3, asn: 65001}`))
	got := SessionResets(old, next)
	want := []SessionReset{
		{Peer: "a", Why: "changed: families"},
		{Peer: "b", Why: "changed: address"},
		{Peer: "c", Why: "changed: interface"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SessionResets = %+v, want %+v", got, want)
	}
}

// TestOnLinkRoundTrip: `config show` of on-link peers reads back as the
// same config (an unnumbered peer's address is empty, a link-local one
// keeps its zone).
func TestOnLinkRoundTrip(t *testing.T) {
	c := mustParse(t, peersDoc("",
		"{name: a, interface: eth1, asn: 65001}",
		`{name: b, address: "fe80::2", interface: eth2, asn: 65002}`))
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "fe80::2%eth2") {
		t.Errorf("YAML lacks fe80::2%%eth2:\n%s", y)
	}
	back := mustParse(t, string(y))
	if diff := cmp.Diff(c, back, cmpNetip); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}
