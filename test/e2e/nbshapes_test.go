package e2e

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestLayer2RealLengths: a real ovsdb-server loaded with the golden NB
// fixture of dual-stack layer2 networks as OVN-Kubernetes 1.1, 1.2 and 1.3
// write them (ovn/testdata/nb/layer2-dualstack.json: other_config:ipv6_prefix
// holds only an address, and before 1.3 only one family) makes FRR receive
// each network whole, both families, at its real length (/16 and /60),
// never a /64 slice (issue 5 item 11).
func TestLayer2RealLengths(t *testing.T) {
	t.Parallel()
	w := &world{lab: lab.New(t)}
	w.nb = w.lab.StartNB()
	if err := w.nb.LoadFixture(filepath.Join("..", "..", "ovn", "testdata", "nb", "layer2-dualstack.json")); err != nil {
		t.Fatal(err)
	}
	w.frr = w.lab.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{
		{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
		{Address: lab.NodeIPv6, ASN: 65010, Passive: true},
	}})
	w.d = w.lab.StartDaemon(w.nb, lab.DaemonConfig{Peers: []lab.Peer{
		lab.DefaultTor(),
		{Name: "tor6", Address: lab.TorIPv6, ASN: 65001, Families: []string{"ipv6"}},
	}})
	pfx := netip.MustParsePrefix
	v4 := []netip.Prefix{pfx("10.128.0.0/23"), pfx("10.40.0.0/16"), pfx("10.41.0.0/16"), pfx("10.42.0.0/16")}
	v6 := []netip.Prefix{pfx("fd00:10:128:1::/64"), pfx("fd10:400::/60"), pfx("fd10:410::/60"), pfx("fd10:420::/60")}
	slices6 := []netip.Prefix{pfx("fd10:400::/64"), pfx("fd10:410::/64"), pfx("fd10:420::/64")}
	waitRIB(t, generous, w.d.Started, "layer2 IPv4 subnets in FRR", w.rib("ipv4", lab.NodeIPv4, v4, nil))
	waitRIB(t, generous, w.d.Started, "layer2 IPv6 subnets at their real length in FRR", w.rib("ipv6", lab.NodeIPv6, v6, slices6))
	if st, err := w.d.Status(); err != nil {
		t.Error(err)
	} else if len(st.NB.Problems) != 0 {
		t.Errorf("status problems = %q, want none", st.NB.Problems)
	}
}
