package plan

import (
	"cmp"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// fuzzPeers are the fixture's peers (linkLocalFixture), and one no rule
// lists.
var fuzzPeers = []string{"tor-a", "tor-b", "tor-c", "tor-6", "ghost", "tor-u", "tor-ll", "tor-mh"}

// fuzzZones are the zones a link-local next hop may carry: none, the
// unnumbered link eth2 (tor-u's and tor-ll's), another link, no link.
var fuzzZones = []string{"", "eth2", "eth0", "eth9"}

// fuzzPaths decodes learned paths from the fuzzer's bytes, 11 at a time:
// a flag byte (bit 0: IPv6, bit 1: malformed, bits 2-4: peer, bit 7: the
// next hop of the other family), the prefix length, 4 bytes of prefix and
// 4 of next hop (IPv6 spreads them into the documentation and link-local
// ranges and ::ffff:0:0/96 so that the interesting cases come up, and gives
// a link-local one a zone of fuzzZones), and a MED byte, whose bits also
// pick the communities (bits 0-2, fuzzCommunities) and the AS path after
// the first AS (bits 3-4, fuzzASPaths) (issue 21).
func fuzzPaths(data []byte) []model.LearnedPath {
	var out []model.LearnedPath
	for len(data) >= 11 {
		b := data[:11]
		data = data[11:]
		flags, bits := b[0], int(b[1])
		heads := [][2]byte{{0x20, 0x01}, {0xfe, 0x80}, {0x00, 0x00}, {0xfd, 0x98}}
		var prefix, nh netip.Addr
		if flags&1 == 0 {
			prefix = netip.AddrFrom4([4]byte(b[2:6]))
			bits %= 33
		} else {
			var p [16]byte
			hp := heads[b[2]%4]
			copy(p[:2], hp[:])
			copy(p[2:], []byte{0x0d, 0xb8, b[3], b[4], b[5]})
			prefix = netip.AddrFrom16(p)
			bits %= 129
		}
		if (flags&1 == 0) == (flags&0x80 == 0) {
			nh = netip.AddrFrom4([4]byte(b[6:10]))
		} else {
			var n [16]byte
			hn := heads[b[6]%4]
			copy(n[:2], hn[:])
			if hn[0] == 0x20 {
				n[2], n[3] = 0x0d, 0xb8 // 2001:db8::/64 is on eth0
			}
			n[10], n[11] = 0xff*(b[7]&1), 0xff*(b[7]&1) // sometimes IPv4-mapped
			copy(n[12:], b[6:10])
			nh = netip.AddrFrom16(n)
			if nh.IsLinkLocalUnicast() {
				nh = nh.WithZone(fuzzZones[b[7]>>1%4])
			}
		}
		if flags&0x20 != 0 {
			nh = netip.Addr{} // no next hop
		}
		p := model.LearnedPath{
			Peer: fuzzPeers[int(flags>>2&7)%len(fuzzPeers)], Prefix: netip.PrefixFrom(prefix, bits),
			NextHop: nh, ASPath: []uint32{65001}, Origin: "igp", MED: uint32(b[10]),
		}
		if flags&0x40 != 0 {
			p.Prefix = p.Prefix.Masked()
		}
		if flags&2 != 0 {
			p.Malformed = "AS 0 in the AS path (RFC 7607)"
		}
		p.Communities = fuzzCommunities[b[10]&7]
		p.ASPath = append([]uint32{65001}, fuzzASPaths[b[10]>>3&3]...)
		out = append(out, p)
	}
	return out
}

// fuzzCommunities and fuzzASPaths are what fuzzPaths gives a path: no
// community, fuzzFixture's wanted and rejected ones, both, and others.
var (
	fuzzCommunities = [][]string{nil, {"65001:100"}, {"65001:666"}, {"64512:1:100"}, {"64512:0:666", "65001:100"},
		{"65001:100", "64512:1:100"}, {"65001:200", "blackhole"}, {"64512:1:101"}}
	fuzzASPaths = [][]uint32{nil, {65010}, {65020}, {65010, 65020}}
)

// fuzzRejected are fuzzFixture's rejectCommunities, as paths carry them.
var fuzzRejected = []string{"65001:666", "64512:0:666", "blackhole"}

// fuzzFixture is linkLocalFixture with attribute matches (issue 21): rule
// up rejects fuzzRejected and has entries before and after its own that
// require communities, large communities, an AS in the path or an origin
// AS, with metrics.
func fuzzFixture() ImportInput {
	in := linkLocalFixture()
	r := &in.Config.Import[0]
	r.RejectCommunities = []config.AnyCommunity{{Community: 65001<<16 | 666}, {Large: true, LargeCommunity: model.LargeCommunity{ASN: 64512, Data2: 666}},
		{Community: 0xFFFF029A}}
	r.Accept = slices.Concat([]config.PrefixMatch{
		{Prefix: pfx("10.0.0.0/8"), MaxLength: 32, ASPathContains: []uint32{65010}, Metric: 5},
		{Prefix: pfx("10.0.0.0/9"), MaxLength: 24, Communities: []model.Community{65001<<16 | 100}, Metric: 7},
	}, r.Accept, []config.PrefixMatch{
		{Prefix: pfx("192.0.0.0/8"), MaxLength: 32, Communities: []model.Community{65001<<16 | 100}, Metric: 30},
		{Prefix: pfx("198.0.0.0/8"), MaxLength: 32, LargeCommunities: []model.LargeCommunity{{ASN: 64512, Data1: 1, Data2: 100}}, OriginAS: 65020},
		{Prefix: pfx("2000::/3"), MaxLength: 128, ASPathContains: []uint32{65010}, Metric: 9},
	})
	return in
}

// fuzzEntry is the first accept entry of r that path p matches, prefix and
// attributes, told without plan's code.
func fuzzEntry(r *config.ImportRule, p model.LearnedPath) (config.PrefixMatch, bool) {
	for _, m := range r.Accept {
		if !m.Matches(p.Prefix) {
			continue
		}
		if len(m.Communities) > 0 && !slices.ContainsFunc(m.Communities, func(c model.Community) bool { return slices.Contains(p.Communities, c.String()) }) {
			continue
		}
		if len(m.LargeCommunities) > 0 && !slices.ContainsFunc(m.LargeCommunities, func(c model.LargeCommunity) bool { return slices.Contains(p.Communities, c.String()) }) {
			continue
		}
		if len(m.ASPathContains) > 0 && !slices.ContainsFunc(m.ASPathContains, func(a uint32) bool { return slices.Contains(p.ASPath, a) }) {
			continue
		}
		if m.OriginAS != 0 && (len(p.ASPath) == 0 || p.ASPath[len(p.ASPath)-1] != m.OriginAS) {
			continue
		}
		return m, true
	}
	return config.PrefixMatch{}, false
}

// FuzzImportDecision feeds the import filter learned paths of any shape
// (prefixes with host bits, any length, next hops of the other family,
// local, link-local with any zone or none, IPv4-mapped or missing,
// malformed paths, unknown peers, unnumbered and multihop peers) and
// checks that nothing forbidden is accepted or wanted in OVN or the
// kernel, that a path carrying a rejectCommunities value is never
// accepted, that an accepted path matches an accept entry in full, that a
// kernel route has the lowest metric of its prefix's accepted paths, and
// that a table fed in two steps decides as one built at once.
func FuzzImportDecision(f *testing.F) {
	f.Add([]byte{0x40, 24, 10, 1, 2, 0, 192, 0, 2, 1, 0})                                                // accepted
	f.Add([]byte{0x40, 23, 10, 128, 0, 0, 192, 0, 2, 1, 0})                                              // a pod subnet: protected
	f.Add([]byte{0x40, 0, 0, 0, 0, 0, 192, 0, 2, 1, 0})                                                  // the default route
	f.Add([]byte{0x00, 24, 10, 1, 2, 7, 127, 0, 0, 1, 0})                                                // host bits, loopback next hop
	f.Add([]byte{0x41 | 3<<2, 48, 0, 1, 0, 0, 0, 0, 0, 0x10, 0})                                         // IPv6 from tor-6 via the host's own 2001:db8::10: local
	f.Add([]byte{0x42, 24, 10, 9, 9, 0, 192, 0, 2, 1, 0, 0x40 | 4<<2, 8, 10, 0, 0, 0, 192, 0, 2, 1, 1})  // malformed; a ghost peer
	f.Add([]byte{0xc0 | 5<<2, 24, 10, 1, 2, 0, 1, 2, 0, 1, 0})                                           // IPv4 via fe80::…%eth2 from tor-u: accepted, kernel only
	f.Add([]byte{0xc0 | 5<<2, 24, 10, 1, 2, 0, 1, 4, 0, 1, 0})                                           // the same via fe80::…%eth0: refused
	f.Add([]byte{0xc0 | 0<<2, 24, 10, 1, 2, 0, 0, 0x10, 0, 1, 0})                                        // IPv4 via 2001:… from tor-a (IPv4 session): refused
	f.Add([]byte{0xc0 | 3<<2, 24, 10, 1, 2, 0, 0, 0x10, 0, 1, 0})                                        // IPv4 via 2001:… from tor-6: kernel only (and OVN with northd 25.03)
	f.Add([]byte{0x41 | 7<<2, 48, 0, 1, 0, 0, 1, 4, 0, 1, 0})                                            // IPv6 via fe80::…%eth0 from multihop tor-mh: refused
	f.Add([]byte{0xc0 | 5<<2, 24, 10, 1, 2, 0, 1, 2, 0, 0x20, 0})                                        // IPv4 via fe80::102:20%eth2, the host's own: refused
	f.Add([]byte{0x40, 24, 10, 1, 2, 0, 192, 0, 2, 1, 2, 0x44, 24, 10, 1, 2, 0, 192, 0, 2, 2, 1 | 1<<3}) // rejected by community; accepted at metric 5
	f.Add([]byte{0x40, 24, 198, 1, 2, 0, 192, 0, 2, 1, 3 | 2<<3})                                        // large community and origin AS
	base := fuzzFixture()
	prot := Protected(base.Config, base.Snapshot, base.Host)
	f.Fuzz(func(t *testing.T, data []byte) {
		paths := fuzzPaths(data)
		if len(paths) > 64 {
			paths = paths[:64]
		}
		// Every input twice: with a northd of unknown version and with
		// one that takes an IPv4 prefix via an IPv6 next hop (OVN 25.03).
		for _, northd := range []model.NorthdVersion{{}, {Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"}} {
			fuzzDecide(t, prot, paths, northd)
		}
	})
}

// fuzzDecide is one FuzzImportDecision run of paths with northd.
func fuzzDecide(t *testing.T, prot []model.ProtectedPrefix, paths []model.LearnedPath, northd model.NorthdVersion) {
	in := fuzzFixture()
	in.Snapshot.Northd = northd
	in.Learned = paths
	once := NewImportTable(in).Result()

	in.Learned = nil
	table := NewImportTable(in)
	half := len(paths) / 2
	table.Update(TableChange{Paths: paths[:half]})
	table.Update(TableChange{Paths: paths[half:]})
	stepped := table.Result()
	for _, r := range []*ImportResult{&once, &stepped} {
		slices.SortFunc(r.Paths, func(a, b model.LearnedPath) int {
			return cmp.Or(strings.Compare(a.Peer, b.Peer), model.ComparePrefix(a.Prefix, b.Prefix))
		})
	}
	if !reflect.DeepEqual(once.Paths, stepped.Paths) || !reflect.DeepEqual(once.OVN, stepped.OVN) || !reflect.DeepEqual(once.Kernel, stepped.Kernel) {
		t.Fatalf("a table fed in two steps decides differently from one built at once:\nonce %+v\nstepped %+v", once, stepped)
	}

	accepted := map[netip.Prefix]bool{}
	bestMetric, hasMetric := map[netip.Prefix]uint32{}, map[netip.Prefix]bool{}
	for _, p := range once.Paths {
		if !p.Accepted {
			if p.Reason == "" {
				t.Fatalf("rejected without a reason: %+v", p)
			}
			continue
		}
		accepted[p.Prefix] = true
		checkImportable(t, prot, p.Prefix, p.NextHop, p.Malformed, p.Peer)
		for _, c := range p.Communities {
			if slices.Contains(fuzzRejected, c) {
				t.Fatalf("%s from %s accepted with community %s, which rejectCommunities lists: %s", p.Prefix, p.Peer, c, p.Reason)
			}
		}
		m, ok := fuzzEntry(&in.Config.Import[0], p)
		if !ok {
			t.Fatalf("%s from %s (communities %v, AS path %v) accepted, but no accept entry matches it: %s", p.Prefix, p.Peer, p.Communities, p.ASPath, p.Reason)
		}
		if m.Metric < bestMetric[p.Prefix] || !hasMetric[p.Prefix] {
			bestMetric[p.Prefix], hasMetric[p.Prefix] = m.Metric, true
		}
	}
	for _, r := range once.OVN {
		if !accepted[r.Prefix] {
			t.Fatalf("OVN route for %s, which no accepted path has", r.Prefix)
		}
		// northd before OVN 25.03 ignores a static route whose
		// families differ, and a zone is not valid in NB (issue 20).
		mixed := r.Prefix.Addr().Is4() && r.NextHop.Is6() && !r.NextHop.Is4In6()
		if r.NextHop.Is4() != r.Prefix.Addr().Is4() && !(mixed && northd.MixedFamilyRoutes()) || r.NextHop.Zone() != "" || r.NextHop.IsLinkLocalUnicast() {
			t.Fatalf("OVN route %s via %s (northd %s)", r.Prefix, r.NextHop, northd)
		}
		checkImportable(t, prot, r.Prefix, r.NextHop, "", "")
	}
	for _, r := range once.Kernel {
		if !accepted[r.Prefix] {
			t.Fatalf("kernel route for %s, which no accepted path has", r.Prefix)
		}
		if r.Metric != bestMetric[r.Prefix] {
			t.Fatalf("kernel route for %s has metric %d, not its accepted paths' lowest %d", r.Prefix, r.Metric, bestMetric[r.Prefix])
		}
		for _, nh := range r.NextHops {
			// The kernel's address carries no zone; a link-local one
			// is through eth2, and not the host's own there.
			if nh.Addr.Zone() != "" || nh.Addr.IsLinkLocalUnicast() && (nh.Dev != "eth2" || nh.Addr == netip.MustParseAddr("fe80::102:20")) {
				t.Fatalf("kernel route %s via %+v", r.Prefix, nh)
			}
			a := nh.Addr
			if a.Is6() && a.IsLinkLocalUnicast() {
				a = a.WithZone(nh.Dev)
			}
			checkImportable(t, prot, r.Prefix, a, "", "")
		}
	}
}

// fuzzSessions6 are linkLocalFixture's peers whose session runs over IPv6
// (an IPv4 prefix may have an IPv6 next hop from them, RFC 8950), and
// fuzzOnLink those on an unnumbered link, by the zone their link-local
// next hops must carry (issue 20).
var (
	fuzzSessions6 = []string{"tor-6", "tor-u", "tor-ll", "tor-mh"}
	fuzzOnLink    = map[string]string{"tor-u": "eth2", "tor-ll": "eth2"}
)

// checkImportable fails the test if an accepted prefix and next hop break
// a safety rule (docs/architecture.md, "Safety rules"); peer is the path's
// peer, "" for an installed route (whose link-local next hop has its
// device as zone).
func checkImportable(t *testing.T, prot []model.ProtectedPrefix, p netip.Prefix, nh netip.Addr, malformed, peer string) {
	t.Helper()
	mixed := p.Addr().Is4() && nh.Is6() && !nh.Is4In6()
	linkLocal := nh.Is6() && nh.IsLinkLocalUnicast()
	switch {
	case mixed && peer != "" && !slices.Contains(fuzzSessions6, peer):
		t.Fatalf("%s accepted with IPv6 next hop %s from peer %s, whose session is over IPv4", p, nh, peer)
	case linkLocal && peer != "" && (fuzzOnLink[peer] == "" || nh.Zone() != fuzzOnLink[peer]):
		t.Fatalf("%s accepted with link-local next hop %s from peer %s (on link %q)", p, nh, peer, fuzzOnLink[peer])
	case linkLocal && nh.WithZone("") == netip.MustParseAddr("fe80::102:20") && nh.Zone() == "eth2":
		t.Fatalf("%s accepted via the host's own link-local address %s", p, nh)
	case linkLocal && nh.Zone() == "":
		t.Fatalf("%s accepted with link-local next hop %s without a zone", p, nh)
	case !linkLocal && nh.Zone() != "":
		t.Fatalf("%s accepted with zoned next hop %s", p, nh)
	}
	switch {
	case malformed != "":
		t.Fatalf("malformed path accepted: %s (%s)", p, malformed)
	case !p.IsValid() || p != p.Masked():
		t.Fatalf("accepted prefix %s is invalid or has host bits", p)
	case p.Bits() == 0:
		t.Fatalf("default route %s accepted by a rule without allowDefaultRoute", p)
	case p.Addr().Is4In6():
		t.Fatalf("IPv4-mapped prefix %s accepted", p)
	case !nh.IsValid() || nh.Is4() != p.Addr().Is4() && !mixed || nh.Is4In6():
		t.Fatalf("%s accepted with next hop %v", p, nh)
	case nh.IsLoopback() || nh.IsUnspecified() || nh.IsMulticast() || nh.Is4() && nh.IsLinkLocalUnicast():
		t.Fatalf("%s accepted with next hop %s", p, nh)
	}
	for _, pp := range prot {
		if pp.Prefix.Overlaps(p) && pp.Prefix.Bits() <= p.Bits() {
			t.Fatalf("%s accepted inside protected %s (%s)", p, pp.Prefix, pp.Why)
		}
		// A next hop may be a peer's address; a host address is refused
		// as local by its own check.
		if pp.Prefix.Contains(nh.WithZone("")) && !strings.HasPrefix(pp.Why, whyPeer) && !strings.HasPrefix(pp.Why, whyHost) {
			t.Fatalf("%s accepted via %s, inside protected %s (%s)", p, nh, pp.Prefix, pp.Why)
		}
	}
}
