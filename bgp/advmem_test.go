package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvStateMemoryPerAdvertisement (issue 18, item 5): what the speaker
// keeps of each advertisement next to gobgp's path, at 10,000 VIPs of one
// rule to one peer, as the daemon gives them (rule, network, a source of
// its own each) and once Advertised has been read (every whole pass reads
// it): the heap that goes when its advertisement state is dropped, after
// a GC. A whole model.Advertisement per key (256 bytes, plus its map
// entry) made it ~775 B an advertisement; a record with the attributes
// and explanation shared, ~615 B (the maps of groups, paths and counts
// are most of the rest). gobgp's own memory is not counted: it keeps its
// paths and policies.
func TestAdvStateMemoryPerAdvertisement(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 advertisements in a real gobgp")
	}
	const n = 10000
	l := newLab(t, 120)
	node := l.node(false, l.peerOf("a", 3, freePort(t), provASN)) // no provider: nothing is sent
	advs := make([]model.Advertisement, n)
	for i := range advs {
		a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		advs[i] = model.Advertisement{Peer: "a", Prefix: netip.PrefixFrom(a, 32), Rule: "vips", Network: "default",
			Source: fmt.Sprintf("Load_Balancer Service_ns/svc%d_TCP_cluster", i)}
	}
	if err := setAll(context.Background(), node, advs); err != nil {
		t.Fatal(err)
	}
	if got := node.Advertised(); len(got) != n {
		t.Fatalf("%d advertised, want %d", len(got), n)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	with := heap()
	node.mu.Lock()
	node.adv = newAdvState()
	node.mu.Unlock()
	without := heap()
	runtime.KeepAlive(advs)
	per := (float64(with) - float64(without)) / n
	t.Logf("the speaker's advertisement state: %.0f B an advertisement at %d", per, n)
	// Between the two layouts, a little above the one measured.
	if per > 690 {
		t.Errorf("the speaker keeps %.0f B an advertisement at %d, want at most 690 (~615 measured): a whole copy per key again?", per, n)
	}
}
