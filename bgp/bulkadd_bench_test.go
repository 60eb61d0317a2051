package bgp

import (
	"context"
	"net/netip"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// BenchmarkApplyBulkAdd10000 (issue 18, the bulk of 10,000 VIPs): Apply
// of 10,000 new /32s of one rule to one established peer, gobgp's AddPath
// included (each is withdrawn again, untimed). No timing is asserted.
func BenchmarkApplyBulkAdd10000(b *testing.B) {
	l := newLab(b, 45)
	port := freePort(b)
	l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("a", 3, port, provASN))
	waitEstablished(b, node, "a")
	advs := make([]model.Advertisement, 10000)
	for i := range advs {
		advs[i] = model.Advertisement{Peer: "a", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)}
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if err := node.Apply(ctx, model.AdvertDiff{Announce: advs}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := node.Apply(ctx, model.AdvertDiff{Withdraw: advs}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
