package bench

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// tor is the receiving peer both contenders advertise to: the harness's FRR
// in the tor namespace, queried on bgpd's vty socket (~0.3 ms a query, no
// vtysh process).
type tor struct {
	frr *lab.FRR
	// from is the node's address, the neighbor whose paths count.
	from netip.Addr
}

// fromNode says what the ToR has for p from the node: a valid path
// (received: the UPDATE has been taken in), and whether that path is the
// best one (selected: it is in the ToR's RIB of best paths). FRR selects
// best paths in a work queue that waits 50 ms after it is first fed
// (bgpd's process queue "hold"), so a new path is received up to 50 ms
// before it is selected. A withdrawn path is gone from the answer at once.
func (r tor) fromNode(p netip.Prefix) (received, selected bool, err error) {
	out, err := r.frr.VTY("show bgp ipv4 unicast " + p.String() + " json")
	if err != nil {
		return false, false, err
	}
	var v struct {
		Paths []struct {
			Valid    bool `json:"valid"`
			Bestpath struct {
				Overall bool `json:"overall"`
			} `json:"bestpath"`
			Peer struct {
				PeerID string `json:"peerId"`
			} `json:"peer"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return false, false, fmt.Errorf("ToR: show bgp ipv4 unicast %s json: %w: %.200s", p, err, out)
	}
	for _, path := range v.Paths {
		if path.Valid && path.Peer.PeerID == r.from.String() {
			received = true
			selected = selected || path.Bestpath.Overall
		}
	}
	return received, selected, nil
}

// bestFromNode reports whether the ToR's best path for p was learned from
// the node.
func (r tor) bestFromNode(p netip.Prefix) (bool, error) {
	_, selected, err := r.fromNode(p)
	return selected, err
}

// counts are the ToR's paths from the node: valid ones (received) and best
// ones (selected), as bgpd counts them in one walk of its table ("PfxCt
// counted" and "PfxCt Best Selected"), which is much cheaper than listing
// thousands of routes in JSON.
func (r tor) counts() (received, selected int, err error) {
	cmd := "show bgp ipv4 unicast neighbors " + r.from.String() + " prefix-counts json"
	out, err := r.frr.VTY(cmd)
	if err != nil && strings.Contains(err.Error(), "Unknown command") {
		// A vty session starts in view mode; prefix-counts is an enable-mode
		// command (vtysh enables its sessions first). The mode lasts as long
		// as the harness's connection to bgpd.
		if _, err = r.frr.VTY("enable"); err == nil {
			out, err = r.frr.VTY(cmd)
		}
	}
	if err != nil {
		return 0, 0, err
	}
	var v struct {
		Counters map[string]int `json:"ribTableWalkCounters"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return 0, 0, fmt.Errorf("ToR: prefix-counts json: %w: %.200s", err, out)
	}
	received, ok1 := v.Counters["PfxCt counted"]
	selected, ok2 := v.Counters["PfxCt Best Selected"]
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("ToR: prefix-counts json lacks \"PfxCt counted\" or \"PfxCt Best Selected\": %.300s", out)
	}
	return received, selected, nil
}

// bestCount is the number of the ToR's best paths from the node.
func (r tor) bestCount() (int, error) {
	_, selected, err := r.counts()
	return selected, err
}

// progress is what a poll of the ToR saw: whether the change has been
// received, and whether it is complete (in the RIB of best paths).
type progress struct{ received, done bool }

// reached is when a change was seen at the ToR, measured from when it was
// issued: first received, then done. Each is the instant the first answer
// showing it arrived, so up to one poll interval plus one query late.
type reached struct{ received, done time.Duration }

// waitFor polls cond every interval until it says done, from start. It
// gives up after timeout. alive, when not nil, is checked on each round so
// that a dead daemon fails fast.
func waitFor(start time.Time, interval, timeout time.Duration, alive func() error, cond func() (progress, error)) (reached, error) {
	var last error
	var res reached
	seen := false
	for {
		p, err := cond()
		took := time.Since(start)
		if err == nil && (p.received || p.done) && !seen {
			res.received, seen = took, true
		}
		if err == nil && p.done {
			res.done = took
			return res, nil
		}
		if err != nil {
			last = err
		}
		if alive != nil {
			if err := alive(); err != nil {
				return res, err
			}
		}
		if took > timeout {
			if last == nil {
				last = fmt.Errorf("not true after %v", timeout)
			}
			return res, last
		}
		time.Sleep(interval)
	}
}

// until adapts a plain condition to waitFor: received when done.
func until(cond func() (bool, error)) func() (progress, error) {
	return func() (progress, error) {
		ok, err := cond()
		return progress{received: ok, done: ok}, err
	}
}
