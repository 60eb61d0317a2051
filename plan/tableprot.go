package plan

import (
	"net/netip"
	"slices"

	"github.com/ovnbgp/ovnbgp/model"
)

// SetSnapshotProtected makes the table's protected set the one snap gives
// (Protected of the table's config, snap and the table's host) without
// deciding everything again: only the prefixes the protected entries that
// came or went can affect are decided again, through Update (so caps stay
// right), and returned with those a cap's freed slot lets in, in prefix
// order. A Service VIP or egress IP added or removed in NB is such a
// change: its host prefix is an entry of snap.Protected.
//
// An entry P (a prefix and why) that comes or goes can change the verdict
// of a path whose prefix is equal to or inside P (the protected check:
// which entry covers it first, if any), and of a path whose next hop is
// inside P (the next-hop check), nothing else: a prefix covering P is not
// checked against P (a route to an aggregate is not a hijack of what it
// covers; the more specific P wins in every FIB). A host prefix costs a
// lookup; a shorter one (a new node's pod subnet), a walk of the
// prefixes; a next hop inside P (never a peer's usual one), a walk of the
// paths.
//
// Entries that stayed but changed their order (the first covering entry
// names a prefix's reason) count as changed, all of them.
//
// The rest of what the table was built against must be the same: the
// caller rebuilds when it changed (daemon's fullWhy). ok is false, and
// nothing changed, when this can tell it did not stay: snap's node,
// northd version or gateway routers (all but their StaticRoutes) differ
// from the table's.
// What else import reads of a snapshot (OwnedRoutes, for which prefixes a
// cap keeps first) is read by NewImportTable only.
func (t *ImportTable) SetSnapshotProtected(snap model.Snapshot) (touched []netip.Prefix, ok bool) {
	e := t.env
	if snap.Node != e.snap.Node || snap.Northd != e.snap.Northd || !slices.EqualFunc(snap.Routers, e.snap.Routers, sameRouterForImport) {
		return nil, false
	}
	prot := Protected(t.cfg, snap, e.host)
	was := make(map[model.ProtectedPrefix]bool, len(t.prot))
	for _, pp := range t.prot {
		was[pp] = true
	}
	is := make(map[model.ProtectedPrefix]bool, len(prot))
	for _, pp := range prot {
		is[pp] = true
	}
	var changed []model.ProtectedPrefix
	for _, pp := range t.prot {
		if !is[pp] {
			changed = append(changed, pp)
		}
	}
	for _, pp := range prot {
		if !was[pp] {
			changed = append(changed, pp)
		}
	}
	stayedOld := slices.DeleteFunc(slices.Clone(t.prot), func(pp model.ProtectedPrefix) bool { return !is[pp] })
	stayedNew := slices.DeleteFunc(slices.Clone(prot), func(pp model.ProtectedPrefix) bool { return !was[pp] })
	if !slices.Equal(stayedOld, stayedNew) {
		// Which of two covering entries names a prefix's reason is their
		// order: every entry counts as changed.
		changed = slices.Concat(t.prot, prot)
	}
	t.prot = prot
	e.setProtected(prot)
	e.snap.Protected = snap.Protected
	if len(changed) == 0 {
		return nil, true
	}
	// The prefixes equal to or inside a changed entry.
	affected := map[netip.Prefix]bool{}
	var shorter []netip.Prefix
	for _, pp := range changed {
		p := pp.Prefix // Protected masks it
		if p.Bits() == p.Addr().BitLen() {
			if t.prefixes[p] != nil {
				affected[p] = true
			}
			continue
		}
		shorter = append(shorter, p)
	}
	if len(shorter) > 0 {
		for pfx := range t.prefixes {
			if slices.ContainsFunc(shorter, func(p netip.Prefix) bool { return covers(p, pfx) }) {
				affected[pfx] = true
			}
		}
	}
	// The paths whose next hop is inside a changed entry a next hop may
	// not be in: the table's next hops are few (one or two a peer).
	var nhs []netip.Addr
	nhChanged := nextHopProtected(changed)
	for nh := range t.attrs.nextHops {
		if nh.IsValid() && slices.ContainsFunc(nhChanged, func(pp model.ProtectedPrefix) bool { return covers(pp.Prefix, hostPrefix(nh)) }) {
			nhs = append(nhs, nh)
		}
	}
	if len(nhs) > 0 {
		t.each(func(pfx netip.Prefix, tp *tablePath) bool {
			if slices.Contains(nhs, t.attrs.slots[tp.attrs].nextHop) {
				affected[pfx] = true
			}
			return true
		})
	}
	if len(affected) == 0 {
		return nil, true
	}
	// Decided again as paths given anew, as they are: Update's put
	// decides each against the new set, its recap and settle apply the
	// caps.
	var c TableChange
	for pfx := range affected {
		pe := t.prefixes[pfx]
		for i := range pe.len() {
			c.Paths = append(c.Paths, t.raw(pfx, pe.at(i)))
		}
	}
	return t.Update(c), true
}

// sameRouterForImport reports whether a and b are the same gateway router
// as the import decision reads it (all but the list of its static routes'
// UUIDs, which changes with every write).
func sameRouterForImport(a, b model.GatewayRouter) bool {
	return a.Network == b.Network && a.Name == b.Name && a.UUID == b.UUID && a.ExternalPort == b.ExternalPort &&
		slices.Equal(a.ExternalNetworks, b.ExternalNetworks) && slices.Equal(a.ForeignRoutes, b.ForeignRoutes) &&
		a.ForeignImport == b.ForeignImport
}
