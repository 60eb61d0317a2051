package bgp

import (
	"context"
	"testing"

	"github.com/osrg/gobgp/v4/api"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestFailedGrowAfterAMoveLeavesNoOldGroup: one Apply moves x to new
// attributes (group A -> B) and announces y into a group C whose creation
// fails. The grow of B set x's member to B before A shrank: the lowering
// after C's failure must look at every group (not only at the change's
// keys), or A's set keeps x's prefix and the peer the old attributes.
// Found by review: a failing gobgp call is forced by a v6 prefix set of
// C's name.
func TestFailedGrowAfterAMoveLeavesNoOldGroup(t *testing.T) {
	l := newLab(t, 199)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	p := l.peerOf("a", 3, port, provASN)
	p.Families = []config.Family{config.IPv4, config.IPv6}
	node := l.node(false, p)
	waitEstablished(t, node, "a")
	ctx := context.Background()

	x := adv("a", "10.99.1.0/24", model.PathAttrs{})
	set(t, node, x)
	waitLearned(t, prov, "node", x.Prefix)

	// Make the creation of y's group fail: a v6 prefix set of its name.
	yAttrs := model.PathAttrs{MED: 9}
	gidC := groupID{peer: "a", family: config.IPv4, attrs: normalize(yAttrs).key()}
	node.mu.Lock()
	err := node.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(groupName(gidC), pfx("fd00:99::/64"))})
	node.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	x2 := adv("a", "10.99.1.0/24", model.PathAttrs{MED: 5})
	y := adv("a", "10.99.2.0/24", yAttrs)
	err = node.Apply(ctx, model.AdvertDiff{Change: []model.Advertisement{x2}, Announce: []model.Advertisement{y}})
	t.Logf("apply: %v", err)
	if err == nil {
		t.Fatal("expected y's grow to fail")
	}
	node.mu.Lock()
	why := exactHolds(node.adv.view())
	exact := node.adv.exact
	node.mu.Unlock()
	if why != "" {
		t.Errorf("exact=%v but the invariant is broken: %s", exact, why)
	}
	// What a daemon's next (whole) diff sees: x at MED 5, as desired.
	for _, a := range node.Advertised() {
		t.Logf("advertised %v %v med=%d", a.Peer, a.Prefix, a.Attrs.MED)
	}
	eventually(t, sessionTimeout, "the provider gets x with MED 5", func() (bool, string) {
		m := learned(t, prov, "node")
		got, ok := m[x.Prefix]
		return ok && got.MED == 5, prefixesOf(m)
	})
}

// TestFailedGrowAfterAWithdrawalLeavesNoSet: one Apply withdraws x and
// announces y into a group whose creation fails. Pass 0 forgot x's member
// before its operations ran: the lowering after y's failure must look at
// every group, or x's group keeps x's prefix while its path is withdrawn
// (a set holding a prefix of no member, never removed).
func TestFailedGrowAfterAWithdrawalLeavesNoSet(t *testing.T) {
	l := newLab(t, 198)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	p := l.peerOf("a", 3, port, provASN)
	p.Families = []config.Family{config.IPv4, config.IPv6}
	node := l.node(false, p)
	waitEstablished(t, node, "a")
	ctx := context.Background()

	x := adv("a", "10.98.1.0/24", model.PathAttrs{})
	set(t, node, x)
	waitLearned(t, prov, "node", x.Prefix)
	yAttrs := model.PathAttrs{MED: 9}
	gidC := groupID{peer: "a", family: config.IPv4, attrs: normalize(yAttrs).key()}
	node.mu.Lock()
	err := node.bgp.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: prefixSet(groupName(gidC), pfx("fd00:98::/64"))})
	node.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	y := adv("a", "10.98.2.0/24", yAttrs)
	err = node.Apply(ctx, model.AdvertDiff{Withdraw: []model.Advertisement{x}, Announce: []model.Advertisement{y}})
	t.Logf("apply: %v", err)
	node.mu.Lock()
	why := exactHolds(node.adv.view())
	exact := node.adv.exact
	node.mu.Unlock()
	if why != "" {
		t.Errorf("after the apply: exact=%v but: %s", exact, why)
	}
	// x comes back with other attributes: the provider must see MED 5.
	x2 := adv("a", "10.98.1.0/24", model.PathAttrs{MED: 5})
	if err := node.Apply(ctx, model.AdvertDiff{Announce: []model.Advertisement{x2}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, sessionTimeout, "the provider gets x with MED 5", func() (bool, string) {
		m := learned(t, prov, "node")
		got, ok := m[x.Prefix]
		return ok && got.MED == 5, prefixesOf(m)
	})
}
