package model

import (
	"math"
	"testing"
)

// TestLinkBandwidthRoundTrip: the encoder writes the draft's octets and the
// decoder reads them back; other communities and bandwidths that weigh
// nothing are refused (issue 21).
func TestLinkBandwidthRoundTrip(t *testing.T) {
	l := LinkBandwidth{ASN: 65001, BytesPerSecond: 125e6} // 1 Gbit/s
	b := l.Encode()
	want := [8]byte{0x40, 0x04, 0xfd, 0xe9, 0x4c, 0xee, 0x6b, 0x28}
	if b != want {
		t.Fatalf("Encode = % x, want % x", b, want)
	}
	got, ok := DecodeLinkBandwidth(b)
	if !ok || got != l {
		t.Fatalf("DecodeLinkBandwidth = %+v, %v; want %+v, true", got, ok, l)
	}
	for _, bad := range []LinkBandwidth{
		{BytesPerSecond: float32(math.NaN())},
		{BytesPerSecond: float32(math.Inf(1))},
		{BytesPerSecond: -1},
	} {
		if got, ok := DecodeLinkBandwidth(bad.Encode()); ok {
			t.Errorf("DecodeLinkBandwidth(%v) = %+v, true; want false", bad.BytesPerSecond, got)
		}
	}
	other := b
	other[0] = 0x00 // the transitive form some speakers send: read too (a receiver ignores transitivity)
	if got, ok := DecodeLinkBandwidth(other); !ok || got != l {
		t.Errorf("the transitive type 0x00 form decoded as %+v, %v; want %+v", got, ok, l)
	}
	other = b
	other[1] = 0x02 // route target
	if _, ok := DecodeLinkBandwidth(other); ok {
		t.Error("a route target decoded as link bandwidth")
	}
}
