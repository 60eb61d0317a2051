package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// This file is the harness of the route import tests: a second subnet on
// the node-tor link for a second peer (ExaBGP), gateway routers whose
// external port holds the link, NB static routes and kernel tables read
// back, and the daemon's import views.

// The second subnet of the node-tor link (AddImportLink): the node and
// ExaBGP, so that two peers offer next hops on-link through veth-node.
var (
	NodeExtIPv4 = netip.MustParsePrefix("203.0.113.1/24")
	ExaIPv4     = netip.MustParseAddr("203.0.113.3")
	NodeExtIPv6 = netip.MustParsePrefix("2001:db8:200::1/64")
	ExaIPv6     = netip.MustParseAddr("2001:db8:200::3")
)

// AddImportLink adds the second subnet of the node-tor link: NodeExtIPv4
// and NodeExtIPv6 on the node's veth, ExaIPv4 and ExaIPv6 on the tor's.
func (l *Lab) AddImportLink() {
	t := l.T
	t.Helper()
	steps := [][]string{
		{"ip", "-n", l.Node, "addr", "add", NodeExtIPv4.String(), "dev", NodeLink},
		{"ip", "-n", l.Node, "addr", "add", NodeExtIPv6.String(), "dev", NodeLink, "nodad"},
		{"ip", "-n", l.Tor, "addr", "add", netip.PrefixFrom(ExaIPv4, NodeExtIPv4.Bits()).String(), "dev", TorLink},
		{"ip", "-n", l.Tor, "addr", "add", netip.PrefixFrom(ExaIPv6, NodeExtIPv6.Bits()).String(), "dev", TorLink, "nodad"},
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
}

// ImportLinkNetworks are the networks of a gateway router's external port
// that put both peers' next hops on-link for OVN: the tor link (both
// families) and the second subnet of AddImportLink.
func ImportLinkNetworks() []netip.Prefix {
	return []netip.Prefix{netip.PrefixFrom(NodeIPv4, 31), netip.PrefixFrom(NodeIPv6, 127), NodeExtIPv4, NodeExtIPv6}
}

// GatewayRouter creates (or completes) node's gateway router GR_<node> and
// gives its external port rtoe-GR_<node> exactly the given networks
// (addresses with their prefix length, as OVN writes them), so that next
// hops inside them are on-link for OVN.
func (nb *NB) GatewayRouter(node string, networks ...netip.Prefix) {
	nb.t.Helper()
	gr, port := "GR_"+node, "rtoe-GR_"+node
	nb.MustNBCtl("--may-exist", "lr-add", gr, "--", "set", "logical_router", gr, "options:chassis=chassis-"+node)
	nets := make([]string, len(networks))
	for i, n := range networks {
		nets[i] = `"` + n.String() + `"`
	}
	if _, err := nb.NBCtl("get", "logical_router_port", port, "_uuid"); err == nil {
		nb.MustNBCtl("set", "logical_router_port", port, "networks=["+strings.Join(nets, ",")+"]")
		return
	}
	args := []string{"lrp-add", gr, port, "02:42:ac:12:00:02"}
	for _, n := range networks {
		args = append(args, n.String())
	}
	nb.MustNBCtl(args...)
}

// StaticRoute is one Logical_Router_Static_Route row.
type StaticRoute struct {
	UUID       string
	Prefix     string // ip_prefix as stored
	NextHop    string
	OutputPort string
	ExternalID map[string]string
}

// StaticRoutes lists the static routes router references, sorted by
// prefix, then next hop.
func (nb *NB) StaticRoutes(router string) ([]StaticRoute, error) {
	out, err := nb.NBCtl("--format=json", "--columns=_uuid,ip_prefix,nexthop,output_port,external_ids",
		"find", "Logical_Router_Static_Route")
	if err != nil {
		return nil, err
	}
	all, err := parseStaticRoutes(out)
	if err != nil {
		return nil, err
	}
	refs, err := nb.NBCtl("get", "logical_router", router, "static_routes")
	if err != nil {
		return nil, err
	}
	var res []StaticRoute
	for _, r := range all {
		if strings.Contains(refs, r.UUID) {
			res = append(res, r)
		}
	}
	sort.Slice(res, func(i, j int) bool {
		if res[i].Prefix != res[j].Prefix {
			return res[i].Prefix < res[j].Prefix
		}
		return res[i].NextHop < res[j].NextHop
	})
	return res, nil
}

// parseStaticRoutes decodes `ovn-nbctl --format=json find` of the columns
// _uuid, ip_prefix, nexthop, output_port, external_ids.
func parseStaticRoutes(text string) ([]StaticRoute, error) {
	var tbl struct {
		Data [][]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(text), &tbl); err != nil {
		return nil, fmt.Errorf("ovn-nbctl json: %w: %.300s", err, text)
	}
	var res []StaticRoute
	for _, row := range tbl.Data {
		if len(row) != 5 {
			return nil, fmt.Errorf("ovn-nbctl json: row of %d columns, want 5", len(row))
		}
		var uuid [2]string
		var r StaticRoute
		if err := json.Unmarshal(row[0], &uuid); err != nil {
			return nil, err
		}
		r.UUID = uuid[1]
		_ = json.Unmarshal(row[1], &r.Prefix)
		_ = json.Unmarshal(row[2], &r.NextHop)
		_ = json.Unmarshal(row[3], &r.OutputPort) // ["set",[]] when empty: stays ""
		var m []json.RawMessage
		r.ExternalID = map[string]string{}
		if json.Unmarshal(row[4], &m) == nil && len(m) == 2 {
			var pairs [][2]string
			if err := json.Unmarshal(m[1], &pairs); err != nil {
				return nil, err
			}
			for _, p := range pairs {
				r.ExternalID[p[0]] = p[1]
			}
		}
		res = append(res, r)
	}
	return res, nil
}

// RowJSON is `ovn-nbctl --format=json list TABLE UUID`: every column of
// one row, byte for byte as ovsdb-server keeps it.
func (nb *NB) RowJSON(table, uuid string) (string, error) {
	return nb.NBCtl("--format=json", "list", table, uuid)
}

// KernelRoutes is `ip -d route show table TABLE [proto PROTO]` in
// namespace ns (proto "" = every protocol), one line per route.
func (l *Lab) KernelRoutes(ns string, table int, proto string) ([]string, error) {
	args := []string{"-n", ns, "-d", "route", "show", "table", fmt.Sprint(table)}
	if proto != "" {
		args = append(args, "proto", proto)
	}
	// a table no route of the family was ever put in "does not exist"
	show := func(fam string) (string, error) {
		out, err := run("ip", append([]string{fam}, args...)...)
		if err != nil && strings.Contains(out, "FIB table does not exist") {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("ip %s %s: %v: %s", fam, strings.Join(args, " "), err, out)
		}
		return out, nil
	}
	out4, err := show("-4")
	if err != nil {
		return nil, err
	}
	out6, err := show("-6")
	if err != nil {
		return nil, err
	}
	// a multipath route spans several lines: its next hops start with
	// whitespace; join them to the route's line
	var res []string
	for _, line := range strings.Split(out4+"\n"+out6, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case (line[0] == ' ' || line[0] == '\t') && len(res) > 0:
			res[len(res)-1] += " " + strings.TrimSpace(line)
		default:
			res = append(res, strings.TrimSpace(line))
		}
	}
	return res, nil
}

// NBMonitor records `ovsdb-client monitor` of one NB table: every insert,
// delete and modify, as it happens.
type NBMonitor struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

// Monitor starts `ovsdb-client --format=csv monitor` of table's columns.
// It waits until the initial rows are printed. Stop it with Stop; it is
// also ended at the end of the test.
func (nb *NB) Monitor(table string, columns ...string) *NBMonitor {
	t := nb.t
	t.Helper()
	m := &NBMonitor{out: &lockedBuffer{}, done: make(chan struct{})}
	args := []string{"--format=csv", "--timestamp", "monitor", nb.Endpoint(), "OVN_Northbound", table}
	if len(columns) > 0 {
		args = append(args, strings.Join(columns, ","))
	}
	m.cmd = exec.Command("ovsdb-client", args...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("ovsdb-client monitor: %v", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() { m.Stop() })
	Eventually(t, 10*time.Second, 20*time.Millisecond, "ovsdb-client monitor started", func() error {
		if !strings.Contains(m.out.String(), "action") {
			return fmt.Errorf("no header yet: %q", m.out.String())
		}
		return nil
	})
	return m
}

// Output is what the monitor printed so far.
func (m *NBMonitor) Output() string { return m.out.String() }

// Stop ends the monitor (by PID) and returns everything it printed.
func (m *NBMonitor) Stop() string {
	select {
	case <-m.done:
	default:
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	}
	return m.out.String()
}

// Config runs configuration commands on bgpd with vtysh: `configure
// terminal`, then each command in turn (their context carries over).
func (f *FRR) Config(cmds ...string) error { return f.ConfigDaemon("bgpd", cmds...) }

// ConfigDaemon runs configuration commands on one of FRR's daemons (bgpd,
// bfdd) as Config does.
func (f *FRR) ConfigDaemon(daemon string, cmds ...string) error {
	args := []string{"--vty_socket", f.Dir, "-d", daemon, "-c", "configure terminal"}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := run("vtysh", args...)
	if err != nil || strings.Contains(out, "% ") {
		return fmt.Errorf("vtysh %q: %v: %s", cmds, err, out)
	}
	return nil
}

// Learned returns `ovnbgp routes learned -o json` (with --rejected: only
// the paths no import rule accepts).
func (d *Daemon) Learned(rejected bool) ([]model.LearnedPath, error) {
	args := []string{"routes", "learned", "-o", "json"}
	if rejected {
		args = append(args, "--rejected")
	}
	var res []model.LearnedPath
	return res, d.cliJSON(&res, args...)
}

// Imported returns `ovnbgp routes imported -o json`.
func (d *Daemon) Imported() (api.Imported, error) {
	var res api.Imported
	return res, d.cliJSON(&res, "routes", "imported", "-o", "json")
}

// Explain returns `ovnbgp explain PREFIX -o json`.
func (d *Daemon) Explain(prefix string) (api.Explanation, error) {
	var res api.Explanation
	return res, d.cliJSON(&res, "explain", prefix, "-o", "json")
}

// Plan returns `ovnbgp plan -o json [args...]` (e.g. --out F, --config NEW).
func (d *Daemon) Plan(args ...string) (api.PlanResponse, error) {
	var res api.PlanResponse
	return res, d.cliJSON(&res, append([]string{"plan", "-o", "json"}, args...)...)
}

// ExaConfig is an ExaBGP speaker in the tor namespace.
type ExaConfig struct {
	// Local is ExaBGP's address (ExaIPv4), Peer the node's (the address of
	// NodeExtIPv4). ExaBGP dials; the daemon must listen (passive peer).
	Local, Peer netip.Addr
	// ASN is ExaBGP's AS (65002), PeerASN the daemon's (65010).
	ASN, PeerASN uint32
	// IPv6 adds a second session, IPv6 unicast from Local6 (ExaIPv6) to
	// Peer6 (the address of NodeExtIPv6): ovnbgp takes no IPv6 routes
	// over an IPv4 session. Commands without a neighbor selector go to
	// every session of the route's family.
	IPv6          bool
	Local6, Peer6 netip.Addr
	// GracefulRestart advertises the capability (restart time 120 s).
	GracefulRestart bool
	// NoEndOfRIB sets `manual-eor true`: ExaBGP then sends no End-of-RIB
	// (it sends one per family after its routes by default), as many
	// speakers without graceful restart do.
	NoEndOfRIB bool
}

// ExaBGP is ExaBGP 4.2 running in the tor namespace, with an API process
// that passes every line written to its control FIFO to ExaBGP: Send
// announces and withdraws at any time, including raw and malformed
// attributes (`attribute [0xTYPE 0xFLAGS 0xHEX]`).
type ExaBGP struct {
	t    testing.TB
	Dir  string
	fifo string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
}

// StartExaBGP starts ExaBGP in the tor namespace. It is stopped (by PID) at
// the end of the test; on failure its log is printed.
func (l *Lab) StartExaBGP(cfg ExaConfig) *ExaBGP {
	t := l.T
	t.Helper()
	if _, err := exec.LookPath("exabgp"); err != nil {
		msg := "exabgp missing (run scripts/test-deps.sh as root)"
		prereq.Missing(t, msg)
	}
	if !cfg.Local.IsValid() {
		cfg.Local = ExaIPv4
	}
	if !cfg.Peer.IsValid() {
		cfg.Peer = NodeExtIPv4.Addr()
	}
	if !cfg.Local6.IsValid() {
		cfg.Local6 = ExaIPv6
	}
	if !cfg.Peer6.IsValid() {
		cfg.Peer6 = NodeExtIPv6.Addr()
	}
	if cfg.ASN == 0 {
		cfg.ASN = 65002
	}
	if cfg.PeerASN == 0 {
		cfg.PeerASN = 65010
	}
	dir := l.Mkdir("exabgp")
	e := &ExaBGP{t: t, Dir: dir, fifo: filepath.Join(dir, "ctl.fifo"), done: make(chan struct{})}
	if err := syscall.Mkfifo(e.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The API process: every line of the FIFO to ExaBGP, forever (ExaBGP
	// withdraws nothing while it lives). The FIFO is reopened after each
	// writer closes it.
	ctl := fmt.Sprintf(`import sys
while True:
    with open(%q) as f:
        for line in f:
            sys.stdout.write(line)
            sys.stdout.flush()
`, e.fifo)
	gr := ""
	if cfg.GracefulRestart {
		gr = "  capability { graceful-restart 120; }\n"
	}
	if cfg.NoEndOfRIB {
		gr += "  manual-eor true;\n"
	}
	neighbor := func(peer, local netip.Addr, fam string) string {
		return fmt.Sprintf(`neighbor %s {
  router-id %s;
  local-address %s;
  local-as %d;
  peer-as %d;
  hold-time 9;
  family { %s unicast; }
%s  api { processes [ ctl ]; }
}
`, peer, TorIPv4, local, cfg.ASN, cfg.PeerASN, fam, gr)
	}
	conf := fmt.Sprintf("process ctl {\n  run /usr/bin/python3 %s;\n  encoder text;\n}\n", filepath.Join(dir, "ctl.py")) +
		neighbor(cfg.Peer, cfg.Local, "ipv4")
	if cfg.IPv6 {
		conf += neighbor(cfg.Peer6, cfg.Local6, "ipv6")
	}
	for name, text := range map[string]string{"ctl.py": ctl, "exabgp.conf": conf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(filepath.Join(dir, "exabgp.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// LAB.md pitfall 13: root, no privilege drop, no ack (an unread ack
	// pipe blocks), no CLI pipes, no listener (it dials).
	e.cmd = exec.Command("ip", "netns", "exec", l.Tor, "env",
		"exabgp.daemon.user=root", "exabgp.daemon.drop=false", "exabgp.daemon.daemonize=false",
		"exabgp.api.ack=false", "exabgp.api.cli=false", "exabgp.tcp.bind=",
		"exabgp.log.level=INFO", "exabgp.log.destination="+filepath.Join(dir, "exabgp.log"),
		"exabgp.daemon.pid="+filepath.Join(dir, "exabgp.pid"),
		"exabgp", filepath.Join(dir, "exabgp.conf"))
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start exabgp: %v", err)
	}
	go func() { _ = e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- exabgp config\n%s--- exabgp log (last 40 lines)\n%s\n%s", conf,
				Tail(filepath.Join(dir, "exabgp.log"), 40), Tail(filepath.Join(dir, "exabgp.out"), 20))
		}
		e.Stop()
	})
	return e
}

// Send passes commands to ExaBGP's API, e.g. "announce route 10.99.1.0/24
// next-hop 203.0.113.3" or "withdraw route 10.99.1.0/24", in order.
func (e *ExaBGP) Send(cmds ...string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var f *os.File
	// O_NONBLOCK: opening fails (ENXIO) instead of blocking while the API
	// process has not opened the FIFO yet.
	_, err := Poll(15*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-e.done:
			return errors.New("exabgp exited")
		default:
		}
		var err error
		f, err = os.OpenFile(e.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err
	})
	if err != nil {
		return fmt.Errorf("exabgp control fifo: %w", err)
	}
	defer f.Close()
	_, err = f.WriteString(strings.Join(cmds, "\n") + "\n")
	return err
}

// MustSend is Send that fails the test on error.
func (e *ExaBGP) MustSend(cmds ...string) {
	e.t.Helper()
	if err := e.Send(cmds...); err != nil {
		e.t.Fatal(err)
	}
}

// Stop ends ExaBGP by PID (SIGTERM, SIGKILL after 5 s).
func (e *ExaBGP) Stop() {
	select {
	case <-e.done:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

// KernelWeights reads `ip -j route show table TABLE PREFIX` in namespace
// ns: each next hop's gateway and weight (a single next hop weighs 1), nil
// if the table has no route there (issue 21).
func (l *Lab) KernelWeights(ns string, table int, prefix netip.Prefix) (map[string]int, error) {
	fam := "-4"
	if prefix.Addr().Is6() {
		fam = "-6"
	}
	args := []string{"-n", ns, "-j", fam, "route", "show", "table", fmt.Sprint(table), prefix.String()}
	out, err := run("ip", args...)
	if err != nil {
		if strings.Contains(out, "FIB table does not exist") {
			return nil, nil
		}
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	var rs []struct {
		Gateway  string `json:"gateway"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
			Weight  int    `json:"weight"`
		} `json:"nexthops"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	if len(rs) == 0 {
		return nil, nil
	}
	w := map[string]int{}
	if rs[0].Gateway != "" {
		w[rs[0].Gateway] = 1
	}
	for _, h := range rs[0].Nexthops {
		w[h.Gateway] = h.Weight
	}
	return w, nil
}
