package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// TakeLearned names every peer in Resync after a change of the fake's
// learned paths (setLearned), as package bgp does after a session change:
// the daemon walks them again.
func (f *fakeSpeaker) TakeLearned() model.LearnedDelta {
	f.mu.Lock()
	on := f.onTake
	f.mu.Unlock()
	if on != nil {
		on()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.pending
	f.pending = model.LearnedDelta{}
	if f.gen == f.taken {
		return d
	}
	f.taken = f.gen
	for _, p := range f.peers {
		d.Resync = append(d.Resync, p.Name)
	}
	return d
}

// TrackLearned records what the daemon asked for.
func (f *fakeSpeaker) TrackLearned(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tracking, f.tracked = on, true
}

func (f *fakeSpeaker) trackingLearned() (on, called bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tracking, f.tracked
}

// change announces paths and withdraws keys as a peer's UPDATEs would:
// the next TakeLearned reports them, and no peer is walked again.
func (f *fakeSpeaker) change(announce []model.LearnedPath, withdraw []model.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range withdraw {
		f.learned = slices.DeleteFunc(f.learned, func(p model.LearnedPath) bool { return p.Peer == k.Peer && p.Prefix == k.Prefix })
		f.pending.Gone = append(f.pending.Gone, k)
	}
	for _, p := range announce {
		f.learned = slices.DeleteFunc(f.learned, func(q model.LearnedPath) bool { return q.Peer == p.Peer && q.Prefix == p.Prefix })
		f.learned = append(f.learned, p)
		f.pending.Paths = append(f.pending.Paths, p)
	}
}

// setLearned replaces what peers sent, as gobgp's path events would.
func (f *fakeSpeaker) setLearned(paths ...model.LearnedPath) {
	f.mu.Lock()
	f.learned = paths
	f.gen++
	f.mu.Unlock()
}

// ApplyRoutes applies static-route operations to the fake's owned routes,
// as package ovn does to NB: guards must match the routers' current routes.
func (f *fakeNB) ApplyRoutes(_ context.Context, node string, ops []model.OVNOp, guards []model.OVNGuard) ([]model.OVNOp, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applies = append(f.applies, slices.Clone(ops))
	for _, g := range guards {
		var now []string
		for _, r := range f.snap.OwnedRoutes {
			if r.Router == g.Router {
				now = append(now, r.UUID)
			}
		}
		slices.Sort(now)
		if !slices.Equal(now, g.StaticRoutes) {
			return nil, fmt.Errorf("%w: router %s no longer has the static routes the plan read: make a new plan", errStalePlan, g.Router)
		}
	}
	var applied []model.OVNOp
	// Snapshots handed out share the fake's slices: change copies, as the
	// real NB client's snapshots never change under their reader.
	f.snap.OwnedRoutes = slices.Clone(f.snap.OwnedRoutes)
	for _, op := range ops {
		switch op.Op {
		case model.OpAdd:
			f.uuids++
			r := op.Route
			r.UUID = fmt.Sprintf("u%d", f.uuids)
			f.snap.OwnedRoutes = append(f.snap.OwnedRoutes, r)
		case model.OpDelete, model.OpReplace:
			i := slices.IndexFunc(f.snap.OwnedRoutes, func(r model.OVNRoute) bool { return r.UUID == op.Route.UUID })
			if i < 0 {
				continue
			}
			if op.Op == model.OpDelete {
				f.snap.OwnedRoutes = slices.Delete(f.snap.OwnedRoutes, i, i+1)
			} else {
				f.snap.OwnedRoutes[i] = op.Route
			}
		}
		applied = append(applied, op)
	}
	f.syncRouters()
	return applied, nil
}

// syncRouters sets each router's StaticRoutes to its owned routes (in a
// copy of Routers: snapshots handed out keep theirs); the caller holds mu.
func (f *fakeNB) syncRouters() {
	f.snap.Routers = slices.Clone(f.snap.Routers)
	for i := range f.snap.Routers {
		var ids []string
		for _, r := range f.snap.OwnedRoutes {
			if r.Router == f.snap.Routers[i].Name {
				ids = append(ids, r.UUID)
			}
		}
		slices.Sort(ids)
		f.snap.Routers[i].StaticRoutes = ids
	}
}

func (f *fakeNB) ownedRoutes() []model.OVNRoute {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.snap.OwnedRoutes)
}

// fakeHost is the kernel as package vrf reports it: links, and the routes
// carrying our protocol.
type fakeHost struct {
	mu      sync.Mutex
	host    model.Host
	ops     [][]model.KernelOp
	changes model.HostChanges // since the last TakeChanges
	closed  bool
	notify  func() // what OpenHost was given
}

// deleteByHand removes a route as `ip route del` would, and sends the
// netlink event package vrf would.
func (h *fakeHost) deleteByHand(prefix netip.Prefix) {
	h.mu.Lock()
	h.host.Routes = slices.DeleteFunc(h.host.Routes, func(r model.KernelRoute) bool {
		if r.Prefix == prefix {
			h.changes.Routes = append(h.changes.Routes, r.Key())
		}
		return r.Prefix == prefix
	})
	n := h.notify
	h.mu.Unlock()
	n()
}

// setLinks replaces the host's links, as a link or address event would.
func (h *fakeHost) setLinks(links []model.Link) {
	h.mu.Lock()
	h.host.Links = links
	h.changes.Links = true
	n := h.notify
	h.mu.Unlock()
	if n != nil {
		n()
	}
}

func (h *fakeHost) TakeChanges() model.HostChanges {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.changes
	h.changes = model.HostChanges{}
	return c
}

func (h *fakeHost) Routes(keys []model.KernelRouteKey) ([]model.KernelRoute, []model.KernelRouteKey, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ours []model.KernelRoute
	var foreign []model.KernelRouteKey
	for _, k := range keys {
		if i := slices.IndexFunc(h.host.Routes, func(r model.KernelRoute) bool { return r.Key() == k }); i >= 0 {
			ours = append(ours, h.host.Routes[i])
		}
		if slices.Contains(h.host.Foreign, k) {
			foreign = append(foreign, k)
		}
	}
	return ours, foreign, nil
}

func (h *fakeHost) Snapshot() (model.Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.host
	out.Routes = slices.Clone(h.host.Routes)
	return out, nil
}

func (h *fakeHost) Apply(_ context.Context, ops []model.KernelOp) ([]model.KernelOp, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, slices.Clone(ops))
	for _, op := range ops {
		if op.Route == nil {
			continue
		}
		i := slices.IndexFunc(h.host.Routes, func(r model.KernelRoute) bool { return r.Key() == op.Route.Key() })
		switch {
		case op.Op == model.OpDelete && i >= 0:
			h.host.Routes = slices.Delete(h.host.Routes, i, i+1)
		case op.Op != model.OpDelete && i >= 0:
			h.host.Routes[i] = *op.Route
		case op.Op != model.OpDelete:
			r := *op.Route
			r.Rule = "" // the kernel keeps no rule
			h.host.Routes = append(h.host.Routes, r)
		}
	}
	return ops, nil
}

func (h *fakeHost) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
}

func (h *fakeHost) routes() []model.KernelRoute {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.host.Routes)
}

// snapshotNow is the fake's snapshot as the daemon would read it.
func (f *fakeNB) snapshotNow() model.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	s.OwnedRoutes = slices.Clone(f.snap.OwnedRoutes)
	return s
}

// deleteOwnedByHand removes an owned row as `ovn-nbctl lr-route-del` would
// (the daemon sees it in its next snapshot).
func (f *fakeNB) deleteOwnedByHand(prefix netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap.OwnedRoutes = slices.DeleteFunc(slices.Clone(f.snap.OwnedRoutes), func(r model.OVNRoute) bool { return r.Prefix == prefix })
	f.syncRouters()
}

// Sync is Peers' state and EndOfRIB of every peer (onPeers is called
// first, as by Peers), each with a graceful-restart capability (so
// End-of-RIB is expected) unless noGR is set, and LastUpdate as setLearned
// last changed something.
func (f *fakeSpeaker) Sync() map[string]model.PeerSync {
	peers, _ := f.Peers(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]model.PeerSync{}
	for _, p := range peers {
		ps := model.PeerSync{Established: p.State == model.StateEstablished, EndOfRIB: p.EndOfRIB, Since: f.since, LastUpdate: f.lastUpdate,
			Down: f.down, Graceful: f.downGraceful, EndOfRIBFamilies: f.eorFamilies}
		if !f.noGR {
			ps.GR = &model.PeerGR{RestartTime: 120 * time.Second, Families: map[string]bool{"ipv4": true, "ipv6": true}}
		}
		out[p.Name] = ps
	}
	return out
}

// SessionEndPending: the fake's events are never late.
func (f *fakeSpeaker) SessionEndPending(context.Context, string) (bool, error) { return false, nil }
