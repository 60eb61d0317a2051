package bgp

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvertisedKeptUntilChange: Advertised keeps its sorted list of what
// is in effect between calls while nothing changes (every pass of the
// daemon asks for it: building it was a map of every key and a sort), and
// every change (Apply, a session state, a peer removed) shows in the next
// call as a list built from scratch shows it.
func TestAdvertisedKeptUntilChange(t *testing.T) {
	parallel(t)
	l := newLab(t, 118)
	port, portB := freePort(t), freePort(t)
	l.provider(3, port, provASN, false, "")
	l.provider(4, portB, provASN+1, false, "")
	tor := l.peerOf("tor", 3, port, provASN)
	node := l.node(false, tor, l.peerOf("b", 4, portB, provASN+1))

	// fresh is Advertised computed without what it kept.
	fresh := func() []model.Advertisement {
		node.mu.Lock()
		node.adv.changed()
		node.mu.Unlock()
		return node.Advertised()
	}
	kept := func() []*record {
		node.mu.Lock()
		defer node.mu.Unlock()
		return node.adv.inEffect
	}
	check := func(what string, want ...string) {
		t.Helper()
		got := node.Advertised()
		var prefixes []string
		for _, a := range got {
			prefixes = append(prefixes, a.Prefix.String())
		}
		if !reflect.DeepEqual(prefixes, want) {
			t.Fatalf("%s: advertised %v, want %v", what, prefixes, want)
		}
		// The send state is asked on each call (the session may come up
		// between the two): the kept entries are what is compared.
		if diff := cmp.Diff(fresh(), got, cmpOpts, cmpopts.IgnoreFields(model.Advertisement{}, "State", "Reason")); diff != "" {
			t.Fatalf("%s: kept list differs from one built anew (-fresh +kept):\n%s", what, diff)
		}
	}

	a := model.PathAttrs{}
	set(t, node, adv("tor", "10.118.1.0/24", a), adv("tor", "10.118.0.0/24", a))
	check("two announced", "10.118.0.0/24", "10.118.1.0/24")
	first := kept()
	if len(first) != 2 {
		t.Fatalf("Advertised kept %d entries, want 2", len(first))
	}
	node.Advertised()
	if again := kept(); len(again) != 2 || &again[0] != &first[0] {
		t.Errorf("Advertised built its list again with nothing changed")
	}

	// The session comes up: the state changes, the list is the same.
	waitEstablished(t, node, "tor")
	eventually(t, routeTimeout, "sent once established", func() (bool, string) {
		got := node.Advertised()
		return len(got) == 2 && got[0].State == model.AdvSent && got[1].State == model.AdvSent, ""
	})
	check("established", "10.118.0.0/24", "10.118.1.0/24")

	// A change: another attribute, one withdrawn, one added.
	b := model.PathAttrs{MED: 7}
	set(t, node, adv("tor", "10.118.1.0/24", b), adv("tor", "10.118.2.0/24", a))
	check("changed", "10.118.1.0/24", "10.118.2.0/24")
	if got := node.Advertised(); got[0].Attrs.MED != 7 {
		t.Errorf("10.118.1.0/24 MED %d after the change, want 7", got[0].Attrs.MED)
	}

	// A prefix already in the RIB selected for another peer too, then
	// deselected for it: no path is added or withdrawn, only the
	// selection changes.
	waitEstablished(t, node, "b")
	set(t, node, adv("tor", "10.118.1.0/24", b), adv("tor", "10.118.2.0/24", a), adv("b", "10.118.2.0/24", a))
	check("selected for b too", "10.118.2.0/24", "10.118.1.0/24", "10.118.2.0/24")
	set(t, node, adv("tor", "10.118.1.0/24", b), adv("tor", "10.118.2.0/24", a))
	check("deselected for b", "10.118.1.0/24", "10.118.2.0/24")

	// The peers removed: SetPeers withdraws nothing; what stays installed
	// is listed, pending, until the plan's withdrawals are applied.
	if err := node.SetPeers(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	check("peer removed", "10.118.1.0/24", "10.118.2.0/24")
	for _, a := range node.Advertised() {
		if a.State != model.AdvPending || a.Reason != "peer is not configured" {
			t.Errorf("%v after its peer was removed: %s (%s), want pending (peer is not configured)", a.Prefix, a.State, a.Reason)
		}
	}
	set(t, node)
	check("withdrawn by the next diff")
	node.mu.Lock()
	n := len(node.adv.groups) + len(node.adv.nbr) + len(node.adv.rib)
	node.mu.Unlock()
	if n != 0 {
		t.Errorf("%d groups, neighbor sets and paths left after the withdrawals", n)
	}
}

// BenchmarkAdvertised1000 measures what every pass of the daemon asks of
// the speaker: Advertised with 1000 advertisements in effect, nothing
// changed since the last call. No timing is asserted.
func BenchmarkAdvertised1000(b *testing.B) {
	l := newLab(b, 119)
	port := freePort(b)
	l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("a", 3, port, provASN))
	waitEstablished(b, node, "a")
	advs := make([]model.Advertisement, 1000)
	for i := range advs {
		advs[i] = model.Advertisement{Peer: "a", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}
	}
	if err := setAll(context.Background(), node, advs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := node.Advertised(); len(got) != len(advs) {
			b.Fatalf("%d advertised, want %d", len(got), len(advs))
		}
	}
}
