package daemon

import (
	"slices"
	"sort"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// withheldIPv4 keeps the advertisement side's config: cfg itself, or,
// while some peer's IPv4 is withheld (model.PeerSync.WithholdIPv4: an
// IPv6 session whose peer did not offer the extended next hop
// capability), a copy without IPv4 in those peers' families. The copy is
// kept while the set of such peers does not change, so that the
// advertisement state (advWhy: "no state of this config") is built whole
// only when it does.
type withheldIPv4 struct {
	base    *config.Config
	peers   string // the withheld peers, sorted, comma-separated
	derived *config.Config
}

// advConfig is cfg as the advertisement side plans it, given the peers'
// sync state.
func (w *withheldIPv4) advConfig(cfg *config.Config, sync map[string]model.PeerSync) *config.Config {
	var names []string
	for name, ps := range sync {
		if ps.WithholdIPv4 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	key := strings.Join(names, ",")
	if len(names) == 0 {
		*w = withheldIPv4{}
		return cfg
	}
	if w.base == cfg && w.peers == key {
		return w.derived
	}
	d := *cfg
	d.BGP.Peers = slices.Clone(cfg.BGP.Peers)
	for i := range d.BGP.Peers {
		p := &d.BGP.Peers[i]
		if slices.Contains(names, p.Name) {
			p.Families = slices.DeleteFunc(slices.Clone(p.Families), func(f config.Family) bool { return f == config.IPv4 })
		}
	}
	*w = withheldIPv4{base: cfg, peers: key, derived: &d}
	return &d
}
