package bgp

import (
	"encoding/binary"
	"net/netip"

	"go.uber.org/zap"
)

// overrunLogger is openConn's fixOverrun for the peer name at addr: it logs
// each rewritten UPDATE, as gobgp logs the UPDATEs it treats as withdraw.
func overrunLogger(log *zap.Logger, name string, addr netip.Addr) func() {
	return func() {
		log.Warn("an UPDATE's path attribute overruns the attribute field: treated as withdraw of its NLRI (RFC 7606 4)",
			zap.String("peer", name), zap.Stringer("address", addr))
	}
}

// withdrawOnAttrOverrun rewrites an UPDATE whose path attribute field ends
// inside an attribute (its length octets claim more than the field holds)
// into an UPDATE that withdraws the original's withdrawn routes and NLRI,
// and reports whether it did. RFC 7606 4 makes such an UPDATE
// treat-as-withdraw: the NLRI field is still located by the Total Path
// Attribute Length. gobgp v4.8.0 flags it treat-as-withdraw but stops
// decoding before the NLRI, so it withdraws nothing and a route the peer
// announced before stays. Every other message, well-formed or not in
// another way, is returned unchanged (gobgp handles those as the RFC says).
func withdrawOnAttrOverrun(msg []byte) ([]byte, bool) {
	if len(msg) < bgpHeaderLen+4 || msg[18] != 2 {
		return msg, false
	}
	body := msg[bgpHeaderLen:]
	wlen := int(binary.BigEndian.Uint16(body))
	if 2+wlen+2 > len(body) {
		return msg, false
	}
	alen := int(binary.BigEndian.Uint16(body[2+wlen:]))
	start := 4 + wlen
	if start+alen > len(body) {
		return msg, false
	}
	attrs, nlri := body[start:start+alen], body[start+alen:]
	overrun := false
	for len(attrs) >= 3 {
		hl, vlen := 3, int(attrs[2])
		if attrs[0]&0x10 != 0 {
			if len(attrs) < 4 {
				break
			}
			hl, vlen = 4, int(binary.BigEndian.Uint16(attrs[2:4]))
		}
		if hl+vlen > len(attrs) {
			overrun = true
			break
		}
		attrs = attrs[hl+vlen:]
	}
	if !overrun || wlen+len(nlri) == 0 || wlen+len(nlri) > 0xffff-bgpHeaderLen-4 {
		return msg, false
	}
	out := make([]byte, bgpHeaderLen, bgpHeaderLen+4+wlen+len(nlri))
	copy(out, msg[:16])
	binary.BigEndian.PutUint16(out[16:], uint16(bgpHeaderLen+4+wlen+len(nlri)))
	out[18] = 2
	out = binary.BigEndian.AppendUint16(out, uint16(wlen+len(nlri)))
	out = append(out, body[2:2+wlen]...)
	out = append(out, nlri...)
	return binary.BigEndian.AppendUint16(out, 0), true
}
