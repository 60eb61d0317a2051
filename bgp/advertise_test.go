package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestAdvertiseAttributes: IPv4 and IPv6 prefixes reach the provider with
// the attributes the advertisement asked for.
func TestAdvertiseAttributes(t *testing.T) {
	parallel(t)
	l := newLab(t, 11)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, provASN))

	v4 := adv("tor", "10.11.0.0/24", model.PathAttrs{
		Communities:      comms("65001:100", "no-export"),
		LargeCommunities: larges("64512:1:2"),
		MED:              50,
		ASPathPrepend:    2,
	})
	v6 := adv("tor", "fd00:11::/64", model.PathAttrs{MED: 7, Communities: comms("65001:600")})
	set(t, node, v4, v6)

	waitEstablished(t, node, "tor")
	got := waitLearned(t, prov, "node", v4.Prefix, v6.Prefix)

	p4 := got[v4.Prefix]
	if want := []uint32{nodeASN, nodeASN, nodeASN}; !slices.Equal(p4.ASPath, want) {
		t.Errorf("as path of %v = %v, want %v (own ASN + 2 prepends)", v4.Prefix, p4.ASPath, want)
	}
	if p4.MED != 50 {
		t.Errorf("med of %v = %d, want 50", v4.Prefix, p4.MED)
	}
	wantComms := []string{"65001:100", "no-export", "64512:1:2"}
	if !sameSet(p4.Communities, wantComms) {
		t.Errorf("communities of %v = %v, want %v", v4.Prefix, p4.Communities, wantComms)
	}
	if p4.NextHop != l.addr(2) {
		t.Errorf("next hop of %v = %v, want %v (next hop self)", v4.Prefix, p4.NextHop, l.addr(2))
	}
	if p4.Origin != "igp" || p4.Accepted || p4.Reason != ReasonDefaultDeny {
		t.Errorf("%v: origin %q accepted %v reason %q", v4.Prefix, p4.Origin, p4.Accepted, p4.Reason)
	}

	p6 := got[v6.Prefix]
	t.Logf("ipv6 next hop over an IPv4 session: %v", p6.NextHop)
	if want := []uint32{nodeASN}; !slices.Equal(p6.ASPath, want) {
		t.Errorf("as path of %v = %v, want %v", v6.Prefix, p6.ASPath, want)
	}
	if p6.MED != 7 || !sameSet(p6.Communities, []string{"65001:600"}) {
		t.Errorf("%v: med %d communities %v, want 7 [65001:600]", v6.Prefix, p6.MED, p6.Communities)
	}

	if diff := cmp.Diff(sent(v4, v6), node.Advertised(), cmpOpts); diff != "" {
		t.Errorf("Advertised() (-want +got):\n%s", diff)
	}

	// Counters and session details, both sides.
	eventually(t, routeTimeout, "provider counts 2 received from node", func() (bool, string) {
		st := peerState(t, prov, "node")
		return countsOf(st, "ipv4").Received == 1 && countsOf(st, "ipv6").Received == 1, fmt.Sprintf("%+v", st.Families)
	})
	eventually(t, routeTimeout, "node counts 2 advertised to tor", func() (bool, string) {
		st := peerState(t, node, "tor")
		return countsOf(st, "ipv4").Advertised == 1 && countsOf(st, "ipv6").Advertised == 1, fmt.Sprintf("%+v", st.Families)
	})
	st := peerState(t, node, "tor")
	if st.LocalAddress != l.addr(2) || st.RouterID != l.addr(3) || st.ASN != provASN || st.Since.IsZero() {
		t.Errorf("node's view of tor: %+v", st)
	}
}

func countsOf(st model.PeerStatus, fam string) model.FamilyCounts {
	for _, f := range st.Families {
		if f.Family == fam {
			return f
		}
	}
	return model.FamilyCounts{Family: fam, Received: -1, Advertised: -1}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestPerPeerSelection: each prefix goes only to the peers that name it;
// moving it withdraws it from one and sends it to the other; changing the
// set for one peer sends nothing to another; the same set twice changes
// nothing; nil withdraws everything.
func TestPerPeerSelection(t *testing.T) {
	parallel(t)
	l := newLab(t, 12)
	portA, portB := freePort(t), freePort(t)
	provA := l.provider(3, portA, provASN, false, "")
	provB := l.provider(4, portB, provASN+1, false, "")
	node := l.node(false, l.peerOf("a", 3, portA, provASN), l.peerOf("b", 4, portB, provASN+1))
	waitEstablished(t, node, "a")
	waitEstablished(t, node, "b")

	x, y := pfx("10.12.1.0/24"), pfx("10.12.2.0/24")
	ya := adv("a", "10.12.2.0/24", model.PathAttrs{})
	yb := adv("b", "10.12.2.0/24", model.PathAttrs{})

	// Both get Y.
	set(t, node, ya, yb)
	waitLearned(t, provA, "node", y)
	baseB := waitLearned(t, provB, "node", y)
	// Path ages are in whole seconds: let one pass so a resend would show.
	time.Sleep(1100 * time.Millisecond)

	// X to A only: B sees neither X nor a resend of Y.
	set(t, node, ya, yb, adv("a", "10.12.1.0/24", model.PathAttrs{}))
	waitLearned(t, provA, "node", x, y)
	never(t, 2*time.Second, "B learns X or Y is resent to B", func() (bool, string) {
		m := learned(t, provB, "node")
		_, hasX := m[x]
		return hasX || m[y].Age != baseB[y].Age, fmt.Sprintf("%s, age of Y %v (was %v)", prefixesOf(m), m[y].Age, baseB[y].Age)
	})

	// Move X from A to B.
	xb := adv("b", "10.12.1.0/24", model.PathAttrs{})
	set(t, node, ya, yb, xb)
	waitLearned(t, provA, "node", y)
	waitLearned(t, provB, "node", x, y)
	if diff := cmp.Diff(sent(ya, xb, yb), node.Advertised(), cmpOpts); diff != "" {
		t.Errorf("Advertised() after the move (-want +got):\n%s", diff)
	}

	// The same set again changes nothing on either provider.
	time.Sleep(1100 * time.Millisecond)
	beforeA, beforeB := learned(t, provA, "node"), learned(t, provB, "node")
	set(t, node, ya, yb, xb)
	set(t, node, yb, xb, ya) // order does not matter
	never(t, 2*time.Second, "a repeated Set changes a provider's view", func() (bool, string) {
		a, b := learned(t, provA, "node"), learned(t, provB, "node")
		dA, dB := cmp.Diff(beforeA, a, cmpOpts), cmp.Diff(beforeB, b, cmpOpts)
		return dA != "" || dB != "", dA + dB
	})

	// New attributes for X towards B: only B's view changes.
	xb.Attrs = model.PathAttrs{MED: 10, Communities: comms("65001:10")}
	set(t, node, ya, yb, xb)
	eventually(t, routeTimeout, "B learns X with MED 10", func() (bool, string) {
		p := learned(t, provB, "node")[x]
		return p.MED == 10 && sameSet(p.Communities, []string{"65001:10"}), fmt.Sprintf("%+v", p)
	})
	if got := learned(t, provA, "node"); cmp.Diff(beforeA, got, cmpOpts) != "" {
		t.Errorf("A's view changed with B's attributes: %s", cmp.Diff(beforeA, got, cmpOpts))
	}

	// nil withdraws everything.
	if err := setAll(context.Background(), node, nil); err != nil {
		t.Fatalf("set nil: %v", err)
	}
	waitLearned(t, provA, "node")
	waitLearned(t, provB, "node")
	if got := node.Advertised(); len(got) != 0 {
		t.Errorf("Advertised() after Set(nil) = %v", got)
	}
	// Nothing of ours is left in gobgp's policy.
	if n := len(node.adv.groups) + len(node.adv.nbr) + len(node.adv.rib); n != 0 {
		t.Errorf("state left after Set(nil): %d groups/neighbor sets/paths", n)
	}
}

// TestSetErrors: bad items are reported and skipped; the rest applies.
func TestSetErrors(t *testing.T) {
	parallel(t)
	l := newLab(t, 13)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	p := l.peerOf("tor", 3, port, provASN)
	p.Families = []config.Family{config.IPv4}
	node := l.node(false, p)

	good := adv("tor", "10.13.0.0/24", model.PathAttrs{})
	err := setAll(context.Background(), node, []model.Advertisement{
		good,
		adv("nobody", "10.13.1.0/24", model.PathAttrs{}),
		adv("tor", "fd00:13::/64", model.PathAttrs{}),                // ipv6 not enabled
		{Peer: "tor", Prefix: netip.MustParsePrefix("10.13.4.1/24")}, // host bits
	})
	if err == nil {
		t.Fatal("Set with bad items returned no error")
	}
	t.Logf("Set errors: %v", err)
	if diff := cmp.Diff([]model.Advertisement{good}, bare(node.Advertised()), cmpOpts); diff != "" {
		t.Errorf("Advertised() (-want +got):\n%s", diff)
	}
	// Every bad item is reported, none is sent.
	na := node.NotApplied()
	if len(na) != 3 {
		t.Errorf("NotApplied() = %d items, want 3: %+v", len(na), na)
	}
	for _, a := range na {
		if a.State != model.AdvNotApplied || !strings.Contains(a.Problem, "not sent") {
			t.Errorf("NotApplied item %v to %s: state %q problem %q", a.Prefix, a.Peer, a.State, a.Problem)
		}
	}
	waitEstablished(t, node, "tor")
	waitLearned(t, prov, "node", good.Prefix)
}

// TestApplyTouchesOnlyTheDiff: Apply makes exactly the changes it is given
// (the plan's diff): what the diff does not name stays as it is, even when
// it is not in the last set asked for.
func TestApplyTouchesOnlyTheDiff(t *testing.T) {
	parallel(t)
	l := newLab(t, 13)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("a", 3, port, provASN))
	waitEstablished(t, node, "a")
	ctx := context.Background()
	x := adv("a", "10.13.1.0/24", model.PathAttrs{})
	y := adv("a", "10.13.2.0/24", model.PathAttrs{})
	z := adv("a", "10.13.3.0/24", model.PathAttrs{MED: 7})
	set(t, node, x, y)
	waitLearned(t, prov, "node", x.Prefix, y.Prefix)

	if err := node.Apply(ctx, model.AdvertDiff{Withdraw: []model.Advertisement{x}, Announce: []model.Advertisement{z}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]model.Advertisement{y, z}, bare(node.Advertised()), cmpOpts); diff != "" {
		t.Errorf("Advertised() (-want +got):\n%s", diff)
	}
	eventually(t, sessionTimeout, "the provider has Y and Z, not X", func() (bool, string) {
		m := learned(t, prov, "node")
		_, hasX := m[x.Prefix]
		_, hasY := m[y.Prefix]
		_, hasZ := m[z.Prefix]
		return !hasX && hasY && hasZ, prefixesOf(m)
	})
	// An empty diff changes nothing.
	if err := node.Apply(ctx, model.AdvertDiff{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]model.Advertisement{y, z}, bare(node.Advertised()), cmpOpts); diff != "" {
		t.Errorf("Advertised() after an empty diff (-want +got):\n%s", diff)
	}
}

// TestMembersOnlyChangeSendsNothing: a Change that differs only in what the
// prefix stands for (an aggregate's members) updates what Advertised
// reports and puts nothing on the wire (a peer that counts UPDATEs sees
// the prefix announced once).
func TestMembersOnlyChangeSendsNothing(t *testing.T) {
	parallel(t)
	l := newLab(t, 14)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	node := l.node(false, l.peerOf("a", 3, port, provASN))
	since := waitEstablished(t, node, "a").Since
	<-w.up
	// Past the session start window: a change there is re-sent once by
	// the session start repair (sessionup.go).
	for time.Since(since) <= 2*sessionWindow {
		time.Sleep(sessionWindow / 4)
	}
	ctx := context.Background()
	x := adv("a", "10.14.0.0/24", model.PathAttrs{})
	x.Members = []netip.Prefix{pfx("10.14.0.1/32")}
	set(t, node, x)
	eventually(t, sessionTimeout, "the peer got "+x.Prefix.String(), func() (bool, string) {
		return w.announced(x.Prefix) == 1, fmt.Sprint(w.announced(x.Prefix))
	})

	before := node.Advertised()
	x.Members = []netip.Prefix{pfx("10.14.0.1/32"), pfx("10.14.0.2/32")}
	if err := node.Apply(ctx, model.AdvertDiff{Change: []model.Advertisement{x}}); err != nil {
		t.Fatal(err)
	}
	if got := node.Advertised(); len(got) != 1 || len(got[0].Members) != 2 {
		t.Fatalf("Advertised() after the members changed: %+v, want the two members", got)
	}
	// The speaker updates what it keeps in place: what Advertised returned
	// before is a copy, and stays as it was.
	if len(before) != 1 || len(before[0].Members) != 1 {
		t.Fatalf("an earlier Advertised() changed under its caller: %+v", before)
	}
	// A later announcement of another prefix: once it arrived, anything
	// the change had sent would have arrived before it.
	y := adv("a", "10.14.1.0/24", model.PathAttrs{})
	if err := node.Apply(ctx, model.AdvertDiff{Announce: []model.Advertisement{y}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, sessionTimeout, "the peer got "+y.Prefix.String(), func() (bool, string) {
		return w.announced(y.Prefix) == 1, fmt.Sprint(w.announced(y.Prefix))
	})
	if n := w.announced(x.Prefix); n != 1 {
		t.Errorf("%s announced %d times: a members-only change must not send an UPDATE", x.Prefix, n)
	}
}

// TestIBGPLocalPrefZero: over iBGP, an advertisement without a local
// preference carries gobgp's default 100, one with 200 carries 200, and
// one with an explicit 0 (a drained peer's, RFC 8326) really carries 0;
// changing it back to unset sends 100 again.
func TestIBGPLocalPrefZero(t *testing.T) {
	parallel(t)
	l := newLab(t, 31)
	port := freePort(t)
	prov := l.provider(3, port, nodeASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, nodeASN))
	zero, two := uint32(0), uint32(200)
	unset := adv("tor", "10.31.1.0/24", model.PathAttrs{})
	high := adv("tor", "10.31.2.0/24", model.PathAttrs{LocalPreference: &two})
	drained := adv("tor", "10.31.3.0/24", model.PathAttrs{LocalPreference: &zero, Communities: comms("graceful-shutdown")})
	set(t, node, unset, high, drained)
	waitEstablished(t, node, "tor")
	want := map[netip.Prefix]uint32{unset.Prefix: 100, high.Prefix: 200, drained.Prefix: 0}
	check := func() (bool, string) {
		got := learned(t, prov, "node")
		var s []string
		ok := len(got) == len(want)
		for p, lp := range want {
			s = append(s, fmt.Sprintf("%v lp %d (want %d)", p, got[p].LocalPref, lp))
			ok = ok && got[p].Prefix == p && got[p].LocalPref == lp
		}
		return ok, strings.Join(s, ", ")
	}
	eventually(t, routeTimeout, "local preferences 100, 200 and 0 at the iBGP peer", check)

	undrained := drained
	undrained.Attrs = model.PathAttrs{}
	set(t, node, unset, high, undrained)
	want[drained.Prefix] = 100
	eventually(t, routeTimeout, "local preference 100 again once unset", check)
}
