package model

import (
	"encoding/hex"
	"testing"
)

// TestLinkBandwidthBytes (issue 21): the encoding against bytes written out
// from the draft's layout (type 0x40, subtype 0x04, 2-octet ASN, IEEE 754
// float32 bytes per second, big-endian) for the values FRR prints
// "LB:65001:1250000 (10.000 Mbps)" and "LB:65001:125000 (1.000 Mbps)".
func TestLinkBandwidthBytes(t *testing.T) {
	for _, tc := range []struct {
		lb   LinkBandwidth
		wire string
	}{
		// 1250000 = 0x49989680 as float32
		{LinkBandwidth{ASN: 65001, BytesPerSecond: 1250000}, "4004fde949989680"},
		// 125000 = 0x47f42400
		{LinkBandwidth{ASN: 65001, BytesPerSecond: 125000}, "4004fde947f42400"},
		{LinkBandwidth{ASN: 23456, BytesPerSecond: 375000}, "40045ba048b71b00"},
		{LinkBandwidth{ASN: 0, BytesPerSecond: 0}, "4004000000000000"},
	} {
		b := tc.lb.Encode()
		if got := hex.EncodeToString(b[:]); got != tc.wire {
			t.Errorf("%v encodes to %s, want %s", tc.lb, got, tc.wire)
		}
		back, ok := DecodeLinkBandwidth(b)
		if !ok || back != tc.lb {
			t.Errorf("%s decodes to %v %v, want %v", tc.wire, back, ok, tc.lb)
		}
	}
}

// TestDecodeLinkBandwidthRefuses (issue 21): other communities and values
// that are no bandwidth are not read as one; the transitive form is.
func TestDecodeLinkBandwidthRefuses(t *testing.T) {
	for _, tc := range []struct {
		wire string
		ok   bool
	}{
		{"0004fde947f42400", true},  // transitive form
		{"4003fde947f42400", false}, // other subtype
		{"0002fde900000064", false}, // route target
		{"4004fde9bf800000", false}, // -1
		{"4004fde97fc00000", false}, // NaN
		{"4004fde97f800000", false}, // +Inf
	} {
		raw, _ := hex.DecodeString(tc.wire)
		var b [8]byte
		copy(b[:], raw)
		if _, ok := DecodeLinkBandwidth(b); ok != tc.ok {
			t.Errorf("%s: decoded %v, want %v", tc.wire, ok, tc.ok)
		}
	}
}

// TestEndpointsBandwidth (issue 21): n endpoints are n × 125000 bytes per
// second, an ASN above 65535 is AS_TRANS, and the count is capped where
// gobgp's 32-bit integer ends.
func TestEndpointsBandwidth(t *testing.T) {
	for _, tc := range []struct {
		asn  uint32
		n    int
		want LinkBandwidth
	}{
		{65010, 1, LinkBandwidth{65010, 125000}},
		{65010, 3, LinkBandwidth{65010, 375000}},
		{4200000000, 2, LinkBandwidth{ASTrans, 250000}},
		{65010, 1 << 30, LinkBandwidth{65010, float32(MaxWeightEndpoints * EndpointBytesPerSecond)}},
	} {
		if got := EndpointsBandwidth(tc.asn, tc.n); got != tc.want {
			t.Errorf("EndpointsBandwidth(%d, %d) = %v, want %v", tc.asn, tc.n, got, tc.want)
		}
	}
	if uint64(MaxWeightEndpoints)*EndpointBytesPerSecond > 1<<32-1 {
		t.Errorf("MaxWeightEndpoints %d overflows 32 bits", MaxWeightEndpoints)
	}
}
