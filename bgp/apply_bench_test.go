package bgp

import (
	"context"
	"net/netip"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// BenchmarkApplyOneChange10000 measures Apply of one changed advertisement
// (its MED toggles, so it moves between two groups and the peer gets a soft
// reset) among 10,000 in effect to one established peer. No timing is
// asserted.
func BenchmarkApplyOneChange10000(b *testing.B) {
	l := newLab(b, 29)
	port := freePort(b)
	l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("a", 3, port, provASN))
	waitEstablished(b, node, "a")
	advs := make([]model.Advertisement, 10000)
	for i := range advs {
		advs[i] = model.Advertisement{Peer: "a", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}
	}
	ctx := context.Background()
	if err := setAll(ctx, node, advs); err != nil {
		b.Fatal(err)
	}
	one := advs[7]
	b.ResetTimer()
	for i := range b.N {
		one.Attrs.MED = uint32(i%2 + 1)
		if err := node.Apply(ctx, model.AdvertDiff{Change: []model.Advertisement{one}}); err != nil {
			b.Fatal(err)
		}
	}
}
