package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// floodPrefixes are n distinct /24s from 11.0.0.0 on, from the from-th.
func floodPrefixes(from, n int) []string {
	out := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		a := uint32(11<<24) + uint32(i)<<8
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), 0}), 24).String())
	}
	return out
}

// TestPrefixLimitFloodInBigUpdates: a peer sends 16 times maxPrefixes in
// large UPDATEs (800 NLRI each), all at once. gobgp's limit is armed only
// near maxPrefixes (prefixlimit.go), and the session must end with Cease /
// Maximum Number of Prefixes Reached as soon as an UPDATE takes the count
// over maxPrefixes: gobgp reports the paths of every UPDATE it took before
// (the bound's announced counts them), not those of the one that crossed,
// so at most maxPrefixes are reported. Without the wire count the limit was
// armed after gobgp had read ahead: 3,200 to 4,000 reported. Found by the
// e2e TestHostileMaxPrefixes: 200,000 prefixes in 13 extended UPDATEs all
// went in before the limit was armed (RSS 384 MB for a limit of 100,000).
func TestPrefixLimitFloodInBigUpdates(t *testing.T) {
	parallel(t)
	l := newLab(t, 97)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	tor := l.peerOf("tor", 3, port, provASN)
	const max, per, n = 2000, 800, 40
	tor.MaxPrefixes = max
	node := l.node(false)
	node.limit.hold = time.Hour
	if err := node.SetPeers(context.Background(), []config.Peer{tor}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, node, "tor")
	<-w.up
	nh, as := l.addr(3), []uint32{provASN}
	var msgs []*bgppkt.BGPMessage
	for i := range n {
		msgs = append(msgs, announce(t, nh, as, false, nil, floodPrefixes(i*per, per)...))
	}
	go func() {
		w.mu.Lock()
		c := w.conn
		w.mu.Unlock()
		for _, m := range msgs {
			if writeMessage(c, m) != nil {
				return // the node ended the session
			}
		}
	}()
	eventually(t, 60*time.Second, "Cease / Maximum Number of Prefixes Reached", func() (bool, string) {
		for _, n := range w.notifications() {
			if n.ErrorCode == bgppkt.BGP_ERROR_CEASE && n.ErrorSubcode == bgppkt.BGP_ERROR_SUB_MAXIMUM_NUMBER_OF_PREFIXES_REACHED {
				return true, ""
			}
		}
		return false, fmt.Sprintf("notifications %v", w.notifications())
	})
	// the session's paths are gone: every path event before that was
	// counted
	eventually(t, 60*time.Second, "the session's paths dropped", func() (bool, string) {
		m := learned(t, node, "tor")
		return len(m) == 0, fmt.Sprintf("%d paths", len(m))
	})
	got := node.sess.bound(tor.Address).announced[0].Load()
	t.Logf("%d prefixes sent in %d UPDATEs; gobgp reported %d paths before the reset (maxPrefixes %d)", per*n, n, got, max)
	if got > max {
		t.Errorf("gobgp took %d paths before the limit ended the session, more than maxPrefixes %d", got, max)
	}
}

// TestPrefixLimitLeakSetAside: NLRI that never get a path event (here an
// UPDATE gobgp treats as withdraw, RFC 7606: a MED of length 3) count as in
// flight, which arms the limit, but not for good: once the wire has been
// quiet for leakAge a read sets them aside and the limit is disarmed. They
// used to stay in flight for the life of the session (with other paths
// that get no event, e.g. a ToR sending our advertisements back), and the
// limit, once armed, stayed armed: gobgp then walks the Adj-RIB-In on
// every UPDATE.
func TestPrefixLimitLeakSetAside(t *testing.T) {
	parallel(t)
	l := newLab(t, 101)
	port := freePort(t)
	w := newWirePeer(t, l.addr(3), port, provASN)
	tor := l.peerOf("tor", 3, port, provASN)
	const max = 1000
	tor.MaxPrefixes = max
	node := l.node(false)
	node.limit.check.Store(int64(200 * time.Millisecond))
	if err := node.SetPeers(context.Background(), []config.Peer{tor}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, node, "tor")
	<-w.up
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	var attrs []byte
	nh, err := bgppkt.NewPathAttributeNextHop(l.addr(3))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []bgppkt.PathAttributeInterface{
		bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP),
		bgppkt.NewPathAttributeAsPath([]bgppkt.AsPathParamInterface{bgppkt.NewAs4PathParam(bgppkt.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{provASN})}),
		nh,
	} {
		b, err := a.Serialize()
		if err != nil {
			t.Fatal(err)
		}
		attrs = append(attrs, b...)
	}
	attrs = append(attrs, 0x80, 4, 3, 0, 0, 1) // MED of length 3: treat-as-withdraw
	// 950 NLRI: over 90% of max on the wire, none ever in the Adj-RIB-In.
	for i := range 19 {
		var nlri []byte
		for _, p := range floodPrefixes(i*50, 50) {
			a := pfx(p).Addr().As4()
			nlri = append(nlri, 24, a[0], a[1], a[2])
		}
		if _, err := c.Write(rawUpdate(nil, attrs, nlri)); err != nil {
			t.Fatal(err)
		}
	}
	b := node.sess.bound(tor.Address)
	state := func() (bool, string) {
		node.mu.Lock()
		defer node.mu.Unlock()
		return b.armed[0], fmt.Sprintf("wire %d, announced %d, leak %d", b.wire[0].Load(), b.announced[0].Load(), b.leak[0])
	}
	eventually(t, 30*time.Second, "the limit armed for 950 NLRI in flight", func() (bool, string) {
		return state()
	})
	eventually(t, 30*time.Second, "the limit disarmed once the wire is quiet", func() (bool, string) {
		armed, s := state()
		return !armed, s
	})
	if p := peerState(t, node, "tor"); p.State != model.StateEstablished {
		t.Fatalf("session %s, want Established (nothing was over the limit)", p.State)
	}
}
