package daemon

import (
	"context"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// Speaker is the BGP side as the daemon uses it (package bgp implements it).
type Speaker interface {
	SetPeers(ctx context.Context, peers []config.Peer) error
	// Apply makes exactly the changes of the plan's advertisement diff,
	// computed against Advertised.
	Apply(ctx context.Context, d model.AdvertDiff) error
	// Advertised is what is in effect now (State says whether it is
	// really sent, Problem whether a newer change failed).
	Advertised() []model.Advertisement
	// AdvertisedOf is what Advertised lists of the given keys, in their
	// order, at a cost of the keys: a pass diffs only what NB changed.
	AdvertisedOf(keys []model.Key) []model.Advertisement
	// NotApplied is what the last Apply asked for and could not apply,
	// each with its Problem; its length is the failed-advertisements
	// count.
	NotApplied() []model.Advertisement
	// SessionRepairs counts the session-start repairs (the peer sent its
	// table again after a change that may have raced its session's start).
	SessionRepairs() model.SessionRepairs
	Peers(ctx context.Context) ([]model.PeerStatus, error)
	// Sync says per peer what fail static and graceful restart read
	// (End-of-RIB, the last UPDATE, the graceful-restart capability),
	// cheaply enough for every pass (Peers makes gobgp count every table).
	Sync() map[string]model.PeerSync
	// EachLearned calls fn for every path the named peer ("" = every
	// peer) sent, one at a time, so that a large table is never held in
	// memory twice; an error from fn stops the walk and is returned.
	EachLearned(ctx context.Context, peer string, fn func(model.LearnedPath) error) error
	// SessionEndPending reports whether a session of the named peer ("" =
	// any) has ended in gobgp before its event reached the speaker: a walk
	// just made may lack that session's paths while the speaker still says
	// Established (bgp.Speaker.SessionEndPending).
	SessionEndPending(ctx context.Context, peer string) (bool, error)
	// TakeLearned returns what peers sent since the previous call: the
	// loop keeps its table from it, and walks a peer again (EachLearned)
	// only when it is named in Resync.
	TakeLearned() model.LearnedDelta
	// TrackLearned says whether the loop takes deltas: off (no import
	// rule), what peers send is not kept for one and pokes nobody.
	TrackLearned(on bool)
	// SetBMP makes the BMP stations streamed to exactly servers, without
	// touching any session; BMP reports their state.
	SetBMP(ctx context.Context, servers []config.BMPServer, sysName, sysDescr string) error
	BMP(ctx context.Context) ([]model.BMPStation, error)
	// HoldSessions keeps new sessions from starting (for at most bound)
	// until ReleaseSessions: the daemon holds them while it gives a new
	// speaker its peers and its first table, so that End-of-RIB follows
	// the whole table.
	HoldSessions(bound time.Duration)
	ReleaseSessions()
	// Stop ends every session; graceful sends no NOTIFICATION so that
	// peers with graceful restart keep our routes.
	Stop(ctx context.Context, graceful bool) error
}

// Northbound is the OVN side as the daemon uses it (package ovn implements
// it).
type Northbound interface {
	// Snapshot is this node's networks; ok is false until the first sync.
	// After a sync it keeps returning the last good snapshot while the DB
	// is away.
	Snapshot(node string) (model.Snapshot, bool)
	// SnapshotDelta is Snapshot with its generation and what changed
	// since generation since (All when the client cannot say); the loop
	// alone calls it, once a pass.
	SnapshotDelta(node string, since uint64) (model.Snapshot, model.SnapshotDelta, uint64, bool)
	Status() api.NBStatus
	// ApplyRoutes applies static-route operations of a plan on node's
	// gateway routers, to rows ovnbgp owns only; with guards, all in one
	// transaction that first checks (OVSDB wait) that nothing the plan
	// read has changed. It returns what was really applied.
	ApplyRoutes(ctx context.Context, node string, ops []model.OVNOp, guards []model.OVNGuard) ([]model.OVNOp, error)
	Close()
}

// Host is the kernel side as the daemon uses it (package vrf implements
// it): links for the next-hop checks, and ovnbgp's own routes and VRFs.
type Host interface {
	Snapshot() (model.Host, error)
	// TakeChanges returns what changed since the previous call.
	TakeChanges() model.HostChanges
	// Routes returns the current state of the given keys: ovnbgp's
	// routes, and the keys held by routes not ovnbgp's.
	Routes(keys []model.KernelRouteKey) (ours []model.KernelRoute, foreign []model.KernelRouteKey, err error)
	// Apply applies kernel operations in order, keeps going on per-op
	// errors, and returns what was really applied.
	Apply(ctx context.Context, ops []model.KernelOp) ([]model.KernelOp, error)
	Close()
}

// Deps builds the external systems. The zero value uses the real ones;
// tests and the lab may replace them.
type Deps struct {
	NewSpeaker func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error)
	DialNB     func(ctx context.Context, cfg config.OVN, log *zap.Logger, notify func()) (Northbound, error)
	// OpenHost opens the kernel side; notify is called on changes in our
	// tables and on link and address changes.
	OpenHost func(protocol int, log *zap.Logger, notify func()) (Host, error)
	// LoadConfig reads and validates the config file, and stops when ctx
	// is done (config.LoadContext).
	LoadConfig func(ctx context.Context, path string) (*config.Config, error)
	// OpenLinks starts neighbour discovery on the links of on-link peers
	// (package nd); notify is called when a link's learned peer changes.
	OpenLinks func(log *zap.Logger, notify func()) (Links, error)
}

// Links learns the link-local address of the peer on each link of an
// on-link peer, and makes the node known there with router
// advertisements (FRR talks to an interface peer only once it has
// received one): package nd.
type Links interface {
	// SetLinks sets the links to work on (the others stop).
	SetLinks(links []string)
	// Peer is the learned, zoned address of link's peer; invalid when
	// none is known.
	Peer(link string) netip.Addr
	// Status says, per link, what was learned and how, or why nothing is.
	Status() []model.LinkStatus
	Close()
}

func (d Deps) withDefaults() Deps {
	if d.NewSpeaker == nil {
		d.NewSpeaker = newBGPSpeaker
	}
	if d.DialNB == nil {
		d.DialNB = dialOVN
	}
	if d.OpenHost == nil {
		d.OpenHost = openHost
	}
	if d.LoadConfig == nil {
		d.LoadConfig = config.LoadContext
	}
	if d.OpenLinks == nil {
		d.OpenLinks = openLinks
	}
	return d
}
