package model

import (
	"net/netip"
	"testing"
)

// TestSpecialPurpose: Covering finds the block a prefix is in (import's
// check, an aggregate covering a block is not inside it); Overlap also the
// block a prefix covers (advertising's check).
func TestSpecialPurpose(t *testing.T) {
	for _, tc := range []struct {
		prefix            string
		covering, overlap string // the block found, "" = none
	}{
		{"127.0.0.0/8", "127.0.0.0/8", "127.0.0.0/8"},
		{"127.1.0.0/16", "127.0.0.0/8", "127.0.0.0/8"},
		{"0.0.0.0/1", "", "0.0.0.0/8"},
		{"128.0.0.0/1", "", "169.254.0.0/16"},
		{"169.254.169.0/29", "169.254.0.0/16", "169.254.0.0/16"},
		{"10.0.0.0/8", "", ""},
		{"::/128", "::/128", "::/128"},
		{"::/1", "", "::/128"},
		{"ff00::/64", "ff00::/8", "ff00::/8"},
		{"2001:db8::/32", "", ""},
		{"fd69::/112", "", ""},
	} {
		p := netip.MustParsePrefix(tc.prefix)
		c, cok := SpecialPurposeCovering(p)
		o, ook := SpecialPurposeOverlap(p)
		if got := map[bool]string{true: c.Prefix.String(), false: ""}[cok]; got != tc.covering {
			t.Errorf("%s: covering %q, want %q", p, got, tc.covering)
		}
		if got := map[bool]string{true: o.Prefix.String(), false: ""}[ook]; got != tc.overlap {
			t.Errorf("%s: overlap %q, want %q", p, got, tc.overlap)
		}
	}
}
