package bgp

import (
	"fmt"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestLocalPathWinsOverLearnedSamePrefix guards the LOCAL_PREF 0 detour
// (localPath, statement): every local path carries LOCAL_PREF 0, which
// would lose gobgp's best-path selection (local preference comes before
// local origin) to any learned path of the same prefix (100 by default) if
// learned paths entered the Loc-RIB. They do not (the import policy
// rejects them all, RFC 8212), so a peer sending back the node's own
// prefix changes nothing: the iBGP peer keeps the node's path (empty AS
// path, not the eBGP peer's), and the eBGP peer keeps it too (were the
// learned path best, gobgp would withdraw it from the peer it came from).
func TestLocalPathWinsOverLearnedSamePrefix(t *testing.T) {
	parallel(t)
	l := newLab(t, 33)
	portA, portB := freePort(t), freePort(t)
	provA := l.provider(3, portA, provASN, false, "")
	provB := l.provider(4, portB, nodeASN, false, "")
	node := l.node(false, l.peerOf("a", 3, portA, provASN), l.peerOf("b", 4, portB, nodeASN))
	p := "10.33.0.0/24"
	set(t, node, adv("a", p, model.PathAttrs{}), adv("b", p, model.PathAttrs{}))
	waitEstablished(t, node, "a")
	waitEstablished(t, node, "b")
	waitLearned(t, provA, "node", pfx(p))
	waitLearned(t, provB, "node", pfx(p))

	// The eBGP peer sends the same prefix back to the node.
	set(t, provA, adv("node", p, model.PathAttrs{}))
	waitLearned(t, node, "a", pfx(p))
	// Markers sent after it: once a peer has its marker, it has seen
	// whatever the node's RIB made of a's path (gobgp sends in order).
	markA, markB := "10.33.8.0/24", "10.33.9.0/24"
	set(t, node, adv("a", p, model.PathAttrs{}), adv("a", markA, model.PathAttrs{}),
		adv("b", p, model.PathAttrs{}), adv("b", markB, model.PathAttrs{}))
	eventually(t, routeTimeout, "both markers at their peers", func() (bool, string) {
		a, b := learned(t, provA, "node"), learned(t, provB, "node")
		_, okA := a[pfx(markA)]
		_, okB := b[pfx(markB)]
		return okA && okB, fmt.Sprintf("a: %s; b: %s", prefixesOf(a), prefixesOf(b))
	})
	if lp, ok := learned(t, provB, "node")[pfx(p)]; !ok || len(lp.ASPath) != 0 || lp.LocalPref != 100 {
		t.Errorf("iBGP peer b has %s: %v, AS path %v, local preference %d; want the node's own path (empty AS path, 100)", p, ok, lp.ASPath, lp.LocalPref)
	}
	if lp, ok := learned(t, provA, "node")[pfx(p)]; !ok || fmt.Sprint(lp.ASPath) != fmt.Sprint([]uint32{nodeASN}) {
		t.Errorf("eBGP peer a has the node's %s: %v (AS path %v); want it kept, AS path [%d]", p, ok, lp.ASPath, nodeASN)
	}
}
