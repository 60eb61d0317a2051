package model

import (
	"encoding/binary"
	"fmt"
	"math"
)

// LinkBandwidth is the link-bandwidth extended community
// (draft-ietf-idr-link-bandwidth, RFC 4360): type 0x40 (AS-specific, not
// transitive), subtype 0x04, a 2-octet ASN and the bandwidth as an IEEE
// 754 float32 in bytes per second. ovnbgp sends it on a Service VIP of a
// weightByEndpoints rule (EndpointsBandwidth), and reads it on learned
// paths. This file is its only encoder and decoder.
type LinkBandwidth struct {
	ASN            uint16  `json:"asn"`
	BytesPerSecond float32 `json:"bytesPerSecond"`
}

// The community's type and subtype octets.
const (
	LinkBandwidthType    = 0x40
	LinkBandwidthSubtype = 0x04
)

// ASTrans (RFC 6793) stands in a 2-octet ASN field for an ASN above 65535.
const ASTrans = 23456

// EndpointBytesPerSecond is what one local ready endpoint weighs: 1 Mbit/s,
// which FRR prints as "LB:65001:125000 (1.000 Mbps)". Only the ratio
// between the nodes' values matters to a receiver's weighted ECMP.
const EndpointBytesPerSecond = 125000

// MaxWeightEndpoints is the largest count EndpointsBandwidth encodes (more
// count as this many): gobgp's policy action takes the bandwidth as a
// 32-bit integer, and 34359 × 125000 is the last multiple below 2^32.
const MaxWeightEndpoints = math.MaxUint32 / EndpointBytesPerSecond

// EndpointsBandwidth is the community a node of ASN asn sends for a VIP
// with n local ready endpoints (n ≥ 1): n × EndpointBytesPerSecond; an
// ASN above 65535 is written AS_TRANS.
func EndpointsBandwidth(asn uint32, n int) LinkBandwidth {
	if asn > math.MaxUint16 {
		asn = ASTrans
	}
	n = min(max(n, 0), MaxWeightEndpoints)
	return LinkBandwidth{ASN: uint16(asn), BytesPerSecond: float32(n * EndpointBytesPerSecond)}
}

// Encode is the community's 8 octets on the wire.
func (l LinkBandwidth) Encode() [8]byte {
	var b [8]byte
	b[0], b[1] = LinkBandwidthType, LinkBandwidthSubtype
	binary.BigEndian.PutUint16(b[2:4], l.ASN)
	binary.BigEndian.PutUint32(b[4:8], math.Float32bits(l.BytesPerSecond))
	return b
}

// DecodeLinkBandwidth reads 8 octets of an extended community; ok is false
// when they are not a link-bandwidth community. The transitive form (type
// 0x00, subtype 0x04), which some speakers send, is read too
// (draft-ietf-idr-link-bandwidth: a receiver ignores the transitivity), as
// is a value that is no finite non-negative number (ok false).
func DecodeLinkBandwidth(b [8]byte) (LinkBandwidth, bool) {
	if (b[0] != LinkBandwidthType && b[0] != 0x00) || b[1] != LinkBandwidthSubtype {
		return LinkBandwidth{}, false
	}
	bw := math.Float32frombits(binary.BigEndian.Uint32(b[4:8]))
	if bw < 0 || math.IsNaN(float64(bw)) || math.IsInf(float64(bw), 0) {
		return LinkBandwidth{}, false
	}
	return LinkBandwidth{ASN: binary.BigEndian.Uint16(b[2:4]), BytesPerSecond: bw}, true
}

// String is "lb:ASN:BYTES_PER_SECOND" ("lb:65001:125000"), the notation
// of gobgp's policy actions; FRR prints the same community as
// "LB:65001:125000 (1.000 Mbps)".
func (l LinkBandwidth) String() string {
	return fmt.Sprintf("lb:%d:%.0f", l.ASN, l.BytesPerSecond)
}
