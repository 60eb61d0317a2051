package plan

import (
	"cmp"
	"slices"

	"github.com/ovnbgp/ovnbgp/model"
)

// AdvertDiff is what must change for the advertised set to become the
// desired one (model.AdvertDiff: the BGP layer applies it as it is).
type AdvertDiff = model.AdvertDiff

// DiffAdvertisements compares desired with current, keyed by (peer, prefix).
// Rule, network and source are explanations, not state: they never make an
// advertisement "changed". Each list is sorted by peer, then prefix.
func DiffAdvertisements(desired, current []model.Advertisement) AdvertDiff {
	cur := make(map[model.Key]model.Advertisement, len(current))
	for _, a := range current {
		cur[a.Key()] = a
	}
	var d AdvertDiff
	for _, a := range desired {
		old, ok := cur[a.Key()]
		switch {
		case !ok:
			d.Announce = append(d.Announce, a)
		case !SameAttrs(old.Attrs, a.Attrs) || !slices.Equal(old.Members, a.Members):
			// Members only: nothing new on the wire, but what the prefix
			// stands for (routes advertised, explain) follows.
			d.Change = append(d.Change, a)
		}
		delete(cur, a.Key())
	}
	for _, a := range cur {
		d.Withdraw = append(d.Withdraw, a)
	}
	SortAdvertisements(d.Announce)
	SortAdvertisements(d.Change)
	SortAdvertisements(d.Withdraw)
	return d
}

// SameAttrs reports whether two attribute sets put the same bytes on the
// wire: community lists compare as sets.
func SameAttrs(a, b model.PathAttrs) bool {
	return sameLocalPref(a.LocalPreference, b.LocalPreference) && a.MED == b.MED &&
		a.ASPathPrepend == b.ASPathPrepend &&
		sameSet(a.Communities, b.Communities) && sameLarge(a.LargeCommunities, b.LargeCommunities)
}

func sameSet[T cmp.Ordered](a, b []T) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func sameLarge(a, b []model.LargeCommunity) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, model.LargeCommunity.Compare)
	slices.SortFunc(y, model.LargeCommunity.Compare)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// sameLocalPref compares two optional local preferences: unset differs
// from 0 (a drained iBGP peer's), which is sent.
func sameLocalPref(a, b *uint32) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
