package doctor

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ovnbgp/ovnbgp/model"
)

// importConfig adds an import rule into OVN (default network) and the
// given kernel target YAML.
func importConfig(kernel string) string {
	return baseConfig + `import:
  - name: up
    peers: [tor-a]
    network: default
    accept: [{prefix: 198.51.100.0/24, maxLength: 32}]
    targets: {ovn: true` + kernel + `}
`
}

func TestReportExitCodes(t *testing.T) {
	for _, tc := range []struct {
		statuses []Status
		want     int
	}{
		{nil, 0},
		{[]Status{Pass, Skip}, 0},
		{[]Status{Pass, Warn, Skip}, 1},
		{[]Status{Warn, Fail, Pass}, 2},
	} {
		var rs []Result
		for _, s := range tc.statuses {
			rs = append(rs, Result{ID: "x", Status: s})
		}
		if got := NewReport(rs); got.ExitCode != tc.want || got.Summary[Warn]+got.Summary[Fail]+got.Summary[Pass]+got.Summary[Skip] != len(rs) {
			t.Errorf("%v: %+v, want exit %d", tc.statuses, got, tc.want)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	s := &state{in: Input{ConfigPath: "c.yaml", ConfigErr: errors.New("bgp.asn: required\nbgp.peers: required")}}
	expect(t, checkConfig(s), "fail:bgp.asn: required; bgp.peers: required")
	expect(t, checkDaemon(context.Background(), s), "skip:needs a valid config")
	s = &state{in: Input{ConfigPath: "c.yaml"}, cfg: parse(t, baseConfig)}
	expect(t, checkConfig(s), "pass:node node1, AS 65010, 1 peers")
}

// TestRunWithoutConfig: an invalid config fails its check, the checks that
// need it skip, the ones that do not still run; exit code 2.
func TestRunWithoutConfig(t *testing.T) {
	env := &fakeEnv{files: fstest.MapFS{"proc/sys/net/ipv4/ip_forward": {Data: []byte("1\n")}}}
	rep := Run(context.Background(), env, Input{ConfigPath: "c.yaml", ConfigErr: errors.New("bgp.asn: required")})
	if rep.ExitCode != 2 || rep.Checks[0].ID != "config" || rep.Checks[0].Status != Fail {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Checks[1:] {
		switch r.ID {
		case "ipv4-forwarding":
			if r.Status != Pass {
				t.Errorf("%s: %s %s", r.ID, r.Status, r.Finding)
			}
		default:
			if r.Status != Skip {
				t.Errorf("%s: %s %s, want skip", r.ID, r.Status, r.Finding)
			}
		}
	}
}

func gr(network, name string, foreign string) model.GatewayRouter {
	return model.GatewayRouter{Network: network, Name: name, ExternalPort: "rtoe-" + name, ForeignImport: foreign}
}

func TestCheckNB(t *testing.T) {
	withBlue := importConfig("") + `  - name: blue
    peers: [tor-a]
    network: ns1_blue
    accept: [{prefix: 203.0.113.0/24, maxLength: 32}]
`
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want []string
	}{
		{"no config", &fakeEnv{}, "", []string{"skip:", "skip:", "skip:"}},
		{"unreachable", &fakeEnv{nbErr: errors.New("connection refused")}, baseConfig,
			[]string{"fail:connection refused", "skip:needs NB", "skip:needs NB"}},
		{"present", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")}}}, baseConfig,
			[]string{"pass:answers", "pass:GR_node1", "pass:no OVN-Kubernetes route import"}},
		{"discovered", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")}}}, baseConfig,
			[]string{"pass:(discovered: ovn.northbound unset; looked at /var/run/ovn-ic/ovnnb_db.sock (", "pass:GR_node1", "pass:"}},
		{"configured", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")}}}, baseConfig + "ovn: {northbound: \"tcp:192.0.2.5:6641\"}\n",
			[]string{"pass:answers at tcp:192.0.2.5:6641 (configured: ovn.northbound;", "pass:GR_node1", "pass:"}},
		{"northd", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")},
			Northd: model.NorthdVersion{Major: 24, Minor: 9, Raw: "24.09.2-20.37.0-73.4"}}}, baseConfig,
			[]string{"pass:networks with subnets on node node1; northd 24.09)", "pass:GR_node1", "pass:"}},
		{"northd unknown", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")}}}, baseConfig,
			[]string{"pass:networks with subnets on node node1; northd version unknown)", "pass:GR_node1", "pass:"}},
		{"absent: another node name", &fakeEnv{}, baseConfig,
			[]string{"pass:", "fail:no gateway router GR_node1 for node.name \"node1\"", "pass:"}},
		{"import network without router", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")}}}, withBlue,
			[]string{"pass:", "pass:GR_node1", "fail:network ns1_blue", "pass:"}},
		{"imported router without external port", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{{Network: "default", Name: "GR_node1"}}}}, importConfig(""),
			[]string{"pass:", "fail:no external port", "pass:"}},
		{"RouteImport on our import target", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "OVN-Kubernetes' route import manages GR_node1")}}}, importConfig(""),
			[]string{"pass:", "pass:", "fail:two writers on GR_node1"}},
		{"RouteImport elsewhere", &fakeEnv{nb: model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", ""), gr("red", "GR_red_node1", "x")}}}, importConfig(""),
			[]string{"pass:", "pass:", "warn:manages GR_red_node1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkNB, tc.env, tc.doc), tc.want...) })
	}
}

// TestCheckNBFix: the fix of an unreachable NB names OpenShift's socket;
// with ovn.northbound unset it says what creates the socket, and the finding
// where it was looked for.
func TestCheckNBFix(t *testing.T) {
	rs := run(t, checkNB, &fakeEnv{nbErr: errors.New("no NB socket was found")}, baseConfig)
	if !strings.Contains(rs[0].Finding, "discovered from /var/run/ovn-ic/ovnnb_db.sock then /var/run/ovn/ovnnb_db.sock") ||
		!strings.Contains(rs[0].Fix, "ovnkube-node") || !strings.Contains(rs[0].Fix, "/var/run/ovn-ic/ovnnb_db.sock") {
		t.Errorf("discovered, unreachable:\n%s", dump(rs))
	}
	rs = run(t, checkNB, &fakeEnv{nbErr: errors.New("connection refused")}, baseConfig+"ovn: {northbound: \"unix:/run/nb.sock\"}\n")
	if !strings.Contains(rs[0].Fix, "check ovn.northbound (unix:/run/nb.sock)") || !strings.Contains(rs[0].Fix, "unix:/var/run/ovn-ic/ovnnb_db.sock") {
		t.Errorf("configured, unreachable:\n%s", dump(rs))
	}
}

// procFiles: a TCP listener on port (inode) held by pid/comm, and the
// control socket's unix listener (inode 777) held by pid 9/ovnbgp.
func procFiles(port string, pid, comm string) fstest.MapFS {
	fsys := fstest.MapFS{
		"proc/net/tcp": {Data: []byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
			"   0: 00000000:" + port + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n" +
			"   1: 0100007F:" + port + " 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 100 0 0 10 0\n")},
		"proc/net/tcp6": {Data: []byte("  sl  local_address remote_address st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")},
		"proc/net/unix": {Data: []byte("Num       RefCount Protocol Flags    Type St Inode Path\n" +
			"0000000000000000: 00000002 00000000 00010000 0001 01 777 /run/ovnbgp/ovnbgp.sock\n")},
	}
	if pid != "" {
		fsys["proc/"+pid+"/fd/7"] = &fstest.MapFile{Data: []byte("socket:[4242]"), Mode: fs.ModeSymlink}
		fsys["proc/"+pid+"/fd/0"] = &fstest.MapFile{Data: []byte("/dev/null"), Mode: fs.ModeSymlink}
		fsys["proc/"+pid+"/comm"] = &fstest.MapFile{Data: []byte(comm + "\n")}
	}
	return fsys
}

// listenerAt: one IPv4 and one IPv6 TCP listener (local_address as
// /proc/net/tcp{,6} print it, on a little-endian host), the IPv4 one held
// by pid/comm; the IPv6 one (inode 4545) too.
func listenerAt(v4, v6, pid, comm string) fstest.MapFS {
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	fsys := fstest.MapFS{
		"proc/net/tcp":  {Data: []byte(head + "   0: " + v4 + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n")},
		"proc/net/tcp6": {Data: []byte(head + "   0: " + v6 + " 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4545 1 0000000000000000 100 0 0 10 0\n")},
		"proc/net/unix": {Data: []byte("Num       RefCount Protocol Flags    Type St Inode Path\n")},
	}
	fsys["proc/"+pid+"/fd/7"] = &fstest.MapFile{Data: []byte("socket:[4242]"), Mode: fs.ModeSymlink}
	fsys["proc/"+pid+"/fd/8"] = &fstest.MapFile{Data: []byte("socket:[4545]"), Mode: fs.ModeSymlink}
	fsys["proc/"+pid+"/comm"] = &fstest.MapFile{Data: []byte(comm + "\n")}
	return fsys
}

func TestCheckPorts(t *testing.T) {
	const p179, p9479 = "00B3", "2507"
	ownSocket := func(fsys fstest.MapFS) fstest.MapFS {
		fsys["run/ovnbgp/ovnbgp.sock"] = &fstest.MapFile{Mode: fs.ModeSocket}
		fsys["proc/9/fd/3"] = &fstest.MapFile{Data: []byte("socket:[777]"), Mode: fs.ModeSymlink}
		fsys["proc/9/comm"] = &fstest.MapFile{Data: []byte("ovnbgp\n")}
		return fsys
	}
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		doc   string
		want  []string
	}{
		{"free", procFiles("0050", "", ""), baseConfig, []string{"pass:port 179 is free", "pass:is free", "pass:port 9479 is free"}},
		{"ours", ownSocket(procFiles(p179, "9", "ovnbgp")), baseConfig,
			[]string{"pass:held by ovnbgp itself: ovnbgp (pid 9)", "pass:held by ovnbgp itself", "pass:9479 is free"}},
		{"foreign", procFiles(p179, "31", "bgpd"), baseConfig, []string{"fail:port 179 is held by bgpd (pid 31)", "pass:", "pass:"}},
		{"metrics taken", procFiles(p9479, "32", "node_exporter"), baseConfig, []string{"pass:", "pass:", "fail:port 9479 is held by node_exporter (pid 32)"}},
		{"holder unseen", procFiles(p179, "", ""), baseConfig, []string{"warn:cannot see", "pass:", "pass:"}},
		{"never listens, no metrics", procFiles(p179, "31", "bgpd"),
			strings.Replace(strings.Replace(baseConfig, "asn: 65010", "asn: 65010\n  listenPort: -1", 1), `"127.0.0.1:9479"`, `""`, 1),
			[]string{"skip:never listens", "pass:", "skip:no metrics"}},
		{"stale socket", func() fstest.MapFS {
			f := procFiles("0050", "", "")
			f["run/ovnbgp/ovnbgp.sock"] = &fstest.MapFile{Mode: fs.ModeSocket}
			delete(f, "proc/net/unix")
			f["proc/net/unix"] = &fstest.MapFile{Data: []byte("Num RefCount Protocol Flags Type St Inode Path\n")}
			return f
		}(), baseConfig, []string{"pass:", "pass:stale socket file", "pass:"}},
		{"socket path is a file", func() fstest.MapFS {
			f := procFiles("0050", "", "")
			f["run/ovnbgp/ovnbgp.sock"] = &fstest.MapFile{Data: []byte("x")}
			return f
		}(), baseConfig, []string{"pass:", "fail:exists and is not a socket", "pass:"}},
		{"socket of another process", func() fstest.MapFS {
			f := procFiles("0050", "", "")
			f["run/ovnbgp/ovnbgp.sock"] = &fstest.MapFile{Mode: fs.ModeSocket}
			f["proc/12/fd/5"] = &fstest.MapFile{Data: []byte("socket:[777]"), Mode: fs.ModeSymlink}
			f["proc/12/comm"] = &fstest.MapFile{Data: []byte("socat\n")}
			return f
		}(), baseConfig, []string{"pass:", "fail:held by socat (pid 12)", "pass:"}},
		{"no config", procFiles(p179, "", ""), "", []string{"skip:", "skip:", "skip:"}},
		// metrics.address is 127.0.0.1:9479: a listener on another address
		// of the same port does not clash, one on 127.0.0.1 or a wildcard does
		{"metrics port on another address", listenerAt("0500000A:"+p9479, "00000000000000000000000000000000:0050", "32", "node_exporter"), baseConfig,
			[]string{"pass:", "pass:", "pass:port 9479 is free on 127.0.0.1"}},
		{"metrics port on another IPv6 address", listenerAt("0100007F:0050", "B80D0120000000000000000001000000:"+p9479, "32", "node_exporter"), baseConfig,
			[]string{"pass:", "pass:", "pass:port 9479 is free on 127.0.0.1"}},
		{"metrics port on the same address", listenerAt("0100007F:"+p9479, "00000000000000000000000000000000:0050", "32", "node_exporter"), baseConfig,
			[]string{"pass:", "pass:", "fail:port 9479 is held by node_exporter (pid 32)"}},
		{"metrics port on the IPv6 wildcard", listenerAt("0100007F:0050", "00000000000000000000000000000000:"+p9479, "32", "node_exporter"), baseConfig,
			[]string{"pass:", "pass:", "fail:port 9479 is held by node_exporter (pid 32)"}},
		{"metrics port on IPv4-mapped 127.0.0.1", listenerAt("0500000A:0050", "0000000000000000FFFF00000100007F:"+p9479, "32", "node_exporter"), baseConfig,
			[]string{"pass:", "pass:", "fail:port 9479 is held by node_exporter (pid 32)"}},
		// a wildcard metrics.address clashes with a listener on any address
		{"wildcard metrics address", listenerAt("0500000A:"+p9479, "00000000000000000000000000000000:0050", "32", "node_exporter"),
			strings.Replace(baseConfig, `"127.0.0.1:9479"`, `":9479"`, 1),
			[]string{"pass:", "pass:", "fail:port 9479 is held by node_exporter (pid 32)"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkPorts, &fakeEnv{files: tc.files}, tc.doc), tc.want...) })
	}
}

func sysctls(kv ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for i := 0; i+1 < len(kv); i += 2 {
		fsys["proc/sys/"+strings.ReplaceAll(kv[i], ".", "/")] = &fstest.MapFile{Data: []byte(kv[i+1] + "\n")}
	}
	return fsys
}

func TestCheckForwarding(t *testing.T) {
	dual := strings.Replace(baseConfig, "asn: 65001}\n", "asn: 65001}\n    - {name: tor-6, address: \"2001:db8::1\", asn: 65001}\n", 1)
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		doc   string
		want  []string
	}{
		{"on, IPv4 only", sysctls("net.ipv4.ip_forward", "1"), baseConfig, []string{"pass:is 1", "skip:no IPv6 session"}},
		{"off", sysctls("net.ipv4.ip_forward", "0", "net.ipv6.conf.all.forwarding", "1"), dual, []string{"fail:is 0", "pass:"}},
		{"IPv6 off", sysctls("net.ipv4.ip_forward", "1", "net.ipv6.conf.all.forwarding", "0"), dual, []string{"pass:", "fail:does not forward IPv6"}},
		{"unreadable", sysctls(), baseConfig, []string{"warn:cannot read", "skip:"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkForwarding, &fakeEnv{files: tc.files}, tc.doc), tc.want...) })
	}
}

func TestCheckRPFilter(t *testing.T) {
	twoPeers := strings.Replace(baseConfig, "    - {name: tor-a, address: 192.0.2.1, asn: 65001}\n",
		"    - {name: tor-a, address: 192.0.2.1, asn: 65001}\n    - {name: tor-b, address: 192.0.2.3, asn: 65001}\n", 1)
	v6only := strings.Replace(baseConfig, "address: 192.0.2.1", "address: 2001:db8::1", 1)
	routes := map[netip.Addr]string{netip.MustParseAddr("192.0.2.1"): "eth0", netip.MustParseAddr("192.0.2.3"): "eth1"}
	strict := sysctls("net.ipv4.conf.all.rp_filter", "0", "net.ipv4.conf.eth0.rp_filter", "1", "net.ipv4.conf.eth1.rp_filter", "0")
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want []string
	}{
		{"loose, no import", &fakeEnv{files: sysctls("net.ipv4.conf.all.rp_filter", "2", "net.ipv4.conf.eth0.rp_filter", "0"), routes: routes}, baseConfig,
			[]string{"pass:uplink eth0 (peers tor-a): rp_filter 2"}},
		{"strict, no asymmetry", &fakeEnv{files: strict, routes: routes}, baseConfig, []string{"pass:rp_filter 1"}},
		{"strict with import", &fakeEnv{files: strict, routes: routes}, importConfig(""), []string{"warn:is strict, and imported routes"}},
		{"strict with ECMP", &fakeEnv{files: strict, routes: routes}, twoPeers,
			[]string{"fail:uplink eth0 (peers tor-a): rp_filter 1 (all 0, eth0 1) is strict, and ECMP", "pass:uplink eth1"}},
		{"all=1 makes every uplink strict", &fakeEnv{files: sysctls("net.ipv4.conf.all.rp_filter", "1", "net.ipv4.conf.eth0.rp_filter", "0", "net.ipv4.conf.eth1.rp_filter", "0"), routes: routes}, twoPeers,
			[]string{"fail:eth0", "fail:eth1"}},
		{"peer unreachable", &fakeEnv{files: strict}, baseConfig, []string{"warn:unreachable"}},
		{"no IPv4 peer", &fakeEnv{}, v6only, []string{"skip:no IPv4 peer"}},
		// a VLAN device: its /proc/sys directory keeps the dot
		{"VLAN uplink", &fakeEnv{files: fstest.MapFS{
			"proc/sys/net/ipv4/conf/all/rp_filter":       {Data: []byte("0\n")},
			"proc/sys/net/ipv4/conf/bond0.100/rp_filter": {Data: []byte("1\n")},
		}, routes: map[netip.Addr]string{netip.MustParseAddr("192.0.2.1"): "bond0.100"}}, importConfig(""),
			[]string{"warn:uplink bond0.100 (peers tor-a): rp_filter 1 (all 0, bond0.100 1) is strict"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkRPFilter, tc.env, tc.doc), tc.want...) })
	}
}

// TestRPFilterFixVLAN: the fix for a VLAN device names it as sysctl wants
// it, its dots as slashes (net.ipv4.conf.bond0/100.rp_filter), since
// sysctl reads the dots of a key as path separators.
func TestRPFilterFixVLAN(t *testing.T) {
	env := &fakeEnv{files: fstest.MapFS{
		"proc/sys/net/ipv4/conf/all/rp_filter":       {Data: []byte("0\n")},
		"proc/sys/net/ipv4/conf/bond0.100/rp_filter": {Data: []byte("1\n")},
	}, routes: map[netip.Addr]string{netip.MustParseAddr("192.0.2.1"): "bond0.100"}}
	rs := run(t, checkRPFilter, env, importConfig(""))
	if len(rs) != 1 || !strings.Contains(rs[0].Fix, "net.ipv4.conf.bond0/100.rp_filter=2") || strings.Contains(rs[0].Fix, "bond0.100.rp_filter") {
		t.Errorf("fix for bond0.100:\n%s", dump(rs))
	}
}

func TestCheckVRFSupport(t *testing.T) {
	rel := fstest.MapFS{"proc/sys/kernel/osrelease": {Data: []byte("6.1.0-9-amd64\n")}}
	with := func(extra fstest.MapFS) fstest.MapFS {
		f := fstest.MapFS{}
		for k, v := range rel {
			f[k] = v
		}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	createVRF := importConfig(", kernel: {table: 100, vrf: blue, createVRF: true}")
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want []string
	}{
		{"no VRF target", &fakeEnv{}, importConfig(", kernel: {table: 100}"), []string{"skip:"}},
		{"exists", &fakeEnv{vrfs: []model.VRFDevice{{Name: "blue", Table: 100}}}, importConfig(", kernel: {vrf: blue}"), []string{"pass:VRF blue exists (table 100)"}},
		{"loaded", &fakeEnv{files: with(fstest.MapFS{"sys/module/vrf/refcnt": {Data: []byte("0")}})}, createVRF, []string{"pass:driver is loaded"}},
		{"built in", &fakeEnv{files: with(fstest.MapFS{"lib/modules/6.1.0-9-amd64/modules.builtin": {Data: []byte("kernel/drivers/net/vrf.ko\n")}})}, createVRF,
			[]string{"pass:built in"}},
		{"loadable, compressed", &fakeEnv{files: with(fstest.MapFS{"lib/modules/6.1.0-9-amd64/modules.dep": {Data: []byte("kernel/drivers/net/dummy.ko.xz:\nkernel/drivers/net/vrf.ko.xz:\n")}})}, createVRF,
			[]string{"pass:loadable"}},
		{"no driver", &fakeEnv{files: with(fstest.MapFS{"lib/modules/6.1.0-9-amd64/modules.dep": {Data: []byte("kernel/drivers/net/dummy.ko:\nkernel/drivers/net/vrfx.ko:\n")}})}, createVRF,
			[]string{"fail:has no VRF driver"}},
		{"missing, not created", &fakeEnv{files: with(fstest.MapFS{"sys/module/vrf/refcnt": {}})}, importConfig(", kernel: {vrf: blue}"),
			[]string{"fail:no import rule creates it"}},
		// the VRFs cannot be listed: no verdict on whether blue exists
		{"no netlink", &fakeEnv{rtErr: errors.New("permission denied"), files: with(fstest.MapFS{"sys/module/vrf/refcnt": {}})}, importConfig(", kernel: {vrf: blue}"),
			[]string{"warn:cannot list VRFs: permission denied"}},
		{"VRF list fails", &fakeEnv{vrfErr: errors.New("netlink: operation not permitted"), files: with(fstest.MapFS{"sys/module/vrf/refcnt": {}})}, createVRF,
			[]string{"warn:cannot list VRFs: netlink: operation not permitted"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkVRFSupport, tc.env, tc.doc), tc.want...) })
	}
}

func TestCheckRouteProtocol(t *testing.T) {
	frr := fstest.MapFS{"etc/iproute2/rt_protos.d/frr.conf": {Data: []byte("186 bgp\n196 static\n")}}
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		doc   string
		want  []string
	}{
		{"free", frr, baseConfig, []string{"pass:200 is free"}},
		{"named ovnbgp", fstest.MapFS{"etc/iproute2/rt_protos.d/ovnbgp.conf": {Data: []byte("# x\n200\tovnbgp\n")}}, baseConfig,
			[]string{"pass:is named ovnbgp (/etc/iproute2/rt_protos.d/ovnbgp.conf)"}},
		{"taken", fstest.MapFS{"etc/iproute2/rt_protos.d/bird.conf": {Data: []byte("201 bird\n")}},
			baseConfig + "kernel: {routeProtocol: 201}\n", []string{"fail:201 is named bird (/etc/iproute2/rt_protos.d/bird.conf)"}},
		{"taken in /usr/share", fstest.MapFS{"usr/share/iproute2/rt_protos": {Data: []byte("0x c9 x\n201 gated\n")}},
			baseConfig + "kernel: {routeProtocol: 201}\n", []string{"fail:gated"}},
		{"ovnbgp names another number", fstest.MapFS{"etc/iproute2/rt_protos.d/ovnbgp.conf": {Data: []byte("200 ovnbgp\n")}},
			baseConfig + "kernel: {routeProtocol: 202}\n", []string{"warn:names 200"}},
		{"no config", nil, "", []string{"skip:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, run(t, checkRouteProtocol, &fakeEnv{files: tc.files}, tc.doc), tc.want...)
		})
	}
}

func TestCheckTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want []string
	}{
		{"no kernel target", &fakeEnv{}, importConfig(""), []string{"skip:"}},
		{"ours alone", &fakeEnv{tables: map[uint32]map[int]int{100: {200: 3, 2: 1}}}, importConfig(", kernel: {table: 100}"),
			[]string{"pass:table 100 is ovnbgp's alone (3 routes of protocol 200)"}},
		{"FRR's routes", &fakeEnv{tables: map[uint32]map[int]int{100: {186: 12, 200: 1}}}, importConfig(", kernel: {table: 100}"),
			[]string{"fail:12 routes of FRR's bgpd (bgp) (protocol 186)"}},
		{"an operator's route", &fakeEnv{tables: map[uint32]map[int]int{100: {3: 1}}}, importConfig(", kernel: {table: 100}"),
			[]string{"warn:1 routes of an operator"}},
		{"another VRF's table", &fakeEnv{vrfs: []model.VRFDevice{{Name: "mp3-udn-vrf", Table: 1003}}}, importConfig(", kernel: {table: 1003}"),
			[]string{"fail:table 1003 is the table of VRF mp3-udn-vrf (an OVN-Kubernetes UDN VRF", "warn:range OVN-Kubernetes"}},
		{"OVN-Kubernetes' range", &fakeEnv{}, importConfig(", kernel: {table: 1500}"), []string{"warn:range OVN-Kubernetes"}},
		{"VRF with another table", &fakeEnv{vrfs: []model.VRFDevice{{Name: "blue", Table: 101}}}, importConfig(", kernel: {table: 100, vrf: blue}"),
			[]string{"fail:VRF blue uses table 101"}},
		{"VRF, table from the device", &fakeEnv{vrfs: []model.VRFDevice{{Name: "blue", Table: 101}}, tables: map[uint32]map[int]int{101: {2: 4}}}, importConfig(", kernel: {vrf: blue}"),
			[]string{"pass:VRF blue (table 101) is ovnbgp's alone"}},
		{"VRF not there yet", &fakeEnv{}, importConfig(", kernel: {vrf: blue}"), []string{"pass:does not exist yet"}},
		{"no netlink", &fakeEnv{rtErr: errors.New("permission denied")}, importConfig(", kernel: {table: 100}"), []string{"warn:permission denied"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, checkTables, tc.env, tc.doc), tc.want...) })
	}
}

// TestChecksDocumented: every check id a run reports is a row of the
// Doctor table in docs/cli.md (scripts match the ids; the doc is their
// reference).
func TestChecksDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Doctor")
	if start < 0 {
		t.Fatal("docs/cli.md has no Doctor section")
	}
	doc = doc[start:]
	if end := strings.Index(doc[3:], "\n## "); end >= 0 {
		doc = doc[:end+3]
	}
	cfg := parse(t, importConfig(", kernel: {table: 100}"))
	rep := Run(context.Background(), &fakeEnv{}, Input{ConfigPath: "c.yaml", Config: cfg})
	seen := map[string]bool{}
	for _, r := range rep.Checks {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		if !strings.Contains(doc, "| `"+r.ID+"`") && !strings.Contains(doc, ", `"+r.ID+"` |") {
			t.Errorf("check %s is not in docs/cli.md's Doctor table", r.ID)
		}
	}
	if len(seen) < 15 {
		t.Errorf("only %d check ids ran: %v", len(seen), seen)
	}
}

// TestCheckPeerNextHops: a peer an import rule lists whose address is
// inside a protected prefix (here OVN-Kubernetes' default join subnet, NB
// holding no live one) is a warning that says its routes will be refused
// as "next hop inside protected" and how to fix it; with NB's live join
// subnet elsewhere it passes; without NB the config's own warning stands
// in; without an import rule nothing is checked.
func TestCheckPeerNextHops(t *testing.T) {
	joinPeer := strings.Replace(importConfig(""), "address: 192.0.2.1", "address: 100.64.0.1", 1)
	liveJoin := model.Snapshot{Routers: []model.GatewayRouter{gr("default", "GR_node1", "")},
		Protected: []model.ProtectedPrefix{{Prefix: netip.MustParsePrefix("100.65.0.0/16"), Why: "join subnet (Logical_Router_Port rtoj-GR_node1 networks)"}}}
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want string
		fix  string
	}{
		{"default join subnet holds the peer", &fakeEnv{}, joinPeer,
			`warn:peer tor-a (100.64.0.1, import rule up): every route it sends with itself as next hop is refused: "next hop 100.64.0.1 is inside protected 100.64.0.0/16: default join subnet of OVN-Kubernetes (NB has no live value)"`,
			"NB has no live join subnet"},
		{"live join subnet elsewhere", &fakeEnv{nb: liveJoin}, joinPeer, "pass:1 peer", ""},
		{"peer outside", &fakeEnv{}, importConfig(""), "pass:1 peer", ""},
		{"no NB: the config's warning", &fakeEnv{nbErr: errors.New("connection refused")}, joinPeer,
			"warn:NB not reachable; from the config alone: bgp.peers[0].address: warning: 100.64.0.1 is inside 100.64.0.0/16", "ovn.northbound"},
		{"no NB, nothing in the config", &fakeEnv{nbErr: errors.New("connection refused")}, importConfig(""), "skip:needs NB", ""},
		{"no import rule", &fakeEnv{}, strings.Replace(baseConfig, "192.0.2.1", "100.64.0.1", 1), "skip:no import rule", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := run(t, checkPeerNextHops, tc.env, tc.doc)
			expect(t, rs, tc.want)
			if !strings.Contains(rs[0].Fix, tc.fix) {
				t.Errorf("fix %q lacks %q", rs[0].Fix, tc.fix)
			}
		})
	}
}
