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
// shown. Package bgp resets a session for any of them but maxPrefixes and
// bfd, which it applies in place (sessionKeepingKeys).
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

// sessionKeepingKeys are the peer keys package bgp applies to a running
// session (gobgp's UpdatePeer): maxPrefixes, and bfd, whose change
// restarts the BFD session alone, never the BGP session (gobgp v4.8.0
// updateNeighbor: a Bfd change is not in NeedsResendOpenMessage).
var sessionKeepingKeys = []string{"maxPrefixes", "bfd"}

// ResetsSession reports whether package bgp resets a session for these
// changed keys (PeerChanges): any change but of sessionKeepingKeys alone.
func ResetsSession(changed []string) bool {
	for _, k := range changed {
		if !slices.Contains(sessionKeepingKeys, k) {
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
