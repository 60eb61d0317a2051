package doctor

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/nd"
)

// unnumberedConfig has one unnumbered peer on eth1 and one numbered peer.
func unnumberedConfig() *config.Config {
	return &config.Config{BGP: config.BGP{ASN: 65010, Peers: []config.Peer{
		{Name: "tor-a", Interface: "eth1", ASN: 65001},
		{Name: "tor-b", Address: netip.MustParseAddr("192.0.2.1"), ASN: 65001},
	}}}
}

// sysfs is /proc/sys for eth1 with the given values (disable_ipv6,
// all's disable_ipv6, addr_gen_mode, accept_ra, forwarding).
func sysfs(dis, allDis, genMode, acceptRA, fwd string) fstest.MapFS {
	c := "proc/sys/net/ipv6/conf/"
	return fstest.MapFS{
		c + "all/disable_ipv6":   {Data: []byte(allDis + "\n")},
		c + "eth1/disable_ipv6":  {Data: []byte(dis + "\n")},
		c + "eth1/addr_gen_mode": {Data: []byte(genMode + "\n")},
		c + "eth1/accept_ra":     {Data: []byte(acceptRA + "\n")},
		c + "eth1/forwarding":    {Data: []byte(fwd + "\n")},
	}
}

func lla(s string) nd.LinkLocal { return nd.LinkLocal{Addr: netip.MustParseAddr(s).WithZone("eth1")} }

func router(s string) nd.Neighbour {
	return nd.Neighbour{Addr: netip.MustParseAddr(s).WithZone("eth1"), Router: true, State: "stale"}
}

// TestCheckUnnumbered: an unnumbered peer's interface needs IPv6 on, a
// usable link-local address and a router neighbour; each missing piece
// fails or warns with a fix (issue 20).
func TestCheckUnnumbered(t *testing.T) {
	healthy := nd.LinkFacts{Up: true, LinkLocals: []nd.LinkLocal{lla("fe80::1")}, Neighbours: []nd.Neighbour{router("fe80::2")}}
	with := func(f func(*nd.LinkFacts)) map[string]nd.LinkFacts {
		l := healthy
		l.LinkLocals = append([]nd.LinkLocal(nil), healthy.LinkLocals...)
		l.Neighbours = append([]nd.Neighbour(nil), healthy.Neighbours...)
		f(&l)
		return map[string]nd.LinkFacts{"eth1": l}
	}
	ok := map[string]nd.LinkFacts{"eth1": healthy}
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		links map[string]nd.LinkFacts
		want  []string
	}{
		{"healthy", sysfs("0", "0", "0", "0", "1"), ok,
			[]string{"pass:IPv6 is on on eth1 (peers tor-a)", "pass:link-local address fe80::1", "pass:router fe80::2 (stale) seen on eth1", "pass:accept_ra = 0"}},
		{"no IPv6 in the kernel", fstest.MapFS{"proc/sys/net/ipv4/ip_forward": {Data: []byte("1")}}, ok,
			[]string{"fail:the kernel has no IPv6", "skip:needs IPv6", "skip:needs IPv6"}},
		{"no such device", fstest.MapFS{"proc/sys/net/ipv6/conf/all/disable_ipv6": {Data: []byte("0")}}, ok,
			[]string{"fail:device eth1 (peers tor-a) does not exist", "skip:", "skip:"}},
		{"disabled on the device", sysfs("1", "0", "0", "0", "1"), ok,
			[]string{"fail:IPv6 is disabled on eth1 (peers tor-a) (net.ipv6.conf.eth1.disable_ipv6 = 1)", "skip:", "skip:"}},
		{"disabled everywhere", sysfs("1", "1", "0", "0", "1"), ok,
			[]string{"fail:net.ipv6.conf.all.disable_ipv6 = 1", "skip:", "skip:"}},
		{"all disabled, device back on", sysfs("0", "1", "0", "0", "1"), ok,
			[]string{"warn:net.ipv6.conf.all.disable_ipv6 is 1", "pass:", "pass:", "pass:"}},
		{"no link-local, addr_gen_mode none", sysfs("0", "0", "1", "0", "1"), with(func(l *nd.LinkFacts) { l.LinkLocals = nil }),
			[]string{"pass:", "fail:net.ipv6.conf.eth1.addr_gen_mode is 1 (none)", "skip:needs a usable link-local", "pass:"}},
		{"no link-local", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.LinkLocals = nil }),
			[]string{"pass:", "fail:eth1 (peers tor-a) has no link-local address", "skip:", "pass:"}},
		{"tentative", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.LinkLocals[0].Tentative = true }),
			[]string{"pass:", "warn:fe80::1 of eth1 (peers tor-a) is tentative", "pass:", "pass:"}},
		{"DAD failed", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.LinkLocals[0].DADFailed = true }),
			[]string{"pass:", "fail:failed duplicate address detection", "skip:", "pass:"}},
		{"no neighbour", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.Neighbours = nil }),
			[]string{"pass:", "pass:", "warn:no link-local neighbour seen on eth1", "pass:"}},
		{"neighbour not a router", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.Neighbours[0].Router = false }),
			[]string{"pass:", "pass:", "warn:no router seen on eth1 (peers tor-a): link-local neighbours fe80::2 (stale)", "pass:"}},
		{"two routers", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.Neighbours = append(l.Neighbours, router("fe80::3")) }),
			[]string{"pass:", "pass:", "warn:2 routers seen on eth1", "pass:"}},
		{"link down", sysfs("0", "0", "0", "0", "1"), with(func(l *nd.LinkFacts) { l.Up = false }),
			[]string{"pass:", "pass:", "fail:eth1 (peers tor-a) is down", "pass:"}},
		{"default route from RAs", sysfs("0", "0", "0", "1", "0"), ok,
			[]string{"pass:", "pass:", "pass:", "warn:the kernel installs a default route via the peer"}},
		{"accept_ra 2", sysfs("0", "0", "0", "2", "1"), ok,
			[]string{"pass:", "pass:", "pass:", "warn:net.ipv6.conf.eth1.accept_ra = 2"}},
		{"device gone from netlink", sysfs("0", "0", "0", "0", "1"), nil,
			[]string{"pass:", "fail:cannot read eth1 (peers tor-a): link eth1: Link not found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &fakeEnv{files: tc.files, links: tc.links}
			s := &state{in: Input{ConfigPath: "test.yaml", Timeout: 1e9}, env: env, cfg: unnumberedConfig()}
			expect(t, checkUnnumbered(context.Background(), s), tc.want...)
		})
	}
}

// TestCheckUnnumberedSkips: without unnumbered peers (or config) the check
// skips.
func TestCheckUnnumberedSkips(t *testing.T) {
	expect(t, run(t, checkUnnumbered, &fakeEnv{}, baseConfig), "skip:no unnumbered peer")
	expect(t, run(t, checkUnnumbered, &fakeEnv{}, ""), "skip:needs a valid config")
	// A loaded config's `interface:` without `address:` is checked.
	doc := strings.Replace(baseConfig, "{name: tor-a, address: 192.0.2.1, asn: 65001}", "{name: tor-a, interface: eth1, asn: 65001}", 1)
	rs := run(t, checkUnnumbered, &fakeEnv{files: sysfs("0", "0", "0", "0", "1"), links: map[string]nd.LinkFacts{"eth1": {Up: true,
		LinkLocals: []nd.LinkLocal{lla("fe80::1")}, Neighbours: []nd.Neighbour{router("fe80::2")}}}}, doc)
	expect(t, rs, "pass:eth1 (peers tor-a)", "pass:", "pass:", "pass:")
}
