package daemon

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/bgp"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// openHost is the real Host: package vrf over netlink.
func openHost(protocol int, log *zap.Logger, notify func()) (Host, error) {
	return vrf.Open(protocol, log, notify)
}

// newBGPSpeaker is the real Speaker: package bgp over gobgp.
func newBGPSpeaker(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error) {
	return bgp.New(ctx, cfg, log, notify)
}

// dialOVN is the real Northbound: package ovn over libovsdb.
func dialOVN(ctx context.Context, cfg config.OVN, log *zap.Logger, notify func()) (Northbound, error) {
	c, err := ovn.Dial(ctx, cfg, log, notify)
	if err != nil {
		return nil, err
	}
	return nbClient{c}, nil
}

// nbClient reports ovn.Status in the control API's terms.
type nbClient struct{ *ovn.Client }

// ApplyRoutes is ovn.Client.ApplyRoutes; a stale plan's error is
// errStalePlan, which the control API answers 409.
func (c nbClient) ApplyRoutes(ctx context.Context, node string, ops []model.OVNOp, guards []model.OVNGuard) ([]model.OVNOp, error) {
	applied, err := c.Client.ApplyRoutes(ctx, node, ops, guards)
	if errors.Is(err, ovn.ErrStale) {
		err = staleError{err}
	}
	return applied, err
}

// staleError is an error of package ovn that says a plan is stale: it is
// errStalePlan too, and reads as it is.
type staleError struct{ error }

func (e staleError) Unwrap() error      { return e.error }
func (staleError) Is(target error) bool { return target == errStalePlan }

func (c nbClient) Status() api.NBStatus {
	s := c.Client.Status()
	var tried []api.NBTried
	for _, t := range s.Tried {
		tried = append(tried, api.NBTried{Path: t.Path, State: t.State})
	}
	return api.NBStatus{
		Endpoint: s.Endpoint, Source: string(s.Source), Tried: tried, Current: s.Current, Connected: s.Connected, Synced: s.Synced, Since: s.Since,
		LastError: s.LastError, LastErrorAt: s.LastErrorAt, Attempts: s.Attempts, Problems: s.Problems, Northd: s.Northd,
	}
}
