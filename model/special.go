package model

import "net/netip"

// specialPurpose is the special-purpose address space (RFC 6890 and its
// registries) that no route may point into, either way: import never
// accepts a route into it, and advertising never sends one that is in it
// or covers it. Each block would capture the host's own traffic (this
// network, loopback, link-local, multicast) or is not forwardable at all
// (reserved, the unspecified IPv6 address). The one list both directions
// use.
var specialPurpose = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// specialWhy is the Why of a special-purpose block.
func specialWhy(what string) string {
	return "special-purpose address space (RFC 6890: " + what + ")"
}

// SpecialPurposeCovering returns the special-purpose block equal to or
// covering p, if any: what import refuses whatever the accept entries say.
// An aggregate that covers a block (0.0.0.0/1) is not inside one.
func SpecialPurposeCovering(p netip.Prefix) (ProtectedPrefix, bool) {
	if !p.IsValid() {
		return ProtectedPrefix{}, false
	}
	for _, s := range specialPurpose {
		if s.prefix.Addr().Is4() == p.Addr().Is4() && s.prefix.Bits() <= p.Bits() && s.prefix.Contains(p.Addr()) {
			return ProtectedPrefix{Prefix: s.prefix, Why: specialWhy(s.what)}, true
		}
	}
	return ProtectedPrefix{}, false
}

// SpecialPurposeOverlap returns the special-purpose block that p is inside
// of, equal to, or covers, if any: what this node never advertises, since
// a peer would send it the host-scoped traffic of the whole block
// (0.0.0.0/1 covers 0.0.0.0/8 and 127.0.0.0/8).
func SpecialPurposeOverlap(p netip.Prefix) (ProtectedPrefix, bool) {
	if !p.IsValid() {
		return ProtectedPrefix{}, false
	}
	p = p.Masked()
	for _, s := range specialPurpose {
		if s.prefix.Addr().Is4() == p.Addr().Is4() && s.prefix.Overlaps(p) {
			return ProtectedPrefix{Prefix: s.prefix, Why: specialWhy(s.what)}, true
		}
	}
	return ProtectedPrefix{}, false
}
