package daemon

// TEMPORARY (not to be merged): until vrf.Manager has Routes and
// TakeChanges, a shim that makes every pass full.

import (
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/vrf"
)

type vrfShim struct{ *vrf.Manager }

func (vrfShim) TakeChanges() model.HostChanges { return model.HostChanges{All: true} }

func (s vrfShim) Routes(keys []model.KernelRouteKey) ([]model.KernelRoute, []model.KernelRouteKey, error) {
	h, err := s.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	want := map[model.KernelRouteKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	var ours []model.KernelRoute
	var foreign []model.KernelRouteKey
	for _, r := range h.Routes {
		if want[r.Key()] {
			ours = append(ours, r)
		}
	}
	for _, k := range h.Foreign {
		if want[k] {
			foreign = append(foreign, k)
		}
	}
	return ours, foreign, nil
}

func openHostShim(protocol int, log *zap.Logger, notify func()) (Host, error) {
	m, err := vrf.Open(protocol, log, notify)
	if err != nil {
		return nil, err
	}
	return vrfShim{m}, nil
}
