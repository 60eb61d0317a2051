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
func rssOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.Atoi(f[1])
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
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

// foreign is what ovnbgp does not own in a hostile world: GR_node1's rows
// of the given UUIDs (every column) and table 100's routes of other
// protocols, as text.
func (w *hostileWorld) foreign(uuids []string) string {
	var b strings.Builder
	refs, err := w.nb.NBCtl("get", "logical_router", "GR_node1", "static_routes")
	if err != nil {
		return fmt.Sprintf("(GR_node1: %v)", err)
	}
	for _, u := range uuids {
		row, err := w.nb.RowJSON("Logical_Router_Static_Route", u)
		if err != nil {
			row = fmt.Sprintf("(row %s: %v)", u, err)
		}
		b.WriteString(row + "\n")
		if !strings.Contains(refs, u) {
			fmt.Fprintf(&b, "GR_node1 no longer references %s\n", u)
		}
	}
	lines, err := w.l.KernelRoutes(w.l.Node, importTable, "")
	if err != nil {
		return fmt.Sprintf("(table %d: %v)", importTable, err)
	}
	for _, l := range lines {
		if !strings.Contains(l, " proto 200 ") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
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
	foreign0 := w.foreign(foreignUUIDs)
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
	if f := w.foreign(foreignUUIDs); f != foreign0 {
		t.Errorf("what ovnbgp does not own changed:\nbefore:\n%s\nnow:\n%s", foreign0, f)
	}
}
