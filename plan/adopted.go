package plan

import (
	"net/netip"

	"github.com/ovnbgp/ovnbgp/model"
)

// Adopted are the owned routes ovnbgp found installed when it started (or
// its speaker, or a peer's session, was restarted by a reload), each next
// hop on its own, that no peer has announced again since. Fail static
// (Build) holds only their deletes: a route learned in this run that its
// peer withdraws, or moves to another next hop, goes at once; an adopted
// one waits for the peers of its rule to be synced (End-of-RIB, a settled
// table, or deferralTime), because until then its absence from the
// learned table says nothing.
//
// The set only shrinks (Forget). A nil *Adopted adopts nothing.
type Adopted struct {
	byPrefix map[netip.Prefix]*adoptedPrefix
	n        int
}

// adoptedPrefix is what is adopted of one prefix.
type adoptedPrefix struct {
	ovn    []model.OVNRouteKey
	kernel []adoptedHop
}

// adoptedHop is one next hop of a kernel route.
type adoptedHop struct {
	key model.KernelRouteKey
	hop model.NextHop // without its weight: a hop is the same whatever it weighs
}

// unweighted is nh without its weight (issue 21).
func unweighted(nh model.NextHop) model.NextHop {
	nh.Weight = 0
	return nh
}

// NewAdopted adopts the owned OVN routes and kernel routes observed now.
func NewAdopted(ovn []model.OVNRoute, kernel []model.KernelRoute) *Adopted {
	a := &Adopted{byPrefix: map[netip.Prefix]*adoptedPrefix{}}
	at := func(p netip.Prefix) *adoptedPrefix {
		e := a.byPrefix[p]
		if e == nil {
			e = &adoptedPrefix{}
			a.byPrefix[p] = e
		}
		return e
	}
	for _, r := range ovn {
		e := at(r.Prefix)
		e.ovn = append(e.ovn, r.Key())
		a.n++
	}
	for _, r := range kernel {
		e := at(r.Prefix)
		for _, nh := range r.NextHops {
			e.kernel = append(e.kernel, adoptedHop{r.Key(), unweighted(nh)})
			a.n++
		}
	}
	return a
}

// Len is the number of adopted OVN rows and kernel next hops.
func (a *Adopted) Len() int {
	if a == nil {
		return 0
	}
	return a.n
}

// OVN reports whether the OVN row with key k is adopted.
func (a *Adopted) OVN(k model.OVNRouteKey) bool {
	if a == nil {
		return false
	}
	e := a.byPrefix[k.Prefix]
	if e == nil {
		return false
	}
	for _, o := range e.ovn {
		if o == k {
			return true
		}
	}
	return false
}

// KernelHop reports whether next hop nh of the kernel route with key k is
// adopted.
func (a *Adopted) KernelHop(k model.KernelRouteKey, nh model.NextHop) bool {
	if a == nil {
		return false
	}
	e := a.byPrefix[k.Prefix]
	if e == nil {
		return false
	}
	for _, o := range e.kernel {
		if o == (adoptedHop{k, unweighted(nh)}) {
			return true
		}
	}
	return false
}

// Forget drops, among the adopted entries of the given prefixes (nil:
// every prefix, a full pass), those the desired routes hold (a peer
// announced them again: from now on they are routes of this run) and those
// not observed any more (deleted: one that comes back is learned in this
// run). desired and observed must cover at least those prefixes; it costs
// what they hold, not the size of the set.
func (a *Adopted) Forget(prefixes []netip.Prefix, desiredOVN []model.OVNRoute, desiredKernel []model.KernelRoute,
	observedOVN []model.OVNRoute, observedKernel []model.KernelRoute) {
	if a.Len() == 0 {
		return
	}
	desired := map[any]bool{}
	observed := map[any]bool{}
	for _, r := range desiredOVN {
		desired[r.Key()] = true
	}
	for _, r := range desiredKernel {
		for _, nh := range r.NextHops {
			desired[adoptedHop{r.Key(), unweighted(nh)}] = true
		}
	}
	for _, r := range observedOVN {
		observed[r.Key()] = true
	}
	for _, r := range observedKernel {
		for _, nh := range r.NextHops {
			observed[adoptedHop{r.Key(), unweighted(nh)}] = true
		}
	}
	keep := func(k any) bool { return observed[k] && !desired[k] }
	forget := func(p netip.Prefix, e *adoptedPrefix) {
		before := len(e.ovn) + len(e.kernel)
		e.ovn = filter(e.ovn, func(k model.OVNRouteKey) bool { return keep(k) })
		e.kernel = filter(e.kernel, func(k adoptedHop) bool { return keep(k) })
		a.n -= before - len(e.ovn) - len(e.kernel)
		if len(e.ovn)+len(e.kernel) == 0 {
			delete(a.byPrefix, p)
		}
	}
	if prefixes == nil {
		for p, e := range a.byPrefix {
			forget(p, e)
		}
		return
	}
	for _, p := range prefixes {
		if e := a.byPrefix[p]; e != nil {
			forget(p, e)
		}
	}
}

// filter keeps the elements of s that keep says to keep, in place.
func filter[T any](s []T, keep func(T) bool) []T {
	out := s[:0]
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
