package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/doctor"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// firstASRule imports 10.99.0.0/16 from ExaBGP into GR_node1 and table 100
// (named like importRule, which checkRows expects).
const firstASRule = `  - name: tor-routes
    peers: [exa]
    network: default
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
    targets: {ovn: true, kernel: {table: 100}}`

// TestImportFirstASEnforced: ExaBGP, a peer of AS 65001, announces a path
// whose AS path is [65999] (RFC 4271 6.3: the first AS must be the eBGP
// peer's). It is imported neither into OVN nor into the kernel, and `routes
// learned --rejected` says why; a path starting with 65001 beside it is
// imported. With enforceFirstAS: false on the peer (a route server) and a
// reload, the path is imported, and the session was not reset.
func TestImportFirstASEnforced(t *testing.T) {
	t.Parallel()
	w := startImportWorld(t, importOpts{noFRR: true, exaASN: 65001, cfg: lab.DaemonConfig{Import: firstASRule}})
	exa := lab.ExaIPv4.String()
	const bad, good = "10.99.31.0/24", "10.99.32.0/24"
	w.exa.MustSend(
		"announce route "+bad+" next-hop "+exa+" as-path [ 65999 ]",
		"announce route "+good+" next-hop "+exa+" as-path [ 65001 65999 ]")
	w.waitInstalled(t, "the path starting with the peer's AS installed", good, exa)
	want := "first AS 65999 of the AS path is not peer exa's AS 65001 (RFC 4271 6.3)"
	lab.Eventually(t, 20*time.Second, 100*time.Millisecond, "routes learned --rejected names the first AS", func() error {
		rej, err := w.d.Learned(true)
		if err != nil {
			return err
		}
		for _, p := range rej {
			if p.Prefix.String() == bad {
				if p.Accepted || !strings.Contains(p.Reason, want) || !strings.Contains(p.Reason, "enforceFirstAS: false") {
					return fmt.Errorf("%s: accepted %v, reason %q, want %q and the opt-out", bad, p.Accepted, p.Reason, want)
				}
				return nil
			}
		}
		return fmt.Errorf("%s not in routes learned --rejected (%d rejected)", bad, len(rej))
	})
	out, err := w.d.CLI("routes", "learned", "--rejected")
	if err != nil || !strings.Contains(string(out), "first AS 65999") {
		t.Errorf("routes learned --rejected (table) does not show the reason: %v\n%s", err, out)
	}
	// Decided by now (the good path of the same UPDATE stream is in):
	// still nowhere, a second later too.
	time.Sleep(time.Second)
	if err := w.nothingInstalledFor(bad); err != nil {
		t.Fatalf("a path with a wrong first AS was imported: %v", err)
	}
	before, err := w.d.Peer("exa")
	if err != nil {
		t.Fatal(err)
	}

	cfg := w.d.Cfg
	cfg.Peers = append([]lab.Peer(nil), cfg.Peers...)
	for i := range cfg.Peers {
		if cfg.Peers[i].Name == "exa" {
			cfg.Peers[i].NoEnforceFirstAS = true
		}
	}
	if err := w.d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	w.waitInstalled(t, "enforceFirstAS: false: the route server's path installed", bad, exa)
	after, err := w.d.Peer("exa")
	if err != nil {
		t.Fatal(err)
	}
	if !after.Since.Equal(before.Since) {
		t.Errorf("the reload reset exa's session: established since %v, now since %v", before.Since, after.Since)
	}
}

// TestImportPeerInsideProtected: the peer exa (203.0.113.3) is inside a
// protectedPrefixes entry. Its routes with itself as next hop are refused
// as "next hop inside protected" (import fails closed), and both `ovnbgp
// config validate` and `ovnbgp doctor` (against the real NB) say so
// beforehand, with the fix.
func TestImportPeerInsideProtected(t *testing.T) {
	t.Parallel()
	prot := netip.MustParsePrefix("203.0.113.0/29")
	w := startImportWorld(t, importOpts{noFRR: true, cfg: lab.DaemonConfig{Import: firstASRule, ProtectedPrefixes: []netip.Prefix{prot}}})
	exa := lab.ExaIPv4.String()
	w.exa.MustSend("announce route 10.99.41.0/24 next-hop " + exa)
	want := "next hop 203.0.113.3 of 10.99.41.0/24 is inside protected 203.0.113.0/29: protectedPrefixes"
	lab.Eventually(t, 20*time.Second, 100*time.Millisecond, "the route is refused for its next hop", func() error {
		rej, err := w.d.Learned(true)
		if err != nil {
			return err
		}
		for _, p := range rej {
			if p.Prefix.String() == "10.99.41.0/24" && strings.Contains(p.Reason, want) {
				return nil
			}
		}
		return fmt.Errorf("10.99.41.0/24 not rejected with %q: %+v", want, rej)
	})
	if err := w.nothingInstalledFor("10.99.41.0/24"); err != nil {
		t.Fatal(err)
	}

	out, err := w.d.CLI("config", "validate", w.d.Config)
	if err != nil || !strings.Contains(string(out), `bgp.peers[0].address: warning: 203.0.113.3 is inside 203.0.113.0/29, protectedPrefixes[0]: every route from peer exa whose next hop is its own address is refused as "next hop inside protected"`) ||
		!strings.Contains(string(out), "narrow or remove protectedPrefixes[0]") {
		t.Errorf("config validate: %v\n%s", err, out)
	}
	rep, code := doctorIn(t, w.l, w.d.Config)
	found := false
	for _, c := range rep.Checks {
		if c.ID != "peer-next-hop" {
			continue
		}
		found = true
		if c.Status != doctor.Warn || !strings.Contains(c.Finding, "peer exa (203.0.113.3, import rule tor-routes)") ||
			!strings.Contains(c.Finding, "inside protected 203.0.113.0/29: protectedPrefixes") || !strings.Contains(c.Fix, "protectedPrefixes entry 203.0.113.0/29") {
			t.Errorf("doctor peer-next-hop: %+v", c)
		}
	}
	if !found || code == 0 {
		t.Errorf("doctor: no peer-next-hop warning (exit %d): %+v", code, rep.Checks)
	}
}
