package bgp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestStateSequence walks Set through named desired states in random
// order, as tailscale's TestRouterStates does: every state must be
// reachable from every other, and after each step the two providers must
// hold exactly what the state gives them, with the state's attributes, and
// Advertised must say the same.
func TestStateSequence(t *testing.T) {
	parallel(t)
	l := newLab(t, 29)
	portA, portB := freePort(t), freePort(t)
	provA := l.provider(3, portA, provASN, false, "")
	provB := l.provider(4, portB, provASN+1, false, "")
	node := l.node(false, l.peerOf("a", 3, portA, provASN), l.peerOf("b", 4, portB, provASN+1))
	waitEstablished(t, node, "a")
	waitEstablished(t, node, "b")

	const x, y, z, w = "10.29.1.0/24", "10.29.2.0/24", "fd00:29::/64", "10.29.4.0/24"
	tagged := model.PathAttrs{Communities: comms("65001:1"), MED: 5}
	prepended := model.PathAttrs{ASPathPrepend: 1}
	none := model.PathAttrs{}
	states := []struct {
		name string
		advs []model.Advertisement
	}{
		{"empty", nil},
		{"a-only", []model.Advertisement{adv("a", x, none), adv("a", y, none)}},
		{"split", []model.Advertisement{adv("a", x, none), adv("b", y, none), adv("a", z, none), adv("b", z, none)}},
		{"tagged", []model.Advertisement{adv("a", x, tagged), adv("a", y, none), adv("b", y, none), adv("b", z, prepended)}},
		{"moved", []model.Advertisement{adv("b", x, none), adv("a", w, tagged)}},
		{"all", []model.Advertisement{adv("a", x, none), adv("a", y, none), adv("a", z, none), adv("a", w, none),
			adv("b", x, tagged), adv("b", y, tagged), adv("b", z, tagged), adv("b", w, tagged)}},
	}

	// view renders what a provider holds, or should hold, comparably.
	render := func(prefix, comms string, med uint32, pathLen int) string {
		return fmt.Sprintf("%s comms=[%s] med=%d aspath=%d", prefix, comms, med, pathLen)
	}
	want := func(advs []model.Advertisement, peer string) string {
		var v []string
		for _, a := range advs {
			if a.Peer == peer {
				c := model.Strings(a.Attrs.Communities)
				slices.Sort(c)
				v = append(v, render(a.Prefix.String(), strings.Join(c, " "), a.Attrs.MED, 1+int(a.Attrs.ASPathPrepend)))
			}
		}
		slices.Sort(v)
		return strings.Join(v, "\n")
	}
	got := func(prov *Speaker) string {
		var v []string
		for p, lp := range learned(t, prov, "node") {
			c := slices.Clone(lp.Communities)
			slices.Sort(c)
			v = append(v, render(p.String(), strings.Join(c, " "), lp.MED, len(lp.ASPath)))
		}
		slices.Sort(v)
		return strings.Join(v, "\n")
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var order []int
	for range 3 {
		order = append(order, rng.Perm(len(states))...)
	}
	for step, i := range order {
		st := states[i]
		set(t, node, st.advs...)
		wantA, wantB := want(st.advs, "a"), want(st.advs, "b")
		eventually(t, routeTimeout, fmt.Sprintf("step %d: state %q reached", step, st.name), func() (bool, string) {
			gotA, gotB := got(provA), got(provB)
			return gotA == wantA && gotB == wantB, fmt.Sprintf("\na has:\n%s\na wants:\n%s\nb has:\n%s\nb wants:\n%s", gotA, wantA, gotB, wantB)
		})
		var adv, wantAdv []string
		for _, a := range node.Advertised() {
			adv = append(adv, fmt.Sprintf("%s %s %+v", a.Peer, a.Prefix, a.Attrs))
		}
		for _, a := range st.advs {
			wantAdv = append(wantAdv, fmt.Sprintf("%s %s %+v", a.Peer, a.Prefix, a.Attrs))
		}
		slices.Sort(adv)
		slices.Sort(wantAdv)
		if !slices.Equal(adv, wantAdv) {
			t.Fatalf("step %d: state %q: Advertised() = %v, want %v", step, st.name, adv, wantAdv)
		}
		// AdvertisedOf, key by key, says what Advertised says.
		var keys []model.Key
		for _, p := range []string{x, y, z, w} {
			for _, peer := range []string{"a", "b"} {
				keys = append(keys, model.Key{Peer: peer, Prefix: netip.MustParsePrefix(p)})
			}
		}
		slices.SortFunc(keys, compareKey)
		if got, all := fmt.Sprint(node.AdvertisedOf(keys)), fmt.Sprint(node.Advertised()); got != all {
			t.Fatalf("step %d: state %q: AdvertisedOf(every key) = %s, Advertised() = %s", step, st.name, got, all)
		}
		// The executor keeps what lets the next lowering look at the
		// change only (TestLowerExactEqualsWhole).
		node.mu.Lock()
		exact, why := node.adv.exact, exactHolds(node.adv.view())
		node.mu.Unlock()
		if !exact || why != "" {
			t.Fatalf("step %d: state %q: exact %v, %s", step, st.name, exact, why)
		}
	}
}
