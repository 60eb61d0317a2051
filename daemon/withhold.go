package daemon

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// withheldIPv4 keeps the advertisement side's config: cfg itself, or,
// while some peer's IPv4 is withheld (model.PeerSync.WithholdIPv4: an
// IPv6 session whose peer did not offer the extended next hop
// capability), a copy without IPv4 in those peers' families, and without
// any family for an unnumbered peer whose address is not known yet (the
// speaker does not run it). The copy is kept while those sets do not
// change, so that the advertisement state (advWhy: "no state of this
// config") is built whole only when they do.
type withheldIPv4 struct {
	base    *config.Config
	peers   string // the withheld peers, sorted, comma-separated
	derived *config.Config
}

// advConfig is cfg as the advertisement side plans it, given the peers'
// sync state.
func (w *withheldIPv4) advConfig(cfg *config.Config, sync map[string]model.PeerSync, unresolved map[string]bool) *config.Config {
	var names, none []string
	for name, ps := range sync {
		if ps.WithholdIPv4 && !unresolved[name] {
			names = append(names, name)
		}
	}
	for name := range unresolved {
		none = append(none, name)
	}
	sort.Strings(names)
	sort.Strings(none)
	key := strings.Join(names, ",") + ";" + strings.Join(none, ",")
	if len(names) == 0 && len(none) == 0 {
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
		switch {
		case slices.Contains(none, p.Name):
			p.Families = nil
		case slices.Contains(names, p.Name):
			p.Families = slices.DeleteFunc(slices.Clone(p.Families), func(f config.Family) bool { return f == config.IPv4 })
		}
	}
	*w = withheldIPv4{base: cfg, peers: key, derived: &d}
	return &d
}

// previewSync is sync as a plan of cfg (a preview, while running runs)
// sees it: a peer whose session cfg resets (config.SessionResets) starts
// a new session, whose OPEN is not known yet, so nothing of it is withheld
// (the speaker clears WithholdIPv4 with the session, as the reload will).
func previewSync(running, cfg *config.Config, sync map[string]model.PeerSync) map[string]model.PeerSync {
	if running == nil || running == cfg {
		return sync
	}
	var out map[string]model.PeerSync
	for _, r := range config.SessionResets(running, cfg) {
		ps, ok := sync[r.Peer]
		if !ok || !ps.WithholdIPv4 {
			continue
		}
		if out == nil {
			out = maps.Clone(sync)
		}
		ps.WithholdIPv4 = false
		out[r.Peer] = ps
	}
	if out == nil {
		return sync
	}
	return out
}
