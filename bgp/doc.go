// Package bgp is ovnbgp's BGP speaker: an embedded gobgp v4 server driven in
// ovnbgp's own types (config.BGP, config.Peer, model.Advertisement,
// model.PeerStatus, model.LearnedPath). It is the only package that imports
// gobgp, and no gobgp type crosses its API. Every gobgp call goes through
// the public methods of *server.BgpServer, which serializes them itself.
//
// # Import: default deny
//
// The global import policy "ovnbgp-import" rejects everything a peer sends
// (RFC 8212). Nothing learned enters the Loc-RIB, so nothing learned is ever
// re-advertised to another peer; Learned reads each peer's Adj-RIB-In,
// before policy, and ovnbgp's own import rules decide what to program
// elsewhere. Its only statement accepts locally originated paths: gobgp runs
// the global import policy on the paths of AddPath too, and a bare default
// REJECT would keep our own prefixes out of the RIB.
//
// # Export: one local path per prefix, one statement per peer and attributes
//
// Set takes the full desired set of (peer, prefix, attributes) every time.
// Each distinct prefix is one local path in the global RIB, next hop self
// (0.0.0.0, or :: in MP_REACH_NLRI for IPv6), carrying no attributes of
// its own. Which peer receives it, and with which attributes, is decided by
// the global export policy "ovnbgp-export", whose default action is REJECT:
//
//   - per peer, a neighbor set "ovnbgp:peer:<name>" holding the peer's
//     address;
//   - per peer, family and distinct attribute set, a prefix set and a
//     statement of the same name "ovnbgp:<peer>:<family>:<hash>", matching
//     that prefix set and that neighbor set, setting the communities, large
//     communities, MED, local preference and AS-path prepend, and accepting.
//
// gobgp v4 has per-peer policies only for route-server clients, whose
// semantics (no own-ASN prepend, a separate RIB per client) are not what a
// node wants, hence one global policy whose statements match the target
// peer with a neighbor set: gobgp evaluates the global export policy once
// per target peer with that peer as the neighbor.
//
// Only changes go out. Adding a prefix first extends the statement sets,
// then adds the path: gobgp runs every peer's export policy on the new path
// and only the selected peers get an UPDATE. Removing a prefix deletes the
// path first (gobgp sends a WITHDRAW to every established peer, including
// those that never had it) and then shrinks the sets. When a prefix stays
// in the RIB but its peers or attributes change, only the peers concerned
// get a soft reset OUT: gobgp re-runs their export policy, withdraws what
// it now rejects and re-sends what it accepts (their whole selection, not
// only the changed prefix). Sets are always changed in place, because
// gobgp binds statements to set objects when they are added.
//
// Set keeps going on per-item errors and returns them joined; Advertised
// returns what is in effect, so that the caller retries only the rest.
//
// # Sessions and events
//
// SetPeers diffs peers by name. A peer whose session-relevant config
// changed is deleted and re-added (its session resets); a change of
// maxPrefixes alone is applied in place. gobgp's peer-state events and
// every change of an Adj-RIB-In (UPDATEs received, paths dropped on session
// loss or graceful-restart expiry, End-of-RIB) call the notify function
// given to New; the daemon coalesces them.
//
// maxPrefixes is enforced by gobgp, but gobgp's check counts the peer's
// whole Adj-RIB-In family on every UPDATE while a limit is configured
// (quadratic in a table transfer: 4000 one-prefix UPDATEs cost 2.9 s instead
// of 0.1 s, BenchmarkPrefixLimitTransfer). So the limit is configured in
// gobgp ("armed") only while the peer's count may be near maxPrefixes:
// prefixlimit.go keeps an O(1)-per-path upper bound of each count (fed by
// the path events below, withdrawals not subtracted), arms when the bound
// reaches 90% and an exact read finds 80% or more, disarms when an exact
// read (every few seconds while armed) finds less than 80%, and reads
// exactly every 30 s in any case
// (for the rejected paths that have no event). gobgp reads UPDATEs ahead
// of processing them, so the connection also counts each UPDATE's NLRI
// before gobgp reads it, and holds the UPDATE that takes that count to 90%
// until the limit is armed: gobgp then tears the session down at the first
// UPDATE that takes the count over the limit.
//
// # Learned paths: TakeLearned
//
// EachLearned walks a peer's whole Adj-RIB-In (O(table)). TakeLearned
// returns only what changed since its previous call (model.LearnedDelta):
// the latest state of each changed (peer, prefix), kept in a journal map
// fed by gobgp's events (O(1) per path), plus the peers whose table must be
// walked again (Resync). Event paths and walked paths go through the same
// conversion (learnedPath), so both say the same about a key. The paths of
// one UPDATE share their AS path and communities slices (nobody mutates
// a LearnedPath's slices: daemon, plan and cmd only read them).
//
// One gobgp watcher (WatchPeer, WatchUpdate pre-policy, WatchAdjInWithdraw,
// WatchEor) delivers every event in gobgp's order. What changes an
// Adj-RIB-In in gobgp v4.8.0 (pkg/server/server.go handleFSMMessage,
// peer.go handleUpdate, table/adj.go), and how each change reaches the
// journal:
//
//	change                                     event?                   handled as
//	announce, re-announce (implicit withdraw)  pre-policy UPDATE path   Paths
//	withdraw (WITHDRAWN, MP_UNREACH)           pre-policy, Withdrawal   Gone
//	treat-as-withdraw (RFC 7606)               pre-policy, Withdrawal   Gone
//	attribute discard (RFC 7606)               pre-policy path          Paths
//	path with our ASN in its AS path           none by default (gobgp   Paths, Malformed: each peer
//	                                           keeps it, rejected, out  allows our ASN 255 times
//	                                           of its events)           (allow-own-as)
//	ORIGINATOR_ID = our router ID (iBGP),      none                     not covered: the peer's next
//	  or our ASN more than 255 times                                    Resync (see below)
//	UPDATE crossing maxPrefixes (stored,       none; the session then   Resync (state event)
//	  then the session is torn down, at once   goes down
//	  or when ovnbgp arms the limit)
//	session down, no graceful restart          AdjInWithdraw, state     Gone, then Resync
//	session down with graceful restart:        none (StaleAll); state   Resync
//	  paths marked stale                       event follows
//	graceful-restart timer expiry              AdjInWithdraw, state     Gone, then Resync
//	End-of-RIB ending a restart: stale         EoR first, then the      Resync (see ordering)
//	  paths dropped (DropStale)                drop, no path event
//	peer deleted (SetPeers)                    AdjInWithdraw (address   Resync by SetPeers; events of
//	                                           no longer configured)    an unknown address ignored
//	peer added or updated (SetPeers)           -                        Resync by SetPeers
//	soft reset in, ROUTE-REFRESH received      Adj-RIB-In unchanged     nothing
//	LOCAL_PREF of an eBGP path, stripped       the event may show it    learnedPath drops it for
//	  after the event was queued                                        eBGP peers (RFC 4271 5.1.5)
//
// Every peer-state event (any transition) and every End-of-RIB puts the
// peer in Resync, as do SetPeers' additions, deletions and updates, and a
// path ovnbgp cannot convert.
//
// Ordering, the guarantee TakeLearned documents: a change without a path
// event is followed, in the same ordered stream, by an event that puts the
// peer in Resync (state changes come after the stale marking or drop they
// cause), except the End-of-RIB drop, which gobgp makes after the EoR event
// but inside the same handleFSMMessage call, under a read lock of the
// server whose write lock ListPath's table snapshot takes: a walk started
// after the event was seen reads the table after the drop. A path event
// still queued when a walk ran is older than the walk but is applied after
// it; it is then followed by the newer event of the same key, or by a
// newer Resync, so the table converges. The gap: the paths gobgp's loop
// checks reject with no event at all (ORIGINATOR_ID equal to our router ID
// from an iBGP peer, our ASN more than 255 times in the AS path) are seen
// only at the peer's next Resync. Such a path is never imported anyway;
// one that replaces a good path of the same prefix leaves that one in the
// table until then. A route reflector reflects only prefixes we originate,
// which are protected (never imported); 256 copies of our ASN is a peer
// that could as well keep announcing the old path. A periodic walk of
// every peer bounds it. (gobgp gives no hook to close it: its debug log
// is written before the Adj-RIB-In changes, outside the event stream.)
//
// Stop(graceful=true) uses gobgp's StopBgp{AllowGracefulRestart}: no
// NOTIFICATION to peers that negotiated graceful restart, which then keep
// our routes stale for the restart time.
//
// # The listener
//
// gobgp never listens (ListenPort -1): listener.go accepts on listenPort,
// survives accept errors such as EMFILE (gobgp's accept loop ends for good
// on the first one), closes connections from addresses that are not peers
// (or whose TCP MD5 key could not be set), and hands a peer's connection
// to gobgp (through gobgp's unexported acceptCh, set by reflection before
// Serve) only once it sent a whole OPEN, so that a silent or half-sent
// connection cannot hold the peer in OpenSent for gobgp's 240 s. At most 4
// connections per peer address wait, until gobgp took them. It sets TCP
// MD5 keys and TTLs as gobgp did.
//
// # Dialing
//
// Every gobgp peer is passive: dialer.go dials the peers that are not
// passive, only while gobgp waits for a connection (Active), and hands
// each connection to gobgp through the same acceptCh, with the socket
// options gobgp's own dialer set (connect-retry with jitter, source
// address, device, TTL, GTSM, TCP MD5, no MPTCP). Every stream gobgp reads
// goes through a sniffer that names the peer's NOTIFICATIONs. collision.go
// decides, per peer, which connection gobgp gets when both sides dial
// (RFC 4271 6.8).
//
// # BFD
//
// bfd.go runs gobgp's own BFD for a peer with bfd.enabled only while its
// session is Established (turned on and off with UpdatePeer, no reset),
// reads its state for Peers, lets only ovnbgp's own BFD detection reset a
// session (not a Down or AdminDown the peer signals: bfdResetter, RFC 5882
// 3.2) and names BFD in lastError (docs/architecture.md, "BFD").
//
// # What is reported
//
// Advertised marks each advertisement in effect sent, pending (session
// down) or not sent (family not negotiated); a change gobgp refused
// keeps its last good state and is listed by NotApplied. Peers' lastError
// names NOTIFICATIONs with their time where ovnbgp can see them: those
// gobgp logs (sent ones, and those received once Established; its events
// carry only "invalid-msg") and those a peer sends during the OPEN
// exchange, read by the sniffer on every connection, dialed or accepted.
//
// # gobgp v4.8.0 behaviour worth knowing
//
//   - After a session drop gobgp stays Idle for 5 s (and closes a
//     connection handed to it then). Its own dialer, unused here, waited
//     1.5 to 2 s before the first dial (connect-retry has a 2 s floor).
//   - Timers are whole seconds; a holdTime of 0 cannot be expressed through
//     gobgp's API (it becomes 90 s).
//   - An empty neighbor set matches every peer; this package never leaves
//     one empty.
//   - DeletePolicy does not delete the statements it removes from a policy;
//     this package deletes them itself.
//   - An IPv6 prefix sent over an IPv4 session gets the IPv4-mapped session
//     address (::ffff:a.b.c.d) as next hop: give IPv6 prefixes IPv6 peers.
//   - A peer reset by the other side dials back during gobgp's idle hold
//     time; gobgp would close that connection ("Closed an accepted
//     connection"), so the listener holds it until gobgp is Active.
//   - gobgp resolves connection collisions (RFC 4271 6.8) only against
//     connections it dialed itself; collision.go does it for ovnbgp.
//   - gobgp's StartBgp writes package-level variables, and its event
//     watcher races with graceful-restart stale marking (osrg/gobgp#3658):
//     harmless in a daemon running one speaker at a time, but visible to
//     the race detector in tests that run several.
package bgp
