package model

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Community is a BGP community (RFC 1997): 32 bits, written "ASN:VALUE"
// (16 bits each) or, for the well-known ones, by name.
type Community uint32

// CommunityLLGRStale (RFC 9494) marks a stale route; a route carrying it is
// not advertised to peers without long-lived graceful restart.
const CommunityLLGRStale Community = 0xFFFF0006

// WellKnownCommunity names a well-known community value.
type WellKnownCommunity struct {
	Name  string
	Value Community
	// RFC defines it.
	RFC string
}

// WellKnownCommunities returns the community names ovnbgp reads and prints,
// with their IANA values ("BGP Well-known Communities" registry). gobgp's
// own name map lacks graceful-shutdown (it calls 0xFFFF0000
// "planned-shut"), so ovnbgp keeps this one table for parsing and printing.
func WellKnownCommunities() []WellKnownCommunity { return slices.Clone(wellKnown[:]) }

var wellKnown = [...]WellKnownCommunity{
	{"graceful-shutdown", 0xFFFF0000, "RFC 8326"},
	{"accept-own", 0xFFFF0001, "RFC 7611"},
	{"llgr-stale", 0xFFFF0006, "RFC 9494"},
	{"no-llgr", 0xFFFF0007, "RFC 9494"},
	{"blackhole", 0xFFFF029A, "RFC 7999"},
	{"no-export", 0xFFFFFF01, "RFC 1997"},
	{"no-advertise", 0xFFFFFF02, "RFC 1997"},
	{"no-export-subconfed", 0xFFFFFF03, "RFC 1997"},
	{"no-peer", 0xFFFFFF04, "RFC 3765"},
}

// wellKnownNames lists the names for error messages.
func wellKnownNames() string {
	names := make([]string, len(wellKnown))
	for i, w := range wellKnown {
		names[i] = w.Name
	}
	return strings.Join(names, ", ")
}

// ParseCommunity reads "ASN:VALUE" (decimal, 0..65535 each, e.g.
// "65001:100") or a well-known name ("no-export"). It is ovnbgp's only
// community parser: config calls it when it loads a file, and the control
// API's JSON decodes through it.
func ParseCommunity(s string) (Community, error) {
	for _, w := range wellKnown {
		if s == w.Name {
			return w.Value, nil
		}
	}
	if hi, lo, ok := strings.Cut(s, ":"); ok {
		h, okh := parseUint(hi, 16)
		l, okl := parseUint(lo, 16)
		if okh && okl {
			return Community(h<<16 | l), nil
		}
	}
	return 0, fmt.Errorf("%q is not a community: write ASN:VALUE (0..65535 each, e.g. \"65001:100\") or a well-known name (%s)", s, wellKnownNames())
}

// parseUint reads a plain decimal number of at most bits (no sign, no
// spaces, no other base).
func parseUint(s string, bits int) (uint32, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, bits)
	return uint32(v), err == nil
}

// String is the well-known name, or "ASN:VALUE".
func (c Community) String() string {
	for _, w := range wellKnown {
		if c == w.Value {
			return w.Name
		}
	}
	return fmt.Sprintf("%d:%d", uint32(c)>>16, uint32(c)&0xffff)
}

// MarshalText writes String.
func (c Community) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads what ParseCommunity reads.
func (c *Community) UnmarshalText(b []byte) error {
	v, err := ParseCommunity(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// LargeCommunity is a BGP large community (RFC 8092), "ASN:DATA1:DATA2".
type LargeCommunity struct {
	ASN, Data1, Data2 uint32
}

// ParseLargeCommunity reads "A:B:C" (decimal, 0..4294967295 each). It is
// ovnbgp's only large-community parser.
func ParseLargeCommunity(s string) (LargeCommunity, error) {
	parts := strings.Split(s, ":")
	if len(parts) == 3 {
		a, oka := parseUint(parts[0], 32)
		b, okb := parseUint(parts[1], 32)
		c, okc := parseUint(parts[2], 32)
		if oka && okb && okc {
			return LargeCommunity{a, b, c}, nil
		}
	}
	return LargeCommunity{}, fmt.Errorf("%q is not a large community: write A:B:C (0..4294967295 each, e.g. \"64512:1:100\")", s)
}

// String is "ASN:DATA1:DATA2".
func (l LargeCommunity) String() string { return fmt.Sprintf("%d:%d:%d", l.ASN, l.Data1, l.Data2) }

// MarshalText writes String.
func (l LargeCommunity) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads what ParseLargeCommunity reads.
func (l *LargeCommunity) UnmarshalText(b []byte) error {
	v, err := ParseLargeCommunity(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Compare orders large communities by ASN, then Data1, then Data2.
func (l LargeCommunity) Compare(o LargeCommunity) int {
	return cmp.Or(cmp.Compare(l.ASN, o.ASN), cmp.Compare(l.Data1, o.Data1), cmp.Compare(l.Data2, o.Data2))
}

// Strings renders each value with its String method, e.g. communities for
// a table cell.
func Strings[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
