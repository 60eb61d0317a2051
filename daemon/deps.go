package daemon

import (
	"context"

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
	// NotApplied is what the last Apply asked for and could not apply,
	// each with its Problem; its length is the failed-advertisements
	// count.
	NotApplied() []model.Advertisement
	Peers(ctx context.Context) ([]model.PeerStatus, error)
	// EachLearned calls fn for every path the named peer ("" = every
	// peer) sent, one at a time, so that a large table is never held in
	// memory twice; an error from fn stops the walk and is returned.
	EachLearned(ctx context.Context, peer string, fn func(model.LearnedPath) error) error
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
	Status() api.NBStatus
	Close()
}

// Deps builds the external systems. The zero value uses the real ones;
// tests and the lab may replace them.
type Deps struct {
	NewSpeaker func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error)
	DialNB     func(ctx context.Context, cfg config.OVN, log *zap.Logger, notify func()) (Northbound, error)
	// LoadConfig reads and validates the config file, and stops when ctx
	// is done (config.LoadContext).
	LoadConfig func(ctx context.Context, path string) (*config.Config, error)
}

func (d Deps) withDefaults() Deps {
	if d.NewSpeaker == nil {
		d.NewSpeaker = newBGPSpeaker
	}
	if d.DialNB == nil {
		d.DialNB = dialOVN
	}
	if d.LoadConfig == nil {
		d.LoadConfig = config.LoadContext
	}
	return d
}
