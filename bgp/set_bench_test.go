package bgp

import (
	"context"
	"net/netip"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// BenchmarkSet5000 measures Set of 5000 new prefixes to one established
// peer, then their withdrawal: the speaker's share of a bulk change.
func BenchmarkSet5000(b *testing.B) {
	l := newLab(b, 28)
	port := freePort(b)
	l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("a", 3, port, provASN))
	waitEstablished(b, node, "a")
	advs := make([]model.Advertisement, 5000)
	for i := range advs {
		advs[i] = model.Advertisement{Peer: "a", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if err := setAll(ctx, node, advs); err != nil {
			b.Fatal(err)
		}
		if err := setAll(ctx, node, nil); err != nil {
			b.Fatal(err)
		}
	}
}
