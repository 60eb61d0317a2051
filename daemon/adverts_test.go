package daemon

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// TestAdvertiseByChangeEqualsWhole (issue 18, item 2): the loop diffs only
// the advertisements of the egress IPs and VIPs NB changed, reading the
// speaker by those keys (AdvertisedOf), never whole (Advertised); after
// every pass the speaker holds exactly what a whole computation of the same
// snapshot selects. Random steps add, change and remove egress IPs and VIPs
// (with and without endpoints, shared by two Services), with and without
// an export cap; now and then a network changes (plan.AdvertState then
// selects everything again, and still names the keys that changed). Under
// a drain, tagging or withdrawn, the same holds: the drain is applied to
// the changed keys alone, and routes advertised lists what it withdrew.
func TestAdvertiseByChangeEqualsWhole(t *testing.T) {
	for _, c := range []struct {
		capped bool
		drain  string // "", "tagged", "withdrawn"
	}{{false, ""}, {true, ""}, {false, "tagged"}, {true, "tagged"}, {false, "withdrawn"}} {
		capped := c.capped
		t.Run(fmt.Sprintf("maxAdvertised=%v drain=%s", capped, cmp.Or(c.drain, "none")), func(t *testing.T) {
			h := start(t, "default", func(h *harness) {
				h.cfg.advertiseExtra = "  - {name: eips, kind: egressIP}\n  - {name: vips, kind: loadBalancerIP}\n"
				if capped {
					h.cfg.peerExtra = ", maxAdvertised: 6"
				}
			})
			if c.drain != "" {
				needRoot(t, h)
			}
			h.nb.set(true, network("default", "10.128.0.0/23"))
			h.wantPrefixes("tor 10.128.0.0/23")
			switch c.drain {
			case "tagged":
				drainOf(t, h, map[string]any{"wait": "1h"})
			case "withdrawn":
				drainOf(t, h, map[string]any{"wait": "0s"})
			}
			h.passDone()
			rng := rand.New(rand.NewPCG(18, 7))
			addr := func(base byte, i int) netip.Addr { return netip.AddrFrom4([4]byte{198, base, 0, byte(i)}) }
			eips := map[int]bool{}
			vips := map[int]int{} // VIP -> endpoints (0: none)
			snapOf := func() {
				h.nb.mu.Lock()
				defer h.nb.mu.Unlock()
				s := h.nb.snap
				s.EgressIPs, s.ServiceVIPs = nil, nil
				for _, i := range sortedInts(eips) {
					s.EgressIPs = append(s.EgressIPs, model.EgressIP{IP: addr(18, i), Network: "default", Router: "GR_node1", Name: fmt.Sprintf("e%d", i)})
				}
				for _, i := range sortedInts(vips) {
					var be []netip.Addr
					for j := range vips[i] {
						be = append(be, netip.AddrFrom4([4]byte{10, 128, 0, byte(10 + j)}))
					}
					for _, svc := range []string{"ns/a", "ns/b"}[:1+i%2] {
						s.ServiceVIPs = append(s.ServiceVIPs, model.ServiceVIP{Service: svc, Network: "default", VIP: addr(19, i), Backends: be, Source: "lb " + svc})
					}
				}
				h.nb.snap = s
			}
			var whole, keyed int
			for step := range 60 {
				context := step%15 == 14
				switch {
				case context:
					h.nb.mu.Lock()
					h.nb.snap.Networks = []model.Network{network("default", fmt.Sprintf("10.128.%d.0/23", 2*(step%4)))}
					h.nb.mu.Unlock()
				default:
					for range 1 + rng.IntN(3) {
						i := rng.IntN(10)
						switch rng.IntN(4) {
						case 0:
							eips[i] = !eips[i]
							if !eips[i] {
								delete(eips, i)
							}
						case 1:
							delete(vips, i)
						default:
							vips[i] = rng.IntN(3)
						}
					}
				}
				snapOf()
				h.sp.mu.Lock()
				w0, k0 := h.sp.wholeReads, h.sp.keyReads
				h.sp.mu.Unlock()
				h.d.poke()
				h.passDone()
				h.sp.mu.Lock()
				w1, k1 := h.sp.wholeReads, h.sp.keyReads
				h.sp.mu.Unlock()
				if w1 != w0 {
					t.Errorf("step %d: a change of NB read the speaker whole (%d times)", step, w1-w0)
				}
				whole, keyed = whole+w1-w0, keyed+k1-k0

				now := time.Now()
				sent, held := plan.NewDrain(h.d.config(), h.d.drainState(), now).Apply(plan.CappedAdvertisements(h.d.config(), h.nb.snapshotNow(), now))
				var want, got []string
				for _, a := range sent {
					want = append(want, fmt.Sprintf("%s %s %+v", a.Peer, a.Prefix, a.Attrs))
				}
				for _, a := range h.sp.advertised() {
					got = append(got, fmt.Sprintf("%s %s %+v", a.Peer, a.Prefix, a.Attrs))
				}
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: the speaker holds\n%q\na whole computation selects\n%q", step, got, want)
				}
				var wantHeld, gotHeld []string
				for _, a := range held {
					wantHeld = append(wantHeld, fmt.Sprintf("%s %s %s %s", a.Peer, a.Prefix, a.State, a.Reason))
				}
				h.d.mu.Lock()
				for _, a := range h.d.heldAdv {
					gotHeld = append(gotHeld, fmt.Sprintf("%s %s %s %s", a.Peer, a.Prefix, a.State, a.Reason))
				}
				h.d.mu.Unlock()
				if !slices.Equal(gotHeld, wantHeld) {
					t.Fatalf("step %d: held back\n%q\na whole computation holds\n%q", step, gotHeld, wantHeld)
				}
			}
			if keyed == 0 || whole != 0 {
				t.Errorf("%d passes read the speaker by key, %d whole: want all by key", keyed, whole)
			}
		})
	}
}

func sortedInts[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
