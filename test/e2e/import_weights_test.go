package e2e

import (
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestImportWeights: FRR (tor, `set extcommunity bandwidth 3`, in Mbit/s)
// and ExaBGP (exa, the raw link-bandwidth extended community of 1 Mbit/s)
// announce one prefix; the node's kernel route weighs their next hops 3
// and 1 (`ip -j route`), and ExaBGP's change to 3 Mbit/s makes them equal,
// the route replaced in place. OVN keeps two equal-cost rows and explain
// says so (issue 21).
func TestImportWeights(t *testing.T) {
	t.Parallel()
	v4 := netip.MustParsePrefix("10.99.7.0/24")
	w := startImportWorld(t, importOpts{
		frrOriginate: []netip.Prefix{v4},
		cfg:          lab.DaemonConfig{Import: importRule},
	})
	tor, exa := lab.TorIPv4.String(), lab.ExaIPv4.String()
	w.waitInstalled(t, "FRR's route installed", v4.String(), tor)

	// FRR's route map first, then the neighbor's: attaching it sends the
	// routes again at once.
	if err := w.frr.Config("route-map LINKBW permit 10", "set extcommunity bandwidth 3", "exit",
		"router bgp 65001", "address-family ipv4 unicast", "neighbor "+lab.NodeIPv4.String()+" route-map LINKBW out"); err != nil {
		t.Fatal(err)
	}
	// ExaBGP sends the community raw, from model's one encoder.
	exaBW := func(mbit float32) string {
		b := model.LinkBandwidth{ASN: 65002, BytesPerSecond: mbit * 1e6 / 8}.Encode()
		return "0x" + hex.EncodeToString(b[:])
	}
	w.exa.MustSend(fmt.Sprintf("announce route %s next-hop %s extended-community [ %s ]", v4, exa, exaBW(1)))

	waitWeights := func(what string, want map[string]int) {
		t.Helper()
		lab.Eventually(t, 30*time.Second, 100*time.Millisecond, what, func() error {
			got, err := w.l.KernelWeights(w.l.Node, importTable, v4)
			if err != nil {
				return err
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("kernel next hops of %s weigh %v, want %v", v4, got, want)
			}
			return nil
		})
	}
	waitWeights("weights 3 (tor) and 1 (exa)", map[string]int{tor: 3, exa: 1})
	if err := w.checkRows(v4.String(), tor, exa); err != nil {
		t.Errorf("OVN rows: %v", err)
	}
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "explain says OVN is equal cost", func() error {
		e, err := w.d.Explain(v4.String())
		if err != nil {
			return err
		}
		sum := strings.Join(e.Summary, "\n")
		for _, want := range []string{
			"weights: the OVN static routes of " + v4.String() + " are equal cost",
			"with link bandwidth 375000 bytes/s (AS 65001)",
			"with link bandwidth 125000 bytes/s (AS 65002)",
		} {
			if !strings.Contains(sum, want) {
				return fmt.Errorf("explain lacks %q:\n%s", want, sum)
			}
		}
		return nil
	})

	// ExaBGP's bandwidth 3 too: equal weights. The route is never gone
	// meanwhile (a replace, not a delete and an add).
	w.exa.MustSend(fmt.Sprintf("announce route %s next-hop %s extended-community [ %s ]", v4, exa, exaBW(3)))
	lab.Eventually(t, 30*time.Second, 50*time.Millisecond, "weights 1 and 1 after 3:3", func() error {
		got, err := w.l.KernelWeights(w.l.Node, importTable, v4)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			t.Fatalf("the route of %s was deleted on a change of bandwidth only", v4)
		}
		if want := map[string]int{tor: 1, exa: 1}; !maps.Equal(got, want) {
			return fmt.Errorf("kernel next hops of %s weigh %v, want %v", v4, got, want)
		}
		return nil
	})
	// The daemon's own account: replaces of the route, never a delete.
	lines, err := w.d.LogLines("programmed kernel route")
	if err != nil {
		t.Fatal(err)
	}
	route := "route " + v4.String() + " in table 100"
	var ops []string
	for _, l := range lines {
		if l["route"] == route {
			ops = append(ops, fmt.Sprint(l["op"]))
		}
	}
	if len(ops) < 2 || ops[0] != "add" || slices.Contains(ops, "delete") || ops[len(ops)-1] != "replace" {
		t.Errorf("kernel operations on %s: %v, want an add, then replaces only", v4, ops)
	}
}
