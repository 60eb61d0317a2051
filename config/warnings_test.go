package config

import (
	"strings"
	"testing"
)

// TestWarningsPeerInsideProtected: a peer that an import rule lists, whose
// address is inside a prefix import protects that the config alone knows
// (OVN-Kubernetes' default join, transit or masquerade subnet,
// cluster.serviceCIDRs, protectedPrefixes), gets a warning on its address
// saying that its routes with itself as next hop are refused as "next hop
// inside protected", and how to fix it. The config stays valid (import
// fails closed); a peer no import rule lists gets none.
func TestWarningsPeerInsideProtected(t *testing.T) {
	doc := `node: {name: n1}
bgp:
  asn: 64512
  routerID: 192.0.2.10
  peers:
    - {name: join, address: 100.64.0.1, asn: 65001}
    - {name: svc, address: 172.30.0.9, asn: 65001}
    - {name: prot, address: 10.66.1.1, asn: 65001}
    - {name: masq6, address: "fd69::7", asn: 65001}
    - {name: fine, address: 192.0.2.1, asn: 65001}
    - {name: advonly, address: 100.64.0.2, asn: 65001}
advertise:
  - {name: pods, kind: podNetwork, networks: [default]}
import:
  - name: up
    peers: [join, svc, prot, fine]
    network: default
    accept:
      - {prefix: 10.0.0.0/8, maxLength: 24}
  - name: up6
    peers: [masq6]
    network: default
    accept:
      - {prefix: "2001:db8:100::/40", maxLength: 64}
protectedPrefixes: [10.66.0.0/16]
`
	c := mustParse(t, doc)
	got := map[string]string{}
	for _, w := range c.Warnings() {
		got[w.Path] = w.Msg
	}
	want := map[string][]string{
		"bgp.peers[0].address": {"100.64.0.1 is inside 100.64.0.0/16, OVN-Kubernetes' default join subnet",
			`next hop inside protected`, "peer join", "ovnbgp doctor", "another address"},
		"bgp.peers[1].address": {"172.30.0.9 is inside 172.30.0.0/16, cluster.serviceCIDRs[0]", `next hop inside protected`, "peer svc"},
		"bgp.peers[2].address": {"10.66.1.1 is inside 10.66.0.0/16, protectedPrefixes[0]", `next hop inside protected`, "narrow or remove protectedPrefixes[0]"},
		"bgp.peers[3].address": {"fd69::7 is inside fd69::/112, OVN-Kubernetes' default masquerade subnet"},
	}
	for path, subs := range want {
		msg, ok := got[path]
		if !ok {
			t.Errorf("%s: no warning (got %q)", path, got)
			continue
		}
		for _, s := range subs {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: %q lacks %q", path, msg, s)
			}
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected warning %s: %s", path, got[path])
		}
	}
	if w := c.Warnings(); len(w) > 0 && w[0].File != "" {
		// Warnings carries no file: a Config does not remember it.
		t.Errorf("warning names a file: %v", w[0])
	}
}
