package bgp

import (
	"strings"
	"testing"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
)

// TestEmptyCommunitiesMalformed: a COMMUNITIES attribute of length 0 is
// malformed (RFC 7606 7.8: the length must be a non-zero multiple of 4;
// treat-as-withdraw), but gobgp v4.8.0 decodes it as an empty list and
// keeps the path. The path must read as malformed, so that import drops
// it (and the route it replaced). Found by the hostile-input suite
// (test/e2e TestHostileInput/cases/communities-length-0).
func TestEmptyCommunitiesMalformed(t *testing.T) {
	s := &Speaker{global: config.BGP{ASN: nodeASN}}
	tor := config.Peer{Name: "tor", ASN: provASN}
	wire := []byte{0xc0, 8, 0} // flags optional transitive, type 8, length 0
	a, err := bgppkt.GetPathAttribute(wire)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DecodeFromBytes(wire); err != nil {
		t.Fatalf("gobgp now refuses an empty COMMUNITIES (%v): the check in learnedPath may go", err)
	}
	p := pathWithASPath(t, provASN)
	p.Attrs = append(p.Attrs, a)
	lp := s.learnedPath(tor, pfx("10.0.0.0/24"), p, nil)
	if !strings.Contains(lp.Malformed, "COMMUNITIES of length 0 (RFC 7606 7.8") || !strings.HasPrefix(lp.Reason, "malformed: ") {
		t.Errorf("malformed %q, reason %q: want an empty COMMUNITIES named malformed", lp.Malformed, lp.Reason)
	}
	// control: one community is fine
	q := pathWithASPath(t, provASN)
	q.Attrs = append(q.Attrs, bgppkt.NewPathAttributeCommunities([]uint32{65001<<16 | 100}))
	if lp := s.learnedPath(tor, pfx("10.0.0.0/24"), q, nil); lp.Malformed != "" {
		t.Errorf("one community: malformed %q", lp.Malformed)
	}
}
