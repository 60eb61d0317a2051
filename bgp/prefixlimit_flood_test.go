package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/config"
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
	node.prefixHold = time.Hour
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
	got := node.boundOf(tor.Address).announced[0].Load()
	t.Logf("%d prefixes sent in %d UPDATEs; gobgp reported %d paths before the reset (maxPrefixes %d)", per*n, n, got, max)
	if got > max {
		t.Errorf("gobgp took %d paths before the limit ended the session, more than maxPrefixes %d", got, max)
	}
}
