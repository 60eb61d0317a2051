package model

import (
	"encoding/binary"
	"math"
)

// LinkBandwidth is the value of the link-bandwidth extended community
// (draft-ietf-idr-link-bandwidth; RFC 4360 type 0x40, non-transitive
// two-octet-AS-specific, subtype 0x04): the sender's AS and the bandwidth
// of its link in bytes per second, an IEEE 754 single-precision float.
// This file is ovnbgp's one encoder and decoder of it (issue 21).
type LinkBandwidth struct {
	ASN            uint16  `json:"asn"`
	BytesPerSecond float32 `json:"bytesPerSecond"`
}

// The type and subtype octets of the link-bandwidth extended community.
const (
	linkBandwidthType    = 0x40
	linkBandwidthSubtype = 0x04
)

// Encode is the community's 8 octets: type 0x40, subtype 0x04, the AS,
// then the bandwidth's float32 bits, big-endian.
func (l LinkBandwidth) Encode() [8]byte {
	var b [8]byte
	b[0], b[1] = linkBandwidthType, linkBandwidthSubtype
	binary.BigEndian.PutUint16(b[2:4], l.ASN)
	binary.BigEndian.PutUint32(b[4:8], math.Float32bits(l.BytesPerSecond))
	return b
}

// DecodeLinkBandwidth reads an extended community's 8 octets; ok is false
// when they are not a link-bandwidth community (another type or subtype)
// or the bandwidth is not a finite number of at least 0 (a NaN, an
// infinity or a negative bandwidth means nothing to weigh by).
func DecodeLinkBandwidth(b [8]byte) (LinkBandwidth, bool) {
	if b[0] != linkBandwidthType || b[1] != linkBandwidthSubtype {
		return LinkBandwidth{}, false
	}
	bw := math.Float32frombits(binary.BigEndian.Uint32(b[4:8]))
	if bw != bw || math.IsInf(float64(bw), 0) || bw < 0 {
		return LinkBandwidth{}, false
	}
	return LinkBandwidth{ASN: binary.BigEndian.Uint16(b[2:4]), BytesPerSecond: bw}, true
}
