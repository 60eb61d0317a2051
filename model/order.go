package model

import (
	"cmp"
	"net/netip"
)

// ComparePrefix orders prefixes by address, then by length: the one
// prefix order of every list ovnbgp sorts, shows or diffs.
func ComparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}
