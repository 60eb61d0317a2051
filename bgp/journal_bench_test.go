package bgp

import (
	"net/netip"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// BenchmarkJournalPaths: the cost per path of recording an UPDATE event in
// the journal and taking it (paths of one UPDATE share their attributes,
// as gobgp delivers them). Reported per path.
func BenchmarkJournalPaths(b *testing.B) {
	addr := netip.MustParseAddr("192.0.2.1")
	s := &Speaker{log: zap.NewNop(), notify: func() {}, global: config.BGP{ASN: nodeASN, RouterID: netip.MustParseAddr("192.0.2.9")},
		journal: newJournal(), sess: sessions{learnFrom: map[netip.Addr]config.Peer{addr: {Name: "tor", Address: addr, ASN: provASN}}}}
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

// TestJournalSpareBounded: the emptied map of a small delta is reused; the
// map of a large one (a table transfer) is let go, not kept for good.
func TestJournalSpareBounded(t *testing.T) {
	j := newJournal()
	fill := func(n int) {
		j.mu.Lock()
		for i := range n {
			k := model.Key{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}
			j.gone[k] = struct{}{}
		}
		j.mu.Unlock()
	}
	fill(10)
	if d := j.take(); len(d.Gone) != 10 || j.spareGone == nil {
		t.Fatalf("small delta: %d gone, spare kept %v; want 10 and a spare", len(d.Gone), j.spareGone != nil)
	}
	j.take() // nothing: the spare stays
	fill(spareMax + 1)
	j.spareGone = nil
	if d := j.take(); len(d.Gone) != spareMax+1 || j.spareGone != nil {
		t.Fatalf("large delta: %d gone, spare kept %v; want %d and no spare", len(d.Gone), j.spareGone != nil, spareMax+1)
	}
}
