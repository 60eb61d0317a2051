package e2e

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The two slow cases of the hostile-input suite (issue 9 item 2), each in
// a lab of its own (hostile_test.go's startHostile: the real daemon, import
// rules into GR_node1 and kernel table 100, a raw-socket speaker dialing its
// port 179): 10,000 prefix updates a second for 30 s, and 200,000 prefixes
// against maxPrefixes. Both watch every reading of the installed state (the
// poller's, every 200 ms) and, with `ip monitor route` and an NB monitor,
// every route and row ever installed.

// attrMED is a MULTI_EXIT_DISC attribute.
func attrMED(v uint32) []byte { return attr(0x80, 4, binary.BigEndian.AppendUint32(nil, v)) }

// rssOf is the VmRSS of process pid in bytes.
func rssOf(pid int) (int, error) { return statusKB(pid, "VmRSS:") }

// peakRSS is the VmHWM of process pid in bytes: the most it was ever
// resident, not only when sampled.
func peakRSS(pid int) (int, error) { return statusKB(pid, "VmHWM:") }

// statusKB reads a field of /proc/PID/status given in kB, in bytes.
func statusKB(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.Atoi(f[1])
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// watcher checks every reading of the installed state the poller takes
// (and the daemon's RSS with it) until stopped: check returns what is
// wrong with one reading.
type watcher struct {
	mu         sync.Mutex
	samples    int
	maxRSS     int
	violations []string
	stop       chan struct{}
	done       chan struct{}
}

func (w *hostileWorld) watch(check func(hsnap) []string) *watcher {
	wt := &watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(wt.done)
		w.mu.Lock()
		ch := w.changed
		w.mu.Unlock()
		for {
			select {
			case <-wt.stop:
				return
			case <-ch:
			}
			w.mu.Lock()
			s := w.snap
			ch = w.changed
			w.mu.Unlock()
			rss, rerr := rssOf(w.d.PID())
			wt.mu.Lock()
			if s.err == nil {
				wt.samples++
				for _, v := range check(s) {
					if len(wt.violations) < 50 {
						wt.violations = append(wt.violations, v)
					}
				}
			}
			if rerr == nil {
				wt.maxRSS = max(wt.maxRSS, rss)
			}
			wt.mu.Unlock()
		}
	}()
	return wt
}

// Stop ends the watch and returns its counts.
func (wt *watcher) Stop() (samples, maxRSS int, violations []string) {
	select {
	case <-wt.stop:
	default:
		close(wt.stop)
	}
	<-wt.done
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return wt.samples, wt.maxRSS, wt.violations
}

// installedOutside lists what a reading holds outside space up to /maxLen,
// via another next hop than nh, or twice.
func installedOutside(s hsnap, space netip.Prefix, maxLen int, nh string) []string {
	var bad []string
	ok := func(ps string) bool {
		p, err := netip.ParsePrefix(ps)
		return err == nil && space.Contains(p.Addr()) && p.Bits() >= space.Bits() && p.Bits() <= maxLen
	}
	for p, hops := range s.kernel {
		if !ok(p) {
			bad = append(bad, fmt.Sprintf("table 100 holds forbidden %s via %v", p, hops))
		} else if len(hops) != 1 || hops[0] != nh {
			bad = append(bad, fmt.Sprintf("table 100 holds %s via %v, want via %s", p, hops, nh))
		}
	}
	for p, hops := range s.ovn {
		if !ok(p) {
			bad = append(bad, fmt.Sprintf("GR_node1 holds forbidden %s via %v", p, hops))
		} else if len(hops) != 1 || hops[0] != nh {
			bad = append(bad, fmt.Sprintf("GR_node1 holds %s via %v (owned rows), want one via %s", p, hops, nh))
		}
	}
	for _, l := range s.kdup {
		bad = append(bad, "table 100 holds a prefix twice: "+l)
	}
	return bad
}

// checkForeignUntouched fails for every change of a foreign row the NB
// monitor saw and every change of a table 100 route of another protocol
// `ip monitor route` saw.
func checkForeignUntouched(t *testing.T, kmon, nbmon string, uuids []string) {
	t.Helper()
	for _, line := range strings.Split(kmon, "\n") {
		if strings.Contains(line, "table 100") && !strings.Contains(line, " proto 200") {
			t.Errorf("ip monitor route: a foreign route in table 100 changed: %q", line)
		}
	}
	for _, line := range strings.Split(nbmon, "\n") {
		f := strings.Split(line, ",")
		if len(f) >= 2 && slices.Contains(uuids, f[0]) && f[1] != "initial" {
			t.Errorf("the NB monitor saw foreign row %s %s: %q", f[0], f[1], line)
		}
	}
}

const (
	// churnRate and churnFor: prefix updates (an announcement or a
	// withdrawal of one prefix) per second, and for how long
	churnRate = 10000
	churnFor  = 30 * time.Second
	// churnBatch updates go in one UPDATE, one UPDATE per 10 ms
	churnBatch = 100
	// churnRSSGrowth bounds the daemon's RSS over its value before the
	// churn: the daemon holds at most 1,024 + 21 learned paths (about 1 KB
	// each in gobgp) and as many imports, so everything beyond the
	// baseline is garbage between collections (GOGC 100: the heap peaks
	// at twice the live data) and per-update state; 300,000 updates
	// leaking 250 bytes each would pass it (measured: about +30 MiB).
	churnRSSGrowth = 64 << 20
)

// churnSpace is where the churn's acceptable prefixes are: 1,024 /26s.
var churnSpace = netip.MustParsePrefix("10.99.0.0/16")

const churnLen = 26

func churnPool() []netip.Prefix {
	var ps []netip.Prefix
	for i := range 1024 {
		ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i / 4), byte(i % 4 * 64)}), churnLen))
	}
	return ps
}

// churnForbidden is mixed into the churn: each one accepted by the rule's
// entry (0.0.0.0/0 up to /32) and refused by the import filter's own
// protection.
var churnForbidden = []string{
	"0.0.0.0/0",                                         // the default route without allowDefaultRoute
	"10.128.0.0/23", "10.128.1.128/25", "10.128.2.0/24", // pod subnets (node1's, node2's) and more-specifics
	"10.200.0.0/24", "10.200.1.64/26", // the UDN blue's
	"172.30.0.0/16", "172.30.9.0/24", // service CIDR
	"100.64.0.0/16", "100.64.5.0/24", "100.88.3.0/24", // join, transit
	"169.254.169.0/29",                         // masquerade
	"0.0.0.0/8", "127.0.0.0/8", "127.0.0.1/32", // martians
	"169.254.10.0/24", "224.0.0.0/4", "239.1.2.0/24", "240.0.0.0/4", "255.255.255.255/32",
	"203.0.113.100/32", // the peer's own address
}

const churnRule = `  - name: churn
    peers: [churn]
    network: default
    maxRoutes: 2000
    accept:
      - {prefix: 0.0.0.0/0, maxLength: 32}
    targets: {ovn: true, kernel: {table: 100}}`

// TestHostileChurn: a raw speaker announces, re-announces (another MED)
// and withdraws prefixes at 10,000 prefix updates a second for 30 s: a pool
// of 1,024 /26s the rule imports into GR_node1 and table 100, with 21
// protected and special-purpose prefixes mixed in. Then a final known
// state. At every reading while it runs: nothing outside the pool, nothing
// twice, only the speaker's next hop, RSS within churnRSSGrowth of the
// start. At the end: OVN and the kernel hold exactly the final accepted
// set, the forbidden are rejected with their reasons, the session was never
// reset, nothing foreign was touched, the daemon is alive.
func TestHostileChurn(t *testing.T) {
	t.Parallel()
	addr := netip.MustParseAddr("203.0.113.100")
	pool := churnPool()
	var forbidden []netip.Prefix
	for _, p := range churnForbidden {
		forbidden = append(forbidden, netip.MustParsePrefix(p))
	}
	var foreignUUIDs []string
	w := startHostile(t, []netip.Addr{addr}, func(w *hostileWorld) {
		// not ovnbgp's: a row that duplicates a prefix of the final
		// set exactly, one elsewhere, table 100 routes of protocols
		// static and boot (one on a pool prefix, at metric 4242)
		w.nb.MustNBCtl("lr-route-add", "GR_node1", pool[0].String(), addr.String())
		w.nb.MustNBCtl("lr-route-add", "GR_node1", "10.99.255.0/24", "203.0.113.9")
		rows, err := w.nb.StaticRoutes("GR_node1")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			foreignUUIDs = append(foreignUUIDs, r.UUID)
		}
		for _, c := range [][]string{
			{"ip", "route", "add", "blackhole", "10.99.250.0/24", "table", "100", "proto", "static"},
			{"ip", "route", "add", pool[3].String(), "dev", "lo", "table", "100", "proto", "boot", "metric", "4242"},
		} {
			if out, err := w.l.Exec(w.l.Node, c...); err != nil {
				t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
			}
		}
	}, lab.DaemonConfig{
		Peers:  []lab.Peer{{Name: "churn", Address: addr, ASN: hostileASN, Passive: true, Families: []string{"ipv4"}}},
		Import: churnRule,
	})
	foreign0 := foreignOrError(w.l, w.nb, foreignUUIDs)
	t.Logf("not ovnbgp's:\n%s", foreign0)
	kmon := w.l.MonitorRoutes(w.l.Node)
	nbmon := w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")

	c := &hctx{w: w, peer: "churn", addr: addr}
	c.connect(t, nil)
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "churn peer established", func() error {
		p, err := w.d.Peer("churn")
		if err != nil {
			return err
		}
		if p.State != model.StateEstablished {
			return fmt.Errorf("state %s", p.State)
		}
		return nil
	})
	p0, err := w.d.Peer("churn")
	if err != nil {
		t.Fatal(err)
	}
	rss0 := w.rss(t)
	rssBound := rss0 + churnRSSGrowth
	watch := w.watch(func(s hsnap) []string {
		return installedOutside(s, churnSpace, churnLen, addr.String())
	})
	defer watch.Stop()

	// all prefixes: the pool, then the forbidden ones
	all := append(slices.Clone(pool), forbidden...)
	announced := make([]bool, len(all))
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("OVNBGP_CHURN_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("OVNBGP_CHURN_SEED=%q: %v: want an unsigned integer", v, err)
		}
	}
	t.Logf("churn seed %d (OVNBGP_CHURN_SEED repeats it)", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	total := int(churnRate * churnFor / time.Second)
	batches := total / churnBatch
	every := churnFor / time.Duration(batches)
	var sent, announces, withdrawals, forbiddenSent int
	start := time.Now()
	touched := make([]int, len(all)) // batch number+1 that last touched a prefix
	for b := range batches {
		if d := time.Until(start.Add(time.Duration(b) * every)); d > 0 {
			time.Sleep(d)
		}
		var wd, nl []netip.Prefix
		for range churnBatch {
			i := 0
			for {
				if rnd.IntN(20) == 0 { // 5 %: a forbidden one
					i = len(pool) + rnd.IntN(len(forbidden))
				} else {
					i = rnd.IntN(len(pool))
				}
				if touched[i] != b+1 { // a prefix at most once per UPDATE
					break
				}
			}
			touched[i] = b + 1
			if i >= len(pool) {
				forbiddenSent++
			}
			if announced[i] && rnd.IntN(2) == 0 {
				announced[i] = false
				wd = append(wd, all[i])
				withdrawals++
			} else {
				announced[i] = true // new, or again with another MED
				nl = append(nl, all[i])
				announces++
			}
		}
		var attrs []byte
		if len(nl) > 0 {
			attrs = cat(c.std(), attrMED(uint32(b)))
		}
		if err := c.s.Send(updateMsg(nlri(wd...), attrs, nlri(nl...))); err != nil {
			t.Fatalf("after %d updates: the session ended: %v (%v)", sent, err, c.s.Notified())
		}
		sent += len(wd) + len(nl)
	}
	took := time.Since(start)
	t.Logf("churn: %d prefix updates sent (%d announcements, %d withdrawals, %d of forbidden prefixes) in %d UPDATEs over %s: %.0f updates/s (target %d/s)",
		sent, announces, withdrawals, forbiddenSent, batches, took.Round(time.Millisecond), float64(sent)/took.Seconds(), churnRate)
	if sent != total {
		t.Fatalf("sent %d prefix updates, want %d", sent, total)
	}

	// the final known state: every third pool prefix and every forbidden
	// one announced, the rest withdrawn
	var final []netip.Prefix
	var wd, nl []netip.Prefix
	for i, p := range all {
		if i >= len(pool) || i%3 == 0 {
			nl = append(nl, p)
			if i < len(pool) {
				final = append(final, p)
			}
		} else if announced[i] {
			wd = append(wd, p)
		}
	}
	for len(wd) > 0 || len(nl) > 0 {
		a, b := min(len(wd), 400), min(len(nl), 400)
		var attrs []byte
		if b > 0 {
			attrs = cat(c.std(), attrMED(7))
		}
		if err := c.s.Send(updateMsg(nlri(wd[:a]...), attrs, nlri(nl[:b]...))); err != nil {
			t.Fatalf("final state: the session ended: %v (%v)", err, c.s.Notified())
		}
		wd, nl = wd[a:], nl[b:]
	}
	finalSet := map[string]bool{}
	for _, p := range final {
		finalSet[p.String()] = true
	}
	conv := time.Now()
	w.wait(t, "OVN and table 100 hold exactly the final accepted set", 120*time.Second, func(s hsnap) error {
		if bad := installedOutside(s, churnSpace, churnLen, addr.String()); len(bad) > 0 {
			return fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		for p := range finalSet {
			if _, ok := s.kernel[p]; !ok {
				return fmt.Errorf("table 100 lacks %s", p)
			}
			// the foreign duplicate of pool[0] stands for ovnbgp's row
			if _, ok := s.ovn[p]; !ok && p != pool[0].String() {
				return fmt.Errorf("GR_node1 lacks %s", p)
			}
		}
		for p := range s.kernel {
			if !finalSet[p] {
				return fmt.Errorf("table 100 still holds %s", p)
			}
		}
		for p := range s.ovn {
			if !finalSet[p] || p == pool[0].String() {
				return fmt.Errorf("GR_node1 holds owned %s", p)
			}
		}
		return nil
	})
	t.Logf("converged to the final state (%d prefixes) %s after it was sent", len(final), time.Since(conv).Round(time.Millisecond))
	samples, maxRSS, violations := watch.Stop()
	for _, v := range violations {
		t.Errorf("during the churn: %s", v)
	}
	if hwm, err := peakRSS(w.d.PID()); err == nil {
		maxRSS = max(maxRSS, hwm) // the peak, not only at the readings
	}
	t.Logf("%d readings of OVN and table 100 during the churn; daemon RSS %d KiB before, at most %d KiB during (bound %d KiB)",
		samples, rss0>>10, maxRSS>>10, rssBound>>10)
	if maxRSS > rssBound {
		t.Errorf("daemon RSS reached %d KiB, above the bound %d KiB (%d KiB before the churn + %d KiB)", maxRSS>>10, rssBound>>10, rss0>>10, churnRSSGrowth>>10)
	}

	// the forbidden ones are learned and rejected by the filter
	rej, err := w.d.Learned(true)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[netip.Prefix]string{}
	for _, lp := range rej {
		if lp.Peer == "churn" && !lp.Accepted {
			reasons[lp.Prefix] = lp.Reason + lp.Malformed
		}
	}
	for _, p := range forbidden {
		r, ok := reasons[p]
		if !ok {
			t.Errorf("%s: not in routes learned --rejected", p)
			continue
		}
		if !strings.Contains(r, "protected") && !strings.Contains(r, "special-purpose") && !strings.Contains(r, "default route") {
			t.Errorf("%s rejected for %q: want protected, special-purpose or the default route", p, r)
		}
	}

	// the session was never reset
	if n := c.s.Notified(); n != nil {
		t.Errorf("the daemon sent %s", n)
	}
	select {
	case <-c.s.closed:
		t.Errorf("the daemon closed the session: %v", c.s.readErr())
	default:
	}
	p1, err := w.d.Peer("churn")
	if err != nil {
		t.Fatal(err)
	}
	if p1.State != model.StateEstablished || !p1.Since.Equal(p0.Since) {
		t.Errorf("peers: churn %s since %s (%s), want established since %s: the session was reset", p1.State, p1.Since, p1.LastError, p0.Since)
	}
	if p1.Imported != len(final) {
		t.Errorf("peers: churn imported %d, want %d", p1.Imported, len(final))
	}
	if err := w.d.Exited(); err != nil {
		t.Fatalf("the daemon died: %v", err)
	}

	// nothing forbidden ever, nothing foreign touched
	kout, nbout := kmon.Stop(), nbmon.Stop()
	checkEverInstalledIn(t, "ip monitor route", kout, "table 100", churnSpace, churnLen)
	checkEverInstalledIn(t, "the NB monitor", nbout, "", churnSpace, churnLen)
	checkForeignUntouched(t, kout, nbout, foreignUUIDs)
	if f := foreignOrError(w.l, w.nb, foreignUUIDs); f != foreign0 {
		t.Errorf("what ovnbgp does not own changed:\nbefore:\n%s\nnow:\n%s", foreign0, f)
	}
}

const (
	// floodMax is the flood peer's maxPrefixes, floodSent what it sends
	floodMax  = 100000
	floodSent = 200000
	// floodCap is the import rule's maxRoutes, far below maxPrefixes
	floodCap = 100
	// floodHold is how long ovnbgp keeps a session down after maxPrefixes
	// reset it (bgp.defaultPrefixHold, docs/config.md: "a minute")
	floodHold = time.Minute
	// floodRSS bounds the daemon's peak RSS (VmHWM: the most it was
	// ever resident). A burst costs more than what it leaves: gobgp
	// parses every UPDATE it read ahead into paths, the daemon journals
	// and filters each path gobgp takes, and the collector lets the heap
	// grow to twice the live data; measured here about 3 KB per prefix
	// taken at the peak: 335-354 MiB when the limit holds (maxPrefixes
	// plus one UPDATE taken), 384 MiB when all 200,000 went in (before
	// prefixAdmit). The bound is the measured peak with a quarter for the
	// collector's timing.
	floodRSS = 448 << 20
	// floodRSSAfter bounds the RSS at the end over the RSS before the
	// flood: the flood's memory is given back (daemon/trim.go) once the
	// session is gone.
	floodRSSAfter = 64 << 20
)

const floodRule = `  - name: flood
    peers: [flood]
    network: default
    maxRoutes: 100
    accept:
      - {prefix: 10.99.0.0/16, maxLength: 24}
    targets: {ovn: true, kernel: {table: 100}}`

// floodPrefix is the i-th /24 from 11.0.0.0 on: outside every accept
// entry (rejected, never imported), and not special-purpose space.
func floodPrefix(i int) netip.Prefix {
	n := uint32(11<<24) + uint32(i)<<8
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), 0}), 24)
}

// TestHostileMaxPrefixes: a peer with maxPrefixes 100,000 and an import
// rule capped at 100 routes. It offers the 256 /24s of 10.99.0.0/16: the
// lowest 100 are imported, the rest held back by the cap with an alarm,
// the session kept. Then it sends 200,000 more prefixes as fast as TCP
// takes them, in UPDATEs as large as the session allows (extended
// messages, RFC 8654: 16,000 NLRI each). RFC 4486: NOTIFICATION Cease /
// Maximum Number of Prefixes Reached (6/1), session down; the session's
// imports are withdrawn from OVN and the kernel as for any session loss
// (no graceful restart on this session); `peers` names maxPrefixes; a
// connection during the hold does not come up; the daemon takes the peer
// again no earlier than the hold (a minute) after the reset, and the
// session comes up and imports again. At every reading: at most floodCap
// routes, only inside 10.99.0.0/16 up to /24. The peak RSS stays under
// floodRSS and is given back after the reset; the daemon is alive.
func TestHostileMaxPrefixes(t *testing.T) {
	t.Parallel()
	addr := netip.MustParseAddr("203.0.113.100")
	w := startHostile(t, []netip.Addr{addr}, nil, lab.DaemonConfig{
		Peers: []lab.Peer{{Name: "flood", Address: addr, ASN: hostileASN, Passive: true, Families: []string{"ipv4"},
			MaxPrefixes: floodMax}},
		Import: floodRule,
	})
	kmon := w.l.MonitorRoutes(w.l.Node)
	nbmon := w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")
	space := netip.MustParsePrefix(legitSpace)
	watch := w.watch(func(s hsnap) []string {
		bad := installedOutside(s, space, legitMax, addr.String())
		if len(s.kernel) > floodCap || len(s.ovn) > floodCap {
			bad = append(bad, fmt.Sprintf("%d routes in table 100 and %d in GR_node1, above the import cap %d", len(s.kernel), len(s.ovn), floodCap))
		}
		return bad
	})
	defer watch.Stop()

	var offered, capped []netip.Prefix
	for i := range 256 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i), 0}), 24)
		offered = append(offered, p)
		if i < floodCap {
			capped = append(capped, p)
		}
	}
	c := &hctx{w: w, peer: "flood", addr: addr}
	// the cap: the lowest floodCap of the 256 imported, exactly
	importCapped := func(what string) {
		t.Helper()
		if err := c.s.Send(c.announce(offered...)); err != nil {
			t.Fatal(err)
		}
		w.wait(t, what, 60*time.Second, func(s hsnap) error {
			for _, p := range capped {
				if _, ok := s.kernel[p.String()]; !ok {
					return fmt.Errorf("table 100 lacks %s", p)
				}
				if _, ok := s.ovn[p.String()]; !ok {
					return fmt.Errorf("GR_node1 lacks %s", p)
				}
			}
			if len(s.kernel) != floodCap || len(s.ovn) != floodCap {
				return fmt.Errorf("%d routes in table 100, %d in GR_node1, want %d", len(s.kernel), len(s.ovn), floodCap)
			}
			return nil
		})
		p, err := w.d.Peer("flood")
		if err != nil {
			t.Fatal(err)
		}
		if p.State != model.StateEstablished || p.ImportAlarm == "" || p.Imported != floodCap {
			t.Fatalf("peers: flood %s, imported %d, import alarm %q: want established, %d, an alarm", p.State, p.Imported, p.ImportAlarm, floodCap)
		}
	}
	// extended messages: the largest UPDATEs
	open := openMsg(4, hostileASN, 90, addr, capParam(capMP(1, 1), cap4Octet(hostileASN), capability(6, nil)))
	c.connect(t, open)
	importCapped("the lowest 100 of 256 offered imported (maxRoutes 100)")
	rss0 := w.rss(t)

	// the flood
	msgMax := 4096
	if c.s.PeerCapability(6) {
		msgMax = 65535
	}
	perMsg := (msgMax - 19 - 4 - len(c.std())) / 4 // a /24 takes 4 octets
	type result struct {
		prefixes, msgs int
		took           time.Duration
		err            error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		var r result
		for r.prefixes < floodSent {
			n := min(perMsg, floodSent-r.prefixes)
			ps := make([]netip.Prefix, n)
			for i := range ps {
				ps[i] = floodPrefix(r.prefixes + i)
			}
			if r.err = c.s.Send(updateMsg(nil, c.std(), nlri(ps...))); r.err != nil {
				break
			}
			r.prefixes += n
			r.msgs++
		}
		r.took = time.Since(start)
		done <- r
	}()
	n, err := c.s.WaitClosed(3 * time.Minute)
	if err != nil {
		t.Fatalf("the session still open 3 minutes after the flood began: %v", err)
	}
	downAt := time.Now()
	r := <-done
	t.Logf("flood: %d of %d prefixes written to the socket in %d UPDATEs of up to %d NLRI (%d-octet messages) in %s (%v); connection closed %s after the flood began",
		r.prefixes, floodSent, r.msgs, perMsg, msgMax, r.took.Round(time.Millisecond), r.err, downAt.Sub(start).Round(time.Millisecond))
	if n == nil || n.code != 6 || n.sub != 1 {
		t.Fatalf("the daemon sent %v, want NOTIFICATION 6/1 Cease / Maximum Number of Prefixes Reached (RFC 4486)", n)
	}
	// the session's imports go with it
	w.wait(t, "the session's imports withdrawn from OVN and table 100", 60*time.Second, func(s hsnap) error {
		if len(s.kernel) > 0 || len(s.ovn) > 0 {
			return fmt.Errorf("%d routes in table 100, %d in GR_node1", len(s.kernel), len(s.ovn))
		}
		return nil
	})
	p, err := w.d.Peer("flood")
	if err != nil {
		t.Fatal(err)
	}
	if p.State == model.StateEstablished || !strings.Contains(p.LastError, "maxPrefixes") {
		t.Fatalf("peers: flood %s, last error %q: want down, naming maxPrefixes", p.State, p.LastError)
	}
	resetAt := p.LastErrorAt
	t.Logf("peers: flood %s: %s (at %s)", p.State, p.LastError, resetAt.Format(time.RFC3339Nano))

	// during the hold, a connection does not come up
	c.s.Close()
	s, err := newRawSession(w.l.Tor, addr, daemonAddr)
	if err == nil {
		err = s.Establish(open, 5*time.Second)
		s.Close()
		if err == nil && time.Since(resetAt) < floodHold {
			t.Fatalf("a session came up %s after maxPrefixes reset it, before the hold of %s", time.Since(resetAt), floodHold)
		}
	}
	t.Logf("a connection during the hold: %v", err)

	// after the hold, the daemon takes the peer's connections again
	// (gobgp's state leaves idle: active), and a session comes up
	var reenabled time.Time
	lab.Eventually(t, floodHold+60*time.Second, 200*time.Millisecond, "flood re-enabled after the hold", func() error {
		p, err := w.d.Peer("flood")
		if err != nil {
			return err
		}
		if p.State == model.StateIdle {
			return fmt.Errorf("state %s (%s)", p.State, p.LastError)
		}
		reenabled = time.Now()
		return nil
	})
	t.Logf("re-enabled %s after the reset", reenabled.Sub(resetAt).Round(time.Millisecond))
	// the hold is the daemon's timer, a lower bound whatever the load
	if d := reenabled.Sub(resetAt); d < floodHold {
		t.Errorf("re-enabled %s after the reset, before the hold of %s", d, floodHold)
	}
	tries := 0
	_, perr := lab.Poll(60*time.Second, time.Second, func() error {
		tries++
		var err error
		if c.s, err = newRawSession(w.l.Tor, addr, daemonAddr); err != nil {
			return err
		}
		if err = c.s.Establish(open, 10*time.Second); err != nil {
			c.s.Close()
		}
		return err
	})
	if perr != nil {
		t.Fatalf("no session within 60 s of the re-enable: %v", perr)
	}
	t.Cleanup(c.s.Close)
	if err := c.s.Send(updateMsg(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
	var p2 model.PeerStatus
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "flood established again", func() error {
		var err error
		if p2, err = w.d.Peer("flood"); err != nil {
			return err
		}
		if p2.State != model.StateEstablished {
			return fmt.Errorf("state %s", p2.State)
		}
		return nil
	})
	t.Logf("established again %s after the reset (%d connection attempts)", p2.Since.Sub(resetAt).Round(time.Millisecond), tries)
	if d := p2.Since.Sub(resetAt); d < floodHold {
		t.Errorf("established again %s after the reset, before the hold of %s", d, floodHold)
	}
	importCapped("after the hold: the lowest 100 of 256 imported again")
	if n := c.s.Notified(); n != nil {
		t.Fatalf("the daemon sent %s", n)
	}

	samples, maxRSS, violations := watch.Stop()
	for _, v := range violations {
		t.Errorf("during the flood: %s", v)
	}
	if hwm, err := peakRSS(w.d.PID()); err == nil {
		maxRSS = max(maxRSS, hwm)
	}
	rss1 := w.rss(t)
	t.Logf("%d readings of OVN and table 100; daemon RSS %d KiB before the flood, at most %d KiB (bound %d KiB), %d KiB at the end (bound %d KiB)",
		samples, rss0>>10, maxRSS>>10, floodRSS>>10, rss1>>10, (rss0+floodRSSAfter)>>10)
	if maxRSS > floodRSS {
		t.Errorf("daemon RSS reached %d KiB, above the bound %d KiB", maxRSS>>10, floodRSS>>10)
	}
	if rss1 > rss0+floodRSSAfter {
		t.Errorf("daemon RSS %d KiB at the end, more than %d KiB over the %d KiB before the flood: the flood's memory was kept", rss1>>10, floodRSSAfter>>10, rss0>>10)
	}
	if err := w.d.Exited(); err != nil {
		t.Fatalf("the daemon died: %v", err)
	}
	checkEverInstalled(t, "ip monitor route", kmon.Stop(), "table 100")
	checkEverInstalled(t, "the NB monitor", nbmon.Stop(), "")
}
