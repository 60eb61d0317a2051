// Package bgp is ovnbgp's BGP speaker: an embedded gobgp v4 server driven in
// ovnbgp's own types (config.Peer, model.AdvertDiff, model.Advertisement,
// model.PeerStatus, model.LearnedPath). It is the only package that imports
// gobgp, and no gobgp type crosses its API.
//
// Speaker owns gobgp's peers, the local paths of its global RIB, its export
// and import policies, and the TCP side of every session: its own listener
// and dialer hand connections to gobgp, whose peers are all passive.
// SetPeers makes gobgp's peers match the config; it withdraws nothing (the
// plan withdraws a removed peer's advertisements). Apply makes exactly the
// changes of an advertisement diff that package plan computed against
// Advertised, and no others: lower (pure) turns it into gobgp operations,
// and Apply executes them in order. EachLearned walks what peers sent, before
// policy; TakeLearned returns what changed since its previous call. Import
// is default deny: nothing learned enters the Loc-RIB.
//
// Inside, Speaker is made of parts, each with one owner, in one lock order
// (the Speaker type's comment): the management part under Speaker.mu (the
// configured peers, the advertisements, BMP), the transport (transport.go:
// listener, dialer, collision gate, the sessions' hold), the session
// bookkeeping (sessions.go), the learned journal (journal.go), the guards
// (the prefix limit's and BFD's workers: prefixlimit.go, bfd.go) and tasks,
// which owns the goroutines and timers the Speaker starts (tasks.go).
//
// How the policies are built, what gobgp reports about learned paths, and
// the gobgp v4.8.0 faults this package works around (listener, dialer and
// collisions, BFD, the prefix limit, a change as a session comes up):
// docs/architecture.md, "Inside the speaker" and the sections after it.
package bgp
