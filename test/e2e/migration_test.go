package e2e

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// migrationHold is the workloadIP rule's handover.holdTime in the live
// migration tests.
const migrationHold = 3 * time.Second

// TestLiveMigrationLayer2 (issue 19): two ovnbgp nodes in one ASN, each
// with its own NB (interconnect), both eBGP to one FRR; a workloadIP rule
// (handover.holdTime 3 s) for a primary layer2 UDN. A KubeVirt VM migrates
// back and forth, through the states exactly as OVN-Kubernetes writes them
// in both NBs (docs/ovn-nb.md, "Live migration"): the target's port
// created disabled (no addresses, port_security with the IP) in both; the
// target ready, one transaction per NB enabling the target and disabling
// the source (addresses cleared), the NBs in either order; the source
// pod's ports deleted later. While the target is created, the source sends
// the address with the handover's AS-path prepend and no LOCAL_PREF (eBGP);
// once the target is active its node sends it unprepended and FRR's best
// path moves there while the source still sends it; the source withdraws
// no earlier than holdTime after its NB's handover. FRR never lacks a path
// for the VM's /32 once it had one: neither in its RIB, polled every 20 ms
// throughout, nor in its log of received UPDATEs replayed (the set of
// neighbours holding the prefix is never empty). The time from the target
// node's NB commit to FRR's best path via the target is logged per
// migration (docs/benchmarks.md, "Live migration handover (issue 19)").
func TestLiveMigrationLayer2(t *testing.T) {
	t.Parallel()
	const runs = 6
	l := lab.New(t)
	node2Addr := netip.MustParseAddr("192.0.2.10")
	l.AddNodeAddress(node2Addr)
	nodes := []string{"node1", "node2"}
	addr := map[string]netip.Addr{"node1": lab.NodeIPv4, "node2": node2Addr}
	green := lab.Layer2Net{Network: "ns2_green", NAD: "ns2/green", Subnet: netip.MustParsePrefix("10.100.0.0/16")}
	nbs := map[string]*lab.NB{}
	for _, n := range nodes {
		nbs[n] = l.StartNB()
		if err := nbs[n].Layer2Zone(n, nodes, green); err != nil {
			t.Fatal(err)
		}
	}
	frr := l.StartFRR(lab.FRRConfig{UpdateLog: true, Neighbors: []lab.FRRNeighbor{
		{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
		{Address: node2Addr, ASN: 65010, Passive: true, DisableConnectedCheck: true},
	}})
	rule := fmt.Sprintf(`  - {name: vms, kind: workloadIP, networks: ["ns2_green"], handover: {holdTime: %s}}`, migrationHold)
	// FRR ignores a LOCAL_PREF from an eBGP neighbour unparsed: a raw
	// speaker (AS 65099, from a tor address) peers with node1 and reads
	// every UPDATE's attributes off the wire
	wireAddr := netip.MustParseAddr("192.0.2.21")
	l.AddTorAddress(wireAddr)
	daemons := map[string]*lab.Daemon{}
	for _, n := range nodes {
		tor := lab.DefaultTor()
		tor.Families = []string{"ipv4"}
		cfg := lab.DaemonConfig{Node: n, RouterID: addr[n], Advertise: rule, Peers: []lab.Peer{tor}}
		if n == "node1" {
			cfg.ListenPort = 179
			cfg.Peers = append(cfg.Peers, lab.Peer{Name: "wire", Address: wireAddr, ASN: 65099, Passive: true, Families: []string{"ipv4"}})
		} else {
			tor.SourceAddress = addr[n]
			cfg.Peers = []lab.Peer{tor}
		}
		daemons[n] = l.StartDaemon(nbs[n], cfg)
	}
	wire := watchWire(t, l.Tor, wireAddr, netip.AddrPortFrom(lab.NodeIPv4, 179))

	vmIP := netip.MustParseAddr("10.100.0.10")
	host := netip.PrefixFrom(vmIP, 32)
	source := lab.VMPod{Net: green, Namespace: "ns2", VM: "vm-a", Pod: "virt-launcher-vm-a-x7k2p", Node: "node1",
		MAC: "0a:58:0a:64:00:0a", IP: vmIP, TnlKey: 10}
	// the VM runs on node1: node1's port local (enabled unset), node2's
	// NB has it as a remote port
	enabled := true
	if err := nbs["node1"].AddVMPod("node1", source, nil); err != nil {
		t.Fatal(err)
	}
	if err := nbs["node2"].AddVMPod("node2", source, &enabled); err != nil {
		t.Fatal(err)
	}
	waitMigrationPaths(t, frr, "the VM on node1: node1 advertises it", host, nil, migPath{addr["node1"], "65010", true})
	w := watchRIB(t, frr, host, 20*time.Millisecond)

	var latencies, received []time.Duration
	disabled := false
	for i := range runs {
		from, to := nodes[i%2], nodes[(i+1)%2]
		target := source
		target.Pod, target.Node, target.TnlKey = fmt.Sprintf("virt-launcher-vm-a-m%d", i), to, 11+i
		// migration starts: the target's port created disabled in
		// both NBs
		for _, n := range []string{from, to} {
			if err := nbs[n].AddVMPod(n, target, &disabled); err != nil {
				t.Fatal(err)
			}
		}
		what := fmt.Sprintf("migration %d %s->%s", i+1, from, to)
		waitMigrationPaths(t, frr, what+", target created: the source sends the handover's prepend", host, nil,
			migPath{addr[from], "65010 65010 65010", true})
		checkAdvertised(t, daemons[from], host, what+", target created", "handover leaving", 2)
		checkAdvertised(t, daemons[to], host, what+", target created", "", -1)

		// target ready: one transaction per NB, in either order (each
		// zone's controller writes its own)
		order := []string{to, from}
		if i%2 == 1 {
			order = []string{from, to}
		}
		var active, toCommitStart, fromCommitStart time.Time
		for _, n := range order {
			start := time.Now()
			at, err := nbs[n].HandOver(target, source)
			if err != nil {
				t.Fatal(err)
			}
			if n == to {
				active, toCommitStart = at, start
			} else {
				fromCommitStart = start
			}
		}
		var bestAt time.Time
		overlap := waitMigrationPaths(t, frr, what+", target active: FRR's best path via the target, unprepended", host,
			&bestAt, migPath{addr[to], "65010", true}, migPath{addr[from], "65010 65010 65010", false})
		latencies = append(latencies, bestAt.Sub(active))
		checkAdvertised(t, daemons[from], host, what+", target active", "handover left", 2)
		checkAdvertised(t, daemons[to], host, what+", target active", "", 0)
		// the source withdraws after its hold
		waitMigrationPaths(t, frr, what+", after the hold: only the target", host, nil, migPath{addr[to], "65010", true})
		if !overlap && !w.sawBoth(addr[to], active) {
			t.Errorf("%s: FRR never held the source's path beside the target's best one after the target was active: the handover is no make-before-break", what)
		}
		// FRR batches its log writes (no `log immediate-mode`): the
		// line of the withdraw FRR's RIB already shows may come a
		// little later (CI saw it missing when read at once).
		var ups []lab.Update
		lab.Eventually(t, generous, 50*time.Millisecond, what+": FRR's log has the source's withdraw", func() error {
			var err error
			if ups, err = lab.ParseUpdateLog(filepath.Join(frr.Dir, "frr.log")); err != nil {
				return err
			}
			if wd := lastUpdate(ups, addr[from], host, true); wd.At.IsZero() || wd.At.Before(fromCommitStart) {
				return fmt.Errorf("no withdraw of %s from %s after the handover in FRR's UPDATE log yet", host, addr[from])
			}
			return nil
		})
		// FRR's log dates the target's announcement: FRR's own time
		// to select it is the rest
		recv := time.Time{}
		for _, u := range ups {
			if u.Neighbor == addr[to] && u.Prefix == host && !u.Withdraw && strings.HasSuffix(u.Attrs, "path 65010") && u.At.After(toCommitStart) {
				recv = u.At
				break
			}
		}
		t.Logf("%s: target active (its NB's commit returned) to FRR's best path via %s: %s (FRR received it after %s)", what, addr[to],
			bestAt.Sub(active).Round(time.Millisecond), recv.Sub(active).Round(100*time.Microsecond))
		if !recv.IsZero() {
			received = append(received, recv.Sub(active))
		}
		wd := lastUpdate(ups, addr[from], host, true)
		switch {
		case wd.At.IsZero() || wd.At.Before(fromCommitStart):
			t.Errorf("%s: FRR's UPDATE log has no withdraw of %s from %s after the handover", what, host, addr[from])
		case wd.At.Before(fromCommitStart.Add(migrationHold)):
			t.Errorf("%s: %s withdrew %s at %s, %s after its NB's handover began: before the hold of %s", what, addr[from], host,
				wd.At.Format("15:04:05.000000"), wd.At.Sub(fromCommitStart).Round(time.Millisecond), migrationHold)
		}
		// later the source pod's ports are deleted: nothing changes
		for _, n := range []string{from, to} {
			if err := nbs[n].DeleteVMPod(source); err != nil {
				t.Fatal(err)
			}
		}
		checkAdvertised(t, daemons[to], host, what+", source deleted", "", 0)
		waitMigrationPaths(t, frr, what+", the source's ports deleted", host, nil, migPath{addr[to], "65010", true})
		source = target
	}
	w.stop()

	if err := w.gapError(); err != nil {
		t.Error(err)
	}
	ups, err := lab.ParseUpdateLog(filepath.Join(frr.Dir, "frr.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := replayHolders(ups, host); err != nil {
		t.Error(err)
	}
	for _, u := range ups {
		// FRR drops a LOCAL_PREF from an eBGP neighbour unparsed, so
		// this cannot fail; the daemon's view (checkAdvertised) and
		// the wire (the raw speaker below) can
		if strings.Contains(u.Attrs, "localpref") {
			t.Errorf("FRR got LOCAL_PREF from eBGP neighbour %s: %s", u.Neighbor, u.Attrs)
		}
	}
	slices.Sort(latencies)
	slices.Sort(received)
	t.Logf("live migration handover, %d runs: target active to FRR's best path via the target: p50 %s, max %s (all %v)",
		len(latencies), latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), latencies)
	if len(received) > 0 {
		t.Logf("live migration handover, %d runs: target active to FRR received the target's path: p50 %s, max %s",
			len(received), received[len(received)/2].Round(100*time.Microsecond), received[len(received)-1].Round(100*time.Microsecond))
	}
	about := 0
	for _, u := range ups {
		if u.Prefix == host {
			about++
		}
	}
	t.Logf("FRR's RIB polled %d times, its UPDATE log has %d lines about %s", w.count(), about, host)
	// the wire: node1's announcements to an eBGP peer, with the
	// handover's prepend and without, never with LOCAL_PREF
	paths, err := wire.announced(host)
	if err != nil {
		t.Error(err)
	}
	t.Logf("node1's UPDATEs about %s to eBGP peer wire: %v", host, paths)
	for _, a := range paths {
		if a.localPref {
			t.Errorf("node1 sent LOCAL_PREF to eBGP peer wire with %s (AS path %v)", host, a.asPath)
		}
	}
	if !slices.ContainsFunc(paths, func(a wireAnnounce) bool { return !a.withdraw && len(a.asPath) == 3 }) ||
		!slices.ContainsFunc(paths, func(a wireAnnounce) bool { return !a.withdraw && len(a.asPath) == 1 }) {
		t.Errorf("node1's UPDATEs to wire announcing %s: %v, want the handover's (AS path 65010 x3) and the plain one", host, paths)
	}
}

// migPath is a path FRR should hold for the VM's address: via NextHop,
// with AS path ASPath, best or not.
type migPath struct {
	NextHop netip.Addr
	ASPath  string
	Best    bool
}

// waitMigrationPaths polls FRR (every 10 ms) until it holds exactly want
// for p (each valid). at, if not nil, gets the time of the poll that saw
// it. It reports whether the last poll saw every path of want, for the
// caller who wants to know that a path not in the final state (the last
// of want) was there too; with two paths wanted, one poll that holds the
// first alone, best, also ends the wait (and reports false).
func waitMigrationPaths(t *testing.T, frr *lab.FRR, what string, p netip.Prefix, at *time.Time, want ...migPath) bool {
	t.Helper()
	all := false
	lab.Eventually(t, generous, 10*time.Millisecond, what, func() error {
		rib, err := frr.RIB("ipv4")
		if err != nil {
			return err
		}
		now := time.Now()
		var got []migPath
		for _, path := range rib[p] {
			if path.Valid {
				got = append(got, migPath{path.NextHop, path.ASPath, path.Best})
			}
		}
		match := func(w []migPath) bool {
			return len(got) == len(w) && !slices.ContainsFunc(w, func(m migPath) bool { return !slices.Contains(got, m) })
		}
		switch {
		case match(want):
			all = true
		case len(want) > 1 && match(want[:1]):
			all = false
		default:
			return fmt.Errorf("FRR's valid paths for %s: %+v, want %+v", p, got, want)
		}
		if at != nil {
			*at = now
		}
		return nil
	})
	return all
}

// checkAdvertised checks what d's `routes advertised` says of p to peer
// tor: the source names handover state (e.g. "handover leaving"; "": no
// handover), the AS path prepend is prepend and no LOCAL_PREF is set (an
// eBGP peer); prepend -1: not advertised at all.
func checkAdvertised(t *testing.T, d *lab.Daemon, p netip.Prefix, what, state string, prepend int) {
	t.Helper()
	lab.Eventually(t, generous, 50*time.Millisecond, what+": routes advertised", func() error {
		adv, err := d.Advertised()
		if err != nil {
			return err
		}
		var mine []model.Advertisement
		for _, a := range adv {
			if a.Prefix == p && a.Peer == "tor" {
				mine = append(mine, a)
			}
		}
		if prepend < 0 {
			if len(mine) > 0 {
				return fmt.Errorf("%s is advertised: %+v", p, mine)
			}
			return nil
		}
		if len(mine) != 1 {
			return fmt.Errorf("%d advertisements of %s, want 1 (to tor): %+v", len(mine), p, mine)
		}
		a := mine[0]
		hasState := strings.Contains(a.Source, "(handover ")
		switch {
		case a.Attrs.LocalPreference != nil:
			return fmt.Errorf("%s to eBGP peer %s carries LOCAL_PREF %d", p, a.Peer, *a.Attrs.LocalPreference)
		case int(a.Attrs.ASPathPrepend) != prepend:
			return fmt.Errorf("%s: prepend %d, want %d (%s)", p, a.Attrs.ASPathPrepend, prepend, a.Source)
		case state == "" && hasState, state != "" && !strings.Contains(a.Source, "("+state):
			return fmt.Errorf("%s: source %q, want handover state %q", p, a.Source, state)
		case a.State != model.AdvSent:
			return fmt.Errorf("%s: state %q (%s)", p, a.State, a.Reason)
		}
		return nil
	})
}

// lastUpdate is the last line of ups from neighbor about p that is a
// withdraw (or an announcement), the zero Update if none.
func lastUpdate(ups []lab.Update, neighbor netip.Addr, p netip.Prefix, withdraw bool) lab.Update {
	var last lab.Update
	for _, u := range ups {
		if u.Neighbor == neighbor && u.Prefix == p && u.Withdraw == withdraw {
			last = u
		}
	}
	return last
}

// replayHolders replays FRR's UPDATE log for p: once some neighbour
// announced it, some neighbour must hold it after every line.
func replayHolders(ups []lab.Update, p netip.Prefix) error {
	held := map[netip.Addr]bool{}
	had, lines := false, 0
	var seen []string
	for _, u := range ups {
		if u.Prefix != p {
			continue
		}
		lines++
		what := "announced (" + u.Attrs + ")"
		if u.Withdraw {
			what = "withdrawn"
		}
		seen = append(seen, u.At.Format("15:04:05.000000")+" "+u.Neighbor.String()+" "+what)
		if u.Withdraw {
			delete(held, u.Neighbor)
		} else {
			held[u.Neighbor] = true
		}
		if len(held) > 0 {
			had = true
		} else if had {
			return fmt.Errorf("FRR's UPDATE log replayed: no neighbour holds %s after %s withdrew it at %s; the lines about it:\n%s",
				p, u.Neighbor, u.At.Format("15:04:05.000000"), strings.Join(seen, "\n"))
		}
	}
	if !had || lines < 2 {
		return fmt.Errorf("FRR's UPDATE log has %d lines about %s: is `debug bgp updates in` logged?", lines, p)
	}
	return nil
}

// ribWatch polls FRR's RIB for one prefix in the background.
type ribWatch struct {
	frr    *lab.FRR
	p      netip.Prefix
	quit   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	polls  int
	gap    string // the first poll without a valid path, after one with
	had    bool
	both   []time.Time // polls with a best path and another valid one
	bothBy []netip.Addr
	errs   int
}

// watchRIB polls FRR every interval until stop (or the test's end) and
// notes any poll without a valid path for p after one with.
func watchRIB(t *testing.T, frr *lab.FRR, p netip.Prefix, every time.Duration) *ribWatch {
	w := &ribWatch{frr: frr, p: p, quit: make(chan struct{}), done: make(chan struct{})}
	go w.run(every)
	t.Cleanup(w.stop)
	return w
}

func (w *ribWatch) run(every time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-tick.C:
		}
		rib, err := w.frr.RIB("ipv4")
		now := time.Now()
		w.mu.Lock()
		if err != nil {
			w.errs++
			w.mu.Unlock()
			continue
		}
		w.polls++
		var valid []lab.Path
		for _, path := range rib[w.p] {
			if path.Valid {
				valid = append(valid, path)
			}
		}
		switch {
		case len(valid) > 0:
			w.had = true
		case w.had && w.gap == "":
			w.gap = fmt.Sprintf("FRR's RIB at %s (poll %d): no valid path for %s (%+v)", now.Format("15:04:05.000000"), w.polls, w.p, rib[w.p])
		}
		if len(valid) == 2 {
			for _, path := range valid {
				if path.Best {
					w.both, w.bothBy = append(w.both, now), append(w.bothBy, path.NextHop)
				}
			}
		}
		w.mu.Unlock()
	}
}

func (w *ribWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

func (w *ribWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls
}

// sawBoth says whether a poll after since saw two valid paths, the best
// via best.
func (w *ribWatch) sawBoth(best netip.Addr, since time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, at := range w.both {
		if at.After(since) && w.bothBy[i] == best {
			return true
		}
	}
	return false
}

// gapError is the first gap the polls saw, or too few polls.
func (w *ribWatch) gapError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gap != "" {
		return fmt.Errorf("%s", w.gap)
	}
	if w.polls < 100 {
		return fmt.Errorf("FRR's RIB polled only %d times (%d errors)", w.polls, w.errs)
	}
	return nil
}

// wireAnnounce is one announcement the raw speaker got: the AS path and
// whether a LOCAL_PREF attribute came with it.
type wireAnnounce struct {
	at        time.Time
	withdraw  bool
	asPath    []uint32
	localPref bool
}

func (a wireAnnounce) String() string {
	if a.withdraw {
		return a.at.Format("15:04:05.000") + " withdraw"
	}
	return fmt.Sprintf("%s path %v localpref %v", a.at.Format("15:04:05.000"), a.asPath, a.localPref)
}

// wireWatch is a raw eBGP speaker's session with the daemon, recording
// the UPDATEs it sends (four-octet AS numbers: negotiated).
type wireWatch struct {
	mu  sync.Mutex
	ann map[netip.Prefix][]wireAnnounce
	bad error
}

// watchWire establishes a raw session from local (in namespace ns, AS
// 65099) to the daemon at remote and records its UPDATEs until the test
// ends.
func watchWire(t *testing.T, ns string, local netip.Addr, remote netip.AddrPort) *wireWatch {
	t.Helper()
	w := &wireWatch{ann: map[netip.Prefix][]wireAnnounce{}}
	var s *rawSession
	_, err := lab.Poll(generous, 200*time.Millisecond, func() error {
		var err error
		if s, err = newRawSession(ns, local, remote); err != nil {
			return err
		}
		if err = s.Establish(stdOpen(65099, local), 10*time.Second); err != nil {
			s.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("raw session to %s: %v", remote, err)
	}
	t.Cleanup(s.Close)
	if err := s.Send(updateMsg(nil, nil, nil)); err != nil { // End-of-RIB
		t.Fatal(err)
	}
	go func() {
		for m := range s.msgs {
			if m.typ == bgpUpdate {
				w.update(m.body)
			}
		}
	}()
	return w
}

// update records one UPDATE body (RFC 4271 4.3; IPv4 NLRI plain or in
// MP_REACH_NLRI).
func (w *wireWatch) update(b []byte) {
	now := time.Now()
	fail := func(what string) {
		w.mu.Lock()
		if w.bad == nil {
			w.bad = fmt.Errorf("UPDATE % x: %s", b, what)
		}
		w.mu.Unlock()
	}
	if len(b) < 4 {
		fail("short")
		return
	}
	wl := int(b[0])<<8 | int(b[1])
	if len(b) < 4+wl {
		fail("withdrawn routes overrun")
		return
	}
	al := int(b[2+wl])<<8 | int(b[3+wl])
	attrs, reach := b[4+wl:], []byte(nil)
	if len(attrs) < al {
		fail("attributes overrun")
		return
	}
	attrs, reach = attrs[:al], attrs[al:]
	withdrawn := slices.Clone(b[2 : 2+wl])
	a := wireAnnounce{at: now}
	for len(attrs) >= 3 {
		flags, typ := attrs[0], attrs[1]
		n, h := int(attrs[2]), 3
		if flags&0x10 != 0 {
			if len(attrs) < 4 {
				fail("attribute header")
				return
			}
			n, h = int(attrs[2])<<8|int(attrs[3]), 4
		}
		if len(attrs) < h+n {
			fail("attribute overrun")
			return
		}
		v := attrs[h : h+n]
		switch typ {
		case 2: // AS_PATH
			for len(v) >= 2 {
				cnt := int(v[1])
				if len(v) < 2+4*cnt {
					fail("AS_PATH segment")
					return
				}
				for i := range cnt {
					o := 2 + 4*i
					a.asPath = append(a.asPath, uint32(v[o])<<24|uint32(v[o+1])<<16|uint32(v[o+2])<<8|uint32(v[o+3]))
				}
				v = v[2+4*cnt:]
			}
		case 5: // LOCAL_PREF
			a.localPref = true
		case 14: // MP_REACH_NLRI: AFI, SAFI, next hop, reserved, NLRI
			if len(v) >= 5 && v[0] == 0 && v[1] == 1 && len(v) >= 5+int(v[3]) {
				reach = append(reach, v[5+int(v[3]):]...)
			}
		case 15: // MP_UNREACH_NLRI: AFI, SAFI, withdrawn routes
			if len(v) >= 3 && v[0] == 0 && v[1] == 1 {
				withdrawn = append(withdrawn, v[3:]...)
			}
		}
		attrs = attrs[h+n:]
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range []struct {
		nlri []byte
		a    wireAnnounce
	}{{withdrawn, wireAnnounce{at: now, withdraw: true}}, {reach, a}} {
		for len(l.nlri) > 0 {
			bits := int(l.nlri[0])
			n := (bits + 7) / 8
			if bits > 32 || len(l.nlri) < 1+n {
				w.bad = fmt.Errorf("UPDATE % x: NLRI", b)
				return
			}
			var ip [4]byte
			copy(ip[:], l.nlri[1:1+n])
			p := netip.PrefixFrom(netip.AddrFrom4(ip), bits)
			w.ann[p] = append(w.ann[p], l.a)
			l.nlri = l.nlri[1+n:]
		}
	}
}

// announced is every announcement and withdraw of p so far, and the
// first UPDATE that did not parse.
func (w *wireWatch) announced(p netip.Prefix) ([]wireAnnounce, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ann[p]), w.bad
}

// TestLiveMigrationDefault (issue 19): the default-network variant of
// TestLiveMigrationLayer2. Two ovnbgp nodes in AS 65010, each with its own
// interconnect NB (its node switch: node1 10.128.0.0/23, node2
// 10.128.2.0/23), eBGP to one FRR; a workloadIP rule for the default
// network (handover.holdTime 3 s). A VM at 10.128.0.30 (node1's subnet)
// migrates to node2 as OVN-Kubernetes writes it (docs/ovn-nb.md, "Live
// migration"): the target pod's port in node2's NB from the start (node2:
// arriving, outside its subnet, not advertised); once the VM is ready, a
// static route on ovn_cluster_router for the VM's address,
// k8s.ovn.org/zone=local in node2's NB (node2 advertises it) and =remote
// in node1's (node1 sends it with the handover's prepend, then withdraws
// it no earlier than holdTime later); then the source pod's port deleted.
// FRR's best path moves to node2 while node1's path is still there, and
// FRR never lacks a path (RIB polled every 20 ms, UPDATE log replayed).
func TestLiveMigrationDefault(t *testing.T) {
	t.Parallel()
	l := lab.New(t)
	node2Addr := netip.MustParseAddr("192.0.2.10")
	l.AddNodeAddress(node2Addr)
	nodes := []string{"node1", "node2"}
	addr := map[string]netip.Addr{"node1": lab.NodeIPv4, "node2": node2Addr}
	subnets := map[string]netip.Prefix{"node1": netip.MustParsePrefix("10.128.0.0/23"), "node2": netip.MustParsePrefix("10.128.2.0/23")}
	nbs := map[string]*lab.NB{}
	for _, n := range nodes {
		nbs[n] = l.StartNB()
		if err := nbs[n].DefaultZone(n, nodes, subnets[n]); err != nil {
			t.Fatal(err)
		}
	}
	frr := l.StartFRR(lab.FRRConfig{UpdateLog: true, Neighbors: []lab.FRRNeighbor{
		{Address: lab.NodeIPv4, ASN: 65010, Passive: true},
		{Address: node2Addr, ASN: 65010, Passive: true, DisableConnectedCheck: true},
	}})
	rule := fmt.Sprintf(`  - {name: vms, kind: workloadIP, networks: ["default"], handover: {holdTime: %s}}`, migrationHold)
	daemons := map[string]*lab.Daemon{}
	for _, n := range nodes {
		tor := lab.DefaultTor()
		tor.Families = []string{"ipv4"}
		if n != "node1" {
			tor.SourceAddress = addr[n]
		}
		daemons[n] = l.StartDaemon(nbs[n], lab.DaemonConfig{Node: n, RouterID: addr[n], Advertise: rule, Peers: []lab.Peer{tor}})
	}

	vmIP := netip.MustParseAddr("10.128.0.30")
	host := netip.PrefixFrom(vmIP, 32)
	source := lab.VMPod{Net: lab.Layer2Net{Subnet: netip.MustParsePrefix("10.128.0.0/14")}, Namespace: "ns3", VM: "vm-x",
		Pod: "virt-launcher-vm-x-k2m8d", Node: "node1", MAC: "0a:58:0a:80:00:1e", IP: vmIP}
	if err := nbs["node1"].AddVMPod("node1", source, nil); err != nil {
		t.Fatal(err)
	}
	waitMigrationPaths(t, frr, "the VM on node1: node1 advertises it", host, nil, migPath{addr["node1"], "65010", true})
	checkAdvertised(t, daemons["node1"], host, "the VM on node1", "", 0)
	w := watchRIB(t, frr, host, 20*time.Millisecond)

	// migration starts: the target pod's port, in node2's NB only (the
	// default network holds only local pods' ports)
	target := source
	target.Pod, target.Node = "virt-launcher-vm-x-9qz4m", "node2"
	if err := nbs["node2"].AddVMPod("node2", target, nil); err != nil {
		t.Fatal(err)
	}
	checkAdvertised(t, daemons["node2"], host, "target created: node2 arriving", "", -1)
	waitMigrationPaths(t, frr, "target created: node1 alone", host, nil, migPath{addr["node1"], "65010", true})

	// the VM ready on node2: its zone's route, then node1's
	active, err := nbs["node2"].VMRoute(target, "local", "node2", vmIP)
	if err != nil {
		t.Fatal(err)
	}
	checkAdvertised(t, daemons["node2"], host, "zone=local route: node2 advertises", "", 0)
	leftStart := time.Now()
	left, err := nbs["node1"].VMRoute(source, "remote", "node1", lab.TransitIP(nodes, "node2"))
	if err != nil {
		t.Fatal(err)
	}
	var bestAt time.Time
	overlap := waitMigrationPaths(t, frr, "zone=remote route on node1: FRR's best path via node2, unprepended", host, &bestAt,
		migPath{addr["node2"], "65010", true}, migPath{addr["node1"], "65010 65010 65010", false})
	t.Logf("default network: node2's zone=local route to FRR's best path via node2: %s (node1's zone=remote route: %s)",
		bestAt.Sub(active).Round(time.Millisecond), bestAt.Sub(left).Round(time.Millisecond))
	checkAdvertised(t, daemons["node1"], host, "zone=remote route", "handover left", 2)
	waitMigrationPaths(t, frr, "after the hold: only node2", host, nil, migPath{addr["node2"], "65010", true})
	if !overlap && !w.sawBoth(addr["node2"], left) {
		t.Errorf("FRR never held node1's path beside node2's best one after the zone=remote route: no make-before-break")
	}
	ups, err := lab.ParseUpdateLog(filepath.Join(frr.Dir, "frr.log"))
	if err != nil {
		t.Fatal(err)
	}
	switch wd := lastUpdate(ups, addr["node1"], host, true); {
	case wd.At.Before(leftStart):
		t.Errorf("FRR's UPDATE log has no withdraw of %s from node1 after the zone=remote route", host)
	case wd.At.Before(leftStart.Add(migrationHold)):
		t.Errorf("node1 withdrew %s %s after the zone=remote route's transaction began: before the hold of %s", host,
			wd.At.Sub(leftStart).Round(time.Millisecond), migrationHold)
	}
	// the source pod's port deleted: nothing changes
	if err := nbs["node1"].DeleteVMPod(source); err != nil {
		t.Fatal(err)
	}
	checkAdvertised(t, daemons["node2"], host, "source deleted", "", 0)
	waitMigrationPaths(t, frr, "source deleted", host, nil, migPath{addr["node2"], "65010", true})
	w.stop()
	if err := w.gapError(); err != nil {
		t.Error(err)
	}
	if ups, err = lab.ParseUpdateLog(filepath.Join(frr.Dir, "frr.log")); err != nil {
		t.Fatal(err)
	}
	if err := replayHolders(ups, host); err != nil {
		t.Error(err)
	}
}

// TestWireWatchParses: the raw speaker's UPDATE parser (no root) sees a
// LOCAL_PREF, a four-octet AS path and the prefixes, plain and withdrawn,
// so that the migration tests' wire check can fail.
func TestWireWatchParses(t *testing.T) {
	p := netip.MustParsePrefix("10.100.0.10/32")
	w := &wireWatch{ann: map[netip.Prefix][]wireAnnounce{}}
	m := updateMsg(nil, cat(attrOrigin(0), attrASPath4(65010, 65010, 65010), attrNextHop(lab.NodeIPv4), attr(0x40, 5, []byte{0, 0, 0, 50})), nlri(p))
	w.update(m[19:])
	w.update(updateMsg(nlri(p), nil, nil)[19:])
	got, err := w.announced(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].localPref || !slices.Equal(got[0].asPath, []uint32{65010, 65010, 65010}) || !got[1].withdraw {
		t.Fatalf("parsed %v, want an announcement with LOCAL_PREF and AS path 65010 x3, then a withdraw", got)
	}
}
