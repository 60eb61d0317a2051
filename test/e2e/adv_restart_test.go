package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Graceful restart on the advertising side (issue 17 item 4): ovnbgp
// restarts while its peers keep its routes stale; what NB withdrew while it
// was down must leave every peer after the restart, at our End-of-RIB, and
// what NB kept must never flap.
//
// Each test runs FRR 8.4 (`bgp graceful-restart`) or BIRD 2 (`graceful
// restart on`) with one session per family (IPv4 over 192.0.2.0/31, IPv6
// over 2001:db8:100::/127), and a real NB. A phase: the node advertises A
// (the default network's subnets) and `gone`; ovnbgp stops (SIGTERM: no
// NOTIFICATION; or SIGKILL); while it is down NB loses `gone` and gains
// `added`; ovnbgp starts again. A sampler reads the router's table every
// 20-25 ms from the stop to the end of the phase.
//
// The flap signals, each of which a withdraw and re-announce of A trips:
// every sample holds A; `ip monitor route` in the router's namespace never
// deletes it; and the router's own record: bgpd never tells zebra to
// delete A (FRR's log, `debug bgp zebra`; FRR 8.4 gives a refreshed stale
// path a new lastUpdate, so that is no signal), and BIRD keeps A's route
// object, whose time (`timeformat route`, microseconds) a refresh with the
// same attributes leaves alone (rte_recalculate: "ignored"). The last two
// cannot miss a flap between two samples.

// advRestartTime is the restart time ovnbgp announces: long enough that a
// loaded machine re-establishes well within it (the stale routes must
// still be there), short enough to be the bound of a stale route kept for
// lack of our End-of-RIB.
const advRestartTime = 30 * time.Second

// Networks B and C of the phases: UDNs with an IPv4 and an IPv6 subnet.
var (
	advB = lab.Network{Name: "bee", Node: "node1", Subnet: netip.MustParsePrefix("10.211.0.0/24"),
		Subnet6: netip.MustParsePrefix("fd00:211::/64")}
	advC = lab.Network{Name: "sea", Node: "node1", Subnet: netip.MustParsePrefix("10.212.0.0/24"),
		Subnet6: netip.MustParsePrefix("fd00:212::/64")}
)

// advFamilies are the two sessions' families.
var advFamilies = []string{"ipv4", "ipv6"}

// prefixOf is n's subnet of family.
func prefixOf(n lab.Network, family string) netip.Prefix {
	if family == "ipv6" {
		return n.Subnet6
	}
	return n.Subnet
}

// advRoute is one route a router holds from the node.
type advRoute struct {
	// Stale: kept for a restarting node (FRR marks it; BIRD's birdc does
	// not say, so always false there).
	Stale bool
	// Since identifies the route object: it changes when the router
	// drops the route and learns it again (see the file comment).
	Since string
}

// advRouter is a router peering with the node, one session per family.
type advRouter interface {
	// Name is "FRR" or "BIRD".
	Name() string
	// Routes are the routes the router holds from the node's session of
	// family, by prefix.
	Routes(family string) (map[netip.Prefix]advRoute, error)
	// Established is nil when the session of family is up.
	Established(family string) error
	// EndOfRIBs counts, for the session of family, the End-of-RIB
	// markers the router received from the node (BIRD: since it started;
	// FRR: 1 when the current session has one, else 0).
	EndOfRIBs(family string) (int, error)
	// KernelNS is the namespace whose kernel gets the router's routes.
	KernelNS() string
}

// nodeAddr is the node's address of family's session.
func nodeAddr(family string) netip.Addr {
	if family == "ipv6" {
		return lab.NodeIPv6
	}
	return lab.NodeIPv4
}

// frrRouter is FRR in the tor namespace as an advRouter.
type frrRouter struct {
	frr *lab.FRR
	ns  string
}

func (r frrRouter) Name() string     { return "FRR" }
func (r frrRouter) KernelNS() string { return r.ns }

func (r frrRouter) Established(family string) error { return r.frr.Established(nodeAddr(family)) }

func (r frrRouter) Routes(family string) (map[netip.Prefix]advRoute, error) {
	rib, err := r.frr.RIB(family)
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix]advRoute{}
	for p, paths := range rib {
		for _, path := range paths {
			if path.Valid && path.PeerID == nodeAddr(family).String() {
				out[p] = advRoute{Stale: path.Stale}
			}
		}
	}
	return out, nil
}

// since is how many times bgpd told zebra to delete prefix (its log, with
// `debug bgp zebra`: "Tx route delete VRF 0 <prefix>"). FRR 8.4 gives a
// stale path that is refreshed a new lastUpdate, so that is no flap
// signal; a withdrawal, however short, takes the route from zebra.
func (r frrRouter) since(prefix netip.Prefix) string {
	n := 0
	for _, line := range strings.Split(lab.Tail(filepath.Join(r.frr.Dir, "frr.log"), 1000000), "\n") {
		if strings.HasSuffix(line, "Tx route delete VRF 0 "+prefix.String()) {
			n++
		}
	}
	return fmt.Sprintf("%d zebra deletes", n)
}

// debug turns on bgpd's zebra debugging, logged to its file (since).
func (r frrRouter) debug(t *testing.T) {
	for _, c := range []string{"enable", "configure terminal", "log file " + r.frr.Dir + "/frr.log debugging", "end", "debug bgp zebra"} {
		if out, err := r.frr.VTY(c); err != nil {
			t.Fatalf("FRR vty %q: %v: %s", c, err, out)
		}
	}
}

func (r frrRouter) EndOfRIBs(family string) (int, error) {
	out, err := r.frr.VTY("show bgp neighbors " + nodeAddr(family).String() + " json")
	if err != nil {
		return 0, err
	}
	// FRR 8.4: gracefulRestartInfo.<ipv4Unicast|ipv6Unicast>.endOfRibStatus
	// .endOfRibRecv, for the current session (reset when it goes down).
	var v map[string]struct {
		GR map[string]json.RawMessage `json:"gracefulRestartInfo"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return 0, fmt.Errorf("parse show bgp neighbors json: %w: %.300s", err, out)
	}
	n, ok := v[nodeAddr(family).String()]
	if !ok {
		return 0, fmt.Errorf("FRR has no neighbor %s", nodeAddr(family))
	}
	raw, ok := n.GR[family+"Unicast"]
	if !ok {
		return 0, nil
	}
	var af struct {
		Status struct {
			Recv bool `json:"endOfRibRecv"`
		} `json:"endOfRibStatus"`
	}
	if err := json.Unmarshal(raw, &af); err != nil {
		return 0, fmt.Errorf("parse gracefulRestartInfo.%sUnicast: %w: %s", family, err, raw)
	}
	if af.Status.Recv {
		return 1, nil
	}
	return 0, nil
}

// birdRouter is BIRD 2 as an advRouter: protocols node4 and node6, their
// routes exported to the namespace's kernel, packets traced to its log.
type birdRouter struct {
	bird *lab.BIRD
}

// birdAdvConfig is BIRD's config: graceful restart on, one passive
// session per family, route times to the microsecond.
func birdAdvConfig(dir string) string {
	return fmt.Sprintf(`log "%s/bird.log" all;
router id %s;
timeformat route "%%F %%T.%%6f";
protocol device { }
protocol kernel k4 { ipv4 { import none; export all; }; }
protocol kernel k6 { ipv6 { import none; export all; }; }
protocol bgp node4 {
  local %s as 65001;
  neighbor %s as 65010;
  hold time 9; keepalive time 3; connect retry time 2;
  error wait time 1, 5;
  passive on;
  graceful restart on;
  debug { states, events, packets };
  ipv4 { import all; export none; };
}
protocol bgp node6 {
  local %s as 65001;
  neighbor %s as 65010;
  hold time 9; keepalive time 3; connect retry time 2;
  error wait time 1, 5;
  passive on;
  graceful restart on;
  debug { states, events, packets };
  ipv6 { import all; export none; };
}
`, dir, lab.TorIPv4, lab.TorIPv4, lab.NodeIPv4, lab.TorIPv6, lab.NodeIPv6)
}

func (r birdRouter) Name() string     { return "BIRD" }
func (r birdRouter) KernelNS() string { return r.bird.NS }

// protocol is BIRD's BGP protocol of family.
func (r birdRouter) protocol(family string) string {
	if family == "ipv6" {
		return "node6"
	}
	return "node4"
}

func (r birdRouter) Established(family string) error {
	out, err := r.bird.Birdc("show protocols " + r.protocol(family))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == r.protocol(family) {
			if strings.Contains(line, "Established") {
				return nil
			}
			return fmt.Errorf("BIRD %s: %s", f[0], strings.TrimSpace(line))
		}
	}
	return fmt.Errorf("BIRD has no protocol %s: %q", r.protocol(family), out)
}

func (r birdRouter) Routes(family string) (map[netip.Prefix]advRoute, error) {
	out, err := r.bird.Birdc("show route protocol " + r.protocol(family))
	if err != nil {
		return nil, err
	}
	// "10.128.0.0/23        unicast [node4 2026-12-02 10:00:01.123456] * (100) [AS65010i]"
	res := map[netip.Prefix]advRoute{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		p, err := netip.ParsePrefix(f[0])
		if err != nil {
			continue
		}
		since := ""
		if i, j := strings.Index(line, "["), strings.Index(line, "]"); i >= 0 && j > i {
			since = line[i+1 : j]
		}
		res[p] = advRoute{Since: since}
	}
	return res, nil
}

func (r birdRouter) EndOfRIBs(family string) (int, error) {
	// BGP_TRACE(D_PACKETS, "Got END-OF-RIB") in bgp_rx_end_mark; the
	// line starts with the protocol's name.
	n := 0
	for _, line := range strings.Split(lab.Tail(filepath.Join(r.bird.Dir, "bird.log"), 100000), "\n") {
		if strings.Contains(line, r.protocol(family)+": Got END-OF-RIB") {
			n++
		}
	}
	return n, nil
}

// advSample is one reading of the router's tables; at is when each
// family's read returned (a goroutine delayed between the clock and the
// read would date older data as newer, never the reverse).
type advSample struct {
	at     map[string]time.Time
	routes map[string]map[netip.Prefix]advRoute
	err    error
}

// sampler reads the router's tables every interval until stop.
type sampler struct {
	mu      sync.Mutex
	samples []advSample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(r advRouter, interval time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			smp := advSample{at: map[string]time.Time{}, routes: map[string]map[netip.Prefix]advRoute{}}
			for _, f := range advFamilies {
				rs, err := r.Routes(f)
				smp.at[f] = time.Now()
				if err != nil {
					smp.err = err
				}
				smp.routes[f] = rs
			}
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampler and returns its samples.
func (s *sampler) Stop() []advSample {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// advWorldR is one test's lab: NB, a router, the daemon.
type advWorldR struct {
	l  *lab.Lab
	nb *lab.NB
	r  advRouter
	d  *lab.Daemon
}

// advPeers are the daemon's two peers: one session per family.
func advPeers() []lab.Peer {
	return []lab.Peer{lab.DefaultTor(), {Name: "tor6", Address: lab.TorIPv6, ASN: 65001, Families: []string{"ipv6"}}}
}

// startAdvWorld builds the lab with NB (the standard topology and B),
// the router (FRR or BIRD, from kind) and the daemon with graceful restart
// at restart.
func startAdvWorld(t *testing.T, kind string, restart time.Duration) *advWorldR {
	t.Helper()
	w := &advWorldR{l: lab.New(t)}
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	if err := w.nb.Add(advB); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "frr":
		frr := w.l.StartFRR(lab.FRRConfig{GracefulRestart: true, Neighbors: []lab.FRRNeighbor{
			{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
			{Address: lab.NodeIPv6, ASN: 65010, Passive: true},
		}})
		r := frrRouter{frr: frr, ns: w.l.Tor}
		r.debug(t)
		w.r = r
	case "bird":
		b := w.l.StartBIRD(w.l.Tor, lab.BIRDConfig{Text: birdAdvConfig})
		w.r = birdRouter{bird: b}
	default:
		t.Fatalf("unknown router %q", kind)
	}
	w.d = w.l.StartDaemon(w.nb, lab.DaemonConfig{Peers: advPeers(), GracefulRestart: true, RestartTime: restart})
	return w
}

// holds is a condition: the router holds every prefix of want (from the
// node), fresh, and none of absent, in both families, both sessions up.
func (w *advWorldR) holds(want, absent []lab.Network) func() error {
	return func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		for _, f := range advFamilies {
			if err := w.r.Established(f); err != nil {
				return err
			}
			rs, err := w.r.Routes(f)
			if err != nil {
				return err
			}
			for _, n := range want {
				p := prefixOf(n, f)
				if r, ok := rs[p]; !ok || r.Stale {
					return fmt.Errorf("%s: %s from the node: %+v (held: %v, want it fresh)", w.r.Name(), p, r, ok)
				}
			}
			for _, n := range absent {
				if _, ok := rs[prefixOf(n, f)]; ok {
					return fmt.Errorf("%s still holds %s from the node", w.r.Name(), prefixOf(n, f))
				}
			}
		}
		return nil
	}
}

// keptAcross reports whether A's route after the restart (since after)
// is the one the router had before the stop (since before). FRR: bgpd told
// zebra to delete it no more times (since counts that). BIRD: the same
// route time; birdc derives it from its monotonic clock, so it may read a
// few microseconds off.
func (w *advWorldR) keptAcross(before, after string) bool {
	if _, frr := w.r.(frrRouter); frr {
		return before == after
	}
	const layout = "2006-01-02 15:04:05.000000"
	parse := func(s string) (time.Time, error) {
		f := strings.Fields(s) // "node4 2026-12-02 11:27:23.757113"
		if len(f) != 3 {
			return time.Time{}, fmt.Errorf("route time %q", s)
		}
		return time.Parse(layout, f[1]+" "+f[2])
	}
	b, err1 := parse(before)
	a, err2 := parse(after)
	d := a.Sub(b)
	return err1 == nil && err2 == nil && d < time.Millisecond && d > -time.Millisecond
}

// sinceOf is the route object's identity of A in each family (advRoute.Since).
func (w *advWorldR) sinceOf(t *testing.T, a lab.Network) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range advFamilies {
		p := prefixOf(a, f)
		if fr, ok := w.r.(frrRouter); ok {
			out[f] = fr.since(p)
			continue
		}
		rs, err := w.r.Routes(f)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := rs[p]
		if !ok {
			t.Fatalf("%s holds no %s from the node", w.r.Name(), p)
		}
		out[f] = r.Since
	}
	return out
}

// advPhase is one restart of the daemon.
type advPhase struct {
	// sig stops the daemon: SIGTERM (graceful, no NOTIFICATION) or SIGKILL.
	sig syscall.Signal
	// gone is deleted from NB while the daemon is down, added is created.
	gone, added lab.Network
	// whileDown, when set, runs after the NB changes, before the restart
	// (e.g. a config change).
	whileDown func(t *testing.T)
	// wantGoneAfter bounds how early gone may leave the router after the
	// restart (the deferral when a peer never sends End-of-RIB).
	wantGoneAfter time.Duration
}

// advResult is what one phase measured, per family.
type advResult struct {
	goneAfter, addedAfter map[string]time.Duration
	upAfter               time.Duration
}

// restartPhase runs one phase (see the file comment) and checks it: A kept
// without a flap, gone withdrawn, added announced, an End-of-RIB per family.
func (w *advWorldR) restartPhase(t *testing.T, ph advPhase) advResult {
	t.Helper()
	a := lab.DefaultNode1
	name := w.r.Name() + " " + ph.sig.String()
	lab.Eventually(t, generous, 50*time.Millisecond, name+": before the stop the router holds A and "+ph.gone.Name+", fresh",
		w.holds([]lab.Network{a, ph.gone}, []lab.Network{ph.added}))
	before := w.sinceOf(t, a)
	eorBefore := map[string]int{}
	for _, f := range advFamilies {
		n, err := w.r.EndOfRIBs(f)
		if err != nil {
			t.Fatal(err)
		}
		eorBefore[f] = n
	}
	interval := 20 * time.Millisecond
	if _, bird := w.r.(birdRouter); bird {
		interval = 25 * time.Millisecond // birdc is a process per call
	}
	kmon := w.l.MonitorRoutes(w.r.KernelNS())
	smp := startSampler(w.r, interval)
	defer smp.Stop()

	stopped := time.Now()
	if ph.sig == syscall.SIGTERM {
		code, took, err := w.d.Stop(15 * time.Second)
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v", name, code, err)
		}
		t.Logf("%s: exit after %v", name, took.Round(time.Millisecond))
	} else {
		if err := w.d.Signal(ph.sig); err != nil {
			t.Fatal(err)
		}
		lab.Eventually(t, 10*time.Second, 10*time.Millisecond, name+": ovnbgp dead", func() error {
			if w.d.Exited() == nil {
				return fmt.Errorf("pid %d still running", w.d.PID())
			}
			return nil
		})
	}
	lab.Eventually(t, generous, 20*time.Millisecond, name+": the router sees both sessions down", func() error {
		for _, f := range advFamilies {
			if err := w.r.Established(f); err == nil {
				return fmt.Errorf("%s session still up", f)
			}
		}
		return nil
	})
	if err := w.nb.Delete(ph.gone); err != nil {
		t.Fatal(err)
	}
	if err := w.nb.Add(ph.added); err != nil {
		t.Fatal(err)
	}
	if ph.whileDown != nil {
		ph.whileDown(t)
	}
	// The router still holds A and gone (stale): nothing told it otherwise.
	for _, f := range advFamilies {
		rs, err := w.r.Routes(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []lab.Network{a, ph.gone} {
			r, ok := rs[prefixOf(n, f)]
			if !ok {
				t.Fatalf("%s: %s dropped %s while ovnbgp was down (%v after the stop)", name, w.r.Name(), prefixOf(n, f), time.Since(stopped).Round(time.Millisecond))
			}
			if _, frr := w.r.(frrRouter); frr && !r.Stale {
				t.Errorf("%s: FRR's path for %s is not stale while ovnbgp is down", name, prefixOf(n, f))
			}
		}
	}
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := w.d.Started
	down := restarted.Sub(stopped)
	if _, err := lab.Poll(advRestartTime, 20*time.Millisecond, w.holds([]lab.Network{a, ph.added}, []lab.Network{ph.gone})); err != nil {
		t.Fatalf("%s: %v after the restart: %v", name, time.Since(restarted).Round(time.Millisecond), err)
	}
	settled := time.Now()
	// A few more samples after the end state, then the analysis.
	time.Sleep(300 * time.Millisecond)
	samples := smp.Stop()
	after := w.sinceOf(t, a)

	res := advResult{goneAfter: map[string]time.Duration{}, addedAfter: map[string]time.Duration{}}
	for _, f := range advFamilies {
		pa, pg, pc := prefixOf(a, f), prefixOf(ph.gone, f), prefixOf(ph.added, f)
		var goneAt, addedAt time.Time
		missing := 0
		for _, s := range samples {
			if s.err != nil {
				continue
			}
			rs := s.routes[f]
			if _, ok := rs[pa]; !ok {
				missing++
				if missing == 1 {
					t.Errorf("%s: %s lacks A (%s) %v after the stop (the restart was at +%v): a flap", name, w.r.Name(), pa,
						s.at[f].Sub(stopped).Round(time.Millisecond), down.Round(time.Millisecond))
				}
			}
			_, hasGone := rs[pg]
			switch {
			case !hasGone && goneAt.IsZero():
				goneAt = s.at[f]
				if s.at[f].Before(restarted) {
					t.Errorf("%s: %s dropped %s %v before the restart: the stale route should stay until our End-of-RIB",
						name, w.r.Name(), pg, restarted.Sub(s.at[f]).Round(time.Millisecond))
				}
			case hasGone && !goneAt.IsZero():
				t.Errorf("%s: %s holds %s again %v after the restart", name, w.r.Name(), pg, s.at[f].Sub(restarted).Round(time.Millisecond))
				goneAt = time.Time{}
			}
			if _, ok := rs[pc]; ok && addedAt.IsZero() {
				addedAt = s.at[f]
			}
		}
		if missing > 0 {
			t.Errorf("%s: A (%s) missing in %d of %d samples", name, pa, missing, len(samples))
		}
		if goneAt.IsZero() {
			goneAt = settled // seen by holds, after the last sample
		}
		if addedAt.IsZero() {
			addedAt = settled
		}
		res.goneAfter[f], res.addedAfter[f] = goneAt.Sub(restarted), addedAt.Sub(restarted)
		if !w.keptAcross(before[f], after[f]) {
			t.Errorf("%s: %s's route for A (%s) was replaced across the restart (since %q -> %q): a withdraw and re-announce",
				name, w.r.Name(), pa, before[f], after[f])
		}
		if res.goneAfter[f] < ph.wantGoneAfter {
			t.Errorf("%s: %s gone %v after the restart, before %v", name, pg, res.goneAfter[f].Round(time.Millisecond), ph.wantGoneAfter)
		}
		n, err := w.r.EndOfRIBs(f)
		if err != nil {
			t.Fatal(err)
		}
		// FRR's flag is per session (a new one starts at 0), BIRD's log
		// counts every marker.
		if _, frr := w.r.(frrRouter); (frr && n != 1) || (!frr && n <= eorBefore[f]) {
			t.Errorf("%s: %s received no End-of-RIB for %s from the restarted node (count %d, before %d)", name, w.r.Name(), f, n, eorBefore[f])
		}
		t.Logf("%s %s: down %v; restart -> %s withdrawn %v, %s announced %v; A kept (since %s), %d samples",
			name, f, down.Round(time.Millisecond), pg, res.goneAfter[f].Round(time.Millisecond), pc,
			res.addedAfter[f].Round(time.Millisecond), after[f], len(samples))
	}
	mon := kmon.Stop()
	for _, f := range advFamilies {
		if del := deletedRoutes(mon, []netip.Prefix{prefixOf(a, f)}); len(del) > 0 {
			t.Errorf("%s: the router's kernel lost A across the restart:\n%s", name, strings.Join(del, "\n"))
		}
		if del := deletedRoutes(mon, []netip.Prefix{prefixOf(ph.gone, f)}); len(del) == 0 {
			t.Errorf("%s: the router's kernel kept %s: ip monitor route:\n%s", name, prefixOf(ph.gone, f), mon)
		}
	}
	return res
}

// runAdvRestart is the test of one router: a SIGTERM phase that withdraws B
// and adds C, a SIGKILL phase that withdraws C and adds B again, and a
// SIGTERM phase with a third peer that never comes up, so that gobgp's
// End-of-RIB wait ends with its deferral timer, not with every peer's
// End-of-RIB.
func runAdvRestart(t *testing.T, kind string) {
	w := startAdvWorld(t, kind, advRestartTime)
	lab.Eventually(t, generous, 100*time.Millisecond, "initial convergence", w.holds([]lab.Network{lab.DefaultNode1, advB}, []lab.Network{advC}))
	w.restartPhase(t, advPhase{sig: syscall.SIGTERM, gone: advB, added: advC})
	w.restartPhase(t, advPhase{sig: syscall.SIGKILL, gone: advC, added: advB})
	// gobgp holds a restarting speaker's UPDATEs until every configured
	// peer sent End-of-RIB or the deferral (bgp/peers.go: grDeferral)
	// expired: a peer that is down makes it wait the whole deferral.
	// 192.0.2.77 has no route in the node's namespace: each dial fails
	// at once, and no packet leaves.
	ghost := lab.Peer{Name: "ghost", Address: netip.MustParseAddr("192.0.2.77"), ASN: 65077}
	w.restartPhase(t, advPhase{sig: syscall.SIGTERM, gone: advB, added: advC, whileDown: func(t *testing.T) {
		cfg := w.d.Cfg
		cfg.Peers = append(advPeers(), ghost)
		text, err := cfg.Render()
		if err != nil {
			t.Fatal(err)
		}
		if err := lab.WriteFileAtomic(w.d.Config, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}, wantGoneAfter: 5 * time.Second})
}

// TestAdvertRestartFRR: FRR 8.4 with `bgp graceful-restart`.
func TestAdvertRestartFRR(t *testing.T) {
	t.Parallel()
	runAdvRestart(t, "frr")
}

// TestAdvertRestartBIRD: BIRD 2 with `graceful restart on`.
func TestAdvertRestartBIRD(t *testing.T) {
	t.Parallel()
	runAdvRestart(t, "bird")
}
