package plan

import (
	"fmt"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// StaleWindow says whether the paths a peer's graceful restart keeps stale
// (gobgp marks them, model.LearnedPath.Stale) may still be imported, for
// one family: Keep, until Until (zero: until the peer's End-of-RIB, which
// drops them), or not; Why says so in a sentence with the deadline.
type StaleWindow struct {
	// Negotiated: the peer's last OPEN carried graceful restart.
	Negotiated bool `json:"negotiated"`
	Keep       bool `json:"keep"`
	// Away: kept because the session is down (gracefully, within the
	// restart time): every path of the family the peer had is kept stale,
	// not only those already stale (Retained).
	Away  bool      `json:"away,omitempty"`
	Until time.Time `json:"until,omitzero"`
	Why   string    `json:"why"`
}

// StaleWindows is the receiving speaker's side of graceful restart (RFC
// 4724 4.2, RFC 8538) for every configured peer and family, from what the
// speaker says of each session (model.PeerSync) now:
//
//   - session down, and it ended gracefully (hold timer, TCP reset, a
//     NOTIFICATION with the N bit) with the family in the peer's
//     capability: kept until Down + the peer's restart time;
//   - Established again with the family's Forwarding State bit set: kept
//     until its End-of-RIB for the family, at most stalePathTime after the
//     session came up;
//   - Established again without graceful restart, without the family, or
//     without the Forwarding State bit: not kept (deleted at once);
//   - anything else (an ungraceful end, which gobgp does not keep stale,
//     or a restart time that ran out): not kept.
//
// next is the earliest Until (zero if none): the decision changes then.
func StaleWindows(cfg *config.Config, sync map[string]model.PeerSync, now time.Time) (map[string]map[config.Family]StaleWindow, time.Time) {
	out := map[string]map[config.Family]StaleWindow{}
	var next time.Time
	for _, p := range cfg.BGP.Peers {
		ps := sync[p.Name]
		fams := map[config.Family]StaleWindow{}
		for _, f := range p.Families {
			w := staleWindow(cfg, p.Name, f, ps, now)
			w.Negotiated = ps.GR != nil
			if w.Keep && !w.Until.IsZero() && (next.IsZero() || w.Until.Before(next)) {
				next = w.Until
			}
			fams[f] = w
		}
		out[p.Name] = fams
	}
	return out, next
}

func staleWindow(cfg *config.Config, peer string, f config.Family, ps model.PeerSync, now time.Time) StaleWindow {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	gr := ps.GR
	switch {
	case gr == nil:
		return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s, which negotiated no graceful restart: not imported", f, peer)}
	case !ps.Established:
		if !ps.Graceful {
			return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s, whose session did not end gracefully (RFC 4724 keeps routes only through a hold-timer expiry or a TCP reset, RFC 8538 also through a NOTIFICATION with the N bit): not imported", f, peer)}
		}
		if _, listed := gr.Families[string(f)]; !listed {
			return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s, whose graceful-restart capability does not list %s: not imported", f, peer, f)}
		}
		until := ps.Down.Add(gr.RestartTime)
		if !now.Before(until) {
			return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s: its restart time (%s) ran out at %s without the session coming back (RFC 4724 4.2): not imported", f, peer, gr.RestartTime, at(until))}
		}
		return StaleWindow{Keep: true, Away: true, Until: until, Why: fmt.Sprintf("kept stale through peer %s's graceful restart (RFC 4724): until it is back and sends End-of-RIB, at the latest %s (its restart time %s from the session's end at %s)", peer, at(until), gr.RestartTime, at(ps.Down))}
	default:
		fbit, listed := gr.Families[string(f)]
		if !listed || !fbit {
			return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s, which came back without preserved forwarding state for %s (RFC 4724 4.2: no Forwarding State bit in its new OPEN): not imported", f, peer, f)}
		}
		if ps.EndOfRIBFamilies[string(f)] {
			return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s, which is back and sent End-of-RIB for %s without announcing it again (RFC 4724 4.2): not imported", f, peer, f)}
		}
		until := ps.Since.Add(cfg.BGP.GracefulRestart.StalePathTime)
		if !now.Before(until) {
			return StaleWindow{Why: fmt.Sprintf("stale %s route of peer %s: not re-sent and no End-of-RIB within bgp.gracefulRestart.stalePathTime (%s) of the session coming back at %s: not imported", f, peer, cfg.BGP.GracefulRestart.StalePathTime, at(ps.Since))}
		}
		return StaleWindow{Keep: true, Until: until, Why: fmt.Sprintf("kept stale through peer %s's graceful restart (RFC 4724): it is back; until it re-sends the route or sends End-of-RIB, at the latest %s (bgp.gracefulRestart.stalePathTime)", peer, at(until))}
	}
}

// Retained says whether old, a path of the table that the speaker no
// longer has (withdrawn, or dropped with its session), stays in the table
// as a stale path, and returns it so: the receiving speaker's graceful
// restart is ovnbgp's own, not gobgp's. gobgp v4.8.0 forgets a peer's
// per-family graceful-restart state (the capability's families it
// received) on every UpdatePeer, which ovnbgp makes when a session comes
// up (BFD, bgp/bfd.go), and then drops the paths of a session that ended
// gracefully instead of keeping them stale; and it keeps nothing across a
// restart of its own. So the daemon keeps its last copy:
//
//   - while the session is away (StaleWindow.Away: it ended gracefully and
//     the restart time runs), every path of the family, as it was;
//   - once it is back, until its End-of-RIB or stalePathTime (Keep without
//     Away), only paths already stale: a path the peer sent again in this
//     session and then withdrew goes at once.
//
// A peer, family or window not in windows keeps nothing.
func Retained(old model.LearnedPath, windows map[string]map[config.Family]StaleWindow) (model.LearnedPath, bool) {
	f := config.IPv6
	if old.Prefix.Addr().Is4() {
		f = config.IPv4
	}
	w, ok := windows[old.Peer][f]
	if !ok || !w.Keep || (!w.Away && !old.Stale) {
		return model.LearnedPath{}, false
	}
	old.Stale = true
	return old, true
}
