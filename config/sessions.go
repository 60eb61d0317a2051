package config

import (
	"cmp"
	"slices"
	"strings"
)

// SessionReset is a peer whose BGP session a config change resets, and why.
type SessionReset struct {
	Peer string `json:"peer"`
	Why  string `json:"why"`
}

// PeerChanges names the keys that differ between two configs of one peer,
// as they are spelled in config.yaml. The password is compared, never
// shown. ResetsSession says which of them reset the session; package bgp
// applies the others in place.
func PeerChanges(a, b Peer) []string {
	var c []string
	add := func(changed bool, key string) {
		if changed {
			c = append(c, key)
		}
	}
	add(a.Address != b.Address, "address")
	add(a.ASN != b.ASN, "asn")
	add(a.Port != b.Port, "port")
	add(a.SourceAddress != b.SourceAddress, "sourceAddress")
	add(a.Interface != b.Interface, "interface")
	add(a.Passive != b.Passive, "passive")
	add(a.EBGPMultihop != b.EBGPMultihop, "ebgpMultihop")
	add(a.TTLSecurity != b.TTLSecurity, "ttlSecurity")
	add(a.Password != b.Password, "password")
	add(a.HoldTime != b.HoldTime, "holdTime")
	add(a.KeepaliveTime != b.KeepaliveTime, "keepaliveTime")
	add(a.ConnectRetry != b.ConnectRetry, "connectRetry")
	add(!slices.Equal(a.Families, b.Families), "families")
	add(a.BFD != b.BFD, "bfd")
	add(a.MaxPrefixes != b.MaxPrefixes, "maxPrefixes")
	return c
}

// peerKey classifies every key PeerChanges names: reset is true when a
// change of it resets the session, known false for a key it does not
// know. A key resets when applying it needs a new OPEN or a new TCP
// connection:
//   - in the OPEN: asn, holdTime, families (multiprotocol, extended next
//     hop and graceful restart capabilities: adding ipv4 to an IPv6
//     session resets it);
//   - on the connection (TCP MD5, TTL, GTSM, device, addresses, port):
//     address, port, sourceAddress, interface, ebgpMultihop, ttlSecurity,
//     password (an unnumbered peer given an address, or moved to another
//     link, is a new session);
//   - keepaliveTime is not in the OPEN, but gobgp fixes a session's
//     keepalive interval when it opens (from the negotiated hold time), so
//     a new value would only apply at the next session.
//
// Applied in place, without a reset: maxPrefixes (gobgp's limit,
// UpdatePeer), connectRetry (the wait between dials of ovnbgp's own
// dialer, and gobgp's timer for a passive peer, which it never uses) and
// passive (whether ovnbgp's dialer dials; gobgp's side of every peer is
// passive) and bfd (gobgp's UpdatePeer restarts the BFD session alone:
// a Bfd change is not in its NeedsResendOpenMessage; bgp/bfd.go). Keys
// PeerChanges does not compare (maxAdvertised: an export policy of plan; enforceFirstAS: an import check of plan)
// never touch the session.
func peerKey(key string) (reset, known bool) {
	switch key {
	case "address", "asn", "port", "sourceAddress", "interface", "ebgpMultihop", "ttlSecurity",
		"password", "holdTime", "keepaliveTime", "families":
		return true, true
	case "passive", "connectRetry", "maxPrefixes", "bfd":
		return false, true
	}
	return false, false
}

// ResetsSession reports whether package bgp resets a session for these
// changed keys (PeerChanges): when any of them needs a new OPEN or a new
// connection (peerKey). A key it does not know resets: it is safer to
// reset than to keep a session on a config it does not have. Package bgp
// and SessionResets (`ovnbgp plan --config`) both decide with it.
func ResetsSession(changed []string) bool {
	for _, k := range changed {
		if reset, known := peerKey(k); reset || !known {
			return true
		}
	}
	return false
}

// bfdOffWhy: ovnbgp keeps the session when BFD is turned off, but gobgp's
// BFD stops without signalling AdminDown, so a peer that still runs BFD for
// this node sees it go Down and resets the session (FRR: Cease/BFD Down).
const bfdOffWhy = "bfd turned off: ovnbgp keeps the session, but a peer still running BFD for this node resets it (BFD stops without AdminDown): turn BFD off on the peer first"

// SessionResets lists the sessions that reloading next over old resets, in
// peer-name order: every session when the speaker restarts (SpeakerChanged),
// a peer that is removed, and a peer whose session keys change. Added peers
// are not resets. This is what `ovnbgp plan --config` shows; the daemon's
// reload does exactly this.
func SessionResets(old, next *Config) []SessionReset {
	var out []SessionReset
	byName := make(map[string]Peer, len(next.BGP.Peers))
	for _, p := range next.BGP.Peers {
		byName[p.Name] = p
	}
	restart := next.SpeakerChanged(old)
	for _, p := range old.BGP.Peers {
		np, kept := byName[p.Name]
		switch {
		case !kept:
			out = append(out, SessionReset{Peer: p.Name, Why: "removed from bgp.peers"})
		case restart:
			out = append(out, SessionReset{Peer: p.Name, Why: "bgp asn, routerID, listenPort or gracefulRestart changed: the speaker restarts"})
		default:
			if ch := PeerChanges(p, np); ResetsSession(ch) {
				out = append(out, SessionReset{Peer: p.Name, Why: "changed: " + strings.Join(ch, ", ")})
			} else if p.BFD.Enabled && !np.BFD.Enabled {
				out = append(out, SessionReset{Peer: p.Name, Why: bfdOffWhy})
			}
		}
	}
	slices.SortFunc(out, func(a, b SessionReset) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
}
