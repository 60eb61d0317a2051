package bgp

import (
	"testing"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestLearnedLinkBandwidth: a path's link-bandwidth extended community, as
// gobgp decodes it from the wire, reaches model.LearnedPath through the one
// decoder (issue 21); the first one counts, and a path without one has none.
func TestLearnedLinkBandwidth(t *testing.T) {
	s := &Speaker{global: config.BGP{ASN: nodeASN}}
	tor := config.Peer{Name: "tor", ASN: provASN}
	for _, tc := range []struct {
		name string
		wire [][8]byte // extended communities as sent
		want *model.LinkBandwidth
	}{
		{name: "none"},
		{name: "non-transitive", wire: [][8]byte{model.LinkBandwidth{ASN: 65010, BytesPerSecond: 375e6}.Encode()},
			want: &model.LinkBandwidth{ASN: 65010, BytesPerSecond: 375e6}},
		// FRR sends the transitive form (type 0x00) unless told
		// non-transitive; gobgp reads both as link bandwidth.
		{name: "transitive", wire: [][8]byte{{0x00, 0x04, 0xfd, 0xf2, 0x4c, 0xee, 0x6b, 0x28}},
			want: &model.LinkBandwidth{ASN: 65010, BytesPerSecond: 125e6}},
		{name: "after a route target, first of two", wire: [][8]byte{
			{0x00, 0x02, 0xfd, 0xf2, 0, 0, 0, 1},
			model.LinkBandwidth{ASN: 1, BytesPerSecond: 10}.Encode(),
			model.LinkBandwidth{ASN: 2, BytesPerSecond: 20}.Encode()},
			want: &model.LinkBandwidth{ASN: 1, BytesPerSecond: 10}},
		{name: "route target only", wire: [][8]byte{{0x00, 0x02, 0xfd, 0xf2, 0, 0, 0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pathWithASPath(t, provASN)
			if len(tc.wire) > 0 {
				b := []byte{0xc0, 16, byte(8 * len(tc.wire))} // optional transitive, type 16
				for _, w := range tc.wire {
					b = append(b, w[:]...)
				}
				a, err := bgppkt.GetPathAttribute(b)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.DecodeFromBytes(b); err != nil {
					t.Fatal(err)
				}
				p.Attrs = append(p.Attrs, a)
			}
			got := s.learnedPath(tor, pfx("10.0.0.0/24"), p, nil).LinkBandwidth
			switch {
			case (got == nil) != (tc.want == nil):
				t.Fatalf("LinkBandwidth = %+v, want %+v", got, tc.want)
			case got != nil && *got != *tc.want:
				t.Fatalf("LinkBandwidth = %+v, want %+v", *got, *tc.want)
			}
		})
	}
}
