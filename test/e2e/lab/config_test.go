package lab

import (
	"cmp"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
)

// The configs the harness writes are valid for ovnbgp's own loader: a
// contract change shows up here, without root, rather than as a daemon that
// will not start in every end-to-end test.
func TestDaemonConfigLoads(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "tor.password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := DaemonConfig{Node: "node1", ASN: 65010, RouterID: NodeIPv4, ListenPort: -1,
		Peers:      []Peer{DefaultTor()},
		Advertise:  `  - {name: pods, kind: podNetwork, networks: ["*"]}`,
		Northbound: "unix:" + filepath.Join(dir, "nb.sock"), Socket: filepath.Join(dir, "ovnbgp.sock"),
		StateDir: filepath.Join(dir, "state")}
	v6 := base
	v6.Peers = []Peer{{Name: "tor6", Address: TorIPv6, ASN: 65001, Families: []string{"ipv6"}}}
	md5 := base
	md5.ListenPort = 179
	md5.Peers = []Peer{{Name: "tor", Address: TorIPv4, ASN: 65001, Passive: true, PasswordFile: pw, Families: []string{"ipv4"}}}

	gr := base
	gr.GracefulRestart, gr.RestartTime = true, 120*time.Second
	gr.Peers = []Peer{DefaultTor(), {Name: "dead", Address: netip.MustParseAddr("198.51.100.1"), ASN: 65002, Port: 1790}}

	opts := base
	opts.Peers = []Peer{{Name: "tor", Address: TorIPv4, ASN: 65001, SourceAddress: netip.MustParseAddr("198.51.100.10"),
		Interface: NodeLink, EBGPMultihop: 2, MaxPrefixes: 3, MaxAdvertised: 100, HoldTime: 30 * time.Second, KeepaliveTime: 10 * time.Second},
		{Name: "gtsm", Address: netip.MustParseAddr("198.51.100.1"), ASN: 65002, TTLSecurity: true}}

	imp := base
	imp.DeferralTime = 10 * time.Minute
	imp.ProtectedPrefixes = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
	imp.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("fd02::/112")}
	imp.RouteProtocol = 201
	imp.Import = `  - name: tor-routes
    peers: [tor]
    network: default
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
    targets: {ovn: true, kernel: {table: 100}}`

	for name, c := range map[string]DaemonConfig{"ipv4": base, "ipv6": v6, "md5-passive": md5, "gr-two-peers": gr, "peer-options": opts, "import": imp} {
		t.Run(name, func(t *testing.T) {
			text, err := c.Render()
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if cfg.StateDir != c.StateDir {
				t.Errorf("stateDir %q, want the daemon's own %q", cfg.StateDir, c.StateDir)
			}
			if len(cfg.BGP.Peers) != len(c.Peers) || cfg.BGP.Peers[0].Address != c.Peers[0].Address || cfg.BGP.ListenPort != c.ListenPort {
				t.Errorf("loaded %+v from\n%s", cfg.BGP, text)
			}
			for i, p := range c.Peers {
				if want := cmp.Or(p.Port, 179); cfg.BGP.Peers[i].Port != want {
					t.Errorf("peer %s: port %d, want %d", p.Name, cfg.BGP.Peers[i].Port, want)
				}
			}
			if c.Import != "" && (len(cfg.Import) != 1 || cfg.Import[0].Name != "tor-routes") {
				t.Errorf("import rules %+v, want tor-routes", cfg.Import)
			}
			if c.DeferralTime != 0 && cfg.BGP.GracefulRestart.DeferralTime != c.DeferralTime {
				t.Errorf("deferralTime %v, want %v", cfg.BGP.GracefulRestart.DeferralTime, c.DeferralTime)
			}
			if len(cfg.ProtectedPrefixes) != len(c.ProtectedPrefixes) || (c.ServiceCIDRs != nil && len(cfg.Cluster.ServiceCIDRs) != len(c.ServiceCIDRs)) ||
				(c.RouteProtocol != 0 && cfg.Kernel.RouteProtocol != c.RouteProtocol) {
				t.Errorf("protectedPrefixes %v, serviceCIDRs %v, routeProtocol %d from\n%s", cfg.ProtectedPrefixes, cfg.Cluster.ServiceCIDRs, cfg.Kernel.RouteProtocol, text)
			}
			if g := cfg.BGP.GracefulRestart; g.Enabled != c.GracefulRestart || (c.RestartTime != 0 && g.RestartTime != c.RestartTime) {
				t.Errorf("gracefulRestart %+v, want enabled %v, restart time %v", g, c.GracefulRestart, c.RestartTime)
			}
			for i, p := range c.Peers {
				got := cfg.BGP.Peers[i]
				wantHold, wantKeep := cmp.Or(p.HoldTime, 9*time.Second), cmp.Or(p.KeepaliveTime, 3*time.Second)
				if got.SourceAddress != p.SourceAddress || got.Interface != p.Interface || int(got.EBGPMultihop) != p.EBGPMultihop ||
					got.TTLSecurity != p.TTLSecurity || int(got.MaxPrefixes) != cmp.Or(p.MaxPrefixes, config.DefaultMaxPrefixes) || got.MaxAdvertised != p.MaxAdvertised || got.HoldTime != wantHold || got.KeepaliveTime != wantKeep {
					t.Errorf("peer %s loaded as %+v from\n%s", p.Name, got, text)
				}
			}
			if c.Peers[0].PasswordFile != "" && cfg.BGP.Peers[0].Password != "s3cret" {
				t.Errorf("password not read from passwordFile")
			}
		})
	}
}

// FRR's own parser accepts the bgpd.conf the harness renders (bgpd -C
// checks a config and exits; it reports errors only in its output).
func TestFRRConfigParses(t *testing.T) {
	Require(t) // bgpd drops privileges to user frr: root, and the frr package
	bgpd := filepath.Join(FRRDir, "bgpd")
	c := FRRConfig{Neighbors: []FRRNeighbor{
		{Address: NodeIPv4, ASN: 65010, Passive: true, Password: "pw", TTLSecurityHops: 1, Keepalive: 10, HoldTime: 30, BFD: true},
		{Address: NodeIPv6, ASN: 65010, EBGPMultihop: 2, UpdateSource: "lo", ExtendedNextHop: true},
		{Address: netip.MustParseAddr("198.51.100.10"), ASN: 65010, DisableConnectedCheck: true},
	}, Originate: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, GracefulRestart: true}
	// not t.TempDir(): its parent is 0700 and bgpd reads the file as frr
	dir, err := os.MkdirTemp("", NamePrefix+"frrcheck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text, err := c.Render("tor", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"neighbor 192.0.2.0 passive", "neighbor 192.0.2.0 password pw", "neighbor 2001:db8:100:: activate", "network 203.0.113.0/24", "bgp graceful-restart",
		"neighbor 192.0.2.0 ttl-security hops 1", "neighbor 192.0.2.0 timers 10 30", "neighbor 2001:db8:100:: ebgp-multihop 2",
		"neighbor 2001:db8:100:: update-source lo", "neighbor 198.51.100.10 disable-connected-check", "neighbor 192.0.2.0 bfd profile lab",
		"neighbor 2001:db8:100:: capability extended-nexthop"} {
		if !strings.Contains(text, want) {
			t.Errorf("bgpd.conf lacks %q:\n%s", want, text)
		}
	}
	// the extended next hop neighbor is activated in ipv4 unicast too
	if v4, _, _ := strings.Cut(text, "address-family ipv6 unicast"); !strings.Contains(v4, "neighbor 2001:db8:100:: activate") {
		t.Errorf("bgpd.conf does not activate 2001:db8:100:: in ipv4 unicast:\n%s", text)
	}
	f := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ChownFRR(dir); err != nil {
		t.Fatal(err)
	}
	// bgpd -C exits 0 even on errors: it only prints them
	out, err := run(bgpd, "-C", "-u", "frr", "-g", "frr", "-f", f, "--vty_socket", dir, "-z", filepath.Join(dir, "zserv.api"))
	if err != nil || strings.Contains(out, "config line") || strings.Contains(out, "[EC ") {
		t.Fatalf("bgpd -C: %v: %s\n%s", err, out, text)
	}
}
