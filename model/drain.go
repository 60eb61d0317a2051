package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Drain is the node's drain state (`ovnbgp drain`, RFC 8326): the peers
// drained, since when, and when their advertisements are withdrawn. The
// zero value drains nothing. The daemon persists it (stateDir/drain.json),
// plan applies it to the advertisements.
type Drain struct {
	// Peers are the drain orders, at most one per peer name; Peer "" is
	// the order for every peer (`ovnbgp drain` without --peer).
	Peers []DrainedPeer `json:"peers"`
}

// DrainedPeer is one drain order.
type DrainedPeer struct {
	// Peer is a configured peer's name, or "" for every peer.
	Peer string `json:"peer"`
	// Since is when the peer was first drained: from then on its
	// advertisements carry GRACEFUL_SHUTDOWN (and LOCAL_PREF 0 on iBGP).
	Since time.Time `json:"since"`
	// WithdrawAt is when its advertisements are withdrawn.
	WithdrawAt time.Time `json:"withdrawAt"`
}

// DrainPhase is where a drained peer stands.
type DrainPhase string

// The drain phases of a peer.
const (
	// DrainNone: the peer is not drained.
	DrainNone DrainPhase = ""
	// DrainTagged: advertisements carry GRACEFUL_SHUTDOWN, and LOCAL_PREF
	// 0 on iBGP, until WithdrawAt.
	DrainTagged DrainPhase = "tagged"
	// DrainWithdrawn: WithdrawAt has passed; nothing is advertised to
	// the peer.
	DrainWithdrawn DrainPhase = "withdrawn"
)

// For is the drain in effect for peer: its own order and the order for
// every peer, merged (the earlier Since and the earlier WithdrawAt: the
// drain further along wins). ok is false when the peer is not drained.
func (d Drain) For(peer string) (DrainedPeer, bool) {
	var out DrainedPeer
	found := false
	for _, p := range d.Peers {
		if p.Peer != "" && p.Peer != peer {
			continue
		}
		if !found {
			out, found = DrainedPeer{Peer: peer, Since: p.Since, WithdrawAt: p.WithdrawAt}, true
			continue
		}
		if p.Since.Before(out.Since) {
			out.Since = p.Since
		}
		if p.WithdrawAt.Before(out.WithdrawAt) {
			out.WithdrawAt = p.WithdrawAt
		}
	}
	return out, found
}

// Phase is where peer stands at now.
func (d Drain) Phase(peer string, now time.Time) DrainPhase {
	p, ok := d.For(peer)
	switch {
	case !ok:
		return DrainNone
	case !now.Before(p.WithdrawAt):
		return DrainWithdrawn
	}
	return DrainTagged
}

// Add drains peer ("" = every peer) at now, withdrawing after wait (0:
// at once). Draining a peer again keeps its Since and moves WithdrawAt
// earlier, never later: a second drain can hasten the withdraw, never
// delay or undo it (`ovnbgp undrain` does that).
func (d Drain) Add(peer string, now time.Time, wait time.Duration) Drain {
	if wait < 0 {
		wait = 0
	}
	at := now.Add(wait)
	out := Drain{Peers: slices.Clone(d.Peers)}
	i := slices.IndexFunc(out.Peers, func(p DrainedPeer) bool { return p.Peer == peer })
	if i < 0 {
		out.Peers = append(out.Peers, DrainedPeer{Peer: peer, Since: now, WithdrawAt: at})
	} else if at.Before(out.Peers[i].WithdrawAt) {
		out.Peers[i].WithdrawAt = at
	}
	slices.SortFunc(out.Peers, func(a, b DrainedPeer) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// ErrDrainedByAll is returned by Remove for a peer drained by the order
// for every peer.
var ErrDrainedByAll = errors.New("drained by `ovnbgp drain` of every peer")

// Remove undrains peer ("" = every peer and every order). A peer that the
// order for every peer drains cannot be undrained alone: Remove returns
// ErrDrainedByAll and d unchanged.
func (d Drain) Remove(peer string) (Drain, error) {
	if peer == "" {
		return Drain{}, nil
	}
	if slices.ContainsFunc(d.Peers, func(p DrainedPeer) bool { return p.Peer == "" }) {
		return d, fmt.Errorf("peer %s is %w: run `ovnbgp undrain` without --peer to undrain every peer", peer, ErrDrainedByAll)
	}
	return Drain{Peers: slices.DeleteFunc(slices.Clone(d.Peers), func(p DrainedPeer) bool { return p.Peer == peer })}, nil
}

// Empty reports whether nothing is drained.
func (d Drain) Empty() bool { return len(d.Peers) == 0 }

// NextWithdraw is the earliest WithdrawAt after now, if any: when the
// daemon must plan again.
func (d Drain) NextWithdraw(now time.Time) (time.Time, bool) {
	var next time.Time
	for _, p := range d.Peers {
		if p.WithdrawAt.After(now) && (next.IsZero() || p.WithdrawAt.Before(next)) {
			next = p.WithdrawAt
		}
	}
	return next, !next.IsZero()
}

// Validate checks a drain state read back from a file.
func (d Drain) Validate() error {
	seen := map[string]bool{}
	for i, p := range d.Peers {
		switch {
		case seen[p.Peer]:
			return fmt.Errorf("peers[%d]: peer %q listed twice", i, p.Peer)
		case p.Since.IsZero() || p.WithdrawAt.IsZero():
			return fmt.Errorf("peers[%d]: since and withdrawAt are required", i)
		case p.WithdrawAt.Before(p.Since):
			return fmt.Errorf("peers[%d]: withdrawAt %s is before since %s", i, p.WithdrawAt.Format(time.RFC3339), p.Since.Format(time.RFC3339))
		}
		seen[p.Peer] = true
	}
	return nil
}
