package config

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var cmpNetip = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

func TestDefaults(t *testing.T) {
	got := mustParse(t, baseDoc)
	defaultBFD := BFD{MinTx: 300 * time.Millisecond, MinRx: 300 * time.Millisecond, Multiplier: 3}
	want := &Config{
		Node: Node{Name: "n1"},
		BGP: BGP{
			ASN:             64512,
			RouterID:        netip.MustParseAddr("192.0.2.10"),
			ListenPort:      179,
			GracefulRestart: GracefulRestart{RestartTime: 120 * time.Second, DeferralTime: 120 * time.Second, StalePathTime: 360 * time.Second},
			Peers: []Peer{{
				Name: "tor-a", Address: netip.MustParseAddr("192.0.2.1"), ASN: 65001, Port: 179,
				HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, ConnectRetry: 5 * time.Second,
				BFD: defaultBFD, Families: []Family{IPv4}, MaxPrefixes: DefaultMaxPrefixes, EnforceFirstAS: true,
			}, {
				Name: "tor-b", Address: netip.MustParseAddr("2001:db8::1"), ASN: 64512, Port: 179,
				HoldTime: 90 * time.Second, KeepaliveTime: 30 * time.Second, ConnectRetry: 5 * time.Second,
				BFD: defaultBFD, Families: []Family{IPv6}, MaxPrefixes: DefaultMaxPrefixes, EnforceFirstAS: true,
			}},
		},
		OVN:       OVN{NorthboundSockets: DefaultNorthboundSockets()},
		Advertise: []AdvertiseRule{{Name: "pods", Kind: KindPodNetwork, Networks: []Glob{mustGlob(t, "default")}}},
		Cluster:   Cluster{ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}},
		Kernel:    Kernel{RouteProtocol: DefaultRouteProtocol},
		Control:   Control{Socket: "/run/ovnbgp/ovnbgp.sock"},
		StateDir:  "/var/lib/ovnbgp",
		Metrics:   Metrics{Address: "127.0.0.1:9479"},
		Log:       Log{Level: "info", Format: "json"},
	}
	if diff := cmp.Diff(want, got, cmpNetip); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate of a parsed config: %v", err)
	}
}

// TestImportDefaults: an import rule's absent keys take their defaults, and
// serviceCIDRs: [] is the default like an absent key.
func TestImportDefaults(t *testing.T) {
	c := mustParse(t, baseDoc+"cluster: {serviceCIDRs: []}\n"+importDoc(acceptTen, ""))
	want := ImportRule{Name: "uplink", Peers: []string{"tor-a"}, Network: "default",
		Accept:    []PrefixMatch{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), MaxLength: 24}},
		MaxRoutes: DefaultMaxRoutes, Mode: "auto", Targets: ImportTargets{OVN: true}}
	if d := cmp.Diff([]ImportRule{want}, c.Import, cmpNetip); d != "" {
		t.Errorf("import defaults (-want +got):\n%s", d)
	}
	if d := cmp.Diff(DefaultServiceCIDRs(), c.Cluster.ServiceCIDRs, cmpNetip); d != "" {
		t.Errorf("serviceCIDRs: [] (-want +got):\n%s", d)
	}
}

// TestExplicitValues checks that explicit zero-like values are kept, not
// replaced by defaults, and that derived defaults follow the keys they
// derive from.
func TestExplicitValues(t *testing.T) {
	c := mustParse(t, edit(t,
		afterBGP, afterBGP+"  listenPort: -1\n",
		afterTorA, afterTorA+"      maxPrefixes: 0\n      families: [ipv4]\n",
		afterTorB, afterTorB+"      holdTime: 10s\n      port: 1790\n      bfd: {minTx: 1s}\n",
	)+"metrics:\n  address: \"\"\nkernel:\n  routeProtocol: 0\n")
	a, b := c.BGP.Peers[0], c.BGP.Peers[1]
	checks := []struct {
		name      string
		got, want any
	}{
		{"listenPort", c.BGP.ListenPort, -1},
		{"tor-a maxPrefixes 0 = no limit", a.MaxPrefixes, uint32(0)},
		{"tor-b maxPrefixes default", b.MaxPrefixes, uint32(DefaultMaxPrefixes)},
		{"tor-a families", a.Families, []Family{IPv4}},
		{"tor-b holdTime", b.HoldTime, 10 * time.Second},
		{"tor-b keepaliveTime (holdTime/3 in whole seconds)", b.KeepaliveTime, 3 * time.Second},
		{"tor-b port", b.Port, 1790},
		{"tor-b bfd", b.BFD, BFD{MinTx: time.Second, MinRx: 300 * time.Millisecond, Multiplier: 3}},
		{"metrics off", c.Metrics.Address, ""},
		{"routeProtocol 0 = default", c.Kernel.RouteProtocol, DefaultRouteProtocol},
	}
	for _, ch := range checks {
		if diff := cmp.Diff(ch.want, ch.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ch.name, diff)
		}
	}
}

func TestHostDefaults(t *testing.T) {
	doc := edit(t, "node:\n  name: n1\n", "", "  routerID: 192.0.2.10\n", "")
	c := mustParse(t, doc)
	if c.Node.Name != "worker-7.example.com" {
		t.Errorf("node.name = %q, want the hostname worker-7.example.com, as the kubelet names the node", c.Node.Name)
	}
	if want := netip.MustParseAddr("10.1.2.3"); c.BGP.RouterID != want {
		t.Errorf("bgp.routerID = %v, want the first global IPv4 address %v", c.BGP.RouterID, want)
	}

	noIPv4 := fakeHost(nil)
	noIPv4.interfaceAddrs = func() ([]net.Addr, error) {
		return []net.Addr{ipNet("127.0.0.1/8"), ipNet("169.254.0.1/16"), ipNet("2001:db8::7/64")}, nil
	}
	noIPv4.hostname = func() (string, error) { return "", errors.New("no hostname") }
	checkErrors(t, parseErrors(t, doc, noIPv4),
		want{"bgp.routerID", "set bgp.routerID", 1},
		want{"node.name", "set node.name", 0},
	)
}

// TestProblems checks each validation rule: the key path, the message, and
// that nothing else is reported.
func TestProblems(t *testing.T) {
	tls := t.TempDir()
	for _, f := range []string{"ca.pem", "cert.pem", "key.pem"} {
		if err := os.WriteFile(filepath.Join(tls, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		edits []string // old, new pairs applied to baseDoc
		add   string   // appended to the document
		wants []want
	}{
		// bgp
		{name: "asn missing", edits: []string{"  asn: 64512\n", ""},
			wants: []want{{"bgp.asn", "required", 3}}},
		{name: "asn AS_TRANS", edits: []string{"  asn: 64512\n", "  asn: 23456\n"},
			wants: []want{{"bgp.asn", "AS_TRANS", 4}}},
		{name: "asn reserved", edits: []string{"  asn: 64512\n", "  asn: 4294967295\n"},
			wants: []want{{"bgp.asn", "reserved", 4}}},
		{name: "routerID IPv6", edits: []string{afterBGP, "  routerID: 2001:db8::10\n"},
			wants: []want{{"bgp.routerID", "not an IPv4 address", 5}}},
		{name: "routerID zero", edits: []string{afterBGP, "  routerID: 0.0.0.0\n"},
			wants: []want{{"bgp.routerID", "0.0.0.0", 5}}},
		{name: "listenPort 0", edits: []string{afterBGP, afterBGP + "  listenPort: 0\n"},
			wants: []want{{"bgp.listenPort", "use -1 to never listen", 6}}},
		{name: "listenPort too big", edits: []string{afterBGP, afterBGP + "  listenPort: 70000\n"},
			wants: []want{{"bgp.listenPort", "out of range", 6}}},
		{name: "restartTime 0", edits: []string{afterBGP, afterBGP + "  gracefulRestart: {enabled: true, restartTime: 0s}\n"},
			wants: []want{{"bgp.gracefulRestart.restartTime", "1s..4095s", 6}}},
		{name: "restartTime too long", edits: []string{afterBGP, afterBGP + "  gracefulRestart: {restartTime: 4096s}\n"},
			wants: []want{{"bgp.gracefulRestart.restartTime", "12-bit", 6}}},
		{name: "no peers", edits: []string{afterBGP + "  peers:\n", afterBGP + "  peers: []\n  x:\n", "  x:\n" + strings.SplitN(baseDoc, peersStart, 2)[1], "advertise:\n"},
			add:   "  - name: pods\n    kind: podNetwork\n    networks: [default]\n",
			wants: []want{{"bgp.peers", "at least one peer", 6}}},

		// peers
		{name: "peer name missing", edits: []string{"    - name: tor-a\n      address", "    - address"},
			wants: []want{{"bgp.peers[0].name", "required", 7}}},
		{name: "peer name invalid", edits: []string{"name: tor-a", "name: Tor_A"},
			wants: []want{{"bgp.peers[0].name", "not a valid name", 7}}},
		{name: "peer name duplicate", edits: []string{"name: tor-b", "name: tor-a"},
			wants: []want{{"bgp.peers[1].name", "also the name of bgp.peers[0]", 10}}},
		{name: "peer address missing", edits: []string{"      address: 192.0.2.1\n", ""},
			wants: []want{{"bgp.peers[0].address", "required", 7}}},
		{name: "peer address duplicate", edits: []string{"address: 2001:db8::1", "address: 192.0.2.1"},
			wants: []want{{"bgp.peers[1].address", "also the address of bgp.peers[0]", 11}}},
		{name: "peer address multicast", edits: []string{"address: 192.0.2.1", "address: 224.0.0.5"},
			wants: []want{{"bgp.peers[0].address", "not a unicast address", 8}}},
		{name: "peer address not an IP", edits: []string{"address: 192.0.2.1", "address: 192.0.2.300"},
			wants: []want{{"bgp.peers[0].address", `"192.0.2.300" is not an IP address`, 8}}},
		{name: "peer address IPv4-mapped", edits: []string{"address: 192.0.2.1", "address: \"::ffff:192.0.2.1\""},
			wants: []want{{"bgp.peers[0].address", "write 192.0.2.1", 8}}},
		{name: "peer asn missing", edits: []string{afterTorA, ""},
			wants: []want{{"bgp.peers[0].asn", "required", 7}}},
		{name: "peer asn AS_TRANS", edits: []string{afterTorA, "      asn: 23456\n"},
			wants: []want{{"bgp.peers[0].asn", "AS_TRANS", 9}}},
		{name: "peer port 0", edits: []string{afterTorA, afterTorA + "      port: 0\n"},
			wants: []want{{"bgp.peers[0].port", "out of range (1..65535)", 10}}},
		{name: "sourceAddress family", edits: []string{afterTorA, afterTorA + "      sourceAddress: 2001:db8::2\n"},
			wants: []want{{"bgp.peers[0].sourceAddress", "same address family", 10}}},
		{name: "interface name", edits: []string{afterTorA, afterTorA + "      interface: a-very-long-interface-name\n"},
			wants: []want{{"bgp.peers[0].interface", "not a valid interface name", 10}}},
		{name: "multihop with ttlSecurity", edits: []string{afterTorA, afterTorA + "      ebgpMultihop: 2\n      ttlSecurity: true\n"},
			wants: []want{{"bgp.peers[0].ttlSecurity", "FRR rejects", 11}}},
		{name: "holdTime too short", edits: []string{afterTorA, afterTorA + "      holdTime: 2s\n"},
			wants: []want{{"bgp.peers[0].holdTime", "out of range (3s..65535s)", 10}}},
		{name: "holdTime fraction", edits: []string{afterTorA, afterTorA + "      holdTime: 9500ms\n      keepaliveTime: 3s\n"},
			wants: []want{{"bgp.peers[0].holdTime", "whole number of seconds", 10}}},
		{name: "keepalive not shorter", edits: []string{afterTorA, afterTorA + "      holdTime: 30s\n      keepaliveTime: 30s\n"},
			wants: []want{{"bgp.peers[0].keepaliveTime", "shorter than holdTime", 11}}},
		{name: "holdTime 0", edits: []string{afterTorA, afterTorA + "      holdTime: 0s\n      keepaliveTime: 0s\n"},
			wants: []want{{"bgp.peers[0].holdTime", "0 (no keepalives) is not supported: the BGP library would negotiate 90s instead", 10}}},
		{name: "passive and never listen", edits: []string{afterBGP, afterBGP + "  listenPort: -1\n", afterTorA, afterTorA + "      passive: true\n"},
			wants: []want{{"bgp.peers[0].passive", "bgp.listenPort is -1 (never listen)", 11}}},
		{name: "connectRetry too short", edits: []string{afterTorA, afterTorA + "      connectRetry: 500ms\n"},
			wants: []want{{"bgp.peers[0].connectRetry", "at least 1s", 10}}},
		{name: "family unknown and twice", edits: []string{afterTorA, afterTorA + "      families: [ipv4, ipv5, ipv4]\n"},
			wants: []want{{"bgp.peers[0].families[1]", `unknown family "ipv5"`, 10}, {"bgp.peers[0].families[2]", "listed twice", 10}}},
		{name: "family of the other address", edits: []string{afterTorA, afterTorA + "      families: [ipv4, ipv6]\n"},
			wants: []want{{"bgp.peers[0].families[1]", "ipv6 over an IPv4 session is refused", 10}}},
		{name: "bfd with ebgpMultihop", edits: []string{afterTorA, afterTorA + "      ebgpMultihop: 2\n      bfd:\n        enabled: true\n"},
			wants: []want{{"bgp.peers[0].bfd.enabled", "single-hop only (RFC 5881", 12}}},
		{name: "bfd ranges", edits: []string{afterTorA, afterTorA + "      bfd: {minTx: 5ms, minRx: 61s, multiplier: 0}\n"},
			wants: []want{
				{"bgp.peers[0].bfd.minTx", "10ms..60s", 10},
				{"bgp.peers[0].bfd.minRx", "10ms..60s", 10},
				{"bgp.peers[0].bfd.multiplier", "2..255", 10}}},
		{name: "bfd multiplier 1", edits: []string{afterTorA, afterTorA + "      bfd: {enabled: true, multiplier: 1}\n"},
			wants: []want{{"bgp.peers[0].bfd.multiplier", "1 is out of range (2..255", 10}}},
		{name: "bfd sub-microsecond", edits: []string{afterTorA, afterTorA + "      bfd: {enabled: true, minTx: 300000500ns}\n"},
			wants: []want{{"bgp.peers[0].bfd.minTx", "whole number of microseconds", 10}}},
		{name: "passwordFile missing", edits: []string{afterTorA, afterTorA + "      passwordFile: /nonexistent/md5\n"},
			wants: []want{{"bgp.peers[0].passwordFile", `cannot read "/nonexistent/md5": no such file or directory`, 10}}},

		// ovn
		{name: "northbound bad scheme", add: "ovn:\n  northbound: http://nb:6641\n",
			wants: []want{{"ovn.northbound", "not unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT", 18}}},
		{name: "northbound tcp without port", add: "ovn:\n  northbound: \"tcp:192.0.2.5:6641, tcp:192.0.2.6\"\n",
			wants: []want{{"ovn.northbound", `"tcp:192.0.2.6"`, 18}}},
		{name: "northbound unix without path", add: "ovn:\n  northbound: \"unix:\"\n",
			wants: []want{{"ovn.northbound", "needs a socket path", 18}}},
		{name: "ssl without tls files", add: "ovn:\n  northbound: ssl:[2001:db8::5]:6641\n",
			wants: []want{
				{"ovn.tls.caFile", "required with an ssl:", 17},
				{"ovn.tls.certFile", "required with an ssl:", 17},
				{"ovn.tls.keyFile", "required with an ssl:", 17}}},
		{name: "ssl with a missing file", add: "ovn:\n  northbound: ssl:nb.example:6641\n  tls:\n" +
			"    caFile: " + filepath.Join(tls, "ca.pem") + "\n    certFile: " + filepath.Join(tls, "cert.pem") + "\n" +
			"    keyFile: " + filepath.Join(tls, "nokey.pem") + "\n",
			wants: []want{{"ovn.tls.keyFile", "no such file or directory", 22}}},
		{name: "ssl with a directory", add: "ovn:\n  northbound: ssl:nb.example:6641\n  tls:\n" +
			"    caFile: " + filepath.Join(tls, "ca.pem") + "\n    certFile: " + filepath.Join(tls, "cert.pem") + "\n" +
			"    keyFile: " + tls + "\n",
			wants: []want{{"ovn.tls.keyFile", "not a regular file", 22}}},
		{name: "tls without ssl", add: "ovn:\n  tls:\n    caFile: " + filepath.Join(tls, "ca.pem") + "\n",
			wants: []want{{"ovn.tls.caFile", "only used with an ssl: northbound endpoint", 19}}},

		// advertise
		{name: "rule name missing and duplicate", edits: []string{"  - name: pods\n", "  - name: pods\n    kind: podNetwork\n    networks: [\"*\"]\n  - name: pods\n    kind: podNetwork\n    networks: [x]\n  - name: \"\"\n"},
			wants: []want{{"advertise[1].name", `"pods" is also the name of advertise[0]`, 17}, {"advertise[2].name", "required", 20}}},
		{name: "kind missing", edits: []string{"    kind: podNetwork\n", ""},
			wants: []want{{"advertise[0].kind", "required", 14}}},
		{name: "kind wrong case", edits: []string{"kind: podNetwork", "kind: PodNetwork"},
			wants: []want{{"advertise[0].kind", `did you mean "podNetwork"`, 15}}},
		{name: "aggregate lengths", edits: []string{afterPods, afterPods + "    aggregateLength: 24\n    aggregateLengthV6: 129\n  - name: eips\n    kind: egressIP\n    aggregateLength: 33\n    aggregateLengthV6: 64\n"},
			wants: []want{
				{"advertise[0].aggregateLength", "only for kind egressIP/loadBalancerIP", 17},
				{"advertise[0].aggregateLengthV6", "only for kind egressIP/loadBalancerIP", 18},
				{"advertise[0].aggregateLengthV6", "129 is out of range", 18},
				{"advertise[1].aggregateLength", "33 is out of range", 21}}},
		{name: "loadBalancerIP keys on egressIP", edits: []string{"kind: podNetwork", "kind: egressIP", afterPods, afterPods + "    namespaces: [a]\n    services: [a/b]\n    localEndpointsOnly: true\n"},
			wants: []want{
				{"advertise[0].services", "only for kind loadBalancerIP", 18},
				{"advertise[0].localEndpointsOnly", "only for kind loadBalancerIP", 19}}},
		{name: "networks empty", edits: []string{afterPods, ""},
			wants: []want{{"advertise[0].networks", "list the networks to advertise", 14}}},
		{name: "networks bad glob", edits: []string{afterPods, "    networks: [default, \"udn-[\"]\n"},
			wants: []want{{"advertise[0].networks[1]", "not a valid glob", 16}}},
		{name: "egressIP/loadBalancerIP keys on podNetwork", edits: []string{afterPods, afterPods + "    namespaces: [a]\n    services: [a/b]\n    localEndpointsOnly: true\n"},
			wants: []want{
				{"advertise[0].namespaces", "only for kind egressIP/loadBalancerIP", 17},
				{"advertise[0].services", "only for kind loadBalancerIP", 18},
				{"advertise[0].localEndpointsOnly", "only for kind loadBalancerIP", 19}}},
		{name: "weightByEndpoints on other kinds and with aggregation (issue 21)", edits: []string{afterPods, afterPods + "    weightByEndpoints: true\n  - name: vips\n    kind: loadBalancerIP\n    weightByEndpoints: true\n    aggregateLength: 24\n"},
			wants: []want{
				{"advertise[0].weightByEndpoints", "only for kind loadBalancerIP", 17},
				{"advertise[1].weightByEndpoints", "an aggregate stands for several Services", 20}}},
		{name: "services shape", edits: []string{"kind: podNetwork", "kind: loadBalancerIP", afterPods, afterPods + "    services: [web, \"web/*\"]\n"},
			wants: []want{{"advertise[0].services[0]", "not NAMESPACE/NAME", 17}}},
		{name: "unknown peer", edits: []string{afterPods, afterPods + "    peers: [tor-a, tor-c, tor-a]\n"},
			wants: []want{{"advertise[0].peers[1]", `no peer is named "tor-c"`, 17}, {"advertise[0].peers[2]", "listed twice", 17}}},
		{name: "communities", edits: []string{afterPods, afterPods + "    communities: [\"65001:100\", no-export, \"65536:1\", nope, \"1:2:3\"]\n"},
			wants: []want{
				{"advertise[0].communities[2]", `"65536:1" is not a community`, 17},
				{"advertise[0].communities[3]", `"nope" is not a community`, 17},
				{"advertise[0].communities[4]", `"1:2:3" is not a community`, 17}}},
		{name: "large communities", edits: []string{afterPods, afterPods + "    largeCommunities: [\"4294967295:0:1\", \"1:2\", \"1:2:4294967296\"]\n"},
			wants: []want{
				{"advertise[0].largeCommunities[1]", "not a large community", 17},
				{"advertise[0].largeCommunities[2]", "not a large community", 17}}},
		{name: "localPreference to all peers", edits: []string{afterPods, afterPods + "    localPreference: 200\n"},
			wants: []want{{"advertise[0].localPreference", `eBGP peer "tor-a"`, 17}}},
		{name: "asPathPrepend", edits: []string{afterPods, afterPods + "    asPathPrepend: 11\n"},
			wants: []want{{"advertise[0].asPathPrepend", "0..10", 17}}},
		{name: "clusterIP refused with its reason", edits: []string{"kind: podNetwork", "kind: clusterIP"},
			wants: []want{{"advertise[0].kind", "reaches the node's host, not OVN", 15}}},
		{name: "clusterIP wrong case", edits: []string{"kind: podNetwork", "kind: ClusterIP"},
			wants: []want{{"advertise[0].kind", `did you mean "clusterIP"`, 15}}},
		{name: "workloadIP networks empty", edits: []string{"kind: podNetwork", "kind: workloadIP", afterPods, ""},
			wants: []want{{"advertise[0].networks", "list the networks to advertise", 14}}},
		{name: "workloadIP keys of other kinds", edits: []string{"kind: podNetwork", "kind: workloadIP", afterPods, afterPods + "    services: [a/b]\n    localEndpointsOnly: true\n    pods: [web, \"web/*\", \"a/b/c\"]\n"},
			wants: []want{
				{"advertise[0].services", "only for kind loadBalancerIP", 17},
				{"advertise[0].localEndpointsOnly", "only for kind loadBalancerIP", 18},
				{"advertise[0].pods[0]", "not NAMESPACE/NAME", 19},
				{"advertise[0].pods[2]", "not NAMESPACE/NAME", 19}}},
		{name: "workloadIP keys on podNetwork", edits: []string{afterPods, afterPods + "    pods: [web/*]\n    handover: {holdTime: 9s}\n"},
			wants: []want{
				{"advertise[0].pods", "only for kind workloadIP", 17},
				{"advertise[0].handover", "only for kind workloadIP", 18}}},
		{name: "workloadIP handover ranges", edits: []string{"kind: podNetwork", "kind: workloadIP", afterPods, afterPods + "    asPathPrepend: 9\n    med: 20\n    handover: {holdTime: 10m, localPreference: 100, asPathPrepend: 2, med: 20}\n"},
			wants: []want{
				{"advertise[0].handover.holdTime", "10m0s is out of range (1s..5m)", 19},
				{"advertise[0].handover.localPreference", "100 is not below the LOCAL_PREF the target sends (100", 19},
				{"advertise[0].handover.asPathPrepend", "2 on top of the rule's asPathPrepend 9 is over 10", 19},
				{"advertise[0].handover.med", "20 is not above the rule's med 20", 19}}},

		// import, protectedPrefixes, cluster
		{name: "import rule problems", add: "import:\n  - peers: [tor-z]\n    mode: sometimes\n    accept:\n      - {prefix: 10.0.0.0/8, minLength: 4}\n    targets: {ovn: false, kernel: {table: 254}}\n",
			wants: []want{
				{"import[0].name", "required", 18},
				{"import[0].peers[0]", `no peer is named "tor-z"`, 18},
				{"import[0].network", "required", 18},
				{"import[0].mode", `"sometimes" is not auto or manual`, 19},
				{"import[0].accept[0].minLength", "out of range (8..32)", 21},
				{"import[0].targets.kernel.table", "a table of the kernel", 22}}},
		{name: "import minLength above maxLength", add: importDoc("      - {prefix: 10.0.0.0/8, minLength: 24, maxLength: 16}\n", ""),
			wants: []want{{"import[0].accept[0].maxLength", "16 is shorter than minLength 24: swap them", 22}}},
		{name: "import createVRF without vrf and table", add: importDoc(acceptTen, "    targets: {kernel: {createVRF: true}}\n"),
			wants: []want{
				{"import[0].targets.kernel.createVRF", "needs targets.kernel.vrf", 23},
				{"import[0].targets.kernel.createVRF", "needs targets.kernel.table", 23}}},
		{name: "import vrf named default", add: importDoc(acceptTen, "    targets: {kernel: {vrf: default}}\n"),
			wants: []want{{"import[0].targets.kernel.vrf", `"default" names the main routing table`, 23}}},
		{name: "import one table two modes", add: importDoc(acceptTen, "    targets: {kernel: {table: 100}}\n") +
			"  - name: second\n    peers: [tor-a]\n    network: default\n    mode: manual\n    accept: [{prefix: 10.0.0.0/8, maxLength: 24}]\n    targets: {ovn: false, kernel: {table: 100}}\n",
			wants: []want{{"import[1].mode", "manual, but import[0] (auto) also targets table 100", 27}}},
		{name: "import one vrf two tables", add: importDoc(acceptTen, "    targets: {kernel: {vrf: blue, table: 100, createVRF: true}}\n") +
			"  - name: second\n    peers: [tor-a]\n    network: default\n    accept: [{prefix: 10.0.0.0/8, maxLength: 24}]\n    targets: {ovn: false, kernel: {vrf: blue, table: 101}}\n",
			wants: []want{{"import[1].targets.kernel.table", "101, but import[0] puts VRF blue in table 100", 28}}},
		{name: "import two vrfs one table", add: importDoc(acceptTen, "    targets: {kernel: {vrf: blue, table: 100}}\n") +
			"  - name: second\n    peers: [tor-a]\n    network: default\n    accept: [{prefix: 10.0.0.0/8, maxLength: 24}]\n    targets: {ovn: false, kernel: {vrf: red, table: 100}}\n",
			wants: []want{{"import[1].targets.kernel.vrf", "table 100 is also the table of VRF blue (import[0])", 28}}},
		{name: "import one vrf two modes", add: importDoc(acceptTen, "    targets: {kernel: {vrf: blue}}\n") +
			"  - name: second\n    peers: [tor-a]\n    network: default\n    mode: manual\n    accept: [{prefix: 10.0.0.0/8, maxLength: 24}]\n    targets: {ovn: false, kernel: {vrf: blue}}\n",
			wants: []want{{"import[1].mode", "manual, but import[0] (auto) also targets VRF blue", 27}}},
		{name: "import one ovn network two modes", add: importDoc(acceptTen, "") +
			"  - name: second\n    peers: [tor-a]\n    network: default\n    mode: manual\n    accept: [{prefix: 10.0.0.0/8, maxLength: 24}]\n    targets: {ovn: true, kernel: {table: 101}}\n",
			wants: []want{{"import[1].mode", "manual, but rule uplink (import[0], auto) also imports into OVN network default's gateway router: the rules of one OVN network share a mode, set mode: auto on rule second or mode: manual on rule uplink", 26}}},
		{name: "import family no peer speaks", add: importDoc("      - {prefix: 2001:db8::/32, maxLength: 64}\n", ""),
			wants: []want{{"import[0].accept", "no peer of this rule (tor-a: ipv4) speaks ipv6", 21}}},
		{name: "import default route only without allowDefaultRoute", add: importDoc("      - {prefix: 0.0.0.0/0}\n", ""),
			wants: []want{{"import[0].accept[0]", "matches only the default route", 22}}},
		{name: "import allowDefaultRoute without a matching entry", add: importDoc(acceptTen, "    allowDefaultRoute: true\n"),
			wants: []want{{"import[0].allowDefaultRoute", "no accept entry matches the default route", 23}}},
		{name: "import accept inside protected", add: "protectedPrefixes: [10.0.0.0/8]\ncluster: {serviceCIDRs: [172.30.0.0/16]}\n" +
			importDoc(acceptTen+"      - {prefix: 172.30.1.0/24}\n", ""),
			wants: []want{
				{"import[0].accept[0]", "10.0.0.0/8 is inside protectedPrefixes 10.0.0.0/8", 24},
				{"import[0].accept[1]", "172.30.1.0/24 is inside cluster.serviceCIDRs 172.30.0.0/16", 25}}},
		{name: "import from a multihop peer without interface", edits: []string{afterTorA, afterTorA + "      ebgpMultihop: 2\n"}, add: importDoc(acceptTen, ""),
			wants: []want{{"import[0].peers[0]", "tor-a is multihop (ebgpMultihop 2) and names no interface", 20}}},
		{name: "import maxRoutes zero", add: importDoc(acceptTen, "    maxRoutes: 0\n"),
			wants: []want{{"import[0].maxRoutes", "0 imports nothing", 23}}},
		{name: "protectedPrefixes everything", add: "protectedPrefixes: [0.0.0.0/0]\n",
			wants: []want{{"protectedPrefixes[0]", "0.0.0.0/0 protects every IPv4 prefix", 17}}},
		{name: "serviceCIDRs", add: "cluster:\n  serviceCIDRs: [172.30.0.0/16, 172.30.0.0/16, \"::/0\"]\n",
			wants: []want{
				{"cluster.serviceCIDRs[1]", "172.30.0.0/16 is listed twice", 18},
				{"cluster.serviceCIDRs[2]", "::/0 covers every IPv6 address", 18}}},
		{name: "deferralTime", add: "",
			edits: []string{afterBGP, afterBGP + "  gracefulRestart: {deferralTime: 0s}\n"},
			wants: []want{{"bgp.gracefulRestart.deferralTime", "0s is out of range (1s..3600s)", 6}}},

		// kernel, control, metrics, log
		{name: "routeProtocol FRR", add: "kernel: {routeProtocol: 186}\n",
			wants: []want{{"kernel.routeProtocol", "belongs to FRR", 17}}},
		{name: "routeProtocol kernel", add: "kernel: {routeProtocol: 4}\n",
			wants: []want{{"kernel.routeProtocol", "belongs to the kernel", 17}}},
		{name: "routeProtocol OVN", add: "kernel: {routeProtocol: 84}\n",
			wants: []want{{"kernel.routeProtocol", "belongs to OVN", 17}}},
		{name: "routeProtocol OVN-Kubernetes", add: "kernel: {routeProtocol: 85}\n",
			wants: []want{{"kernel.routeProtocol", "belongs to OVN-Kubernetes", 17}}},
		{name: "routeProtocol bird", add: "kernel: {routeProtocol: 12}\n",
			wants: []want{{"kernel.routeProtocol", "another routing daemon", 17}}},
		{name: "routeProtocol range", add: "kernel: {routeProtocol: 256}\n",
			wants: []want{{"kernel.routeProtocol", "out of range (1..255", 17}}},
		{name: "control socket relative", add: "control: {socket: ovnbgp.sock}\n",
			wants: []want{{"control.socket", "not an absolute path", 17}}},
		{name: "stateDir relative", add: "stateDir: var/lib/ovnbgp\n",
			wants: []want{{"stateDir", "not an absolute path", 17}}},
		{name: "stateDir not clean", add: "stateDir: /var/lib/ovnbgp/\n",
			wants: []want{{"stateDir", "not a clean path", 17}}},
		{name: "stateDir empty", add: "stateDir: \"\"\n",
			wants: []want{{"stateDir", "required", 17}}},
		{name: "metrics address", add: "metrics:\n  address: localhost\n",
			wants: []want{{"metrics.address", "not HOST:PORT", 18}}},
		{name: "metrics port", add: "metrics:\n  address: \":0\"\n",
			wants: []want{{"metrics.address", "1..65535", 18}}},
		{name: "log", add: "log: {level: verbose, format: text}\n",
			wants: []want{{"log.level", `"verbose" is not debug, info, warn or error`, 17}, {"log.format", `"text" is not json or console`, 17}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := edit(t, tt.edits...) + tt.add
			checkErrors(t, parseErrors(t, doc, fakeHost(nil)), tt.wants...)
		})
	}
}

// importDoc is an import section with one rule "uplink" from tor-a with
// the given accept entries (lines 21..) and further keys.
func importDoc(accept, more string) string {
	return "import:\n  - name: uplink\n    peers: [tor-a]\n    network: default\n    accept:\n" + accept + more
}

const acceptTen = "      - {prefix: 10.0.0.0/8, maxLength: 24}\n"

// TestValidValues accepts values at the edges of their ranges.
func TestValidValues(t *testing.T) {
	tls := t.TempDir()
	for _, f := range []string{"ca.pem", "cert.pem", "key.pem"} {
		if err := os.WriteFile(filepath.Join(tls, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	docs := map[string]string{
		"tcp and unix endpoints": baseDoc + "ovn:\n  northbound: \"tcp:192.0.2.5:6641,tcp:[2001:db8::5]:6641, unix:/run/nb.sock\"\n",
		"ssl with files": baseDoc + "ovn:\n  northbound: ssl:nb:6641\n  tls:\n    caFile: " + filepath.Join(tls, "ca.pem") +
			"\n    certFile: " + filepath.Join(tls, "cert.pem") + "\n    keyFile: " + filepath.Join(tls, "key.pem") + "\n",
		"edges": edit(t,
			"  asn: 64512\n", "  asn: 4294967294\n",
			afterBGP, afterBGP+"  listenPort: 65535\n  gracefulRestart: {restartTime: 4095s}\n",
			afterTorA, afterTorA+"      holdTime: 3s\n      keepaliveTime: 1s\n      connectRetry: 1s\n      ebgpMultihop: 255\n"+
				"      bfd: {minTx: 10ms, minRx: 60s, multiplier: 255}\n      maxPrefixes: 4294967295\n",
			afterTorB, "      asn: 4294967294\n      bfd: {enabled: true, minTx: 300ms, minRx: 60s, multiplier: 2}\n",
		) + "kernel: {routeProtocol: 255}\nmetrics: {address: \":9479\"}\nlog: {level: error, format: console}\n",
		"localPreference to iBGP only": edit(t, afterPods, afterPods+"    peers: [tor-b]\n    localPreference: 200\n    asPathPrepend: 10\n"+
			"    communities: [no-advertise, no-export-subconfed, blackhole, graceful-shutdown, accept-own, no-llgr, no-peer, \"0:0\", \"65535:65535\"]\n"),
		"globs": edit(t, afterPods, "    networks: [\"*\", \"udn-?\", \"[a-c]*\"]\n"),
		"import": edit(t, afterTorA, afterTorA+"      ebgpMultihop: 2\n      interface: eth1\n") + "protectedPrefixes: [203.0.113.0/24]\ncluster: {serviceCIDRs: [172.30.0.0/16, fd02::/112]}\n" + importDoc(acceptTen+"      - {prefix: 0.0.0.0/0}\n",
			"    allowDefaultRoute: true\n    maxRoutes: 5\n    mode: manual\n    targets: {ovn: true, kernel: {vrf: blue, table: 100, createVRF: true}}\n") +
			"  - name: second\n    peers: [tor-a, tor-b]\n    network: blue\n    mode: manual\n    accept: [{prefix: 2001:db8::/32, maxLength: 64}]\n    targets: {kernel: {table: 100}}\n",
		"import one network, OVN auto and kernel-only manual": baseDoc + importDoc(acceptTen, "") +
			"  - name: second\n    peers: [tor-a]\n    network: default\n    mode: manual\n    accept: [{prefix: 10.0.0.0/8, maxLength: 24}]\n    targets: {ovn: false, kernel: {table: 101}}\n",
		"trailing comment": baseDoc + "\n# trailing comment\n",
		"egress IPs and load-balancer IPs": baseDoc + "  - name: eips\n    kind: egressIP\n    namespaces: [\"prod-*\"]\n" +
			"  - name: vips\n    kind: loadBalancerIP\n    networks: [default]\n    namespaces: [web]\n    services: [\"web/*\"]\n    localEndpointsOnly: true\n    peers: [tor-a]\n    aggregateLength: 24\n    aggregateLengthV6: 120\n",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			mustParse(t, doc)
		})
	}
}

// TestMergeKeys lets peers share settings through a YAML anchor; a peer's
// own keys win over merged ones.
func TestMergeKeys(t *testing.T) {
	c := mustParse(t, edit(t,
		afterTorA, "      <<: &common {asn: 65001, holdTime: 9s}\n",
		afterTorB, "      <<: *common\n      asn: 64512\n",
	))
	a, b := c.BGP.Peers[0], c.BGP.Peers[1]
	if a.ASN != 65001 || a.HoldTime != 9*time.Second || b.ASN != 64512 || b.HoldTime != 9*time.Second {
		t.Errorf("got tor-a asn %d holdTime %v, tor-b asn %d holdTime %v; want 65001 9s, 64512 9s", a.ASN, a.HoldTime, b.ASN, b.HoldTime)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "read config") {
		t.Errorf("Load(missing) = %v, want a read error", err)
	}
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte("bgp: {asn: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(f)
	if err == nil || !strings.HasPrefix(err.Error(), f+":1: bgp.asn: required") {
		t.Errorf("Load(bad) = %v, want problems prefixed with the file name and line", err)
	}
}
