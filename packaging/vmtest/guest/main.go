// Command guest is both halves of the VM test of the shipped systemd unit
// (see ../unit_test.go).
//
// As /init (PID 1 of the initramfs) it loads the virtio, 9p and overlay
// modules from /modules (in the order of /modules/order), mounts the host's root read-only over 9p under a tmpfs
// overlay, copies /payload (the unit, the binary under test, the test's
// units and configs) into it, and execs the host's systemd as PID 1 with
// --unit=vmtest.target.
//
// As "guest check" (vmtest-check.service, after ovnbgp.service is up) it
// checks the daemon under the sandbox from the outside (watchdog.go: the
// watchdog kills a hung loop, the imports stay), prints one
// "vmtest: PASS|FAIL NAME: detail" line per check and a verdict line to the
// serial console, and powers the VM off.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		check()
		return
	}
	initVM()
}

// console is where the report goes: the serial console, whoever runs us.
func say(f string, a ...any) {
	line := fmt.Sprintf("vmtest: "+f+"\n", a...)
	if tty, err := os.OpenFile("/dev/ttyS0", os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		_, _ = tty.WriteString(line)
		tty.Close()
		return
	}
	fmt.Print(line)
}

func powerOff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

// --- /init ---------------------------------------------------------------

func initVM() {
	fail := func(f string, a ...any) {
		say("FAIL init: "+f, a...)
		say("VERDICT FAIL")
		powerOff()
	}
	say("INFO init: loading modules")
	mods, err := os.ReadFile("/modules/order")
	if err != nil {
		fail("%v", err)
	}
	for _, m := range strings.Fields(string(mods)) {
		f, err := os.Open("/modules/" + m)
		if err != nil {
			fail("%v", err)
		}
		if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
			fail("load %s: %v", m, err)
		}
		f.Close()
	}
	for _, d := range []string{"/lower", "/upper", "/newroot"} {
		_ = os.MkdirAll(d, 0o755)
	}
	if err := unix.Mount("hostroot", "/lower", "9p", unix.MS_RDONLY, "trans=virtio,version=9p2000.L,msize=262144"); err != nil {
		fail("mount the host root over 9p: %v", err)
	}
	if err := unix.Mount("tmpfs", "/upper", "tmpfs", 0, "mode=0755"); err != nil {
		fail("tmpfs: %v", err)
	}
	_ = os.MkdirAll("/upper/u", 0o755)
	_ = os.MkdirAll("/upper/w", 0o755)
	if err := unix.Mount("overlay", "/newroot", "overlay", 0, "lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w"); err != nil {
		fail("overlay: %v", err)
	}
	err = filepath.WalkDir("/payload", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("/payload", p)
		dst := filepath.Join("/newroot", rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_ = os.Remove(dst)
		return os.WriteFile(dst, b, fi.Mode().Perm())
	})
	if err != nil {
		fail("payload: %v", err)
	}
	// The host's machine-id is not the VM's: an empty one makes systemd
	// generate a transient one.
	_ = os.Remove("/newroot/etc/machine-id")
	_ = os.WriteFile("/newroot/etc/machine-id", nil, 0o444)
	if err := unix.Chdir("/newroot"); err != nil {
		fail("%v", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		fail("move the new root: %v", err)
	}
	if err := unix.Chroot("."); err != nil {
		fail("chroot: %v", err)
	}
	_ = unix.Chdir("/")
	// systemd expects shared propagation (it sets it only when the kernel
	// starts it on a real root): LoadCredential= builds each service's
	// credentials in a private mount namespace and lets the mount propagate
	// to /run/credentials; with private mounts the service sees an empty
	// directory.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		fail("make / shared: %v", err)
	}
	say("INFO init: exec systemd")
	err = unix.Exec("/lib/systemd/systemd", []string{"/lib/systemd/systemd", "--system", "--unit=vmtest.target"}, os.Environ())
	fail("exec systemd: %v", err)
}

// --- check ---------------------------------------------------------------

const (
	vty     = "/run/vmtest-tor"
	nodeIP  = "192.0.2.10"
	podNet  = "10.128.0.0/23"
	learned = "198.51.100.0/24"
	// added is accepted only by the config the reload test writes.
	added = "203.0.113.0/24"
	// icSocket is the only NB socket in the VM (vmtest-nb.service).
	icSocket = "/var/run/ovn-ic/ovnnb_db.sock"
)

// checker runs the checks and counts failures.
type checker struct{ failed int }

func (c *checker) result(name string, err error, detail string) bool {
	if err != nil {
		c.failed++
		say("FAIL %s: %v", name, err)
		return false
	}
	say("PASS %s: %s", name, detail)
	return true
}

func check() {
	c := &checker{}
	c.run()
	if c.failed > 0 {
		for _, l := range lines(run("journalctl", "-b", "--no-pager", "-o", "short-monotonic", "-u", "ovnbgp", "-u", "vmtest-tor", "-u", "vmtest-nb", "-u", "vmtest-net")) {
			say("INFO journal: %s", l)
		}
	}
	say("VERDICT %s", map[bool]string{true: "FAIL", false: "PASS"}[c.failed > 0])
	_, _ = run("systemctl", "poweroff", "--no-block")
}

func (c *checker) run() {
	// READY: Type=notify makes the unit active only after READY=1, which
	// the daemon sends after its first reconcile.
	props, err := unitProps("ovnbgp")
	if err == nil && (props["Type"] != "notify" || props["ActiveState"] != "active" || props["SubState"] != "running") {
		err = fmt.Errorf("ovnbgp.service is %s/%s (Type=%s), want active/running after READY=1 (status: %s)",
			props["ActiveState"], props["SubState"], props["Type"], props["StatusText"])
	}
	if !c.result("ready", err, fmt.Sprintf("Type=%s %s/%s, status %q", props["Type"], props["ActiveState"], props["SubState"], props["StatusText"])) {
		return
	}
	pid := props["MainPID"]

	// The sandbox as the kernel applies it to the running process.
	st, err := os.ReadFile("/proc/" + pid + "/status")
	got := map[string]string{}
	for _, l := range lines(string(st), err) {
		k, v, _ := strings.Cut(l, ":")
		got[k] = strings.TrimSpace(v)
	}
	want := map[string]string{"Uid": "0\t0\t0\t0", "CapEff": "0000000000003400", "CapPrm": "0000000000003400",
		"CapBnd": "0000000000003400", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
	var bad []string
	for _, k := range []string{"Uid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"} {
		if got[k] != want[k] {
			bad = append(bad, fmt.Sprintf("%s %q, want %q", k, got[k], want[k]))
		}
	}
	if err == nil && len(bad) > 0 {
		err = fmt.Errorf("/proc/%s/status: %s", pid, strings.Join(bad, "; "))
	}
	c.result("sandbox", err, fmt.Sprintf("CapEff %s CapBnd %s CapAmb %s NoNewPrivs %s Seccomp %s",
		got["CapEff"], got["CapBnd"], got["CapAmb"], got["NoNewPrivs"], got["Seccomp"]))

	// LoadCredential=: systemd passed the secret to this service only.
	env, err := os.ReadFile("/proc/" + pid + "/environ")
	credDir := ""
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "CREDENTIALS_DIRECTORY="); ok {
			credDir = v
		}
	}
	if err == nil {
		if credDir == "" {
			err = fmt.Errorf("no $CREDENTIALS_DIRECTORY in the daemon's environment")
		} else if fi, e := os.Stat(filepath.Join(credDir, "tor-a")); e != nil {
			err = e
		} else if fi.Mode().Perm()&0o077 != 0 {
			err = fmt.Errorf("%s/tor-a has mode %v, readable by others", credDir, fi.Mode())
		}
	}
	c.result("credential", err, "$CREDENTIALS_DIRECTORY="+credDir+" holds tor-a")

	// The session with FRR, which has the TCP MD5 password of the
	// credential: without it the session never comes up.
	var nb frrNeighbor
	err = waitFor(2*time.Minute, func() error {
		var e error
		nb, e = neighbor()
		if e == nil && nb.State != "Established" {
			e = fmt.Errorf("FRR's session with %s is %s", nodeIP, nb.State)
		}
		return e
	})
	// The control: a connection from the same address without the key
	// never gets an answer, and the peer's kernel counts the dropped SYN.
	var md5Before, md5After int
	if err == nil {
		md5Before, err = md5NotFound()
	}
	if err == nil {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(nodeIP)}, Timeout: 3 * time.Second}
		if conn, e := d.Dial("tcp", "192.0.2.1:179"); e == nil {
			conn.Close()
			err = fmt.Errorf("a connection from %s without TCP MD5 was accepted: the peer does not require the password", nodeIP)
		}
	}
	if err == nil {
		err = waitFor(time.Minute, func() error {
			var e error
			md5After, e = md5NotFound()
			if e == nil && md5After <= md5Before {
				e = fmt.Errorf("the peer's TcpExtTCPMD5NotFound stayed %d after a SYN without the key", md5After)
			}
			return e
		})
	}
	c.result("established-md5", err, fmt.Sprintf("FRR AS65001 <-> ovnbgp %s Established; a SYN without the key is dropped (TcpExtTCPMD5NotFound %d -> %d), so ovnbgp signs with the credential's password",
		nodeIP, md5Before, md5After))

	// The CLI through the control socket.
	var peers []model.PeerStatus
	out, err := run("/usr/local/bin/ovnbgp", "peers", "-o", "json")
	if err == nil {
		err = json.Unmarshal([]byte(out), &peers)
	}
	if err == nil && (len(peers) != 1 || peers[0].Name != "tor-a" || peers[0].State != model.StateEstablished) {
		err = fmt.Errorf("ovnbgp peers: %s", out)
	}
	if c.result("cli-peers", err, "ovnbgp peers -o json: tor-a established") {
		table, _ := run("/usr/local/bin/ovnbgp", "peers")
		for _, l := range lines(table, nil) {
			say("INFO peers: %s", l)
		}
	}

	// The pod subnet reached the peer.
	err = waitFor(time.Minute, func() error { return frrHasPath(podNet, nodeIP) })
	c.result("advertised", err, podNet+" (node1's pod subnet in NB) in FRR's RIB from "+nodeIP)

	// No ovn.northbound: the daemon started before the NB socket existed
	// (vmtest-nb.service runs after it, like ovnkube-node at boot) and
	// found it at OpenShift's /var/run/ovn-ic, through the unit's sandbox.
	var nbst api.NBStatus
	err = waitFor(time.Minute, func() error {
		out, e := run("/usr/local/bin/ovnbgp", "status", "-o", "json")
		var st api.Status
		if e == nil {
			e = json.Unmarshal([]byte(out), &st)
		}
		nbst = st.NB
		if e == nil && (!nbst.Connected || nbst.Source != "discovered" || nbst.Current != "unix:"+icSocket) {
			e = fmt.Errorf("ovnbgp status northbound: %+v, want connected to the discovered unix:%s", nbst, icSocket)
		}
		return e
	})
	if err == nil {
		journal, e := run("journalctl", "-b", "--no-pager", "-o", "cat", "-u", "ovnbgp")
		if e == nil && !strings.Contains(journal, "no NB socket was found") {
			e = fmt.Errorf("ovnbgp's journal never says \"no NB socket was found\": it did not start before the socket existed")
		}
		err = e
	}
	c.result("nb-discovered", err, fmt.Sprintf("no ovn.northbound: started before the NB socket existed, then %s (%s; tried %v)", nbst.Current, nbst.Source, nbst.Tried))

	// A learned route in the kernel (CAP_NET_ADMIN over netlink), with our
	// protocol, named by the shipped rt_protos.d file.
	var route string
	err = waitFor(time.Minute, func() error {
		var e error
		route, e = kernelRoute(learned)
		return e
	})
	c.result("kernel-route", err, "table 100: "+route)
	if r, _ := kernelRoute(added); r != "" {
		c.result("kernel-route", fmt.Errorf("%s is in table 100 before the reload accepts it: %s", added, r), "")
	}

	// SIGHUP (systemctl reload): the changed rule applies, the session
	// stays, the process stays.
	before, err := neighbor()
	if err == nil {
		err = reloadWithRule()
	}
	if err == nil {
		err = waitFor(time.Minute, func() error { _, e := kernelRoute(added); return e })
	}
	var after frrNeighbor
	var props2 map[string]string
	if err == nil {
		after, err = neighbor()
	}
	if err == nil {
		props2, err = unitProps("ovnbgp")
	}
	if err == nil {
		switch {
		case after.State != "Established" || after.ConnectionsEstablished != before.ConnectionsEstablished ||
			after.ConnectionsDropped != before.ConnectionsDropped:
			err = fmt.Errorf("the session was reset by the reload: before %+v, after %+v", before, after)
		case props2["MainPID"] != pid || props2["NRestarts"] != "0" || props2["ActiveState"] != "active":
			err = fmt.Errorf("the daemon was restarted by the reload: MainPID %s -> %s, NRestarts %s, %s",
				pid, props2["MainPID"], props2["NRestarts"], props2["ActiveState"])
		}
	}
	c.result("reload", err, fmt.Sprintf("systemctl reload: %s imported, session kept (established %d, dropped %d), MainPID %s",
		added, after.ConnectionsEstablished, after.ConnectionsDropped, pid))

	// The watchdog kills a hung loop (the test-hooks build), and the
	// restart keeps the imports (watchdog.go). The daemon runs that build
	// from here on.
	c.watchdog()

	// A config that does not load: Restart=on-failure restarts it, then
	// the start limit (StartLimitBurst=5 starts within 300 s, counting
	// this restart) stops it: systemd logs "Start request repeated too
	// quickly" and the unit stays failed (systemd 252 keeps
	// Result=exit-code, the last run's). reset-failed first clears the
	// start counter and NRestarts of the boot's start and the watchdog
	// check's two, so that this check counts its own restarts only.
	if _, err := run("systemctl", "reset-failed", "ovnbgp"); err != nil {
		c.result("start-limit", err, "")
	}
	const limitLine = "ovnbgp.service: Start request repeated too quickly."
	err = os.WriteFile("/etc/ovnbgp/config.yaml", []byte("node: {name: node1}\nbgp: {asn: 64512}\n"), 0o600)
	if err == nil {
		_, _ = run("systemctl", "restart", "ovnbgp") // fails: the start job does
		err = waitFor(3*time.Minute, func() error {
			out, e := run("journalctl", "-b", "--no-pager", "-o", "cat", "-u", "ovnbgp")
			if e == nil && !strings.Contains(out, limitLine) {
				e = fmt.Errorf("no %q in ovnbgp.service's journal", limitLine)
			}
			return e
		})
	}
	if err == nil {
		props2, err = unitProps("ovnbgp")
	}
	if err == nil {
		var n int
		n, err = strconv.Atoi(props2["NRestarts"])
		switch {
		case err != nil:
		case props2["ActiveState"] != "failed":
			err = fmt.Errorf("after the start limit ovnbgp.service is %s/%s, want failed", props2["ActiveState"], props2["SubState"])
		case n < 3:
			err = fmt.Errorf("NRestarts %d: the start limit came before 3 automatic restarts", n)
		}
	}
	c.result("start-limit", err, fmt.Sprintf("bad config: %q, then %s after %s automatic restarts",
		limitLine, props2["ActiveState"], props2["NRestarts"]))
}

// reloadWithRule accepts the second prefix too and reloads.
func reloadWithRule() error {
	b, err := os.ReadFile("/etc/ovnbgp/config.yaml")
	if err != nil {
		return err
	}
	old := "accept: [{prefix: " + learned + "}]"
	if !bytes.Contains(b, []byte(old)) {
		return fmt.Errorf("/etc/ovnbgp/config.yaml has no %q", old)
	}
	b = bytes.Replace(b, []byte(old), []byte("accept: [{prefix: "+learned+"}, {prefix: "+added+"}]"), 1)
	if err := os.WriteFile("/etc/ovnbgp/config.yaml", b, 0o600); err != nil {
		return err
	}
	_, err = run("systemctl", "reload", "ovnbgp")
	return err
}

// md5NotFound reads the tor namespace's count of TCP segments dropped for
// lacking an expected MD5 signature.
func md5NotFound() (int, error) {
	out, err := run("ip", "netns", "exec", "tor", "nstat", "-a", "-s", "-z", "TcpExtTCPMD5NotFound")
	if err != nil {
		return 0, err
	}
	for _, l := range lines(out, nil) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "TcpExtTCPMD5NotFound" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("nstat shows no TcpExtTCPMD5NotFound: %q", out)
}

// frrNeighbor is FRR's view of the session with ovnbgp.
type frrNeighbor struct {
	State                  string `json:"bgpState"`
	ConnectionsEstablished int    `json:"connectionsEstablished"`
	ConnectionsDropped     int    `json:"connectionsDropped"`
}

func neighbor() (frrNeighbor, error) {
	out, err := run("vtysh", "--vty_socket", vty, "-c", "show bgp neighbors "+nodeIP+" json")
	if err != nil {
		return frrNeighbor{}, err
	}
	var m map[string]frrNeighbor
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return frrNeighbor{}, fmt.Errorf("show bgp neighbors: %w: %s", err, out)
	}
	n, ok := m[nodeIP]
	if !ok {
		return n, fmt.Errorf("FRR has no neighbor %s: %s", nodeIP, out)
	}
	return n, nil
}

func frrHasPath(prefix, from string) error {
	out, err := run("vtysh", "--vty_socket", vty, "-c", "show bgp ipv4 unicast "+prefix+" json")
	if err != nil {
		return err
	}
	var r struct {
		Paths []struct {
			Peer struct {
				PeerID string `json:"peerId"`
			} `json:"peer"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return fmt.Errorf("show bgp ipv4 unicast %s: %w: %s", prefix, err, out)
	}
	for _, p := range r.Paths {
		if p.Peer.PeerID == from {
			return nil
		}
	}
	return fmt.Errorf("FRR has no path for %s from %s: %s", prefix, from, out)
}

// kernelRoute returns the route to prefix in table 100 with protocol
// "ovnbgp" (200, named by /etc/iproute2/rt_protos.d/ovnbgp.conf).
func kernelRoute(prefix string) (string, error) {
	out, err := run("ip", "route", "show", "table", "100", prefix)
	if err != nil {
		return "", err
	}
	out = strings.TrimSpace(out)
	if !strings.Contains(out, "proto ovnbgp") || !strings.Contains(out, "via 192.0.2.1") {
		return out, fmt.Errorf("no %s via 192.0.2.1 proto ovnbgp in table 100: %q (table: %q)", prefix, out, must(run("ip", "route", "show", "table", "100")))
	}
	return out, nil
}

func unitProps(unit string) (map[string]string, error) {
	out, err := run("systemctl", "show", unit, "-p", "Type,ActiveState,SubState,Result,MainPID,NRestarts,StatusText,WatchdogUSec")
	p := map[string]string{}
	for _, l := range lines(out, err) {
		k, v, _ := strings.Cut(l, "=")
		p[k] = v
	}
	return p, err
}

// waitFor retries f every 500 ms until it succeeds or timeout passes, and
// returns its last error then.
func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func run(name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func must(s string, _ error) string { return s }

func lines(s string, err error) []string {
	if err != nil {
		return []string{err.Error()}
	}
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}
