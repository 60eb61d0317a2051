package bench

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// op is what one change operation did.
type op struct {
	// start is when the operation began: the change is issued.
	start time.Time
	// commit is when the change was committed to the contender's source of
	// truth: the NB transaction's reply (ovnbgp), vtysh's return (bgpd has
	// the `network` statements), the new frr.conf on disk (reload: the
	// reload that follows is how FRR gets the change).
	commit time.Time
	// end is when the command returned.
	end time.Time
	// cpu is the CPU time of the command's processes (vtysh, frr-reload.py
	// and its vtysh children); 0 when the change was made in-process.
	cpu time.Duration
}

// contender is one way of getting prefixes to the ToR.
type contender interface {
	// announce advertises ps, all in one operation (one NB transaction, one
	// vtysh invocation, one frr.conf rewrite and reload).
	announce(ps []netip.Prefix) (op, error)
	// withdraw stops advertising ps, in one operation.
	withdraw(ps []netip.Prefix) (op, error)
	// daemons are the node-side processes that do the work, by name.
	daemons() map[string]int
	// alive returns an error when one of them died.
	alive() error
}

// The contenders. id names the sub-benchmark (-bench 'Single/frr-vtysh');
// name is the column of the table.
var contenders = []struct{ id, name string }{
	{"ovnbgp", ovnbgpName},
	{"frr-vtysh", vtyshName},
	{"frr-reload", reloadName},
	{"bird-configure", birdConfName},
}

// world is one contender's lab: the ToR and the contender in the node
// namespace.
type world struct {
	name string
	c    contender
	tor  tor
	// base is how many prefixes the ToR has from the node before the
	// benchmark adds any (ovnbgp: node1's default network and blue UDN).
	base int
	// warm is the prefix of the warm-up (warmUpPrefix unless set).
	warm netip.Prefix
	// l is the world's lab.
	l *lab.Lab
}

// newWorld builds a lab (namespaces, ToR) and starts the contender in the
// node namespace, and returns when the ToR has the contender's session and
// its initial routes.
func newWorld(b testing.TB, id, name string) *world {
	b.Helper()
	if id == "frr-reload" {
		// Check before building anything. Under CI=true a missing tool
		// fails the run: a table without the column would pass unnoticed.
		skip := b.Skipf
		if lab.InCI() {
			skip = b.Fatalf
		}
		if _, err := os.Stat(frrReloadScript); err != nil {
			skip("FRR(reload) needs %s (Debian's frr-pythontools package; scripts/test-deps.sh installs it): %v", frrReloadScript, err)
		}
		if _, err := os.Stat(python3); err != nil {
			skip("FRR(reload) needs %s to run frr-reload.py: %v", python3, err)
		}
	}
	l := lab.New(b)
	w := &world{name: name, l: l}
	tf := l.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: nodeASN, Passive: true}}})
	w.tor = tor{frr: tf, from: lab.NodeIPv4}
	const sessionTimeout = 60 * time.Second
	switch id {
	case "ovnbgp", "ovnbgp-vip", "ovnbgp-wl":
		nb := l.StartNB()
		nb.PopulateOVNK()
		var d *daemon
		initial := []netip.Prefix{lab.DefaultNode1.Subnet, lab.BlueNode1.Subnet}
		switch id {
		case "ovnbgp":
			d = startOvnbgp(b, l, nb)
			w.c = &ovnbgpContender{nb: nb, d: d}
		case "ovnbgp-vip":
			d = startOvnbgpConfig(b, l, nb, lab.DaemonConfig{Peers: []lab.Peer{lab.DefaultTor()}, Advertise: advertiseRules}, "")
			w.c = &vipContender{nb: &advNB{sock: nb.Sock, nats: map[netip.Addr]string{}}, d: d}
			w.warm = host(vipAddr(maxAdvAddrs - 1))
		default:
			// Issue 19: the pods' network, then the daemon advertising
			// their /32s (workloadIP) and the three subnets.
			if err := nb.Add(wlNet); err != nil {
				b.Fatal(err)
			}
			d = startOvnbgpConfig(b, l, nb, lab.DaemonConfig{Peers: []lab.Peer{lab.DefaultTor()}, Advertise: workloadRules}, "")
			w.c = &wlContender{nb: &wlNB{sock: nb.Sock, ports: map[netip.Addr]string{}}, d: d}
			w.warm = host(wlPodAddr(maxWLPods - 1))
			initial = append(initial, wlNet.Subnet)
		}
		w.base = len(initial)
		if _, err := waitFor(time.Now(), 50*time.Millisecond, sessionTimeout, d.exited, until(func() (bool, error) {
			for _, p := range initial {
				if ok, err := w.tor.bestFromNode(p); !ok || err != nil {
					return false, err
				}
			}
			return true, nil
		})); err != nil {
			b.Fatalf("ovnbgp: node1's subnets %v never reached the ToR: %v", initial, err)
		}
	case "frr-vtysh", "frr-reload":
		n := startNodeFRR(b, l)
		if id == "frr-vtysh" {
			w.c = &vtyshContender{n: n}
		} else {
			w.c = &reloadContender{n: n, set: map[netip.Prefix]bool{}}
		}
		if _, err := waitFor(time.Now(), 50*time.Millisecond, sessionTimeout, n.alive, until(func() (bool, error) {
			return tf.Established(lab.NodeIPv4) == nil, nil
		})); err != nil {
			b.Fatalf("%s: no session between the node's FRR and the ToR: %v", name, err)
		}
		if rc, ok := w.c.(*reloadContender); ok {
			rc.warmUp(b)
		}
	case "bird-configure":
		n := startNodeBIRD(b, l)
		w.c = n
		if _, err := waitFor(time.Now(), 50*time.Millisecond, sessionTimeout, n.alive, until(func() (bool, error) {
			return tf.Established(lab.NodeIPv4) == nil, nil
		})); err != nil {
			b.Fatalf("%s: no session between the node's BIRD and the ToR: %v", name, err)
		}
	default:
		b.Fatalf("unknown contender %q", id)
	}
	if got, err := w.tor.bestCount(); err != nil || got != w.base {
		b.Fatalf("%s: the ToR has %d best paths from the node (err %v), want %d", name, got, err, w.base)
	}
	w.warmUp(b)
	return w
}

// warmUpPrefix is announced and withdrawn once before anything is measured.
var warmUpPrefix = netip.MustParsePrefix("10.255.255.0/24")

// warmUp announces and withdraws one prefix, unmeasured. Right after a
// session comes up FRR holds its first UPDATEs back for about a second
// (the update group's coalesce timer); the first vtysh, ovn-nbctl or
// frr-reload.py run also reads its files from disk. Neither is what the
// benchmarks are about.
func (w *world) warmUp(b testing.TB) {
	b.Helper()
	warm := w.warm
	if !warm.IsValid() {
		warm = warmUpPrefix
	}
	for _, add := range []bool{true, false} {
		do := w.c.withdraw
		if add {
			do = w.c.announce
		}
		o, err := do([]netip.Prefix{warm})
		if err == nil {
			_, err = waitFor(o.start, 10*time.Millisecond, singleTimeout, w.c.alive, until(func() (bool, error) {
				ok, err := w.tor.bestFromNode(warm)
				return ok == add, err
			}))
		}
		if err != nil {
			b.Fatalf("%s: warm-up (add %v) of %s: %v", w.name, add, warm, err)
		}
	}
}

// ovnbgpContender: ovnbgp reads the change from OVN NB, as OVN-Kubernetes
// writes it: one layer3 primary UDN node switch per prefix, with
// other_config:subnet and the k8s.ovn.org external IDs, all in one OVSDB
// transaction (OVN-Kubernetes writes with libovsdb transactions too). The
// transaction's reply is the commit instant, within the ~1 ms the
// transaction takes; ovn-nbctl commits somewhere inside its own ~15 ms run,
// so its return would not say when the change happened.
type ovnbgpContender struct {
	nb *lab.NB
	d  *daemon
}

func (c *ovnbgpContender) announce(ps []netip.Prefix) (op, error) {
	return c.transact(ps, insertSwitch)
}

func (c *ovnbgpContender) withdraw(ps []netip.Prefix) (op, error) {
	return c.transact(ps, deleteSwitch)
}

func (c *ovnbgpContender) transact(ps []netip.Prefix, row func(lab.Network) any) (op, error) {
	ops := make([]any, len(ps))
	for i, p := range ps {
		ops[i] = row(udn(p))
	}
	o := op{start: time.Now()}
	err := nbTransact(c.nb.Sock, ops)
	o.end = time.Now()
	o.commit = o.end
	return o, err
}

func (c *ovnbgpContender) daemons() map[string]int { return map[string]int{"ovnbgp": c.d.pid()} }
func (c *ovnbgpContender) alive() error            { return c.d.exited() }

// vtyshContender: the fastest way to change a running FRR: one vtysh
// invocation adding (or removing) `network` statements to bgpd's running
// config, no file, no reload.
type vtyshContender struct{ n *nodeFRR }

func (c *vtyshContender) announce(ps []netip.Prefix) (op, error) { return c.configure(ps, "") }
func (c *vtyshContender) withdraw(ps []netip.Prefix) (op, error) { return c.configure(ps, "no ") }

func (c *vtyshContender) configure(ps []netip.Prefix, no string) (op, error) {
	args := []string{"-c", "configure terminal", "-c", "router bgp " + strconv.Itoa(nodeASN), "-c", "address-family ipv4 unicast"}
	for _, p := range ps {
		args = append(args, "-c", no+"network "+p.String())
	}
	o := op{start: time.Now()}
	out, cpu, err := c.n.vtysh(args...)
	o.end = time.Now()
	o.commit, o.cpu = o.end, cpu
	if err == nil && strings.TrimSpace(out) != "" {
		// vtysh -c says what went wrong on stdout, sometimes with status 0.
		err = fmt.Errorf("vtysh: %.500s", out)
	}
	return o, err
}

func (c *vtyshContender) daemons() map[string]int {
	return map[string]int{"bgpd": c.n.pid("bgpd"), "zebra": c.n.pid("zebra")}
}
func (c *vtyshContender) alive() error { return c.n.alive() }

// python3 runs frr-reload.py (Debian's, the interpreter its #! names).
const python3 = "/usr/bin/python3"

// reloadContender models frr-k8s and MetalLB's FRR mode: render the whole
// frr.conf from the desired state, then run what frr-k8s's frr-reloader.sh
// runs on it, `frr-reload.py --test` and `frr-reload.py --reload
// --overwrite`. Not modelled (each only makes FRR slower): their 3 s
// debounce before a reload, and the per-prefix prefix-lists and route-maps
// they render.
type reloadContender struct {
	n   *nodeFRR
	set map[netip.Prefix]bool
}

func (c *reloadContender) announce(ps []netip.Prefix) (op, error) {
	for _, p := range ps {
		c.set[p] = true
	}
	return c.reload()
}

func (c *reloadContender) withdraw(ps []netip.Prefix) (op, error) {
	for _, p := range ps {
		delete(c.set, p)
	}
	return c.reload()
}

// confPath is the rendered config, named as frr-k8s names it.
func (c *reloadContender) confPath() string { return filepath.Join(c.n.Dir, "frr.conf.load") }

// render writes the full frr.conf for the current set: the node speaker's
// startup config with one `network` line per prefix.
func (c *reloadContender) render() error {
	cfg := c.n.Config
	cfg.Originate = make([]netip.Prefix, 0, len(c.set))
	for p := range c.set {
		cfg.Originate = append(cfg.Originate, p)
	}
	lab.SortPrefixes(cfg.Originate)
	text, err := cfg.Render(c.n.Hostname, c.n.Dir)
	if err != nil {
		return err
	}
	return os.WriteFile(c.confPath(), []byte(text), 0o644)
}

func (c *reloadContender) frrReload(args ...string) (string, time.Duration, error) {
	return runTool(python3, append([]string{frrReloadScript,
		"--bindir", filepath.Dir(vtyshBin), "--confdir", c.n.Dir, "--rundir", filepath.Join(c.n.Dir, "run"),
		"--vty_socket", c.n.Dir, "--stdout"}, append(args, c.confPath())...)...)
}

func (c *reloadContender) reload() (op, error) {
	o := op{start: time.Now()}
	err := c.render()
	o.commit = time.Now()
	if err == nil {
		var cpu time.Duration
		_, cpu, err = c.frrReload("--test")
		o.cpu += cpu
		if err == nil {
			_, cpu, err = c.frrReload("--reload", "--overwrite")
			o.cpu += cpu
		}
	}
	o.end = time.Now()
	return o, err
}

// warmUp reloads the config once with no prefixes: the first reload also
// rewrites lines the startup config lacked (FRR's defaults), which the
// measured reloads must not pay for. It logs what a reload of the same
// config would still change: only the `network` lines must differ from
// then on.
func (c *reloadContender) warmUp(b testing.TB) {
	b.Helper()
	if _, err := c.reload(); err != nil {
		b.Fatalf("FRR(reload) warm-up: %v", err)
	}
	out, _, err := c.frrReload("--test")
	if err != nil {
		b.Fatalf("FRR(reload): frr-reload.py --test after the warm-up: %v", err)
	}
	if strings.Contains(out, "Lines To Add") || strings.Contains(out, "Lines To Delete") {
		b.Logf("FRR(reload): frr-reload.py --test of an unchanged config still shows a delta (every reload pays for it):\n%s", out)
	}
}

func (c *reloadContender) daemons() map[string]int {
	return map[string]int{"bgpd": c.n.pid("bgpd"), "zebra": c.n.pid("zebra")}
}
func (c *reloadContender) alive() error { return c.n.alive() }
