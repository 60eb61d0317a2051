package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Issue 7 item 6: `ovnbgp drain` and `undrain` against real FRR.

const gracefulShutdown = 0xFFFF0000

// drainCLI runs `ovnbgp ARGS -o json` (drain or undrain) and decodes the
// drain status it prints.
func drainCLI(t *testing.T, d *lab.Daemon, args ...string) api.DrainStatus {
	t.Helper()
	out, err := d.CLI(append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var st api.DrainStatus
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("ovnbgp %v: %v\n%s", args, err, out)
	}
	return st
}

// frrSees waits until FRR's path for prefix from the node has, or has not,
// the GRACEFUL_SHUTDOWN community, and (localPref not nil) that local
// preference; FRR's JSON is read (`show bgp ipv4 unicast PREFIX json`).
func frrSees(t *testing.T, w *world, what string, prefix netip.Prefix, gshut bool, localPref *uint32) {
	t.Helper()
	lab.Eventually(t, generous, 100*time.Millisecond, what, func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		_, comms, _, _, lp, raw, err := frrAttrs(w, prefix.String())
		if err != nil {
			return err
		}
		if slices.Contains(comms, gracefulShutdown) != gshut {
			return fmt.Errorf("FRR's path for %s has communities %#x (graceful-shutdown wanted: %v): %s", prefix, comms, gshut, raw)
		}
		if localPref != nil && (lp == nil || *lp != *localPref) {
			return fmt.Errorf("FRR's path for %s has local preference %v, want %d: %s", prefix, lp, *localPref, raw)
		}
		return nil
	})
}

// attrLineRE and prefixLineRE match FRR 8.4's `debug bgp updates in`
// lines: "N(host) rcvd UPDATE w/ attr: ATTRS" comes before the prefix
// lines of the UPDATE it describes, "N(host) rcvd P IPv4 unicast".
var (
	attrLineRE   = regexp.MustCompile(`\] (\S+)\(\S*\) rcvd UPDATE w/ attr: (.*)$`)
	prefixLineRE = rcvdRE
)

// announcements replays FRR's UPDATE log from offset and returns, for each
// prefix announced by neighbor, the attribute strings it came with.
func announcements(t *testing.T, logFile string, offset int64, neighbor netip.Addr) map[netip.Prefix][]string {
	t.Helper()
	text, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(text)) < offset {
		t.Fatalf("FRR's log %s shrank", logFile)
	}
	out := map[netip.Prefix][]string{}
	attrs := ""
	for _, line := range strings.Split(string(text[offset:]), "\n") {
		if m := attrLineRE.FindStringSubmatch(line); m != nil && m[1] == neighbor.String() {
			attrs = m[2]
			continue
		}
		m := prefixLineRE.FindStringSubmatch(line)
		if m == nil || m[1] != neighbor.String() || strings.Contains(m[3], "withdrawn") || strings.Contains(m[3], "DENIED") {
			continue
		}
		p, err := netip.ParsePrefix(m[2])
		if err != nil {
			t.Fatalf("FRR log line %q: %v", line, err)
		}
		out[p] = append(out[p], attrs)
	}
	return out
}

// frrLogTime reads the timestamp FRR 8.4 starts its log lines with
// ("2026/12/01 06:00:00 BGP: ..."), in local time.
var frrLogTime = regexp.MustCompile(`^(\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2})`)

// lastWithdraw returns when FRR last logged the withdraw of prefix from
// neighbor.
func lastWithdraw(logFile string, neighbor netip.Addr, prefix netip.Prefix) (time.Time, error) {
	text, err := os.ReadFile(logFile)
	if err != nil {
		return time.Time{}, err
	}
	var at time.Time
	for _, line := range strings.Split(string(text), "\n") {
		m := rcvdRE.FindStringSubmatch(line)
		if m == nil || m[1] != neighbor.String() || m[2] != prefix.String() || !strings.Contains(m[3], "withdrawn") {
			continue
		}
		ts := frrLogTime.FindString(line)
		t, err := time.ParseInLocation("2006/01/02 15:04:05", ts, time.Local)
		if err != nil {
			return time.Time{}, fmt.Errorf("FRR log line %q: no timestamp: %w", line, err)
		}
		at = t
	}
	if at.IsZero() {
		return at, fmt.Errorf("FRR's log has no withdraw of %s from %s", prefix, neighbor)
	}
	return at, nil
}

// TestDrain: eBGP. `ovnbgp drain --wait 1h` tags the node's subnet with
// GRACEFUL_SHUTDOWN at FRR (FRR's JSON), `peers` and `status` show tor
// tagged. The daemon is stopped and started again: FRR's log of received
// UPDATEs shows the subnet re-announced, and only ever with
// graceful-shutdown. `drain --wait 3s` brings the withdraw nearer: FRR
// loses the subnet (the session stays up) no earlier than the deadline;
// `routes advertised` lists it drained and `peers` says withdrawn.
// `undrain` brings it back, untagged.
func TestDrain(t *testing.T) {
	t.Parallel()
	w := setup(t, nil, lab.DaemonConfig{Advertise: `  - {name: pods, kind: podNetwork, networks: [default]}`})
	frrLog := filepath.Join(w.frr.Dir, "frr.log")
	if err := w.frr.Config("log file "+frrLog+" debugging", "debug bgp updates in"); err != nil {
		t.Fatal(err)
	}
	subnet := lab.DefaultNode1.Subnet
	frrSees(t, w, "FRR has the subnet, untagged", subnet, false, nil)

	st := drainCLI(t, w.d, "drain", "--wait", "1h")
	if len(st.Peers) != 1 || st.Peers[0].Peer != "tor" || st.Peers[0].Phase != model.DrainTagged {
		t.Fatalf("drain printed %+v, want tor tagged", st)
	}
	frrSees(t, w, "FRR sees graceful-shutdown on the subnet", subnet, true, nil)
	if p, err := w.d.Peer("tor"); err != nil || p.Drain != model.DrainTagged {
		t.Errorf("peers: %+v %v, want tor tagged", p, err)
	}
	if s, err := w.d.Status(); err != nil || len(s.Drained) != 1 || s.Drained[0].Phase != model.DrainTagged {
		t.Errorf("status drained: %+v %v", s.Drained, err)
	}
	table, err := w.d.CLI("peers")
	if err != nil || !strings.Contains(string(table), "DRAIN") || !strings.Contains(string(table), "tagged") {
		t.Errorf("peers table: %v\n%s", err, table)
	}

	// Restart: every re-announcement FRR receives is tagged.
	fi, err := os.Stat(frrLog)
	if err != nil {
		t.Fatal(err)
	}
	offset := fi.Size()
	before, err := w.frr.Neighbors()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.d.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "a new session with the restarted daemon", func() error {
		nbs, err := w.frr.Neighbors()
		if err != nil {
			return err
		}
		n := nbs[lab.NodeIPv4.String()]
		if n.ConnectionsEstablished <= before[lab.NodeIPv4.String()].ConnectionsEstablished || n.State != "Established" {
			return fmt.Errorf("FRR's session with the node: %s, %d connections established", n.State, n.ConnectionsEstablished)
		}
		return nil
	})
	frrSees(t, w, "FRR has the subnet again after the restart, tagged", subnet, true, nil)
	got := announcements(t, frrLog, offset, lab.NodeIPv4)
	if len(got[subnet]) == 0 {
		t.Fatalf("FRR's UPDATE log since the restart has no announcement of %s (is `debug bgp updates in` logged?):\n%s", subnet, lab.Tail(frrLog, 40))
	}
	for p, attrs := range got {
		for _, a := range attrs {
			if !strings.Contains(a, "graceful-shutdown") {
				t.Errorf("after the restart FRR received %s without graceful-shutdown: %q", p, a)
			}
		}
	}
	t.Logf("after the restart FRR received: %v", got)

	// The withdraw, after --wait.
	st = drainCLI(t, w.d, "drain", "--wait", "3s")
	withdrawAt := st.Peers[0].WithdrawAt
	if time.Until(withdrawAt) > 3*time.Second || withdrawAt.Before(st.Peers[0].Since) {
		t.Fatalf("drain --wait 3s: %+v", st.Peers[0])
	}
	gone := w.rib("ipv4", lab.NodeIPv4, nil, []netip.Prefix{subnet})
	lab.Eventually(t, generous, 100*time.Millisecond, "the daemon withdraws the subnet after the wait and FRR loses it", func() error {
		advs, err := w.d.Advertised()
		if err != nil {
			return err
		}
		if len(advs) != 1 || advs[0].Prefix != subnet || advs[0].State != model.AdvDrained || !strings.Contains(advs[0].Reason, "ovnbgp undrain") {
			return fmt.Errorf("routes advertised: %+v, want the subnet drained", advs)
		}
		return gone()
	})
	// FRR's log says when the withdraw came (FRR logs whole seconds).
	if at, err := lastWithdraw(frrLog, lab.NodeIPv4, subnet); err != nil {
		t.Error(err)
	} else if at.Before(withdrawAt.Truncate(time.Second)) {
		t.Errorf("FRR received the withdraw of %s at %v, before withdrawAt %v", subnet, at, withdrawAt)
	}
	if err := w.frr.Established(lab.NodeIPv4); err != nil {
		t.Errorf("the session after the withdraw: %v", err)
	}
	if p, err := w.d.Peer("tor"); err != nil || p.Drain != model.DrainWithdrawn {
		t.Errorf("peers: %+v %v, want tor withdrawn", p, err)
	}

	drainCLI(t, w.d, "undrain")
	frrSees(t, w, "FRR has the subnet after undrain, untagged", subnet, false, nil)
	if p, err := w.d.Peer("tor"); err != nil || p.Drain != model.DrainNone {
		t.Errorf("peers after undrain: %+v %v", p, err)
	}
}

// TestDrainIBGP: over iBGP (FRR in AS 65010), a drained advertisement
// carries GRACEFUL_SHUTDOWN and LOCAL_PREF 0 (FRR's JSON); `drain --wait 0`
// withdraws at once; undrain restores the rule's local preference (200),
// untagged.
func TestDrainIBGP(t *testing.T) {
	t.Parallel()
	w := setup(t, &lab.FRRConfig{ASN: 65010, Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}},
		lab.DaemonConfig{
			Peers:     []lab.Peer{{Name: "tor", Address: lab.TorIPv4, ASN: 65010}},
			Advertise: `  - {name: pods, kind: podNetwork, networks: [default], localPreference: 200}`,
		})
	subnet := lab.DefaultNode1.Subnet
	lp := func(v uint32) *uint32 { return &v }
	frrSees(t, w, "FRR has the subnet with local preference 200", subnet, false, lp(200))
	drainCLI(t, w.d, "drain", "--peer", "tor", "--wait", "1h")
	frrSees(t, w, "FRR sees graceful-shutdown and local preference 0", subnet, true, lp(0))
	drainCLI(t, w.d, "drain", "--peer", "tor", "--wait", "0s")
	lab.Eventually(t, generous, 100*time.Millisecond, "FRR loses the subnet at once with --wait 0", w.rib("ipv4", lab.NodeIPv4, nil, []netip.Prefix{subnet}))
	drainCLI(t, w.d, "undrain", "--peer", "tor")
	frrSees(t, w, "FRR has the subnet after undrain, local preference 200 again", subnet, false, lp(200))
}
