package bgp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// rawUpdate frames an UPDATE of withdrawn routes, path attributes and NLRI.
func rawUpdate(withdrawn, attrs, nlri []byte) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(len(withdrawn)))
	body = append(body, withdrawn...)
	body = binary.BigEndian.AppendUint16(body, uint16(len(attrs)))
	body = append(body, attrs...)
	body = append(body, nlri...)
	h := bytes.Repeat([]byte{0xff}, 16)
	h = binary.BigEndian.AppendUint16(h, uint16(bgpHeaderLen+len(body)))
	return append(append(h, 2), body...)
}

// TestAttrOverrunTreatAsWithdraw: an UPDATE whose last attribute claims
// more octets than the path attribute field holds is malformed; RFC 7606 4
// says treat-as-withdraw of its NLRI (the NLRI field is still located by
// the Total Path Attribute Length). gobgp v4.8.0 stops decoding there and
// withdraws nothing, so a route announced before stayed. The stream gobgp
// reads carries instead an UPDATE that withdraws those NLRI. Found by the
// hostile-input suite (test/e2e TestHostileInput/cases/attribute-length-overrun).
func TestAttrOverrunTreatAsWithdraw(t *testing.T) {
	good := []byte{0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xea, 0x40, 3, 4, 192, 0, 2, 1}
	overrun := append(append([]byte{}, good...), 0x80, 4, 8, 0, 0, 0, 1) // MED "of 8 octets", 4 there
	nlri := []byte{24, 10, 99, 1, 16, 10, 98}
	withdrawn := []byte{24, 10, 97, 1}

	// what gobgp makes of the original: treat-as-withdraw with no NLRI
	var u bgppkt.BGPUpdate
	err := u.DecodeFromBytes(rawUpdate(withdrawn, overrun, nlri)[bgpHeaderLen:])
	if me, ok := err.(*bgppkt.MessageError); !ok || me.ErrorHandling != bgppkt.ERROR_HANDLING_TREAT_AS_WITHDRAW || len(u.NLRI) != 0 {
		t.Fatalf("gobgp now decodes it differently (%v, NLRI %v): the rewrite may go", err, u.NLRI)
	}

	got, ok := withdrawOnAttrOverrun(rawUpdate(withdrawn, overrun, nlri))
	want := rawUpdate(append(append([]byte{}, withdrawn...), nlri...), nil, nil)
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("rewrite = %x, %v; want %x", got, ok, want)
	}
	var w bgppkt.BGPUpdate
	if err := w.DecodeFromBytes(got[bgpHeaderLen:]); err != nil || len(w.WithdrawnRoutes) != 3 || len(w.NLRI) != 0 {
		t.Fatalf("rewritten UPDATE: %v, withdrawn %v", err, w.WithdrawnRoutes)
	}
	// controls: well-formed UPDATEs, other messages and other errors pass
	// unchanged
	for _, m := range [][]byte{
		rawUpdate(withdrawn, good, nlri),
		rawUpdate(nil, nil, nil),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 19, 4},
		rawUpdate(nil, append(append([]byte{}, good...), 0x80, 4, 3, 0, 0, 1), nlri), // MED of length 3: gobgp's own treat-as-withdraw
	} {
		if got, ok := withdrawOnAttrOverrun(m); ok || !bytes.Equal(got, m) {
			t.Errorf("%x rewritten to %x", m, got)
		}
	}

	// through openConn, the messages cut in odd pieces
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		stream := append(rawUpdate(withdrawn, good, nlri), rawUpdate(withdrawn, overrun, nlri)...)
		stream = append(stream, rawUpdate(nil, good, nlri)...)
		for i := 0; i < len(stream); i += 7 {
			_, _ = c.Write(stream[i:min(i+7, len(stream))])
			time.Sleep(time.Millisecond)
		}
	}()
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	fixed := 0
	oc := &openConn{TCPConn: s, head: nil, fixOverrun: func() { fixed++ }}
	out, err := io.ReadAll(oc)
	if err != nil {
		t.Fatal(err)
	}
	wantStream := append(rawUpdate(withdrawn, good, nlri), want...)
	wantStream = append(wantStream, rawUpdate(nil, good, nlri)...)
	if !bytes.Equal(out, wantStream) || fixed != 1 {
		t.Errorf("stream read through openConn (%d fixed):\n%x\nwant\n%x", fixed, out, wantStream)
	}
}
