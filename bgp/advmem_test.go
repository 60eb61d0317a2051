package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvStateMemoryPerAdvertisement (issue 18, item 5): what the speaker
// keeps of each advertisement next to gobgp's path, at 10,000 VIPs of one
// rule to one peer, as the daemon gives them (rule, network, a source of
// its own each) and once Advertised has been read (every whole pass reads
// it): the heap that goes when its advertisement state is dropped, after
// a GC. A whole model.Advertisement per key (256 bytes, in a map of its
// own beside the map of groups) made it ~775 B an advertisement; a
// record with the attributes and explanation shared, in that map, ~615
// B; the record holding the group, one map, ~495 B (the sets of groups,
// paths and counts are most of the rest). gobgp's own memory is not
// counted: it keeps its paths and policies.
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
	// Above the one measured, below the two before.
	if per > 580 {
		t.Errorf("the speaker keeps %.0f B an advertisement at %d, want at most 580 (~495 measured): a copy per key again?", per, n)
	}
}

// TestAdvStateSharesWhys (issue 18, item 5): the records of the
// advertisements with the same attributes (as given) and explanation share
// one why, and a why goes with its last record: changing the rule of
// every advertisement leaves one why, of the new rule; attributes given in
// another order are another why (Advertised lists them as asked), in the
// same group; withdrawing everything leaves none.
func TestAdvStateSharesWhys(t *testing.T) {
	parallel(t)
	l := newLab(t, 121)
	node := l.node(false, l.peerOf("a", 3, freePort(t), provASN))
	c1, c2 := model.Community(65001<<16|1), model.Community(65001<<16|2)
	advs := make([]model.Advertisement, 100)
	for i := range advs {
		advs[i] = model.Advertisement{Peer: "a", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), 32),
			Rule: "vips", Network: "default", Source: fmt.Sprintf("lb %d", i), Attrs: model.PathAttrs{Communities: []model.Community{c1, c2}}}
	}
	whys := func() []string {
		node.mu.Lock()
		defer node.mu.Unlock()
		var out []string
		for k, list := range node.adv.whys {
			for _, w := range list {
				out = append(out, fmt.Sprintf("%s %v x%d", k.rule, w.attrs.Communities, w.refs))
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, want ...string) {
		t.Helper()
		if got := whys(); !slices.Equal(got, want) {
			t.Errorf("%s: whys %q, want %q", what, got, want)
		}
	}
	ctx := context.Background()
	if err := setAll(ctx, node, advs); err != nil {
		t.Fatal(err)
	}
	check("announced", "vips [65001:1 65001:2] x100")
	for i := range advs {
		advs[i].Rule = "other"
		if i%2 == 1 {
			advs[i].Attrs.Communities = []model.Community{c2, c1}
		}
	}
	// The diff sees no change of what is sent: Apply the records' change.
	if err := node.Apply(ctx, model.AdvertDiff{Change: advs}); err != nil {
		t.Fatal(err)
	}
	check("rule changed, half the communities given in another order",
		"other [65001:1 65001:2] x50", "other [65001:2 65001:1] x50")
	got := node.Advertised()
	if len(got) != len(advs) {
		t.Fatalf("%d advertised, want %d", len(got), len(advs))
	}
	for i, a := range got {
		if a.Rule != "other" || a.Source != advs[i].Source || !slices.Equal(a.Attrs.Communities, advs[i].Attrs.Communities) {
			t.Errorf("advertised %+v, want %+v", a, advs[i])
		}
	}
	if err := setAll(ctx, node, nil); err != nil {
		t.Fatal(err)
	}
	check("withdrawn")
}
