package bgp

import (
	"net/netip"
	"sync"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// sessions is the session bookkeeping: what gobgp's peer events (and the
// NOTIFICATIONs in its log records) tell us and ListPeer does not, and the
// configured peers by address, for the conversion of gobgp's events
// (which name the address).
//
// mu guards all of it, and is held only for the bookkeeping itself: no
// call of gobgp, the dialer, the listener or the journal is made under it
// (only tasks', which come after it in the lock order: after, and a
// re-enable's stop). Its writers are gobgp's event goroutine (onPeerEvent,
// onEndOfRIB, onNotification, onBFDDown), the dialer's and listener's
// goroutines (collision.go), BFD's worker and switches (bfd.go), and
// SetPeers under Speaker.mu (addPeer, deletePeer: the maps' keys change
// only there); anyone may read it.
type sessions struct {
	mu sync.Mutex
	// byAddr are the configured peers' names, by address.
	byAddr map[netip.Addr]string
	// all are the sessions, by peer address.
	all map[netip.Addr]*session
	// learnFrom are the configured peers by address, for the conversion
	// of gobgp's path events (which name the address).
	learnFrom map[netip.Addr]config.Peer
	// bounds are the configured peers' Adj-RIB-In upper bounds, by
	// address (prefixlimit.go: the map is guarded by mu, the bounds'
	// fields as prefixBound says).
	bounds map[netip.Addr]*prefixBound
}

// init makes t's maps, before any event comes (New).
func (t *sessions) init() {
	t.byAddr, t.all = map[netip.Addr]string{}, map[netip.Addr]*session{}
	t.learnFrom, t.bounds = map[netip.Addr]config.Peer{}, map[netip.Addr]*prefixBound{}
}

// session is what gobgp's peer events tell us and ListPeer does not.
type session struct {
	// state is the last state gobgp reported.
	state     model.SessionState
	since     time.Time
	lastError string
	// lastErrorAt is when lastError happened.
	lastErrorAt time.Time
	// notif describes the last NOTIFICATION sent or received, at notifAt.
	notif   string
	notifAt time.Time
	// recvAt is when the peer last sent a NOTIFICATION.
	recvAt time.Time
	// collidedAt is when ovnbgp closed its own connection to the peer to
	// resolve a connection collision (collision.go).
	collidedAt time.Time
	// actives counts the events that said Active: each one lets one
	// connection go to gobgp (collision.go).
	actives uint64
	// families are those negotiated with the peer, while Established;
	// enh says the peer offered the extended next hop capability for
	// IPv4 unicast over IPv6 (RFC 8950).
	families map[config.Family]bool
	enh      bool
	// enhKnown: some session of the peer was Established (enh is its
	// OPEN's, kept while down).
	enhKnown bool
	// eor are the families whose End-of-RIB marker the peer really sent
	// in the current session (gobgp's own EndOfRibReceived flag is also
	// set, without any marker, when ovnbgp restarts and the peer's OPEN
	// carries the Restart State bit: it means "do not wait", not "the
	// table is complete", and fail static must not act on it).
	eor map[config.Family]bool
	// down is when the session was last seen leave Established, or first
	// seen without it; zero while Established.
	down time.Time
	// gr is the graceful-restart capability of the peer's last OPEN
	// (model.PeerSync.GR); graceful says the last session ended the way
	// gobgp keeps the peer's paths stale for, leftAt when it left
	// Established.
	gr       *model.PeerGR
	graceful bool
	leftAt   time.Time
	// lastUpdate is when an UPDATE of this session was last taken.
	lastUpdate time.Time
	// reenable is pending while the session is held down by maxPrefixes.
	reenable *task
	// bfdOn: BFD is on in gobgp for this peer (bfd.go: only while
	// Established). bfd is its last state read, entered at bfdSince.
	bfdOn    bool
	bfd      model.BFDState
	bfdSince time.Time
	// bfdDown says why BFD last went down, at bfdDownAt; bfdExpired:
	// by ovnbgp's own detection (the session is reset), else the peer
	// signalled it (the session is kept).
	bfdDown    string
	bfdDownAt  time.Time
	bfdExpired bool
}

// onNotification records a NOTIFICATION gobgp sent to or received from
// the peer at addr (from gobgp's log records, see gobgpHandler).
func (t *sessions) onNotification(addr string, sent bool, code, subcode uint8, communication string) {
	if sent && code == 6 && subcode == 3 {
		// Cease/Peer De-configured is ovnbgp's own doing: SetPeers
		// deletes a changed peer and re-adds it at once, and gobgp
		// logs the NOTIFICATION asynchronously, possibly after the new
		// session exists, which would start with it as lastError.
		return
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	a = a.Unmap()
	now := time.Now()
	text := notificationText(sent, code, subcode, communication)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.all == nil {
		return
	}
	ss := t.all[a]
	if ss == nil {
		return
	}
	if answersReceived(ss, sent, code) {
		return
	}
	if !sent {
		ss.recvAt = now
	}
	if sent && communication == bfdCommunication && ss.bfdExpired && !ss.bfdDownAt.IsZero() && !ss.bfdDownAt.Before(ss.since) {
		text = ss.bfdDown // onBFDDown said why, with more than the Cease
	}
	ss.notif, ss.notifAt = text, now
	ss.lastError, ss.lastErrorAt = text, now
}

// answersReceived reports whether a NOTIFICATION gobgp sent is its answer
// to one the peer sent in this same OPEN exchange: gobgp answers one
// received in OpenSent with 5/1 (Finite State Machine Error), and the
// peer's says why, so it stays lastError. The caller holds sess.mu.
func answersReceived(ss *session, sent bool, code uint8) bool {
	return sent && code == 5 && !ss.recvAt.IsZero() && !ss.recvAt.Before(ss.since)
}

// endOfRIB records the End-of-RIB marker of family f the peer at addr
// sent, if its session is Established, and reports whether the peer may
// have stale paths gobgp drops now (graceful restart; or no session).
func (t *sessions) endOfRIB(addr netip.Addr, f config.Family) (stale bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stale = true
	if ss := t.all[addr]; ss != nil && ss.state == model.StateEstablished {
		if ss.eor == nil {
			ss.eor = map[config.Family]bool{}
		}
		ss.eor[f] = true
		stale = ss.gr != nil
	}
	return stale
}

// countActive counts an event that said Active for the peer at addr
// (session.actives, collision.go).
func (t *sessions) countActive(addr netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ss := t.all[addr]; ss != nil && ss.state == model.StateActive {
		ss.actives++
	}
}

// dropReenables forgets the pending re-enables (shutdown: tasks.close
// cancelled them).
func (t *sessions) dropReenables() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ss := range t.all {
		ss.reenable = nil
	}
}

// addrs are the configured peers' addresses.
func (t *sessions) addrs() []netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	addrs := make([]netip.Addr, 0, len(t.byAddr))
	for a := range t.byAddr {
		addrs = append(addrs, a)
	}
	return addrs
}

// add starts the bookkeeping of p, a peer SetPeers adds (a new session,
// and a bound if the speaker keeps them).
func (t *sessions) add(p config.Peer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byAddr[p.Address] = p.Name
	t.learnFrom[p.Address] = p
	t.all[p.Address] = &session{since: time.Now()}
	if t.bounds != nil {
		t.bounds[p.Address] = newPrefixBound(p)
	}
}

// remove ends the bookkeeping of the peer at addr, and its pending
// re-enable (a new peer on this address starts enabled).
func (t *sessions) remove(addr netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ss := t.all[addr]; ss != nil && ss.reenable != nil {
		ss.reenable.stop()
	}
	delete(t.byAddr, addr)
	delete(t.learnFrom, addr)
	delete(t.all, addr)
	delete(t.bounds, addr)
}

// setPeer records p's new config (SetPeers: same address).
func (t *sessions) setPeer(p config.Peer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.learnFrom[p.Address] = p
}
