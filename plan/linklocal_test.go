package plan

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// linkLocalFixture is importFixture with an unnumbered link eth2 (only its
// link-local address) and three more peers in rule up (issue 20): tor-u,
// unnumbered on eth2; tor-ll, given by hand as fe80::99%eth2; tor-mh, a
// numbered multihop peer whose next hops are on eth0.
func linkLocalFixture() ImportInput {
	in := importFixture()
	in.Host.Links = append(in.Host.Links, model.Link{Name: "eth2", Index: 4, Up: true, Addrs: []netip.Prefix{pfx("fe80::102:20/64")}})
	in.Config.BGP.Peers = append(in.Config.BGP.Peers,
		config.Peer{Name: "tor-u", Interface: "eth2", ASN: 65003, Families: []config.Family{config.IPv4, config.IPv6}},
		config.Peer{Name: "tor-ll", Address: addr("fe80::99%eth2"), Interface: "eth2", ASN: 65003, Families: []config.Family{config.IPv4, config.IPv6}},
		config.Peer{Name: "tor-mh", Address: addr("2001:db8:77::1"), Interface: "eth0", EBGPMultihop: 2, ASN: 65004, Families: []config.Family{config.IPv4, config.IPv6}},
	)
	in.Config.Import[0].Peers = append(in.Config.Import[0].Peers, "tor-u", "tor-ll", "tor-mh")
	return in
}

// TestImportLinkLocalNextHops (issue 20, contract items 4-6): an IPv6
// next hop for an IPv4 prefix only from a session over IPv6; a link-local
// next hop only with the zone of the peer's own link, from a peer on that
// link, and never one of the node's own addresses on it; the kernel route
// gets the address without the zone and the zone as its device; northd
// before OVN 25.03 ignores an IPv4 prefix with an IPv6 next hop, so with
// such a northd, or one of unknown version, the OVN target skips it (the
// kernel target installs it), and from 25.03 on takes it; no link-local
// next hop goes into NB. Reasons are exact.
func TestImportLinkLocalNextHops(t *testing.T) {
	const (
		mixed     = `: northd version unknown (no NB_Global options:northd_internal_version), taken as before OVN 25.03, which ignores a static route whose families differ ("Address family doesn't match")`
		mixed2409 = `: northd 24.09 is before OVN 25.03, and ignores a static route whose families differ ("Address family doesn't match")`
		mixedBad  = `: northd version unknown (NB_Global options:northd_internal_version "garbage"), taken as before OVN 25.03, which ignores a static route whose families differ ("Address family doesn't match")`
	)
	v2409 := model.NorthdVersion{Major: 24, Minor: 9, Raw: "24.09.2-20.37.0-73.4"}
	v2503 := model.NorthdVersion{Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"}
	v2603 := model.NorthdVersion{Major: 26, Minor: 3, Raw: "26.03.1-21.1.0-80.15"}
	bad := model.NorthdVersion{Raw: "garbage"}
	tests := []struct {
		name    string
		path    model.LearnedPath
		ovnOnly bool
		northd  model.NorthdVersion
		reason  string
		kernel  []model.NextHop // nil: rejected
		ovn     int
	}{
		{"unnumbered IPv4 via link-local", path("tor-u", "10.1.0.0/16", "fe80::1%eth2"), false, model.NorthdVersion{},
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop fe80::1%eth2" + mixed + " (network default)",
			[]model.NextHop{{Addr: addr("fe80::1"), Dev: "eth2"}}, 0},
		{"unnumbered IPv6 via link-local", path("tor-u", "2001:db8:100::/48", "fe80::1%eth2"), false, model.NorthdVersion{},
			"accepted by rule up (2001:db8:100::/40 length 40..64), installed in table 100 only: not in OVN: next hop fe80::1%eth2 of 2001:db8:100::/48 is link-local: ovnbgp writes no link-local next hop into NB (network default)",
			[]model.NextHop{{Addr: addr("fe80::1"), Dev: "eth2"}}, 0},
		{"peer given by link-local address", path("tor-ll", "10.1.0.0/16", "fe80::99%eth2"), false, model.NorthdVersion{},
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop fe80::99%eth2" + mixed + " (network default)",
			[]model.NextHop{{Addr: addr("fe80::99"), Dev: "eth2"}}, 0},
		{"another link's address, on this link", path("tor-u", "10.1.0.0/16", "fe80::10%eth2"), false, model.NorthdVersion{},
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop fe80::10%eth2" + mixed + " (network default)",
			[]model.NextHop{{Addr: addr("fe80::10"), Dev: "eth2"}}, 0},
		{"IPv4 over IPv6 with a global next hop", path("tor-6", "10.1.0.0/16", "2001:db8::5"), false, model.NorthdVersion{},
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop 2001:db8::5" + mixed + " (network default)",
			[]model.NextHop{{Addr: addr("2001:db8::5"), Dev: "eth0"}}, 0},
		{"OVN-only rule", path("tor-u", "10.1.0.0/16", "fe80::1%eth2"), true, model.NorthdVersion{},
			"IPv4 prefix with IPv6 next hop fe80::1%eth2" + mixed + "; only a kernel target installs it (rule up, network default)", nil, 0},
		{"IPv4 over IPv6, northd 24.09", path("tor-6", "10.1.0.0/16", "2001:db8::5"), false, v2409,
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop 2001:db8::5" + mixed2409 + " (network default)",
			[]model.NextHop{{Addr: addr("2001:db8::5"), Dev: "eth0"}}, 0},
		{"IPv4 over IPv6, northd version garbage", path("tor-6", "10.1.0.0/16", "2001:db8::5"), false, bad,
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop 2001:db8::5" + mixedBad + " (network default)",
			[]model.NextHop{{Addr: addr("2001:db8::5"), Dev: "eth0"}}, 0},
		{"IPv4 over IPv6, northd 25.03", path("tor-6", "10.1.0.0/16", "2001:db8::5"), false, v2503,
			"accepted by rule up (10.0.0.0/8 length 8..24)",
			[]model.NextHop{{Addr: addr("2001:db8::5"), Dev: "eth0"}}, 1},
		{"IPv4 over IPv6, northd 26.03", path("tor-6", "10.1.0.0/16", "2001:db8::5"), false, v2603,
			"accepted by rule up (10.0.0.0/8 length 8..24)",
			[]model.NextHop{{Addr: addr("2001:db8::5"), Dev: "eth0"}}, 1},
		{"IPv4 over IPv6, OVN-only rule, northd 25.03", path("tor-6", "10.1.0.0/16", "2001:db8::5"), true, v2503,
			"accepted by rule up (10.0.0.0/8 length 8..24)", []model.NextHop{}, 1},
		{"IPv4 over IPv6, OVN-only rule, northd 24.09", path("tor-6", "10.1.0.0/16", "2001:db8::5"), true, v2409,
			"IPv4 prefix with IPv6 next hop 2001:db8::5" + mixed2409 + "; only a kernel target installs it (rule up, network default)", nil, 0},
		{"unnumbered IPv4 via link-local, northd 25.03", path("tor-u", "10.1.0.0/16", "fe80::1%eth2"), false, v2503,
			"accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: next hop fe80::1%eth2 of 10.1.0.0/16 is link-local: ovnbgp writes no link-local next hop into NB (network default)",
			[]model.NextHop{{Addr: addr("fe80::1"), Dev: "eth2"}}, 0},
		{"OVN-only rule, link-local, northd 25.03", path("tor-u", "10.1.0.0/16", "fe80::1%eth2"), true, v2503,
			"next hop fe80::1%eth2 of 10.1.0.0/16 is link-local: ovnbgp writes no link-local next hop into NB (rule up, network default)", nil, 0},
		{"IPv6 next hop over an IPv4 session", path("tor-a", "10.1.0.0/16", "2001:db8::5"), false, model.NorthdVersion{},
			"next hop 2001:db8::5 is IPv6 but the prefix 10.1.0.0/16 is IPv4, and peer tor-a's session is over IPv4: an IPv6 next hop for an IPv4 prefix (RFC 8950) comes only over an IPv6 session (rule up)", nil, 0},
		{"another link's zone", path("tor-u", "10.1.0.0/16", "fe80::1%eth0"), false, model.NorthdVersion{},
			"next hop fe80::1%eth0 of 10.1.0.0/16 is a link-local address on eth0, not on peer tor-u's link eth2 (rule up)", nil, 0},
		{"no zone", path("tor-u", "10.1.0.0/16", "fe80::1"), false, model.NorthdVersion{},
			"next hop fe80::1 of 10.1.0.0/16 is a link-local address without a zone: the link it is on is unknown (rule up)", nil, 0},
		{"own link-local on that link", path("tor-u", "10.1.0.0/16", "fe80::102:20%eth2"), false, model.NorthdVersion{},
			"next hop fe80::102:20%eth2 of 10.1.0.0/16 is local (an address of host link eth2) (rule up)", nil, 0},
		{"numbered multihop peer", path("tor-mh", "10.1.0.0/16", "fe80::1%eth0"), false, model.NorthdVersion{},
			"next hop fe80::1%eth0 of 10.1.0.0/16 is a link-local address, and peer tor-mh is multihop (ebgpMultihop 2): a link-local next hop is accepted only from a peer on that link (rule up)", nil, 0},
		{"numbered peer without interface", path("tor-6", "2001:db8:100::/48", "fe80::1%eth0"), false, model.NorthdVersion{},
			"next hop fe80::1%eth0 of 2001:db8:100::/48 is a link-local address, and peer tor-6 has no interface: a link-local next hop is accepted only from a peer on that link (bgp.peers[].interface) (rule up)", nil, 0},
		{"IPv4 link-local", path("tor-a", "10.1.0.0/16", "169.254.1.1"), false, model.NorthdVersion{},
			"next hop 169.254.1.1 of 10.1.0.0/16 is a link-local address (rule up)", nil, 0},
		{"zone on a global address", path("tor-u", "10.1.0.0/16", "2001:db8::5%eth2"), false, model.NorthdVersion{},
			"next hop 2001:db8::5%eth2 of 10.1.0.0/16 carries a zone but is not link-local (rule up)", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := linkLocalFixture()
			if tt.ovnOnly {
				in.Config.Import[0].Targets.Kernel = config.KernelTarget{}
			}
			in.Snapshot.Northd = tt.northd
			in.Learned = []model.LearnedPath{tt.path}
			res := Import(in)
			got := res.Paths[0]
			if got.Accepted != (tt.kernel != nil) || got.Reason != tt.reason {
				t.Errorf("got accepted=%v %q\nwant accepted=%v %q", got.Accepted, got.Reason, tt.kernel != nil, tt.reason)
			}
			var hops []model.NextHop
			for _, r := range res.Kernel {
				hops = append(hops, r.NextHops...)
			}
			if diff := cmp.Diff(tt.kernel, hops, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); len(tt.kernel)+len(hops) > 0 && diff != "" {
				t.Errorf("kernel next hops (-want +got):\n%s", diff)
			}
			if len(res.OVN) != tt.ovn {
				t.Errorf("OVN rows %+v, want %d", res.OVN, tt.ovn)
			}
			for _, r := range res.OVN {
				if r.Prefix != tt.path.Prefix || r.NextHop != tt.path.NextHop || r.Router != "GR_n1" || r.OutputPort != "rtoe-GR_n1" {
					t.Errorf("OVN row %+v, want %s via %s on GR_n1 out of rtoe-GR_n1", r, tt.path.Prefix, tt.path.NextHop)
				}
			}
		})
	}
}

// TestExplainLinkLocal: explain shows an unnumbered peer's IPv4 path via a
// link-local next hop with its zone, the reason it is not in OVN, and the
// kernel route via the address and the device (issue 20); a path refused
// for its IPv6 next hop over an IPv4 session says why.
func TestExplainLinkLocal(t *testing.T) {
	in := linkLocalFixture()
	in.Learned = []model.LearnedPath{path("tor-u", "10.1.0.0/16", "fe80::1%eth2"), path("tor-a", "10.2.0.0/16", "2001:db8::5")}
	res := Import(in)
	p := Build(BuildInput{Node: "n1", Config: in.Config, Import: res, Snapshot: in.Snapshot, Host: in.Host})
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"10.1.0.0/16", []string{
			`import: peer tor-u sent 10.1.0.0/16 via fe80::1%eth2: accepted: accepted by rule up (10.0.0.0/8 length 8..24), installed in table 100 only: not in OVN: IPv4 prefix with IPv6 next hop fe80::1%eth2: northd version unknown (no NB_Global options:northd_internal_version), taken as before OVN 25.03, which ignores a static route whose families differ ("Address family doesn't match") (network default)`,
			"installed: nowhere (no owned OVN row nor kernel route for 10.1.0.0/16 or a prefix covering it)",
			"pending: kernel add 10.1.0.0/16 in table 100 via fe80::1 dev eth2",
			"advertise: no rule advertises 10.1.0.0/16 or a prefix covering it",
		}},
		{"10.2.0.0/16", []string{
			"import: peer tor-a sent 10.2.0.0/16 via 2001:db8::5: rejected: next hop 2001:db8::5 is IPv6 but the prefix 10.2.0.0/16 is IPv4, and peer tor-a's session is over IPv4: an IPv6 next hop for an IPv4 prefix (RFC 8950) comes only over an IPv6 session (rule up)",
			"installed: nowhere (no owned OVN row nor kernel route for 10.2.0.0/16 or a prefix covering it)",
			"advertise: no rule advertises 10.2.0.0/16 or a prefix covering it",
		}},
	} {
		e := Explain(in.Config, pfx(tt.prefix), res, nil, p, in.Snapshot, in.Host, testNow)
		if d := cmp.Diff(tt.want, e.Summary); d != "" {
			t.Errorf("%s: summary (-want +got):\n%s", tt.prefix, d)
		}
	}
}

// TestCountLinkLocalInstalled: Count asks installed with a link-local next
// hop without its zone, as the kernel route carries it, so a path via
// fe80::1%eth2 counts as installed when table 100 has fe80::1 dev eth2
// (issue 20).
func TestCountLinkLocalInstalled(t *testing.T) {
	in := linkLocalFixture()
	in.Learned = []model.LearnedPath{path("tor-u", "10.1.0.0/16", "fe80::1%eth2")}
	table := NewImportTable(in)
	c := table.Count(func(p netip.Prefix, nh netip.Addr) bool { return p == pfx("10.1.0.0/16") && nh == addr("fe80::1") })
	if got := c.ByPeer["tor-u"].Installed; got != 1 {
		t.Errorf("tor-u installed = %d, want 1 (counts %+v)", got, c)
	}
}
