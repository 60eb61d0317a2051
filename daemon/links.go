package daemon

import (
	"context"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// On-link peers (issue 20): an unnumbered peer's address is the one
// neighbour discovery learns on its link (Links); until one is known the
// peer is not given to the speaker, and the advertisement side plans
// nothing for it (advConfig). Every on-link peer's link runs neighbour
// discovery, also for an address given by hand: FRR's interface peers
// talk only to a node whose router advertisement they received.

// onLinkLinks are the links of cfg's on-link peers, sorted.
func onLinkLinks(cfg *config.Config) []string {
	var links []string
	for _, p := range cfg.BGP.Peers {
		if p.OnLink() && !slices.Contains(links, p.Link()) {
			links = append(links, p.Link())
		}
	}
	slices.Sort(links)
	return links
}

// syncLinks runs neighbour discovery on cfg's on-link links, opening it
// the first time one is needed. An error is logged: the unnumbered peers
// then stay unresolved (peers says why), the others run.
func (d *Daemon) syncLinks(cfg *config.Config) {
	links := onLinkLinks(cfg)
	d.mu.Lock()
	l := d.links
	d.mu.Unlock()
	if l == nil && len(links) == 0 {
		return
	}
	if l == nil {
		var err error
		l, err = d.deps.OpenLinks(d.log.Named("nd"), d.linksPoke)
		if err != nil {
			d.log.Error("neighbour discovery failed to start: unnumbered peers get no address", zap.Error(err))
			d.mu.Lock()
			d.linksErr = err.Error()
			d.mu.Unlock()
			return
		}
		d.mu.Lock()
		d.links, d.linksErr = l, ""
		d.mu.Unlock()
	}
	l.SetLinks(links)
}

// linksPoke tells the loop that a link's learned peer changed; it never
// blocks.
func (d *Daemon) linksPoke() {
	select {
	case d.linksChanged <- struct{}{}:
	default:
	}
}

// closeLinks stops neighbour discovery (the daemon's end).
func (d *Daemon) closeLinks() {
	d.mu.Lock()
	l := d.links
	d.links = nil
	d.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

// resolvedPeers are the peers the speaker runs: cfg's, with each
// unnumbered peer's learned address, and without the unnumbered peers
// whose address is not known yet.
func (d *Daemon) resolvedPeers(cfg *config.Config) []config.Peer {
	d.mu.Lock()
	l := d.links
	d.mu.Unlock()
	out := make([]config.Peer, 0, len(cfg.BGP.Peers))
	for _, p := range cfg.BGP.Peers {
		if p.Unnumbered() {
			if l == nil {
				continue
			}
			a := l.Peer(p.Link())
			if !a.IsValid() {
				continue
			}
			p.Address = a
		}
		out = append(out, p)
	}
	return out
}

// unresolved are the names of cfg's unnumbered peers the speaker does
// not run yet (no address learned).
func (d *Daemon) unresolved(cfg *config.Config) map[string]bool {
	var out map[string]bool
	d.mu.Lock()
	l := d.links
	d.mu.Unlock()
	for _, p := range cfg.BGP.Peers {
		if p.Unnumbered() && (l == nil || !l.Peer(p.Link()).IsValid()) {
			if out == nil {
				out = map[string]bool{}
			}
			out[p.Name] = true
		}
	}
	return out
}

// linkPeers completes the peers answer for on-link peers: their link and
// how their address was learned, and the unnumbered peers the speaker
// does not run yet, with why (sorted by name, as the speaker's).
func (d *Daemon) linkPeers(cfg *config.Config, peers []model.PeerStatus) []model.PeerStatus {
	d.mu.Lock()
	l, lerr := d.links, d.linksErr
	d.mu.Unlock()
	status := map[string]model.LinkStatus{}
	if l != nil {
		for _, s := range l.Status() {
			status[s.Link] = s
		}
	}
	for _, p := range cfg.BGP.Peers {
		if !p.OnLink() {
			continue
		}
		st := status[p.Link()]
		i := slices.IndexFunc(peers, func(s model.PeerStatus) bool { return s.Name == p.Name })
		if i >= 0 {
			peers[i].Interface = p.Link()
			if p.Unnumbered() && st.How != "" {
				peers[i].Learned = "learned from a " + st.How
			}
			continue
		}
		if !p.Unnumbered() {
			continue
		}
		why := st.Waiting
		switch {
		case lerr != "":
			why = "neighbour discovery failed to start: " + lerr
		case st.Problem != "":
			why = st.Problem
		case st.LastError != "":
			why = st.LastError
		case why == "":
			why = "no neighbour learned on " + p.Link() + " yet"
		}
		fams := make([]model.FamilyCounts, 0, len(p.Families))
		for _, f := range p.Families {
			fams = append(fams, model.FamilyCounts{Family: string(f)})
		}
		peers = append(peers, model.PeerStatus{Name: p.Name, ASN: p.ASN, State: model.StateIdle, Interface: p.Link(),
			Families: fams, LastError: "unnumbered: " + why})
	}
	slices.SortFunc(peers, func(a, b model.PeerStatus) int { return strings.Compare(a.Name, b.Name) })
	return peers
}

// linksChangedPeers gives the speaker the peers again after a link's
// learned peer changed, once the peers run.
func (d *Daemon) linksChangedPeers(ctx context.Context) {
	if !d.peersAdded() {
		return
	}
	d.mu.Lock()
	sp, cfg := d.speaker, d.cfg
	d.mu.Unlock()
	if sp == nil {
		return
	}
	d.setPeers(ctx, sp, cfg)
}
