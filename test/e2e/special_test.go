package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestAdvertiseNoSpecialPurpose: NB holds, for node1, pod subnets in
// special-purpose address space (0.0.0.0/1, 127.0.0.0/8, 224.0.0.0/4,
// ff00::/64, the masquerade subnet 169.254.169.0/29) and node1's own
// address as a /32 subnet, an egress IP 127.0.0.5 and Service VIPs
// 127.0.0.1 and 224.1.1.1. FRR never receives any of them, while a good
// subnet, egress IP and VIP written after them arrive; `ovnbgp status`
// lists each refusal.
func TestAdvertiseNoSpecialPurpose(t *testing.T) {
	t.Parallel()
	a := setupAdvertise(t, `  - {name: all-pods, kind: podNetwork, networks: ["*"]}
  - {name: eips, kind: egressIP}
  - {name: lbs, kind: loadBalancerIP}`)
	bad := map[string]netip.Prefix{
		"half":  netip.MustParsePrefix("0.0.0.0/1"),
		"lo":    netip.MustParsePrefix("127.0.0.0/8"),
		"mc":    netip.MustParsePrefix("224.0.0.0/4"),
		"masq":  netip.MustParsePrefix("169.254.169.0/29"),
		"self":  netip.MustParsePrefix("172.18.0.2/32"), // node1's rtoe-GR_node1 address
		"mc6":   netip.MustParsePrefix("ff00::/64"),
		"upper": netip.MustParsePrefix("128.0.0.0/1"),
	}
	var never []netip.Prefix
	for name, p := range bad {
		n := lab.Network{Name: name, Node: "node1"}
		if p.Addr().Is4() {
			n.Subnet = p
		} else {
			n.Subnet6 = p
		}
		if err := a.nb.Add(n); err != nil {
			t.Fatal(err)
		}
		never = append(never, p)
	}
	a.addEgressIP("GR_node1", "eip-lo", "ns1", "pod1", "127.0.0.5", "10.128.0.5")
	a.addServiceLB("ns1/web", "tcp", map[string]string{
		"127.0.0.1:80":    "10.128.0.5:8080",
		"224.1.1.1:80":    "10.128.0.5:8080",
		"203.0.113.10:80": "10.128.0.5:8080",
	})
	never = append(never, hostPrefix("127.0.0.5"), hostPrefix("127.0.0.1"), hostPrefix("224.1.1.1"))
	// Written last: once these are in FRR, the daemon has read the rest.
	good := lab.Network{Name: "good", Node: "node1", Subnet: netip.MustParsePrefix("10.210.0.0/24")}
	if err := a.nb.Add(good); err != nil {
		t.Fatal(err)
	}
	a.addEgressIP("GR_node1", "eip-ok", "ns1", "pod1", "172.18.0.100", "10.128.0.5")
	a.waitFRR("the good subnet, egress IP and VIP in FRR", []netip.Prefix{good.Subnet, hostPrefix("172.18.0.100"), hostPrefix("203.0.113.10")}, never)
	time.Sleep(time.Second) // a late UPDATE would show now
	a.noFRR("special-purpose space and the node's own address from NB", never)

	want := []string{
		`pod subnet 0.0.0.0/1 (Logical_Switch half_node1 other_config:subnet) covers 0.0.0.0/8`,
		`pod subnet 128.0.0.0/1 (Logical_Switch upper_node1 other_config:subnet) covers 169.254.0.0/16`,
		`pod subnet 127.0.0.0/8 (Logical_Switch lo_node1 other_config:subnet) is 127.0.0.0/8`,
		`pod subnet 224.0.0.0/4 (Logical_Switch mc_node1 other_config:subnet) is 224.0.0.0/4`,
		`pod subnet 169.254.169.0/29 (Logical_Switch masq_node1 other_config:subnet) is inside 169.254.0.0/16`,
		`pod subnet ff00::/64 (Logical_Switch mc6_node1 other_config:ipv6_prefix) is inside ff00::/8`,
		`pod subnet 172.18.0.2/32 (Logical_Switch self_node1 other_config:subnet) holds node address 172.18.0.2`,
		`external_ip 127.0.0.5 is inside 127.0.0.0/8, special-purpose address space (RFC 6890: loopback): never advertised`,
		`vips["127.0.0.1:80"]: 127.0.0.1 is inside 127.0.0.0/8`,
		`vips["224.1.1.1:80"]: 224.1.1.1 is inside 224.0.0.0/4`,
	}
	lab.Eventually(t, 10*time.Second, 100*time.Millisecond, "ovnbgp status lists every refusal", func() error {
		out, err := a.d.CLI("status")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var missing []string
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("status lacks:\n%s\n--- status:\n%s", strings.Join(missing, "\n"), out)
		}
		return nil
	})
}
