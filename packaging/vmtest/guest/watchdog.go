package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/api"
)

// The watchdog check's files (../unit_test.go puts them in the payload).
const (
	// testHooksBin is ovnbgp built with -tags ovnbgp_testhooks: SIGUSR2
	// hangs its reconcile loop (daemon/testhooks_on.go).
	testHooksBin = "/usr/local/libexec/ovnbgp-testhooks"
	// watchdogDropIn is the test's drop-in that only shortens WatchdogSec;
	// it is installed as watchdogDropInPath for this check.
	watchdogDropIn     = "/etc/vmtest/ovnbgp-watchdog.conf"
	watchdogDropInPath = "/etc/systemd/system/ovnbgp.service.d/watchdog.conf"
	// hookHang is what the test-hooks build logs when SIGUSR2 hangs its
	// loop (daemon/testhooks_on.go's testHookHang).
	hookHang = "test hook: SIGUSR2: the reconcile loop hangs now, for good"
	// table and protoOvnbgp are where the import rule installs and how it
	// marks its routes (config.yaml, rt_protos.d).
	table       = 100
	protoOvnbgp = 200
)

// watchdog proves that the unit's watchdog kills a hung loop and that the
// restart keeps the imports: the test-hooks binary replaces the release
// one, the drop-in shortens WatchdogSec (the shipped unit is unchanged),
// SIGUSR2 hangs the loop, and systemd must kill it for the watchdog
// ("Watchdog timeout", "Failed with result 'watchdog'"), restart it
// (NRestarts+1, a new MainPID, active), and the imported routes must never
// leave table 100 nor the gateway router: netlink and an NB monitor are
// watched for every delete of them, and they are polled throughout, from
// before the binary is swapped until the new daemon has learned them again
// from the peer.
func (c *checker) watchdog() {
	const name = "watchdog"
	fail := func(err error) { c.result(name, err, "") }
	prefixes := []netip.Prefix{netip.MustParsePrefix(learned), netip.MustParsePrefix(added)}
	// Both imported by the release binary, in the kernel and in OVN.
	err := waitFor(time.Minute, func() error { return importedInstalled(prefixes) })
	var w *routeWatch
	if err == nil {
		w, err = watchRoutes(prefixes)
	}
	if err != nil {
		fail(err)
		return
	}
	defer w.close()

	// The test-hooks binary in place of the release one (rename: the
	// running one keeps its inode), and the short watchdog.
	err = os.Rename(testHooksBin, "/usr/local/bin/ovnbgp")
	if err == nil {
		err = copyFile(watchdogDropIn, watchdogDropInPath, 0o644)
	}
	if err == nil {
		_, err = run("systemctl", "daemon-reload")
	}
	// Restarted by hand (not a watchdog restart): the test-hooks build runs
	// with the short watchdog, and keeps it fed while its loop is healthy.
	// (A running instance keeps the watchdog it started with: WatchdogUSec
	// changes with the restart, not with daemon-reload.)
	restartedAt := time.Now()
	if err == nil {
		_, err = run("systemctl", "restart", "ovnbgp")
	}
	var props map[string]string
	if err == nil {
		props, err = unitProps("ovnbgp")
	}
	var wd time.Duration
	if err == nil {
		wd, err = time.ParseDuration(strings.ReplaceAll(props["WatchdogUSec"], "min", "m"))
	}
	if err == nil && (wd <= 0 || wd > 30*time.Second) {
		err = fmt.Errorf("WatchdogUSec=%s after the drop-in %s and a restart, want the test's short watchdog", props["WatchdogUSec"], watchdogDropInPath)
	}
	if err != nil {
		fail(err)
		return
	}
	var before map[string]string
	var hookPID string
	var nb frrNeighbor
	err = waitFor(2*time.Minute, func() error {
		var e error
		before, e = unitProps("ovnbgp")
		if e == nil && (before["ActiveState"] != "active" || before["SubState"] != "running") {
			e = fmt.Errorf("after systemctl restart ovnbgp.service is %s/%s", before["ActiveState"], before["SubState"])
		}
		hookPID = before["MainPID"]
		if e == nil {
			e = importedInstalled(prefixes)
		}
		if e == nil {
			nb, e = neighbor()
		}
		if e == nil && nb.State != "Established" {
			e = fmt.Errorf("FRR's session with %s is %s", nodeIP, nb.State)
		}
		return e
	})
	if err == nil {
		var entries []journalEntry
		entries, err = journalSince(restartedAt)
		if err == nil && !slices.ContainsFunc(entries, func(e journalEntry) bool {
			return e.PID == hookPID && strings.Contains(e.Message, "built with -tags ovnbgp_testhooks")
		}) {
			err = fmt.Errorf("the daemon now running (PID %s) never logged that it was built with -tags ovnbgp_testhooks", hookPID)
		}
	}
	if err != nil {
		fail(fmt.Errorf("the test-hooks build under the short watchdog: %w", err))
		return
	}
	// The control: fed by a healthy loop, the short watchdog does not fire.
	healthy := wd + wd/2
	time.Sleep(healthy)
	still, err := unitProps("ovnbgp")
	if err == nil && (still["MainPID"] != hookPID || still["NRestarts"] != before["NRestarts"] || still["ActiveState"] != "active") {
		err = fmt.Errorf("with a healthy loop the daemon did not stay up for %s under WatchdogSec=%s: MainPID %s -> %s, NRestarts %s -> %s, %s (Result %s)",
			healthy, wd, hookPID, still["MainPID"], before["NRestarts"], still["NRestarts"], still["ActiveState"], still["Result"])
	}
	if err != nil {
		fail(err)
		return
	}
	say("INFO %s: the test-hooks build (PID %s) ran %s under WatchdogSec=%s with its loop healthy: not killed", name, hookPID, healthy, wd)

	// Hang the loop.
	n0, _ := strconv.Atoi(before["NRestarts"])
	sent := time.Now()
	if _, err := run("systemctl", "kill", "--kill-who=main", "--signal=SIGUSR2", "ovnbgp"); err != nil {
		fail(err)
		return
	}
	// Until it is active again: Result=watchdog is visible only until the
	// restart (RestartSec=2), so it is sampled on the way.
	var after map[string]string
	var seen []string
	var activeAt time.Time
	err = waitFor(3*time.Minute, func() error {
		var e error
		after, e = unitProps("ovnbgp")
		if e != nil {
			return e
		}
		st := after["ActiveState"] + "/" + after["SubState"] + " Result=" + after["Result"]
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
		n, _ := strconv.Atoi(after["NRestarts"])
		if after["ActiveState"] != "active" || after["SubState"] != "running" || after["MainPID"] == hookPID || n <= n0 {
			return fmt.Errorf("ovnbgp.service is %s, MainPID %s, NRestarts %s: not restarted yet (states seen: %s)",
				st, after["MainPID"], after["NRestarts"], strings.Join(seen, " -> "))
		}
		activeAt = time.Now()
		return nil
	})
	if err != nil {
		fail(err)
		return
	}
	// What systemd and the hung daemon said, from the journal.
	var hungAt, killAt, startedAt time.Time
	var killLine, resultLine string
	err = waitFor(time.Minute, func() error {
		entries, e := journalSince(sent)
		if e != nil {
			return e
		}
		hungAt, killAt, startedAt, killLine, resultLine = time.Time{}, time.Time{}, time.Time{}, "", ""
		for _, j := range entries {
			switch {
			case hungAt.IsZero() && j.PID == hookPID && strings.Contains(j.Message, hookHang):
				hungAt = j.At
			case killAt.IsZero() && strings.Contains(j.Message, "Watchdog timeout"):
				killAt, killLine = j.At, j.Message
			case resultLine == "" && strings.Contains(j.Message, "Failed with result 'watchdog'"):
				resultLine = j.Message
			case !killAt.IsZero() && startedAt.IsZero() && strings.HasPrefix(j.Message, "Started ovnbgp.service"):
				startedAt = j.At
			}
		}
		switch {
		case hungAt.IsZero():
			return fmt.Errorf("PID %s never logged %q after SIGUSR2: the loop did not hang (a binary without the test hooks?)", hookPID, hookHang)
		case killAt.IsZero() || resultLine == "":
			return fmt.Errorf("no \"Watchdog timeout\" and \"Failed with result 'watchdog'\" in ovnbgp.service's journal since SIGUSR2 (states seen: %s)", strings.Join(seen, " -> "))
		case startedAt.IsZero():
			return fmt.Errorf("no \"Started ovnbgp.service\" in the journal after the watchdog kill")
		}
		return nil
	})
	if err != nil {
		fail(err)
		return
	}

	// The new daemon has the peer's table again: its session is new and
	// the import rule wants both routes (installed, not held as adopted).
	var nb2 frrNeighbor
	err = waitFor(2*time.Minute, func() error {
		var e error
		nb2, e = neighbor()
		if e == nil && (nb2.State != "Established" || nb2.ConnectionsEstablished <= nb.ConnectionsEstablished) {
			e = fmt.Errorf("FRR's session with %s: %s, established %d times (%d before the hang)", nodeIP, nb2.State, nb2.ConnectionsEstablished, nb.ConnectionsEstablished)
		}
		if e == nil {
			e = importedInstalled(prefixes)
		}
		return e
	})
	resyncedAt := time.Now()
	st := w.close()
	if err == nil {
		err = st.err()
	}
	if err != nil {
		fail(err)
		return
	}
	c.result(name, nil, fmt.Sprintf("WatchdogSec=%s (drop-in; shipped unit 60s): SIGUSR2 hung PID %s, %q, %q; "+
		"restarted: MainPID %s, NRestarts %d -> %s, %s/%s (states seen: %s); hang -> kill %s, kill -> active again %s "+
		"(systemd's Started; the checker saw it %s after the kill), kill -> peer's table back %s; "+
		"%s and %s never left table 100 nor %s: %d kernel and %d NB polls over %s, every one found both; "+
		"netlink and the NB monitor saw no delete of them (%d NB row updates)",
		wd, hookPID, killLine, resultLine, after["MainPID"], n0, after["NRestarts"], after["ActiveState"], after["SubState"],
		strings.Join(seen, " -> "), killAt.Sub(hungAt).Round(10*time.Millisecond), startedAt.Sub(killAt).Round(10*time.Millisecond),
		activeAt.Sub(killAt).Round(10*time.Millisecond), resyncedAt.Sub(killAt).Round(10*time.Millisecond),
		learned, added, gatewayRouter, st.polls, st.ovnPolls, st.took.Round(time.Second), st.ovnUpdates))
}

// importedInstalled checks `ovnbgp routes imported`: each prefix is in
// table 100, installed, by the rule "uplink" (wanted from what the peer
// sent, not only held as adopted).
func importedInstalled(prefixes []netip.Prefix) error {
	out, err := run("/usr/local/bin/ovnbgp", "routes", "imported", "-o", "json")
	if err != nil {
		return err
	}
	var imp api.Imported
	if err := json.Unmarshal([]byte(out), &imp); err != nil {
		return fmt.Errorf("ovnbgp routes imported: %w: %s", err, out)
	}
	for _, p := range prefixes {
		if !slices.ContainsFunc(imp.Kernel, func(k api.ImportedKernel) bool {
			return k.Prefix == p && k.Table == table && k.State == api.ImportInstalled && k.Rule == "uplink"
		}) {
			return fmt.Errorf("ovnbgp routes imported: %s is not installed in table %d by rule uplink: %s", p, table, strings.TrimSpace(out))
		}
		if !slices.ContainsFunc(imp.OVN, func(o api.ImportedOVN) bool {
			return o.Prefix == p && o.Router == gatewayRouter && o.NextHop.String() == "192.0.2.1" && o.State == api.ImportInstalled && o.Rule == "uplink"
		}) {
			return fmt.Errorf("ovnbgp routes imported: %s via 192.0.2.1 is not installed on %s by rule uplink: %s", p, gatewayRouter, strings.TrimSpace(out))
		}
	}
	return nil
}

// routeWatch records every delete of the watched prefixes in table 100
// (netlink) and of their OVN static routes (an NB monitor, ovsdb-client),
// and polls that they are there: the kernel every 200 ms, OVN every second.
type routeWatch struct {
	prefixes []netip.Prefix
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
	start    time.Time
	mon      *exec.Cmd // ovsdb-client monitor, ended by its PID at close
	mu       sync.Mutex
	st       watchStats
}

// watchStats is what a routeWatch saw.
type watchStats struct {
	polls, ovnPolls int
	took            time.Duration
	deletes         []string // RTM_DELROUTE, or an NB "delete", of a watched prefix
	ovnUpdates      int      // NB "new" rows (a modify) of a watched prefix
	absent          []string // polls that missed a watched prefix
	errs            []string
}

func (s watchStats) err() error {
	var bad []string
	if len(s.deletes) > 0 {
		bad = append(bad, fmt.Sprintf("%d deletes: %s", len(s.deletes), strings.Join(s.deletes, "; ")))
	}
	if len(s.absent) > 0 {
		bad = append(bad, fmt.Sprintf("%d of %d polls missed a route: %s", len(s.absent), s.polls+s.ovnPolls, strings.Join(first(s.absent, 5), "; ")))
	}
	if len(s.errs) > 0 {
		bad = append(bad, "the watch failed: "+strings.Join(first(s.errs, 5), "; "))
	}
	if len(bad) == 0 && (s.polls == 0 || s.ovnPolls == 0) {
		bad = append(bad, "no poll ran")
	}
	if len(bad) > 0 {
		return fmt.Errorf("the imported routes did not stay in table %d and on %s: %s", table, gatewayRouter, strings.Join(bad, "; "))
	}
	return nil
}

func first(s []string, n int) []string { return s[:min(len(s), n)] }

// watchRoutes starts watching prefixes; they must be in table 100 and on
// the gateway router now.
func watchRoutes(prefixes []netip.Prefix) (*routeWatch, error) {
	w := &routeWatch{prefixes: prefixes, done: make(chan struct{}), start: time.Now()}
	if missing := append(w.pollKernel(), w.pollOVN()...); len(missing) > 0 {
		return nil, fmt.Errorf("before the watchdog check: %s missing", strings.Join(missing, ", "))
	}
	updates := make(chan netlink.RouteUpdate, 256)
	if err := netlink.RouteSubscribeWithOptions(updates, w.done, netlink.RouteSubscribeOptions{
		ErrorCallback: func(err error) { w.fault(err.Error()) },
	}); err != nil {
		return nil, fmt.Errorf("netlink route subscription: %w", err)
	}
	if err := w.monitorNB(); err != nil {
		w.close()
		return nil, err
	}
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case u, ok := <-updates:
				if !ok {
					w.fault("the netlink subscription ended")
					updates = nil
					continue
				}
				if u.Type != unix.RTM_DELROUTE || u.Table != table || u.Dst == nil {
					continue
				}
				if p, ok := netipPrefix(u.Dst.String()); ok && slices.Contains(prefixes, p) {
					w.deleted(fmt.Sprintf("kernel %s: %s", p, u.Route))
				}
			case <-tick.C:
				missing := w.pollKernel()
				w.polled(&w.st.polls, missing)
			}
		}
	}()
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
				missing := w.pollOVN()
				w.polled(&w.st.ovnPolls, missing)
			}
		}
	}()
	return w, nil
}

// gatewayRouter is node1's, where the rule's OVN target puts the routes.
const gatewayRouter = "GR_node1"

// monitorNB starts ovsdb-client monitoring the static routes and returns
// once it has printed their initial rows, the watched ones among them.
func (w *routeWatch) monitorNB() error {
	w.mon = exec.Command("ovsdb-client", "--format=json", "monitor", "unix:"+icSocket, "OVN_Northbound",
		"Logical_Router_Static_Route", "ip_prefix,nexthop")
	out, err := w.mon.StdoutPipe()
	if err != nil {
		return err
	}
	if err := w.mon.Start(); err != nil {
		w.mon = nil
		return fmt.Errorf("ovsdb-client monitor: %w", err)
	}
	initial := make(chan []netip.Prefix, 1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		first := true
		for sc.Scan() {
			var upd struct {
				Data [][]json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(sc.Bytes(), &upd); err != nil {
				w.fault(fmt.Sprintf("ovsdb-client monitor: %v: %.200s", err, sc.Text()))
				continue
			}
			var seen []netip.Prefix
			for _, row := range upd.Data {
				var action, prefix, nexthop string
				if len(row) < 4 || json.Unmarshal(row[1], &action) != nil || json.Unmarshal(row[2], &prefix) != nil ||
					json.Unmarshal(row[3], &nexthop) != nil {
					w.fault(fmt.Sprintf("ovsdb-client monitor: a row without action, ip_prefix, nexthop: %.200s", sc.Text()))
					continue
				}
				p, ok := netipPrefix(prefix)
				if !ok || !slices.Contains(w.prefixes, p) {
					continue
				}
				switch action {
				case "initial":
					seen = append(seen, p)
				case "delete":
					w.deleted(fmt.Sprintf("OVN %s via %s", p, nexthop))
				case "new":
					w.note(func(s *watchStats) { s.ovnUpdates++ })
				}
			}
			if first {
				first = false
				initial <- seen
			}
		}
		if first {
			initial <- nil
		}
		w.fault("ovsdb-client monitor ended")
	}()
	select {
	case seen := <-initial:
		for _, p := range w.prefixes {
			if !slices.Contains(seen, p) {
				return fmt.Errorf("ovsdb-client monitor: the initial rows have no %s (they have %v)", p, seen)
			}
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("ovsdb-client monitor printed no initial rows within a minute")
	}
}

func (w *routeWatch) deleted(what string) {
	at := time.Since(w.start).Round(time.Millisecond)
	w.note(func(s *watchStats) { s.deletes = append(s.deletes, fmt.Sprintf("+%s %s", at, what)) })
}

func (w *routeWatch) polled(n *int, missing []string) {
	at := time.Since(w.start).Round(time.Millisecond)
	w.note(func(s *watchStats) {
		*n++
		if len(missing) > 0 {
			s.absent = append(s.absent, fmt.Sprintf("+%s: %s", at, strings.Join(missing, ", ")))
		}
	})
}

// pollKernel returns the prefixes not in table 100 with our protocol now.
func (w *routeWatch) pollKernel() []string {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return []string{"kernel (list: " + err.Error() + ")"}
	}
	var missing []string
	for _, p := range w.prefixes {
		if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
			q, ok := netipPrefix(fmt.Sprint(r.Dst))
			return ok && q == p && int(r.Protocol) == protoOvnbgp
		}) {
			missing = append(missing, fmt.Sprintf("kernel %s (table %d, proto ovnbgp)", p, table))
		}
	}
	return missing
}

// pollOVN returns the prefixes without a static route via the peer that
// ovnbgp owns on the gateway router now.
func (w *routeWatch) pollOVN() []string {
	out, err := run("ovn-nbctl", "--db=unix:"+icSocket, "--format=csv", "--data=bare", "--no-headings",
		"--columns=ip_prefix,nexthop", "find", "Logical_Router_Static_Route", "external_ids:ovnbgp.io/owner=node1")
	if err != nil {
		return []string{"OVN (" + err.Error() + ")"}
	}
	var missing []string
	for _, p := range w.prefixes {
		if !slices.Contains(lines(out, nil), p.String()+",192.0.2.1") {
			missing = append(missing, fmt.Sprintf("OVN %s via 192.0.2.1 (owned by node1)", p))
		}
	}
	return missing
}

// fault records a failure of the netlink subscription or the NB monitor,
// unless the watch is being closed: closing the socket ends its reader
// with EAGAIN, and the monitor is killed.
func (w *routeWatch) fault(msg string) {
	select {
	case <-w.done:
		return
	default:
	}
	w.note(func(s *watchStats) { s.errs = append(s.errs, msg) })
}

func (w *routeWatch) note(f func(*watchStats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.st)
}

// close stops the watch, the monitor it started included (by its PID),
// and returns what it saw.
func (w *routeWatch) close() watchStats {
	w.once.Do(func() {
		close(w.done)
		if w.mon != nil {
			_ = w.mon.Process.Kill()
			_ = w.mon.Wait()
		}
		w.wg.Wait()
		w.note(func(s *watchStats) { s.took = time.Since(w.start) })
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

func netipPrefix(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	return p, err == nil
}

// journalEntry is one line of ovnbgp.service's journal: the daemon's own,
// or systemd's about the unit.
type journalEntry struct {
	At      time.Time
	PID     string
	Message string
}

// journalSince returns ovnbgp.service's journal from since on.
func journalSince(since time.Time) ([]journalEntry, error) {
	out, err := run("journalctl", "-b", "--no-pager", "-o", "json", "-u", "ovnbgp",
		"--since", "@"+strconv.FormatInt(since.Add(-time.Second).Unix(), 10))
	if err != nil {
		return nil, err
	}
	var res []journalEntry
	for _, l := range lines(out, nil) {
		if l == "" {
			continue
		}
		var raw struct {
			Realtime string          `json:"__REALTIME_TIMESTAMP"`
			PID      string          `json:"_PID"`
			Message  json.RawMessage `json:"MESSAGE"`
		}
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			return nil, fmt.Errorf("journalctl -o json: %w: %.200s", err, l)
		}
		us, err := strconv.ParseInt(raw.Realtime, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("journalctl -o json: __REALTIME_TIMESTAMP %q: %w", raw.Realtime, err)
		}
		at := time.UnixMicro(us)
		if at.Before(since) {
			continue
		}
		// MESSAGE is a string, or an array of bytes when it is not
		// printable UTF-8 (a colour escape).
		var msg string
		if json.Unmarshal(raw.Message, &msg) != nil {
			var b []byte
			var ints []int
			if json.Unmarshal(raw.Message, &ints) == nil {
				for _, i := range ints {
					b = append(b, byte(i))
				}
			}
			msg = string(b)
		}
		res = append(res, journalEntry{At: at, PID: raw.PID, Message: msg})
	}
	return res, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}
