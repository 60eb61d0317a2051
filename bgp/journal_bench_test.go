package bgp

import (
	"net/netip"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
)

// BenchmarkJournalPaths: the cost per path of recording an UPDATE event in
// the journal and taking it (paths of one UPDATE share their attributes,
// as gobgp delivers them). Reported per path.
func BenchmarkJournalPaths(b *testing.B) {
	addr := netip.MustParseAddr("192.0.2.1")
	s := &Speaker{log: zap.NewNop(), notify: func() {}, global: config.BGP{ASN: nodeASN, RouterID: netip.MustParseAddr("192.0.2.9")},
		journal: newJournal(), learnFrom: map[netip.Addr]config.Peer{addr: {Name: "tor", Address: addr, ASN: provASN}}}
	nh, _ := bgppkt.NewPathAttributeNextHop(addr)
	attrs := []bgppkt.PathAttributeInterface{
		bgppkt.NewPathAttributeOrigin(0),
		bgppkt.NewPathAttributeAsPath([]bgppkt.AsPathParamInterface{bgppkt.NewAs4PathParam(bgppkt.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{provASN, 65002})}),
		nh,
		bgppkt.NewPathAttributeCommunities([]uint32{provASN<<16 | 1}),
	}
	const perUpdate = 500
	paths := make([]*apiutil.Path, perUpdate)
	for i := range paths {
		n, _ := bgppkt.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24))
		paths[i] = &apiutil.Path{Family: bgppkt.RF_IPv4_UC, Nlri: n, Attrs: attrs, Age: 1, PeerAddress: addr}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perUpdate {
		s.journalPaths(paths)
		if d := s.TakeLearned(); len(d.Paths) != perUpdate {
			b.Fatalf("%d paths", len(d.Paths))
		}
	}
}
