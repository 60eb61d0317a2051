package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestAdvertisedPendingWhileIdle: no BGP speaker runs on the tor yet, so
// the session is down. `routes advertised` lists the subnets as pending
// (and why), not as sent; once FRR runs, they reach it and turn sent.
func TestAdvertisedPendingWhileIdle(t *testing.T) {
	t.Parallel()
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	w.nb.PopulateOVNK()
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{})
	check := func(want model.AdvState) func() error {
		return func() error {
			advs, err := w.d.Advertised()
			if err != nil {
				return err
			}
			n := 0
			for _, a := range advs {
				if a.Peer != "tor" || !a.Prefix.Addr().Is4() {
					continue
				}
				n++
				if a.State != want {
					return fmt.Errorf("%v: state %q (%s), want %q", a.Prefix, a.State, a.Reason, want)
				}
				if want == model.AdvPending && !strings.Contains(a.Reason, "session") {
					return fmt.Errorf("%v: pending without saying the session is down: %q", a.Prefix, a.Reason)
				}
			}
			if n != len(nodeSubnets4) {
				return fmt.Errorf("routes advertised lists %d IPv4 subnets for tor, want %d: %+v", n, len(nodeSubnets4), advs)
			}
			return nil
		}
	}
	lab.Eventually(t, generous, 200*time.Millisecond, "routes advertised says pending", check(model.AdvPending))

	// FRR starts: the same routes are now sent.
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}})
	waitRIB(t, generous, time.Now(), "routes once FRR has the neighbor", w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, nil))
	lab.Eventually(t, generous, 200*time.Millisecond, "routes advertised says sent", check(model.AdvSent))
}
