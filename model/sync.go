package model

import "time"

// PeerSync is a peer's session as fail static and graceful restart
// (RFC 4724 receiving speaker) read it on every pass of the loop.
type PeerSync struct {
	// Established is true while the session is; Since is when it entered
	// its state (Established, or the last state reported).
	Established bool      `json:"established"`
	Since       time.Time `json:"since,omitzero"`
	// EndOfRIB: the peer sent End-of-RIB for every family negotiated in
	// this session.
	EndOfRIB bool `json:"endOfRIB"`
	// EndOfRIBFamilies are the families ("ipv4", "ipv6") the peer sent
	// End-of-RIB for in this session (nil while not Established).
	EndOfRIBFamilies map[string]bool `json:"endOfRIBFamilies,omitempty"`
	// LastUpdate is when an UPDATE of the peer was last taken in this
	// session (zero: none yet).
	LastUpdate time.Time `json:"lastUpdate,omitzero"`
	// GR is the graceful-restart capability the peer sent in its last
	// OPEN, when graceful restart is enabled on ovnbgp's side too (so it
	// was negotiated): this session's while Established, the last one's
	// while down. nil: not negotiated.
	GR *PeerGR `json:"gracefulRestart,omitempty"`
	// Down is when the session last left Established (zero while
	// Established or if it never was); Graceful says that it ended the
	// way RFC 4724 keeps routes for (hold timer, TCP reset, or a
	// NOTIFICATION with RFC 8538's N bit), so the peer's paths are kept
	// stale.
	Down     time.Time `json:"down,omitzero"`
	Graceful bool      `json:"graceful,omitempty"`
	// WithholdIPv4: the peer has IPv4 over an IPv6 session, and its last
	// OPEN (this session's, or the last one's while down) did not offer
	// the extended next hop capability for IPv4 unicast (RFC 8950): the
	// plan sends it no IPv4 prefix, since each would carry an IPv6 next
	// hop it treats as withdrawn. Before any OPEN it is false: a peer
	// that has the capability (FRR always does on an interface peer)
	// gets its IPv4 prefixes in the first burst, and keeps them over a
	// graceful restart.
	WithholdIPv4 bool `json:"withholdIPv4,omitempty"`
}

// PeerGR is a graceful-restart capability a peer sent (RFC 4724 3,
// RFC 8538 2).
type PeerGR struct {
	// RestartTime is how long the peer asks its routes be kept after its
	// session ends.
	RestartTime time.Duration `json:"restartTime"`
	// Restarting is the Restart State (R) bit: the peer has restarted.
	Restarting bool `json:"restarting,omitempty"`
	// Notification is the N bit (RFC 8538).
	Notification bool `json:"notification,omitempty"`
	// Families are the families ("ipv4", "ipv6") the capability lists,
	// true where its Forwarding State (F) bit is set.
	Families map[string]bool `json:"families,omitempty"`
}
