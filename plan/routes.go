package plan

import (
	"cmp"
	"slices"

	"github.com/ovnbgp/ovnbgp/model"
)

// DiffOVN returns the operations that turn the observed owned static routes
// into the desired ones, keyed by (router, prefix, next hop): adds first,
// then replaces (same key, other output port or rule: the observed row is
// updated in place and keeps its UUID), then deletes, so that traffic always
// has a route while it moves (add before delete). Observed duplicates of one
// key are deleted but one. Each group is sorted by router, prefix, next hop.
func DiffOVN(desired, observed []model.OVNRoute) []model.OVNOp {
	have := make(map[model.OVNRouteKey]model.OVNRoute, len(observed))
	var adds, replaces, deletes []model.OVNOp
	for _, r := range observed {
		if _, dup := have[r.Key()]; dup {
			deletes = append(deletes, model.OVNOp{Op: model.OpDelete, Route: r})
			continue
		}
		have[r.Key()] = r
	}
	want := make(map[model.OVNRouteKey]bool, len(desired))
	for _, r := range desired {
		if want[r.Key()] {
			continue
		}
		want[r.Key()] = true
		old, ok := have[r.Key()]
		switch {
		case !ok:
			r.UUID = ""
			adds = append(adds, model.OVNOp{Op: model.OpAdd, Route: r})
		case old.OutputPort != r.OutputPort || old.Rule != r.Rule:
			r.UUID = old.UUID
			replaces = append(replaces, model.OVNOp{Op: model.OpReplace, Route: r})
		}
	}
	for k, r := range have {
		if !want[k] {
			deletes = append(deletes, model.OVNOp{Op: model.OpDelete, Route: r})
		}
	}
	for _, ops := range [][]model.OVNOp{adds, replaces, deletes} {
		slices.SortFunc(ops, func(a, b model.OVNOp) int { return compareOVN(a.Route, b.Route) })
	}
	return slices.Concat(adds, replaces, deletes)
}

// DiffKernel returns the operations that turn the observed routes carrying
// ovnbgp's protocol into the desired ones, keyed by (table, prefix): adds
// first, then replaces (other next hops, or another metric), then deletes. Next hops compare
// as sets. Each group is sorted by table, then prefix.
func DiffKernel(desired, observed []model.KernelRoute) []model.KernelOp {
	have := make(map[model.KernelRouteKey]model.KernelRoute, len(observed))
	for _, r := range observed {
		have[r.Key()] = r
	}
	// The desired keys: desired as the table gives it (ImportTable.Desired)
	// is sorted by key already, and then a key repeats only right after
	// itself and is found by a binary search, with no map of every
	// desired key a pass (issue 18: 13 MB over a 100k import,
	// TestDiffKernelAllocs). Unsorted, a map.
	sorted := slices.IsSortedFunc(desired, compareKernel)
	var want map[model.KernelRouteKey]bool
	if !sorted {
		want = make(map[model.KernelRouteKey]bool, len(desired))
	}
	wanted := func(k model.KernelRouteKey) bool {
		if !sorted {
			return want[k]
		}
		_, ok := slices.BinarySearchFunc(desired, k, func(r model.KernelRoute, k model.KernelRouteKey) int {
			return cmp.Or(cmp.Compare(r.Table, k.Table), model.ComparePrefix(r.Prefix, k.Prefix))
		})
		return ok
	}
	var addAt, replaceAt []int
	for i, r := range desired {
		if sorted {
			if i > 0 && desired[i-1].Key() == r.Key() {
				continue
			}
		} else {
			if want[r.Key()] {
				continue
			}
			want[r.Key()] = true
		}
		old, ok := have[r.Key()]
		switch {
		case !ok:
			addAt = append(addAt, i)
		case !SameNextHops(old.NextHops, r.NextHops) || old.Protocol != r.Protocol || old.Metric != r.Metric:
			replaceAt = append(replaceAt, i)
		}
	}
	var gone []model.KernelRouteKey
	for k := range have {
		if !wanted(k) {
			gone = append(gone, k)
		}
	}
	// The operations' routes, in one allocation of exactly their number
	// (a held operation keeps it alive; it holds nothing else).
	routes := make([]model.KernelRoute, 0, len(addAt)+len(replaceAt)+len(gone))
	op := func(kind model.OpKind, r model.KernelRoute) model.KernelOp {
		routes = append(routes, r)
		return model.KernelOp{Op: kind, Route: &routes[len(routes)-1]}
	}
	adds := make([]model.KernelOp, 0, len(addAt))
	for _, i := range addAt {
		adds = append(adds, op(model.OpAdd, desired[i]))
	}
	replaces := make([]model.KernelOp, 0, len(replaceAt))
	for _, i := range replaceAt {
		replaces = append(replaces, op(model.OpReplace, desired[i]))
	}
	deletes := make([]model.KernelOp, 0, len(gone))
	for _, k := range gone {
		deletes = append(deletes, op(model.OpDelete, have[k]))
	}
	for _, ops := range [][]model.KernelOp{adds, replaces, deletes} {
		slices.SortFunc(ops, func(a, b model.KernelOp) int { return compareKernel(*a.Route, *b.Route) })
	}
	return slices.Concat(adds, replaces, deletes)
}

// SameNextHops reports whether two next-hop lists hold the same next hops,
// in any order.
func SameNextHops(a, b []model.NextHop) bool {
	if slices.Equal(a, b) {
		return true // the usual case, both sorted already: no copies
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, compareNextHop)
	slices.SortFunc(y, compareNextHop)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func compareNextHop(a, b model.NextHop) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Dev, b.Dev))
}

func compareOVN(a, b model.OVNRoute) int {
	return cmp.Or(cmp.Compare(a.Router, b.Router), model.ComparePrefix(a.Prefix, b.Prefix),
		a.NextHop.Compare(b.NextHop), cmp.Compare(a.UUID, b.UUID))
}

func compareKernel(a, b model.KernelRoute) int {
	return cmp.Or(cmp.Compare(a.Table, b.Table), model.ComparePrefix(a.Prefix, b.Prefix))
}
