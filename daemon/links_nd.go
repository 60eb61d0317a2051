package daemon

import (
	"net/netip"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/nd"
)

// openLinks is Deps.OpenLinks: package nd in the daemon's namespace.
func openLinks(log *zap.Logger, notify func()) (Links, error) {
	f, err := nd.New(nd.Options{
		Notify: func(string, netip.Addr) { notify() },
		Log:    zapr.NewLogger(log),
	})
	if err != nil {
		return nil, err
	}
	return ndLinks{f}, nil
}

// ndLinks is an nd.Finder as Links.
type ndLinks struct{ *nd.Finder }

func (l ndLinks) Status() []model.LinkStatus {
	st := l.Finder.Status()
	out := make([]model.LinkStatus, 0, len(st))
	for _, s := range st {
		out = append(out, model.LinkStatus{Link: s.Link, Peer: s.Peer, How: string(s.How), Since: s.Since, Local: s.Local,
			Waiting: s.Waiting, Problem: s.Problem, LastError: s.LastError})
	}
	return out
}
