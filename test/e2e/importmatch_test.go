package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// matchRules is the import rule of TestImportMatches (issue 21): each
// entry requires a mark of the path, some with a kernel metric, and the
// rule rejects blackhole, 65002:666 and 65001:0:666.
const matchRules = `  - name: marks
    peers: [tor, exa]
    network: default
    maxRoutes: 20
    rejectCommunities: [blackhole, "65002:666", "65001:0:666"]
    accept:
      - {prefix: 10.99.1.0/24, maxLength: 25, communities: ["65002:100"], metric: 10}
      - {prefix: 10.99.2.0/24, maxLength: 25, largeCommunities: ["65002:1:100"]}
      - {prefix: 10.99.3.0/24, maxLength: 25, asPathContains: [65030]}
      - {prefix: 10.99.4.0/24, maxLength: 25, originAS: 65040}
      - {prefix: 10.99.5.0/24, maxLength: 25}
      - {prefix: 10.99.10.0/24, maxLength: 25, communities: ["65001:100"], metric: 20}
      - {prefix: 10.99.11.0/24, maxLength: 25}
    targets: {ovn: false, kernel: {table: 100}}`

// TestImportMatches (issue 21, items 3 and 4): ExaBGP and FRR send routes
// marked with communities, large communities and AS paths; the ones an
// accept entry's marks match are in kernel table 100, at their entry's
// metric; the others, and those carrying a rejectCommunities value, are in
// `routes learned --rejected` with the exact reason, and `explain` says
// the same.
func TestImportMatches(t *testing.T) {
	t.Parallel()
	frrRoutes := []netip.Prefix{netip.MustParsePrefix("10.99.10.0/25"), netip.MustParsePrefix("10.99.10.128/25"), netip.MustParsePrefix("10.99.11.0/25")}
	w := startImportWorld(t, importOpts{
		frrOriginate: frrRoutes,
		cfg:          lab.DaemonConfig{Import: matchRules},
		before: func(w *importWorld) {
			// FRR marks its routes on the way out to the node.
			if err := w.frr.Config(
				"bgp route-map delay-timer 0",
				"ip prefix-list GOOD seq 5 permit 10.99.10.0/25",
				"ip prefix-list OTHER seq 5 permit 10.99.10.128/25",
				"ip prefix-list REJ seq 5 permit 10.99.11.0/25",
				"route-map MARK permit 10", "match ip address prefix-list GOOD", "set community 65001:100", "exit",
				"route-map MARK permit 20", "match ip address prefix-list OTHER", "set community 65001:200", "exit",
				"route-map MARK permit 30", "match ip address prefix-list REJ", "set community 65001:100", "set large-community 65001:0:666", "exit",
				"route-map MARK permit 40", "exit",
				"router bgp 65001", "address-family ipv4 unicast", "neighbor "+lab.NodeIPv4.String()+" route-map MARK out", "exit-address-family", "exit",
			); err != nil {
				t.Fatal(err)
			}
		},
	})
	exa := lab.ExaIPv4.String()
	w.exa.MustSend(
		"announce route 10.99.1.0/25 next-hop "+exa+" community [ 65002:100 ]",
		"announce route 10.99.1.128/25 next-hop "+exa+" community [ 65002:200 ]",
		"announce route 10.99.2.0/25 next-hop "+exa+" large-community [ 65002:1:100 ]",
		"announce route 10.99.2.128/25 next-hop "+exa+" large-community [ 65002:1:101 ]",
		"announce route 10.99.3.0/25 next-hop "+exa+" as-path [ 65002 65030 65031 ]",
		"announce route 10.99.3.128/25 next-hop "+exa+" as-path [ 65002 65031 ]",
		"announce route 10.99.4.0/25 next-hop "+exa+" as-path [ 65002 65030 65040 ]",
		"announce route 10.99.4.128/25 next-hop "+exa+" as-path [ 65002 65040 65030 ]",
		"announce route 10.99.5.0/25 next-hop "+exa+" community [ 65002:100 65002:666 ]",
		"announce route 10.99.5.128/25 next-hop "+exa+" community [ blackhole ]",
	)
	tor := lab.TorIPv4.String()
	// prefix -> the kernel route's next hop and metric
	accepted := map[string][2]string{
		"10.99.1.0/25":  {exa, "metric 10"},
		"10.99.2.0/25":  {exa, ""},
		"10.99.3.0/25":  {exa, ""},
		"10.99.4.0/25":  {exa, ""},
		"10.99.10.0/25": {tor, "metric 20"},
	}
	rejected := map[string]string{
		"10.99.1.128/25":  "rule marks accept[0] (10.99.1.0/24) needs one of communities [65002:100] (route has 65002:200)",
		"10.99.2.128/25":  "rule marks accept[1] (10.99.2.0/24) needs one of largeCommunities [65002:1:100] (route has 65002:1:101)",
		"10.99.3.128/25":  "rule marks accept[2] (10.99.3.0/24) needs one of asPathContains [65030] in the AS path (route has AS path 65002 65031)",
		"10.99.4.128/25":  "rule marks accept[3] (10.99.4.0/24) needs originAS 65040 (route's origin AS is 65030)",
		"10.99.5.0/25":    "community 65002:666 matches rejectCommunities of rule marks",
		"10.99.5.128/25":  "community blackhole matches rejectCommunities of rule marks",
		"10.99.10.128/25": "rule marks accept[5] (10.99.10.0/24) needs one of communities [65001:100] (route has 65001:200)",
		"10.99.11.0/25":   "large community 65001:0:666 matches rejectCommunities of rule marks",
	}
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "the matching routes in table 100 at their metrics", func() error {
		lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, l := range lines {
			for _, f := range strings.Fields(l) {
				if _, ok := accepted[f]; ok {
					got[f] = l
				}
			}
		}
		for p, want := range accepted {
			l := got[p]
			if !strings.Contains(l, "via "+want[0]+" ") || want[1] != "" && !strings.Contains(l, " "+want[1]) || want[1] == "" && strings.Contains(l, " metric ") {
				return fmt.Errorf("table %d: %s is %q, want via %s %s (all: %q)", importTable, p, l, want[0], want[1], lines)
			}
		}
		if len(lines) != len(accepted) {
			return fmt.Errorf("table %d holds %d routes of ours, want %d: %q", importTable, len(lines), len(accepted), lines)
		}
		return nil
	})
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "routes learned --rejected gives each reason", func() error {
		rej, err := w.d.Learned(true)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, p := range rej {
			got[p.Prefix.String()] = p.Reason
		}
		for p, want := range rejected {
			if got[p] != want {
				return fmt.Errorf("routes learned --rejected: %s is %q, want %q", p, got[p], want)
			}
		}
		return nil
	})
	for _, p := range []string{"10.99.5.0/25", "10.99.10.128/25"} {
		e, err := w.d.Explain(p)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, lp := range e.Learned {
			found = found || lp.Prefix.String() == p && !lp.Accepted && lp.Reason == rejected[p]
		}
		if !found {
			t.Errorf("explain %s: %+v, want the reason %q", p, e.Learned, rejected[p])
		}
	}
	e, err := w.d.Explain("10.99.1.0/25")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Learned) != 1 || !e.Learned[0].Accepted || !strings.HasPrefix(e.Learned[0].Reason, "accepted by rule marks (10.99.1.0/24 length 24..25 communities [65002:100] metric 10)") {
		t.Errorf("explain 10.99.1.0/25: %+v", e.Learned)
	}
	if !strings.Contains(strings.Join(e.Summary, "; "), "(protocol 200 metric 10)") {
		imp, _ := w.d.Imported()
		t.Errorf("explain 10.99.1.0/25 does not give the kernel route's metric: %q; kernel %+v; imported %+v", e.Summary, e.Kernel, imp.Kernel)
	}
}
