package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The peer matrix (issue 17 item 3): imports that follow the peer, proven
// against real BGP daemons. Each peer kind gets its own lab (node and tor
// namespaces, NB, the peer in the tor namespace, ovnbgp from the race-built
// binary with graceful restart on and deferralTime at its default 120 s, so
// that any delete held until the deferral shows as a failure) with an IPv4
// and an IPv6 session, and an import rule into GR_node1 and kernel table
// 100. `ip monitor route` in the node namespace and an NB monitor of
// Logical_Router_Static_Route record every change from before ovnbgp's
// start; the cells below read those records:
//
//	withdraw-2s      the peer withdraws a route 2 s after ovnbgp starts: gone within 5 s
//	nexthop          the peer re-announces a route with another on-link next hop: the old one gone within 5 s
//	withdraw-60s     a withdraw a minute after the start: gone within 5 s
//	notification     the peer resets both sessions with a NOTIFICATION: imports deleted within 5 s
//	link-cut         the link drops everything (iptables), hold time 6 s: a peer that negotiated
//	                 graceful restart for the family keeps its routes (stale) until it is back;
//	                 from any other peer they are deleted within 5 s of the hold timer
//	gr-restart       (graceful restart peers) the peer's daemon is killed and starts again with
//	                 graceful restart, without one route: the others are never deleted, that one
//	                 goes at its End-of-RIB (within 5 s of the session being back)
//	ovnbgp-kill      ovnbgp SIGKILLed; the peer withdraws a route and adds one; ovnbgp restarted:
//	                 the withdrawn one gone within 5 s of the restart (of the session's return
//	                 for a peer that holds a reset session Idle: gobgpd), the new one added,
//	                 the others never deleted and re-added
//	bfd              (BFD peers) BFD on at both ends, the link cut: imports deleted within 5 s
//
// In every cell, a route that was not to change (the session did not end)
// must never be deleted and added again. The times (from the peer's
// command to the event in the kernel and in NB) are printed per peer,
// family and cell, with one summary line of the worst. OVNBGP_MATRIX=frr,bird
// runs a subset (a name also selects its -gr kind; frr-gr alone selects one),
// OVNBGP_MATRIX_CELLS=link-cut,bfd only those cells (to debug one).

const (
	mxTable = 100
	// mxBound is the generous bound on withdraw -> gone.
	mxBound = 5 * time.Second
	// mxHold is the hold time of every session (ovnbgp and the peer).
	mxHold = 6 * time.Second
	mxWait = 90 * time.Second // generous: the race build is slow
)

// The other on-link next hop of the next-hop change (on the tor's link,
// inside the second subnet of AddImportLink).
var mxAlt = [2]netip.Addr{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("2001:db8:200::5")}

// Each cell has its own prefixes (IPv4, IPv6), so that what a failed cell
// leaves behind does not disturb the next.
var (
	mxKeep     = mxPrefixes(10) // announced throughout: never to be deleted while the session lives
	mxW2s      = mxPrefixes(1)
	mxW60      = mxPrefixes(2)
	mxNH       = mxPrefixes(3)
	mxGRGone   = mxPrefixes(4) // not announced again after the peer's graceful restart
	mxKillGone = mxPrefixes(5) // withdrawn while ovnbgp is dead
	mxKillNew  = mxPrefixes(6) // added while ovnbgp is dead
)

func mxPrefixes(n int) [2]netip.Prefix {
	return [2]netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.99.%d.0/24", n)),
		netip.MustParsePrefix(fmt.Sprintf("2001:db8:99:%d::/64", n))}
}

var mxFamilies = [2]string{"ipv4", "ipv6"}

func fam(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// mxRoutes is what a peer announces: prefix -> next hop (the zero Addr:
// its own session address).
type mxRoutes map[netip.Prefix]netip.Addr

func (r mxRoutes) clone() mxRoutes {
	c := mxRoutes{}
	for p, nh := range r {
		c[p] = nh
	}
	return c
}

func (r mxRoutes) without(ps ...[2]netip.Prefix) mxRoutes {
	c := r.clone()
	for _, pp := range ps {
		delete(c, pp[0])
		delete(c, pp[1])
	}
	return c
}

func (r mxRoutes) with(ps ...[2]netip.Prefix) mxRoutes {
	c := r.clone()
	for _, pp := range ps {
		c[pp[0]], c[pp[1]] = netip.Addr{}, netip.Addr{}
	}
	return c
}

// mxPeer drives one peer daemon.
type mxPeer interface {
	// announce makes the peer announce exactly routes from now on.
	announce(routes mxRoutes) error
	// notify ends both sessions with a NOTIFICATION.
	notify() error
	// bfdOn turns BFD on for both sessions (BFD kinds).
	bfdOn() error
	// grRestart kills the peer's BGP daemon (no NOTIFICATION), calls
	// whileDown, and starts it again gracefully, announcing routes.
	grRestart(routes mxRoutes, whileDown func()) error
}

// mxKind is one kind of peer.
type mxKind struct {
	name string
	// gr: the peer lists both families in its graceful restart capability.
	gr bool
	// fbit: its OPEN sets the Forwarding State bit on a reconnect without a
	// restart of its own (otherwise RFC 4724 4.2 makes the receiver drop
	// the stale routes when the session is back, before the UPDATEs).
	fbit bool
	// eor: it sends End-of-RIB.
	eor bool
	// noBFD and noGR say why a cell does not apply ("" = it does).
	noBFD, noGR string
	// killHold: after ovnbgp's kill the peer holds the reset session Idle
	// this long before it accepts or dials again (gobgpd's idle hold
	// after a reset): the ovnbgp-kill cell measures the withdrawn route's
	// delete from the session's return, since until then fail static
	// rightly keeps the adopted route.
	killHold time.Duration
	start    func(w *mxWorld, routes mxRoutes) mxPeer
}

var mxKinds = []mxKind{
	{name: "frr", eor: false, start: startMxFRR(false),
		noGR: "FRR without `bgp graceful-restart` is no graceful restart peer (FRR 8.4's default is helper mode: no family in its capability)"},
	{name: "frr-gr", gr: true, fbit: true, eor: true, start: startMxFRR(true)},
	{name: "bird", eor: true, start: startMxBIRD(false),
		noGR: "BIRD without `graceful restart on` (its default, `aware`: the capability lists no family) is no graceful restart peer"},
	{name: "bird-gr", gr: true, fbit: false, eor: true, start: startMxBIRD(true)},
	{name: "gobgpd", eor: false, start: startMxGoBGP,
		noBFD:    "gobgpd 3.10 has no BFD (GoBGP has BFD from v4 on)",
		killHold: 30 * time.Second, // its idle-hold-time-after-reset; the TOML key did not shorten it here
		noGR:     "gobgpd runs without graceful restart here (gobgpd 3.10 sends no End-of-RIB to a peer without graceful restart: ovnbgp saw none)"},
	{name: "exabgp", eor: false, start: startMxExa,
		noBFD: "ExaBGP 4.2 has no BFD",
		noGR:  "ExaBGP runs without graceful restart and sends no End-of-RIB (manual-eor): it cannot restart gracefully"},
}

// selectMxKinds reads OVNBGP_MATRIX: "" (make test) or "all" = every kind, else a
// comma-separated list of kind names; a name without -gr selects its -gr
// kind too.
func selectMxKinds(spec string) ([]mxKind, error) {
	if spec == "all" || spec == "" {
		return mxKinds, nil
	}
	var res []mxKind
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, k := range mxKinds {
			if k.name == name || k.name == name+"-gr" {
				found = true
				if !slices.ContainsFunc(res, func(r mxKind) bool { return r.name == k.name }) {
					res = append(res, k)
				}
			}
		}
		if !found {
			var names []string
			for _, k := range mxKinds {
				names = append(names, k.name)
			}
			return nil, fmt.Errorf("OVNBGP_MATRIX: unknown peer kind %q: want all or a list of %s", name, strings.Join(names, ", "))
		}
	}
	return res, nil
}

func TestSelectMxKinds(t *testing.T) {
	names := func(spec string) string {
		ks, err := selectMxKinds(spec)
		if err != nil {
			return "error"
		}
		var n []string
		for _, k := range ks {
			n = append(n, k.name)
		}
		return strings.Join(n, ",")
	}
	for spec, want := range map[string]string{
		"":            "frr,frr-gr,bird,bird-gr,gobgpd,exabgp",
		"all":         "frr,frr-gr,bird,bird-gr,gobgpd,exabgp",
		"frr,bird":    "frr,frr-gr,bird,bird-gr",
		"frr-gr":      "frr-gr",
		"exabgp, frr": "exabgp,frr,frr-gr",
		"quagga":      "error",
	} {
		if got := names(spec); got != want {
			t.Errorf("selectMxKinds(%q) = %s, want %s", spec, got, want)
		}
	}
}

// mxResult is one measured time, or one cell's outcome.
type mxResult struct {
	kind, cell, family string
	// what was measured ("withdraw -> gone" ...); kernel and nb are the
	// times from the command to the event, -1 when not seen.
	what        string
	kernel, nb  time.Duration
	withdrawish bool // a withdraw or next-hop change by the peer
}

type mxResults struct {
	mu      sync.Mutex
	times   []mxResult
	outcome map[string]string // kind/cell -> pass, FAIL, skip: why
}

func (r *mxResults) add(x mxResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.times = append(r.times, x)
}

func (r *mxResults) setOutcome(kind, cell, o string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome[kind+"/"+cell] = o
}

// mxWorld is one kind's lab.
type mxWorld struct {
	t     *testing.T
	kind  mxKind
	l     *lab.Lab
	nb    *lab.NB
	d     *lab.Daemon
	peer  mxPeer
	names [2]string     // ovnbgp's peers: IPv4, IPv6
	self  [2]netip.Addr // the peer's session addresses: its own next hop
	// routes is what the peer announces now.
	routes mxRoutes
	kmon   *lab.RouteMonitor
	nbmon  *lab.NBMonitor
	res    *mxResults
	begin  mxMark // before ovnbgp's first start
}

// mxMark is a point in the monitors' records.
type mxMark struct {
	k, n int
	at   time.Time
}

func (w *mxWorld) mark() mxMark {
	return mxMark{k: len(w.kmon.Output()), n: len(w.nbmon.Output()), at: time.Now()}
}

func (w *mxWorld) nh(p netip.Prefix, nh netip.Addr) netip.Addr {
	if nh.IsValid() {
		return nh
	}
	return w.self[fam(p)]
}

// TestPeerMatrix runs every selected kind at once (each in its own lab,
// with random names), each kind's cells in order.
func TestPeerMatrix(t *testing.T) {
	kinds, err := selectMxKinds(os.Getenv("OVNBGP_MATRIX"))
	if err != nil {
		t.Fatal(err)
	}
	lab.Require(t)
	if _, err := os.Stat("/usr/sbin/iptables"); err != nil {
		t.Fatalf("iptables cuts the link (scripts/test-deps.sh installs it): %v", err)
	}
	start := time.Now()
	res := &mxResults{outcome: map[string]string{}}
	// t.Run from one goroutine per kind: the kinds run at once whatever
	// -parallel says (each waits on its peers and timers, not on the CPU)
	var wg sync.WaitGroup
	for _, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(k.name, func(t *testing.T) { runMxKind(t, k, res) })
		}()
	}
	wg.Wait()
	mxSummary(t, kinds, res, time.Since(start))
}

// mxCells are the cells in the order they run.
var mxCells = []string{"withdraw-2s", "nexthop", "withdraw-60s", "notification", "link-cut", "gr-restart", "ovnbgp-kill", "bfd"}

func runMxKind(t *testing.T, k mxKind, res *mxResults) {
	w := &mxWorld{t: t, kind: k, res: res, l: lab.New(t)}
	w.l.AddImportLink()
	for _, a := range []string{mxAlt[0].String() + "/24", mxAlt[1].String() + "/64"} {
		args := []string{"ip", "addr", "add", a, "dev", lab.TorLink}
		if strings.Contains(a, ":") {
			args = append(args, "nodad")
		}
		if out, err := w.l.Exec(w.l.Tor, args...); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	w.nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	w.routes = mxRoutes{}.with(mxKeep, mxW2s, mxW60, mxNH, mxGRGone, mxKillGone)
	w.names, w.self = [2]string{"tor", "tor6"}, [2]netip.Addr{lab.TorIPv4, lab.TorIPv6}
	cfg := lab.DaemonConfig{GracefulRestart: true, Race: true} // deferralTime: the default, 120 s
	peerASN := uint32(65001)
	if k.name == "exabgp" {
		w.names, w.self = [2]string{"exa", "exa6"}, [2]netip.Addr{lab.ExaIPv4, lab.ExaIPv6}
		peerASN = 65002
		cfg.ListenPort = 179 // ExaBGP dials
	}
	for i, name := range w.names {
		cfg.Peers = append(cfg.Peers, lab.Peer{Name: name, Address: w.self[i], ASN: peerASN,
			Families: []string{mxFamilies[i]}, Passive: k.name == "exabgp",
			HoldTime: mxHold, KeepaliveTime: 2 * time.Second,
			// one-sided until the bfd cell turns it on at the peer: BFD
			// never comes up and resets nothing (TestBFDOneSided)
			BFD: k.noBFD == ""})
	}
	cfg.Import = fmt.Sprintf(`  - name: matrix
    peers: [%s, %s]
    network: default
    maxRoutes: 100
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
      - {prefix: "2001:db8:99::/48", maxLength: 64}
    targets: {ovn: true, kernel: {table: %d}}`, w.names[0], w.names[1], mxTable)
	if k.name != "exabgp" {
		w.peer = k.start(w, w.routes)
	}
	w.kmon = w.l.MonitorRoutes(w.l.Node)
	w.nbmon = w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")
	w.begin = w.mark()
	w.d = w.l.StartDaemon(w.nb, cfg)
	if k.name == "exabgp" {
		w.peer = k.start(w, w.routes) // it dials the daemon
	}
	t.Logf("%s: ovnbgp (%s) started at %s", k.name, w.d.Bin, w.d.Started.Format("15:04:05.000"))
	cells := map[string]func(t *testing.T){
		"withdraw-2s": w.cellWithdraw2s, "nexthop": w.cellNextHop, "withdraw-60s": w.cellWithdraw60s,
		"notification": w.cellNotification, "link-cut": w.cellLinkCut, "gr-restart": w.cellGRRestart,
		"ovnbgp-kill": w.cellKill, "bfd": w.cellBFD,
	}
	only := os.Getenv("OVNBGP_MATRIX_CELLS") // e.g. "link-cut,gr-restart": a subset, to debug one
	for _, c := range strings.Split(only, ",") {
		if only != "" && !slices.Contains(mxCells, c) {
			t.Fatalf("OVNBGP_MATRIX_CELLS: unknown cell %q: want a list of %s", c, strings.Join(mxCells, ", "))
		}
	}
	for _, c := range mxCells {
		if only != "" && !slices.Contains(strings.Split(only, ","), c) {
			continue
		}
		t.Run(c, func(t *testing.T) {
			w.t = t
			defer func() {
				switch {
				case t.Skipped():
					res.setOutcome(k.name, c, "skip")
				case t.Failed():
					res.setOutcome(k.name, c, "FAIL")
				default:
					res.setOutcome(k.name, c, "pass")
				}
			}()
			cells[c](t)
		})
	}
}

// --- state: NB rows and kernel routes, read back ---

// mxState is GR_node1's owned rows and table 100's protocol 200 routes:
// prefix -> sorted next hops.
type mxState struct{ nb, kernel map[string][]string }

func (w *mxWorld) state() (mxState, error) {
	s := mxState{nb: map[string][]string{}, kernel: map[string][]string{}}
	rows, err := w.nb.StaticRoutes("GR_node1")
	if err != nil {
		return s, err
	}
	for _, r := range rows {
		if r.ExternalID["ovnbgp.io/owner"] != "" {
			s.nb[r.Prefix] = append(s.nb[r.Prefix], r.NextHop)
		}
	}
	lines, err := w.l.KernelRoutes(w.l.Node, mxTable, "200")
	if err != nil {
		return s, err
	}
	for _, line := range lines {
		p, nhs, _ := parseRouteLine(line)
		s.kernel[p] = nhs
	}
	for _, m := range []map[string][]string{s.nb, s.kernel} {
		for p := range m {
			slices.Sort(m[p])
		}
	}
	return s, nil
}

// check compares the state with want: prefix -> next hop, the zero Addr
// for "not installed".
func (s mxState) check(want map[netip.Prefix]netip.Addr) error {
	var errs []string
	for p, nh := range want {
		var exp []string
		if nh.IsValid() {
			exp = []string{nh.String()}
		}
		if got := s.nb[p.String()]; !slices.Equal(got, exp) {
			errs = append(errs, fmt.Sprintf("NB %s via %v, want %v", p, got, exp))
		}
		if got := s.kernel[p.String()]; !slices.Equal(got, exp) {
			errs = append(errs, fmt.Sprintf("kernel %s via %v, want %v", p, got, exp))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// want is the installed state of the peer's routes ps (both families), as
// announced now (absent when not announced).
func (w *mxWorld) want(ps ...[2]netip.Prefix) map[netip.Prefix]netip.Addr {
	res := map[netip.Prefix]netip.Addr{}
	for _, pp := range ps {
		for _, p := range pp {
			if nh, ok := w.routes[p]; ok {
				res[p] = w.nh(p, nh)
			} else {
				res[p] = netip.Addr{}
			}
		}
	}
	return res
}

// waitState waits (generously) until the state is want.
func (w *mxWorld) waitState(what string, want map[netip.Prefix]netip.Addr) time.Duration {
	w.t.Helper()
	return lab.Eventually(w.t, mxWait, 50*time.Millisecond, w.kind.name+": "+what, func() error {
		s, err := w.state()
		if err != nil {
			return err
		}
		return s.check(want)
	})
}

// waitSessions waits until both sessions are Established (with End-of-RIB
// from a kind that sends it) and returns when it saw that.
func (w *mxWorld) waitSessions(what string) time.Time {
	w.t.Helper()
	lab.Eventually(w.t, mxWait, 50*time.Millisecond, w.kind.name+": "+what, func() error {
		return w.sessionsUp()
	})
	return time.Now()
}

func (w *mxWorld) sessionsUp() error {
	peers, err := w.d.Peers()
	if err != nil {
		return err
	}
	for _, name := range w.names {
		i := slices.IndexFunc(peers, func(p model.PeerStatus) bool { return p.Name == name })
		if i < 0 {
			return fmt.Errorf("no peer %s", name)
		}
		p := peers[i]
		if p.State != model.StateEstablished || (w.kind.eor && !p.EndOfRIB) {
			return fmt.Errorf("peer %s: %s (End-of-RIB %v, last error %q)", name, p.State, p.EndOfRIB, p.LastError)
		}
	}
	return nil
}

// sessionsDown returns nil once neither session is Established.
func (w *mxWorld) sessionsDown() error {
	peers, err := w.d.Peers()
	if err != nil {
		return err
	}
	for _, p := range peers {
		if slices.Contains(w.names[:], p.Name) && p.State == model.StateEstablished {
			return fmt.Errorf("peer %s still established", p.Name)
		}
	}
	return nil
}

// announce changes the peer's routes.
func (w *mxWorld) announce(routes mxRoutes) {
	w.t.Helper()
	if err := w.peer.announce(routes); err != nil {
		w.t.Fatalf("%s: announce: %v", w.kind.name, err)
	}
	w.routes = routes
}

// imported is what `routes imported` says of p (state and reason), for
// failure messages.
func (w *mxWorld) imported(p netip.Prefix) string {
	imp, err := w.d.Imported()
	if err != nil {
		return fmt.Sprintf("(routes imported: %v)", err)
	}
	var res []string
	for _, r := range imp.OVN {
		if r.Prefix == p {
			res = append(res, fmt.Sprintf("ovn %s via %s %s (rule %q) %s", r.Prefix, r.NextHop, r.State, r.Rule, r.Reason))
		}
	}
	for _, r := range imp.Kernel {
		if r.Prefix == p {
			res = append(res, fmt.Sprintf("kernel %s %s (rule %q) %s", r.Prefix, r.State, r.Rule, r.Reason))
		}
	}
	if len(res) == 0 {
		return "routes imported lists nothing for " + p.String()
	}
	return "routes imported: " + strings.Join(res, "; ")
}

// --- the monitors' records ---

// nbEvent is one row change the NB monitor printed.
type nbEvent struct {
	off          int // byte offset of the line in the output
	action       string
	prefix, next string
	line         string
}

// nbEvents parses the NB monitor's CSV (row,action,ip_prefix,nexthop),
// naming the row of a modification's "old" half by its UUID.
func nbEvents(out string) []nbEvent {
	rows := map[string][2]string{}
	var res []nbEvent
	off := 0
	for _, line := range strings.SplitAfter(out, "\n") {
		lineOff := off
		off += len(line)
		if !strings.HasSuffix(line, "\n") {
			break // not complete yet
		}
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 4 {
			continue
		}
		uuid, action := f[0], f[1]
		p, nh := strings.Trim(f[2], `"`), strings.Trim(f[3], `"`)
		if prev, ok := rows[uuid]; ok {
			if p == "" {
				p = prev[0]
			}
			if nh == "" {
				nh = prev[1]
			}
		}
		switch action {
		case "initial", "insert", "new":
			rows[uuid] = [2]string{p, nh}
		}
		res = append(res, nbEvent{off: lineOff, action: action, prefix: p, next: nh, line: strings.TrimSpace(line)})
	}
	return res
}

// kernelLost reports whether route message m (ip monitor) ends route p via
// nh: its deletion, or p now without nh (a replace).
func kernelLost(m, p, nh string) bool {
	if !strings.Contains(m, "table 100") {
		return false
	}
	prefix, nhs, deleted := parseRouteLine(m)
	if prefix != p {
		return false
	}
	if deleted {
		return slices.Contains(nhs, nh) || len(nhs) == 0
	}
	return !slices.Contains(nhs, nh)
}

func nbLost(e nbEvent, p, nh string) bool {
	return (e.action == "delete" || e.action == "old") && e.prefix == p && e.next == nh
}

// gone: when a route left the kernel and NB after m (-1 = not yet).
type gone struct {
	prefix     netip.Prefix
	nh         netip.Addr
	kernel, nb time.Duration
	kLine      string
	nLine      string
}

// watchGone polls the monitors from m until every route of routes (prefix
// -> next hop) left both the kernel and NB, or until deadline.
func (w *mxWorld) watchGone(m mxMark, routes map[netip.Prefix]netip.Addr, deadline time.Time) []*gone {
	var res []*gone
	for p, nh := range routes {
		res = append(res, &gone{prefix: p, nh: nh, kernel: -1, nb: -1})
	}
	sort.Slice(res, func(i, j int) bool { return res[i].prefix.String() < res[j].prefix.String() })
	kOff := m.k
	for {
		now := time.Since(m.at)
		var msgs []string
		msgs, kOff = monitorMessages(w.kmon.Output(), kOff)
		evs := nbEvents(w.nbmon.Output())
		done := true
		for _, g := range res {
			if g.kernel < 0 {
				for _, msg := range msgs {
					if kernelLost(msg, g.prefix.String(), g.nh.String()) {
						g.kernel, g.kLine = now, msg
						break
					}
				}
			}
			if g.nb < 0 {
				for _, e := range evs {
					if e.off >= m.n && nbLost(e, g.prefix.String(), g.nh.String()) {
						g.nb, g.nLine = now, e.line
						break
					}
				}
			}
			done = done && g.kernel >= 0 && g.nb >= 0
		}
		if done || time.Now().After(deadline) {
			return res
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectGone asserts that routes (prefix -> next hop) leave the kernel and
// NB within bound of m (the command), records the times and returns when
// the last went.
func (w *mxWorld) expectGone(cell, what string, m mxMark, routes map[netip.Prefix]netip.Addr, bound time.Duration, withdrawish bool) {
	w.t.Helper()
	res := w.watchGone(m, routes, m.at.Add(bound))
	for _, g := range res {
		f := mxFamilies[fam(g.prefix)]
		w.res.add(mxResult{kind: w.kind.name, cell: cell, family: f, what: what, kernel: g.kernel, nb: g.nb, withdrawish: withdrawish})
		w.t.Logf("%s %s %s: %s: %s via %s: kernel %s, NB %s", w.kind.name, f, cell, what, g.prefix, g.nh, fmtDur(g.kernel), fmtDur(g.nb))
		if g.kernel < 0 || g.nb < 0 {
			s, _ := w.state()
			w.t.Errorf("%s %s %s: %s: %s via %s not gone within %v of the command (kernel %s, NB %s); now NB has it via %v, the kernel via %v; %s",
				w.kind.name, f, cell, what, g.prefix, g.nh, bound, fmtDur(g.kernel), fmtDur(g.nb),
				s.nb[g.prefix.String()], s.kernel[g.prefix.String()], w.imported(g.prefix))
		}
	}
}

func fmtDur(d time.Duration) string {
	if d < 0 {
		return "not seen"
	}
	return d.Round(time.Millisecond).String()
}

// noFlap asserts that none of routes (prefix -> next hop) was deleted (or
// replaced) in the kernel or NB since m: an unchanged route of a live
// session is never deleted and added again.
func (w *mxWorld) noFlap(cell string, m mxMark, routes map[netip.Prefix]netip.Addr) {
	w.t.Helper()
	for _, l := range w.flaps(m, routes) {
		w.t.Errorf("%s %s: %s", w.kind.name, cell, l)
	}
}

// flaps lists the deletions of routes since m.
func (w *mxWorld) flaps(m mxMark, routes map[netip.Prefix]netip.Addr) []string {
	var res []string
	msgs, _ := monitorMessages(w.kmon.Output(), m.k)
	evs := nbEvents(w.nbmon.Output())
	for p, nh := range routes {
		if !nh.IsValid() {
			continue
		}
		for _, msg := range msgs {
			if kernelLost(msg, p.String(), nh.String()) {
				res = append(res, fmt.Sprintf("unchanged route %s via %s left the kernel (ip monitor: %q)", p, nh, msg))
			}
		}
		for _, e := range evs {
			if e.off >= m.n && nbLost(e, p.String(), nh.String()) {
				res = append(res, fmt.Sprintf("unchanged route %s via %s: NB row %s (NB monitor: %q)", p, nh, e.action, e.line))
			}
		}
	}
	sort.Strings(res)
	return res
}

// others is the installed state of every announced route but those of ps.
func (w *mxWorld) others(ps ...[2]netip.Prefix) map[netip.Prefix]netip.Addr {
	res := map[netip.Prefix]netip.Addr{}
	for p, nh := range w.routes {
		if !slices.ContainsFunc(ps, func(pp [2]netip.Prefix) bool { return pp[0] == p || pp[1] == p }) {
			res[p] = w.nh(p, nh)
		}
	}
	return res
}

// cut drops everything on the tor's end of the link, both ways and both
// families, the interfaces up (BFD and the hold timer notice; the kernel
// drops nothing by itself). Undone by cut(false) and at the end.
func (w *mxWorld) cut(on bool) {
	w.t.Helper()
	op := "-A"
	if !on {
		op = "-D"
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, rule := range [][]string{{"INPUT", "-i"}, {"OUTPUT", "-o"}} {
			if out, err := w.l.Exec(w.l.Tor, ipt, "-w", op, rule[0], rule[1], lab.TorLink, "-j", "DROP"); err != nil {
				w.t.Fatalf("%s %s %s: %v: %s", ipt, op, rule[0], err, out)
			}
		}
	}
}

// --- the cells ---

func (w *mxWorld) cellWithdraw2s(t *testing.T) {
	w.waitState("routes installed after the start", w.want(mxKeep, mxW2s))
	if d := time.Until(w.d.Started.Add(2 * time.Second)); d > 0 {
		time.Sleep(d)
	}
	m := w.mark()
	t.Logf("%s: withdraw %s at %v after ovnbgp's start", w.kind.name, mxW2s, m.at.Sub(w.d.Started).Round(time.Millisecond))
	w.announce(w.routes.without(mxW2s))
	w.expectGone("withdraw-2s", "withdraw -> gone", m, map[netip.Prefix]netip.Addr{mxW2s[0]: w.self[0], mxW2s[1]: w.self[1]}, mxBound, true)
	w.noFlap("withdraw-2s", w.begin, w.others())
}

func (w *mxWorld) cellNextHop(t *testing.T) {
	w.waitState("the route whose next hop changes installed", w.want(mxNH))
	m := w.mark()
	old := map[netip.Prefix]netip.Addr{mxNH[0]: w.self[0], mxNH[1]: w.self[1]}
	r := w.routes.clone()
	r[mxNH[0]], r[mxNH[1]] = mxAlt[0], mxAlt[1]
	w.announce(r)
	w.expectGone("nexthop", "next-hop change -> old next hop gone", m, old, mxBound, true)
	if t.Failed() {
		return // the old next hop is held: the new one would only come with it
	}
	d := w.waitState("the new next hop installed", w.want(mxNH))
	t.Logf("%s: new next hops %v installed %v after the change", w.kind.name, mxAlt, time.Since(m.at).Round(time.Millisecond))
	_ = d
	w.noFlap("nexthop", w.begin, w.others(mxNH))
}

func (w *mxWorld) cellWithdraw60s(t *testing.T) {
	w.waitState("the route withdrawn a minute after the start installed", w.want(mxW60))
	if d := time.Until(w.d.Started.Add(time.Minute)); d > 0 {
		time.Sleep(d)
	}
	m := w.mark()
	t.Logf("%s: withdraw %s at %v after ovnbgp's start", w.kind.name, mxW60, m.at.Sub(w.d.Started).Round(time.Millisecond))
	w.announce(w.routes.without(mxW60))
	w.expectGone("withdraw-60s", "withdraw -> gone", m, map[netip.Prefix]netip.Addr{mxW60[0]: w.self[0], mxW60[1]: w.self[1]}, mxBound, true)
	// the sessions have lived since the start: nothing else ever went
	// (but the route of the next-hop change)
	w.noFlap("withdraw-60s", w.begin, w.others(mxNH))
}

func (w *mxWorld) cellNotification(t *testing.T) {
	w.waitSessions("sessions up before the NOTIFICATION")
	w.waitState("routes installed before the NOTIFICATION", w.want(mxKeep))
	m := w.mark()
	if err := w.peer.notify(); err != nil {
		t.Fatalf("%s: NOTIFICATION: %v", w.kind.name, err)
	}
	w.expectGone("notification", "NOTIFICATION -> imports gone", m, w.want(mxKeep), mxBound, false)
	back := w.waitSessions("sessions back after the NOTIFICATION")
	w.waitState("routes installed again after the NOTIFICATION", w.want(mxKeep))
	t.Logf("%s: sessions back %v after the NOTIFICATION", w.kind.name, back.Sub(m.at).Round(time.Millisecond))
}

func (w *mxWorld) cellLinkCut(t *testing.T) {
	w.waitSessions("sessions up before the cut")
	w.waitState("routes installed before the cut", w.want(mxKeep))
	keep := w.others()
	m := w.mark()
	w.cut(true)
	healed := false
	defer func() {
		if !healed {
			w.cut(false)
		}
	}()
	lab.Eventually(t, 4*mxHold, 50*time.Millisecond, w.kind.name+": hold timer ends the sessions", w.sessionsDown)
	down := time.Since(m.at)
	t.Logf("%s: sessions down %v after the cut (hold time %v)", w.kind.name, down.Round(time.Millisecond), mxHold)
	if !w.kind.gr {
		// no graceful restart for the family: deleted at once
		w.expectGone("link-cut", "cut -> imports gone (hold time "+mxHold.String()+" included)", m, w.want(mxKeep), down+mxBound, false)
		w.cut(false)
		healed = true
		w.waitSessions("sessions back after the cut")
		w.waitState("routes installed again after the cut", w.want(mxKeep))
		return
	}
	// graceful restart negotiated: the routes stay, stale, while it is away
	lab.Consistently(t, 3*time.Second, 100*time.Millisecond, w.kind.name+": imports kept (stale) while the peer is away", func() error {
		if f := w.flaps(m, keep); len(f) > 0 {
			return fmt.Errorf("%s", strings.Join(f, "; "))
		}
		s, err := w.state()
		if err != nil {
			return err
		}
		return s.check(keep)
	})
	t.Logf("%s: while away: %s", w.kind.name, w.imported(mxKeep[0]))
	w.cut(false)
	healed = true
	back := w.waitSessions("sessions back after the cut")
	w.waitState("routes installed after the peer is back", keep)
	t.Logf("%s: sessions back %v after the cut", w.kind.name, back.Sub(m.at).Round(time.Millisecond))
	if w.kind.fbit {
		// the F bit set again: the stale routes are refreshed in place
		w.noFlap("link-cut", m, keep)
	} else if f := w.flaps(m, keep); len(f) > 0 {
		// RFC 4724 4.2: the F bit is clear in the new OPEN, so the stale
		// routes go when the session is back, and come again with the
		// UPDATEs
		t.Logf("%s: the peer's new OPEN has no F bit (RFC 4724 4.2: stale routes dropped when it is back): %s", w.kind.name, strings.Join(f, "; "))
	}
}

func (w *mxWorld) cellGRRestart(t *testing.T) {
	if w.kind.noGR != "" {
		t.Skip(w.kind.noGR)
	}
	w.waitSessions("sessions up before the peer's graceful restart")
	w.waitState("routes installed before the peer's graceful restart", w.want(mxKeep, mxGRGone))
	routes := w.routes.without(mxGRGone)
	keep := w.others(mxGRGone)
	gone := w.want(mxGRGone)
	m := w.mark()
	err := w.peer.grRestart(routes, func() {
		lab.Eventually(t, 4*mxHold, 50*time.Millisecond, w.kind.name+": sessions down with the peer's daemon", w.sessionsDown)
		t.Logf("%s: sessions down %v after the kill", w.kind.name, time.Since(m.at).Round(time.Millisecond))
		all := w.others()
		lab.Consistently(t, 2*time.Second, 100*time.Millisecond, w.kind.name+": imports kept (stale) while the peer restarts", func() error {
			if f := w.flaps(m, all); len(f) > 0 {
				return fmt.Errorf("%s", strings.Join(f, "; "))
			}
			s, err := w.state()
			if err != nil {
				return err
			}
			return s.check(all)
		})
	})
	if err != nil {
		t.Fatalf("%s: graceful restart: %v", w.kind.name, err)
	}
	restarted := time.Since(m.at)
	w.routes = routes
	back := w.waitSessions("sessions back (End-of-RIB) after the peer's graceful restart")
	t.Logf("%s: peer started again %v after the kill, sessions back with End-of-RIB %v after", w.kind.name,
		restarted.Round(time.Millisecond), back.Sub(m.at).Round(time.Millisecond))
	w.expectGone("gr-restart", "kill -> route not announced again gone (at End-of-RIB)", m, gone, back.Sub(m.at)+mxBound, false)
	w.waitState("routes after the peer's graceful restart", w.want(mxKeep, mxGRGone))
	w.noFlap("gr-restart", m, keep)
}

func (w *mxWorld) cellKill(t *testing.T) {
	w.waitSessions("sessions up before ovnbgp is killed")
	w.waitState("routes installed before ovnbgp is killed", w.want(mxKeep, mxKillGone, mxKillNew))
	routes := w.routes.without(mxKillGone).with(mxKillNew)
	keep := w.others(mxKillGone, mxKillNew)
	gone := w.want(mxKillGone)
	m := w.mark()
	if err := w.d.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "ovnbgp dead after SIGKILL", func() error {
		if w.d.Exited() == nil {
			return fmt.Errorf("pid %d still running", w.d.PID())
		}
		return nil
	})
	w.announce(routes)
	time.Sleep(time.Second) // the peer has taken the change in
	r := w.mark()
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: ovnbgp SIGKILLed, %s withdrawn and %s added, ovnbgp restarted %v after the kill", w.kind.name,
		mxKillGone, mxKillNew, r.at.Sub(m.at).Round(time.Millisecond))
	what := "restart -> route withdrawn while down gone"
	if w.kind.killHold > 0 {
		// The peer is back only after its idle hold: until then the
		// adopted route is kept (fail static), so the bound counts from
		// the session's return, and a delete before it (while the peer's
		// table is unknown) fails the cell: it is not seen from there.
		w.waitSessions("sessions back after ovnbgp's restart (the peer's idle hold after a reset)")
		back := w.mark()
		if f := w.flaps(r, gone); len(f) > 0 {
			t.Errorf("%s: the withdrawn route deleted before the peer was back (fail static keeps it until the peer's table is known): %s", w.kind.name, strings.Join(f, "; "))
		}
		t.Logf("%s: sessions back %v after ovnbgp's restart (its idle hold after a reset: %v)", w.kind.name,
			back.at.Sub(r.at).Round(time.Millisecond), w.kind.killHold)
		r, what = back, "session back after the restart -> route withdrawn while down gone"
	}
	w.expectGone("ovnbgp-kill", what, r, gone, mxBound, false)
	d := w.waitState("the route added while ovnbgp was down installed", w.want(mxKillNew, mxKeep))
	t.Logf("%s: the route added while down installed %v after the restart", w.kind.name, d.Round(time.Millisecond))
	w.noFlap("ovnbgp-kill", m, keep)
}

func (w *mxWorld) cellBFD(t *testing.T) {
	if w.kind.noBFD != "" {
		t.Skip(w.kind.noBFD)
	}
	w.waitSessions("sessions up before BFD")
	if err := w.peer.bfdOn(); err != nil {
		t.Fatalf("%s: BFD on: %v", w.kind.name, err)
	}
	lab.Eventually(t, mxWait, 100*time.Millisecond, w.kind.name+": BFD up on both sessions", func() error {
		if err := w.sessionsUp(); err != nil {
			return err
		}
		for _, name := range w.names {
			p, err := w.d.Peer(name)
			if err != nil {
				return err
			}
			if p.BFD == nil || p.BFD.State != model.BFDUp {
				return fmt.Errorf("peer %s BFD %+v", name, p.BFD)
			}
		}
		return nil
	})
	w.waitState("routes installed with BFD up", w.want(mxKeep))
	m := w.mark()
	w.cut(true)
	defer w.cut(false)
	// BFD at 300 ms x 3 detects in about 0.9 s; the hold time is 6 s
	w.expectGone("bfd", "cut -> BFD down -> imports gone", m, w.want(mxKeep), mxBound, false)
	for _, name := range w.names {
		if p, err := w.d.Peer(name); err == nil {
			t.Logf("%s: peer %s after the cut: %s, last error %q", w.kind.name, name, p.State, p.LastError)
		}
	}
}

// --- the summary ---

func mxSummary(t *testing.T, kinds []mxKind, res *mxResults, elapsed time.Duration) {
	res.mu.Lock()
	defer res.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "peer matrix: %d kinds in %v\n", len(kinds), elapsed.Round(time.Second))
	fmt.Fprintf(&b, "%-8s %-13s %-5s %-10s %-10s %s\n", "PEER", "CELL", "FAM", "KERNEL", "NB", "WHAT")
	sort.SliceStable(res.times, func(i, j int) bool {
		a, c := res.times[i], res.times[j]
		if a.kind != c.kind {
			return a.kind < c.kind
		}
		if a.cell != c.cell {
			return slices.Index(mxCells, a.cell) < slices.Index(mxCells, c.cell)
		}
		return a.family < c.family
	})
	worst, worstAll := mxResult{kernel: -2}, mxResult{kernel: -2}
	max := func(x mxResult) time.Duration {
		if x.kernel < 0 || x.nb < 0 {
			return time.Hour // not seen: worse than anything seen
		}
		return time.Duration(maxInt64(int64(x.kernel), int64(x.nb)))
	}
	for _, x := range res.times {
		fmt.Fprintf(&b, "%-8s %-13s %-5s %-10s %-10s %s\n", x.kind, x.cell, x.family, fmtDur(x.kernel), fmtDur(x.nb), x.what)
		if x.withdrawish && (worst.kernel == -2 || max(x) > max(worst)) {
			worst = x
		}
		if worstAll.kernel == -2 || max(x) > max(worstAll) {
			worstAll = x
		}
	}
	var cells []string
	for _, k := range kinds {
		var row []string
		for _, c := range mxCells {
			o := res.outcome[k.name+"/"+c]
			if o == "" {
				o = "not run"
			}
			row = append(row, c+"="+o)
		}
		cells = append(cells, k.name+": "+strings.Join(row, " "))
	}
	fmt.Fprintf(&b, "cells:\n  %s\n", strings.Join(cells, "\n  "))
	line := func(x mxResult) string {
		if x.kernel == -2 {
			return "none measured"
		}
		if max(x) == time.Hour {
			return fmt.Sprintf("not gone within the bound (%s %s %s: kernel %s, NB %s)", x.kind, x.family, x.cell, fmtDur(x.kernel), fmtDur(x.nb))
		}
		return fmt.Sprintf("%v (%s %s %s: kernel %s, NB %s)", max(x).Round(time.Millisecond), x.kind, x.family, x.cell, fmtDur(x.kernel), fmtDur(x.nb))
	}
	fmt.Fprintf(&b, "peer matrix summary: worst withdraw -> gone %s; worst of every measured deletion %s", line(worst), line(worstAll))
	t.Log(b.String())
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
