package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// badPeerAS is how ovnbgp names the NOTIFICATION FRR sends when our ASN is
// not the remote-as it expects.
const badPeerAS = "received NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS"

// TestDialedOpenRefusedNamed: FRR is passive and expects another ASN from
// the node (65099, not 65010), so it refuses the OPEN ovnbgp sends on the
// connection ovnbgp dialed with NOTIFICATION 2/2 Bad Peer AS. `ovnbgp
// peers` names code, subcode and name in LAST ERROR (gobgp alone says
// only "invalid-msg" there).
func TestDialedOpenRefusedNamed(t *testing.T) {
	t.Parallel()
	w := setup(t,
		&lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65099, Passive: true}}},
		lab.DaemonConfig{})
	var last model.PeerStatus
	lab.Eventually(t, generous, 200*time.Millisecond, "ovnbgp peers names FRR's NOTIFICATION", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		p, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		last = p
		if !strings.Contains(p.LastError, badPeerAS) {
			return fmt.Errorf("ovnbgp peers: tor is %s, last error %q", p.State, p.LastError)
		}
		return nil
	})
	if last.LastErrorAt.Before(w.d.Started) {
		t.Errorf("lastErrorAt %v is before the daemon started (%v)", last.LastErrorAt, w.d.Started)
	}
	// The CLI table too.
	out, err := w.d.CLI("peers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "LAST ERROR") || !strings.Contains(string(out), "2/2 OPEN Message Error / Bad Peer AS") {
		t.Errorf("ovnbgp peers does not name the NOTIFICATION:\n%s", out)
	}
	// FRR did refuse the connection ovnbgp dialed.
	n, err := w.frrNeighbor(lab.NodeIPv4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FRR neighbor %s: %+v", lab.NodeIPv4, n)
	if n.ConnectionsEstablished != 0 {
		t.Errorf("FRR neighbor %s: established %d times; want a refusal", lab.NodeIPv4, n.ConnectionsEstablished)
	}
	t.Logf("ovnbgp peers:\n%s", out)
}

// TestBothDial: FRR and ovnbgp both dial (neither is passive) and both
// listen. The session comes up with the node's routes; then FRR resets it
// three times (`clear bgp`): FRR dials back at once, while gobgp is Idle
// (its connection waits with ovnbgp's listener, and ovnbgp's dialer holds
// off), or both dial at once (connection collision, RFC 4271 6.8). Each
// time the session converges to one Established session, which then stays
// up.
func TestBothDial(t *testing.T) {
	t.Parallel()
	w := setup(t,
		&lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010}}},
		lab.DaemonConfig{ListenPort: 179})
	w.comesUp(t, "tor", lab.NodeIPv4)
	n, err := w.frrNeighbor(lab.NodeIPv4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FRR neighbor %s: established %d time(s), FRR port %d, node port %d", lab.NodeIPv4, n.ConnectionsEstablished, n.PortLocal, n.PortForeign)
	est := n.ConnectionsEstablished
	for round := range 3 {
		// vtysh's socket starts in the view node: clear needs enable.
		for _, cmd := range []string{"enable", "clear bgp " + lab.NodeIPv4.String()} {
			if _, err := w.frr.VTY(cmd); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		lab.Eventually(t, generous, 100*time.Millisecond, fmt.Sprintf("reset %d: Established again", round+1), func() error {
			if err := w.d.Exited(); err != nil {
				return err
			}
			n, err = w.frrNeighbor(lab.NodeIPv4)
			if err != nil {
				return err
			}
			if n.State != "Established" || n.ConnectionsEstablished <= est {
				return fmt.Errorf("FRR neighbor %s: %s, established %d times, last reset %q", lab.NodeIPv4, n.State, n.ConnectionsEstablished, n.LastReset)
			}
			p, err := w.d.Peer("tor")
			if err != nil {
				return err
			}
			if p.State != model.StateEstablished {
				return fmt.Errorf("ovnbgp peers: tor is %s (%s)", p.State, p.LastError)
			}
			return nil
		})
		dialer := "ovnbgp"
		if n.PortForeign == 179 {
			dialer = "FRR"
		}
		t.Logf("reset %d: Established again after %v on the connection %s dialed (FRR port %d, node port %d), established %d time(s)",
			round+1, time.Since(start).Round(time.Millisecond), dialer, n.PortLocal, n.PortForeign, n.ConnectionsEstablished)
		if n.ConnectionsEstablished != est+1 {
			t.Errorf("reset %d: FRR counts %d establishments, want %d: the session flapped", round+1, n.ConnectionsEstablished, est+1)
		}
		est = n.ConnectionsEstablished
	}
	// One session, not two fighting.
	lab.Consistently(t, 12*time.Second, 250*time.Millisecond, "one session stays Established", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		n, err := w.frrNeighbor(lab.NodeIPv4)
		if err != nil {
			return err
		}
		if n.State != "Established" || n.ConnectionsEstablished != est {
			return fmt.Errorf("FRR neighbor %s: %s, established %d times (was %d), last reset %q", lab.NodeIPv4, n.State, n.ConnectionsEstablished, est, n.LastReset)
		}
		p, err := w.d.Peer("tor")
		if err != nil {
			return err
		}
		if p.State != model.StateEstablished {
			return fmt.Errorf("ovnbgp peers: tor is %s (%s)", p.State, p.LastError)
		}
		return nil
	})
	if err := w.rib("ipv4", lab.NodeIPv4, nodeSubnets4, notOurs)(); err != nil {
		t.Error(err)
	}
}
