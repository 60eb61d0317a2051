package bgp

import (
	"testing"

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
