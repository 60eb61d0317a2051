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
	// The map holds positions in current: an advertisement is too big a
	// map value to be stored in place (each would be allocated apart), and
	// this runs on every pass over every advertisement.
	cur := make(map[model.Key]int, len(current))
	for i, a := range current {
		cur[a.Key()] = i
	}
	kept := make([]bool, len(current))
	var d AdvertDiff
	// The positions in desired of what is announced and changed: the
	// lists are then made once at their size (a bulk of 10,000 grew by
	// doubling, copying each advertisement about twice more).
	var announce, change []int32
	for j, a := range desired {
		i, ok := cur[a.Key()]
		switch {
		case !ok:
			announce = append(announce, int32(j))
		case !SameAttrs(current[i].Attrs, a.Attrs) || !slices.Equal(current[i].Members, a.Members):
			// Members only: nothing new on the wire, but what the prefix
			// stands for (routes advertised, explain) follows.
			change = append(change, int32(j))
		}
		if ok {
			kept[i] = true
		}
	}
	pick := func(at []int32) []model.Advertisement {
		if len(at) == 0 {
			return nil
		}
		out := make([]model.Advertisement, len(at))
		for n, j := range at {
			out[n] = desired[j]
		}
		return out
	}
	d.Announce, d.Change = pick(announce), pick(change)
	for i, a := range current {
		// A key listed twice in current is withdrawn once (its last).
		if !kept[i] && cur[a.Key()] == i {
			d.Withdraw = append(d.Withdraw, a)
		}
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
		a.ASPathPrepend == b.ASPathPrepend && sameLinkBandwidth(a.LinkBandwidth, b.LinkBandwidth) &&
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

// sameLinkBandwidth compares two optional link-bandwidth communities.
func sameLinkBandwidth(a, b *model.LinkBandwidth) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
