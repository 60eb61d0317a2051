package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestEndOfRIB: once the provider has sent its table and End-of-RIB for
// every negotiated family, the node's status says so; a learned path is not
// stale, and its Malformed is empty. (gobgp sends End-of-RIB only with
// graceful restart negotiated, so both sides enable it.)
func TestEndOfRIB(t *testing.T) {
	parallel(t)
	l := newLab(t, 41)
	port := freePort(t)
	prov := l.provider(3, port, provASN, true, "")
	set(t, prov, adv("node", "10.77.0.0/16", model.PathAttrs{}))
	node := l.node(true, l.peerOf("tor", 3, port, provASN))
	waitEstablished(t, node, "tor")
	eventually(t, sessionTimeout, "End-of-RIB from tor", func() (bool, string) {
		st := peerState(t, node, "tor")
		return st.EndOfRIB, "EndOfRIB false"
	})
	paths := waitLearned(t, node, "tor", pfx("10.77.0.0/16"))
	p := paths[pfx("10.77.0.0/16")]
	if p.Stale || p.Malformed != "" {
		t.Errorf("path = %+v, want neither stale nor malformed", p)
	}
}

// TestLearnedNextHopOfMPReach: the next hop of an IPv6 path is the one in
// MP_REACH_NLRI, whatever NEXT_HOP says and in whichever order the
// attributes come; an IPv4 next hop there is reported as it is, for import
// to reject.
func TestLearnedNextHopOfMPReach(t *testing.T) {
	s := &Speaker{global: config.BGP{ASN: nodeASN}}
	peer := config.Peer{Name: "tor", ASN: provASN}
	prefix := pfx("2001:db8:9::/48")
	nlri, err := bgppkt.NewIPAddrPrefix(prefix)
	if err != nil {
		t.Fatal(err)
	}
	v4, err := bgppkt.NewPathAttributeNextHop(netip.MustParseAddr("192.0.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mpNH string
		v4   bool // NEXT_HOP attribute too
		want string
	}{
		{"IPv6 next hop, NEXT_HOP too", "2001:db8::1", true, "2001:db8::1"},
		{"IPv6 next hop alone", "2001:db8::1", false, "2001:db8::1"},
		{"IPv4 next hop in MP_REACH", "192.0.2.7", true, "192.0.2.7"},
	} {
		mp, err := bgppkt.NewPathAttributeMpReachNLRI(bgppkt.RF_IPv6_UC,
			[]bgppkt.PathNLRI{{NLRI: nlri}}, netip.MustParseAddr(tc.mpNH))
		if err != nil {
			t.Fatal(err)
		}
		orders := [][]bgppkt.PathAttributeInterface{{mp}}
		if tc.v4 {
			orders = [][]bgppkt.PathAttributeInterface{{v4, mp}, {mp, v4}}
		}
		for _, attrs := range orders {
			path := &apiutil.Path{Family: bgppkt.RF_IPv6_UC, Nlri: nlri, Attrs: append([]bgppkt.PathAttributeInterface{
				bgppkt.NewPathAttributeOrigin(0),
				bgppkt.NewPathAttributeAsPath([]bgppkt.AsPathParamInterface{bgppkt.NewAs4PathParam(bgppkt.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{provASN})}),
			}, attrs...)}
			if got := s.learnedPath(peer, prefix, path, nil).NextHop.String(); got != tc.want {
				t.Errorf("%s: next hop = %s, want %s", tc.name, got, tc.want)
			}
		}
	}
}

// TestLearnedPoke: a peer's new path reaches the daemon's TakeLearned
// delta, so the daemon never walks the learned table for it.
func TestLearnedPoke(t *testing.T) {
	parallel(t)
	l := newLab(t, 42)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	waitEstablished(t, node, "tor")
	node.TakeLearned()
	set(t, prov, adv("node", "10.78.0.0/16", model.PathAttrs{}))
	waitLearned(t, node, "tor", pfx("10.78.0.0/16"))
	var got []netip.Prefix
	eventually(t, sessionTimeout, "the path in TakeLearned", func() (bool, string) {
		for _, p := range node.TakeLearned().Paths {
			got = append(got, p.Prefix)
		}
		return slices.Contains(got, pfx("10.78.0.0/16")), fmt.Sprint(got)
	})
}
