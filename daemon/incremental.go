package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"time"

	"github.com/google/btree"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// importResync is how often the loop decides every learned path again from
// a full walk of the speaker and a full read of the kernel, whatever the
// events said: a missed event costs at most this long.
const importResync = 10 * time.Minute

// loopPlan is the plan of one pass of the loop. With import rules it is
// incremental: the table is updated with what the speaker, the kernel and
// NB say changed since the last pass, and only the prefixes that touches
// are diffed, so a pass costs what changed, not the size of the table. A
// pass is full (every path walked and decided, the whole kernel read and
// diffed: planFrom) when anything the table was decided against changed,
// and every importResync.
func (pl *planner) loopPlan(ctx context.Context, cfg *config.Config, sp Speaker, snap model.Snapshot, nr nbRead) planView {
	// Without import rules nothing learned is planned: the speaker keeps
	// no delta (a ToR sends every advertised prefix back, each a path to
	// convert, keep and wake the loop for). With them, the table starts
	// from a full walk (no table of a config without import rules).
	sp.TrackLearned(len(cfg.Import) > 0)
	if len(cfg.Import) == 0 {
		pl.setTable(planView{}, nil, nil, nil)
		return pl.planFrom(ctx, cfg, sp, snap, false, false, &nr)
	}
	pl.openHostOnce(cfg)
	// End-of-RIB is read before what peers sent is taken: gobgp reports a
	// peer's paths before its End-of-RIB, so every path sent before an
	// End-of-RIB seen here is in the delta (the other order could let a
	// held delete go for a route the peer had just re-sent). What changed
	// is taken before anything is walked: whatever happens after is in
	// the next take, and a walk that follows is newer.
	synced := pl.syncedPeers(ctx, sp, cfg, false)
	take := func() (hc model.HostChanges, delta model.LearnedDelta) {
		if pl.imp.host != nil {
			hc = pl.imp.host.TakeChanges()
		}
		return hc, sp.TakeLearned()
	}
	// A queued change is decided first: what changed since waits in the
	// speaker and the kernel (each keeps the latest state of a key), so
	// that it is decided after what came before it.
	var hc model.HostChanges
	var delta model.LearnedDelta
	if pl.imp.queue == nil {
		hc, delta = take()
	}
	if why := pl.fullWhy(cfg, sp, snap, hc, synced); why != "" {
		if pl.imp.queue != nil {
			_, delta = take() // the walk that follows is newer
		}
		return pl.fullPass(ctx, cfg, sp, snap, why, delta.Gone, &nr)
	}
	v, err := pl.incrementalPass(ctx, cfg, sp, snap, delta, hc, synced, &nr)
	if err != nil {
		return pl.fullPass(ctx, cfg, sp, snap, err.Error(), delta.Gone, &nr)
	}
	return v
}

// fullPass plans everything anew and keeps the new table.
// withdrawn are the keys the pass took as withdrawn (or dropped after
// their session was seen down) and does not apply itself: the walk's
// retention keeps none of them stale (a withdrawal is never kept).
func (pl *planner) fullPass(ctx context.Context, cfg *config.Config, sp Speaker, snap model.Snapshot, why string, withdrawn []model.Key, nr *nbRead) planView {
	pl.log.Debug("import: full pass", zap.String("why", why))
	pl.imp.withdrawn = withdrawn
	v := pl.planFrom(ctx, cfg, sp, snap, false, true, nr)
	pl.imp.withdrawn = nil
	pl.setTable(v, cfg, sp, v.synced)
	return v
}

// fullWhy says why this pass must be full, or "".
func (pl *planner) fullWhy(cfg *config.Config, sp Speaker, snap model.Snapshot, hc model.HostChanges, synced map[string]bool) string {
	switch {
	case pl.imp.table == nil || pl.imp.tableFor != sp:
		return "no table of this speaker yet"
	case pl.imp.tableCfg != cfg:
		return "the config changed"
	case pl.imp.host == nil:
		return "the kernel side is not open"
	case hc.All:
		return "kernel events may have been missed"
	case hc.Links:
		return "links, addresses or VRFs changed"
	case pl.imp.fullDue:
		return "the last pass did not finish"
	case !reflect.DeepEqual(pl.imp.stale, pl.imp.tableStale):
		return "a peer's graceful-restart window changed (its stale paths are decided again)"
	case pl.imp.adoptDue:
		return "the routes installed now are adopted (the sync starts over)"
	case time.Since(pl.imp.fullAt) >= importResync:
		return "periodic resync"
	case slices.ContainsFunc(cfg.Import, func(r config.ImportRule) bool { return r.Mode == "manual" }):
		return "a rule is in manual mode (its plan is always whole)"
	case !sameImportEnv(snap, pl.imp.tableEnv):
		return "NB changed what import checks against"
	}
	return ""
}

// importEnv is the part of a snapshot the import decision is checked
// against: all but the owned routes and the routers' route lists, which
// change with every write, and what only advertising reads (egress IPs and
// Service VIPs: import sees them as Protected). Its Protected is the
// table's protected set as NB gave it; sameImportEnv leaves it out: a
// change of it alone (every VIP or NAT address added or removed) is
// decided in the incremental pass (ImportTable.SetSnapshotProtected).
func importEnv(s model.Snapshot) model.Snapshot {
	s.OwnedRoutes, s.EgressIPs, s.ServiceVIPs = nil, nil, nil
	s.Routers = slices.Clone(s.Routers)
	for i := range s.Routers {
		s.Routers[i].StaticRoutes = nil
	}
	return s
}

// sameImportEnv reports whether snapshot a has the import environment b
// (an importEnv), NB's protected prefixes aside.
func sameImportEnv(a, b model.Snapshot) bool {
	a = importEnv(a)
	a.Protected, b.Protected = nil, nil
	return reflect.DeepEqual(a, b)
}

// setProtected gives the table NB's protected prefixes of snap when they
// changed, and returns the prefixes whose decision that can change. fullWhy
// found the rest of the environment the same, so the table cannot refuse
// it; if it did, the error makes the pass full.
func (pl *planner) setProtected(snap model.Snapshot) ([]netip.Prefix, error) {
	if slices.Equal(snap.Protected, pl.imp.tableEnv.Protected) {
		return nil, nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	touched, ok := pl.imp.table.SetSnapshotProtected(snap)
	if !ok {
		return nil, errors.New("NB changed what import checks against")
	}
	pl.imp.tableEnv.Protected = snap.Protected
	return touched, nil
}

// setTable keeps the decision of a full pass (v.table nil: none).
func (pl *planner) setTable(v planView, cfg *config.Config, sp Speaker, synced map[string]bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.imp.table, pl.imp.tableFor, pl.imp.tableCfg, pl.imp.tableSynced = v.table, sp, cfg, synced
	pl.imp.tableStale = v.stale
	// A table decided on the last good paths (the walk failed), or on a
	// kernel that could not be read, is redone by the next pass.
	pl.imp.fullDue = v.table != nil && (!v.learnedOK || v.hostErr != nil)
	pl.imp.tableEnv = importEnv(v.snap)
	pl.imp.fullAt = time.Now()
	pl.imp.ovnSeen, pl.imp.ovnWrote = v.snap.OwnedRoutes, nil
	pl.imp.hostSnap = v.host
	pl.imp.held = map[netip.Prefix][]plan.Held{}
	pl.addHeld(v.plan.Held)
	pl.imp.resync = map[string]bool{}      // the full walk covered them
	pl.imp.queue, pl.imp.toDiff = nil, nil // and it decided and diffed everything
}

// addHeld records held operations by prefix; the caller holds mu.
func (pl *planner) addHeld(held []plan.Held) {
	for _, h := range held {
		var p netip.Prefix
		switch {
		case h.OVN != nil:
			p = h.OVN.Route.Prefix
		case h.Kernel != nil && h.Kernel.Route != nil:
			p = h.Kernel.Route.Prefix
		}
		pl.imp.held[p] = append(pl.imp.held[p], h)
	}
}

// heldOps are the operations held back now; the caller holds mu.
func (pl *planner) heldOps() []plan.Held {
	var out []plan.Held
	for _, h := range pl.imp.held {
		out = append(out, h...)
	}
	return out
}

// incrementalPass updates the table with what changed and plans the
// prefixes that touches. An error means the change could not be read
// whole: the caller makes the pass full instead.
func (pl *planner) incrementalPass(ctx context.Context, cfg *config.Config, sp Speaker, snap model.Snapshot,
	delta model.LearnedDelta, hc model.HostChanges, synced map[string]bool, nr *nbRead) (planView, error) {
	t := pl.imp.table
	// A VIP or NAT address that came or went (NB's protected prefixes)
	// decides again only the prefixes it can affect; they are diffed with
	// the rest.
	protTouched, err := pl.setProtected(snap)
	if err != nil {
		return planView{}, err
	}
	if pl.imp.queue != nil {
		return pl.queuedPass(ctx, cfg, sp, snap, protTouched, nil, synced, nr)
	}
	change := plan.TableChange{Paths: delta.Paths, Gone: delta.Gone}
	// walkGone: keys a walk of a peer lacks. Only those may be kept
	// stale (the speaker dropped them with the session); a withdrawal the
	// peer sent (the delta's Gone) never is.
	var walkGone []model.Key
	// A peer to walk again waits one pass when paths came too: what the
	// peer sent is decided and applied first (at the end of a table
	// transfer, End-of-RIB comes right after the last UPDATE), and the
	// walk, newer than anything taken, follows at once.
	for _, peer := range delta.Resync {
		pl.imp.resync[peer] = true
	}
	if len(pl.imp.resync) > 0 && len(change.Paths)+len(change.Gone) > 0 {
		// Until its walk, a peer's table may miss what only the walk
		// shows (paths gobgp drops without an event): nothing of its
		// rules is deleted meanwhile.
		for peer := range pl.imp.resync {
			synced[peer] = false
		}
		pl.poke()
	} else {
		for _, peer := range slices.Sorted(maps.Keys(pl.imp.resync)) {
			paths, gone, err := pl.resyncPeer(ctx, sp, t, peer)
			if err != nil {
				return planView{}, err
			}
			change.Paths = append(change.Paths, paths...)
			walkGone = append(walkGone, gone...)
			delete(pl.imp.resync, peer)
		}
	}
	if len(hc.Routes) > 0 {
		_, foreign, err := pl.imp.host.Routes(hc.Routes)
		if err != nil {
			return planView{}, fmt.Errorf("read changed kernel routes: %w", err)
		}
		change.KernelKeys, change.Foreign = hc.Routes, foreign
	}
	if pl.sessionsEnded(sp, cfg) {
		// What was taken may lack the paths gobgp dropped with the
		// session: decided on the new windows, in a full pass.
		return planView{}, errors.New("a session ended while the pass read what changed")
	}
	pl.mu.Lock()
	change.Paths, walkGone = retainStale(t, pl.imp.stale, change.Paths, withoutKeys(walkGone, delta.Gone))
	change.Gone = append(change.Gone, walkGone...)
	pl.mu.Unlock()
	if len(change.Paths)+len(change.Gone) > pl.lim.passChunk {
		// Too large for one pass: decided passChunk changes a pass, in
		// prefix order, the loop serving its other work between; taking
		// and queueing it (100k paths: ~20 ms) is this pass's work.
		pl.imp.queue = plan.NewChangeQueue(change)
		return pl.diffPass(ctx, cfg, sp, snap, protTouched, hc.Routes, synced, nr)
	}
	pl.mu.Lock()
	touched := t.Update(change)
	pl.mu.Unlock()
	return pl.diffPass(ctx, cfg, sp, snap, append(touched, protTouched...), hc.Routes, synced, nr)
}

// passChunk is limits.passChunk's default: the path changes decided
// (ImportTable.Update) and the prefixes diffed and applied in one pass. A
// part of 1024 of a large peer's drop costs ~3 ms to decide
// (BenchmarkChangeQueueDrop: 2 µs per prefix, its cap's freed slots
// included); 100k at once held the loop, the watchdog's ping and the API
// for 0.4 s.
const passChunk = 1024

// queuedPass decides the next part of the queued change. Nothing imported
// is diffed until the queue is empty: the prefixes decided wait in toDiff,
// so that nothing is applied from a half-decided table (a cap's slot
// freed by one part can go to a prefix that a later part removes). The
// pass still plans the advertisements. touched are prefixes decided
// already (a protected prefix that came or went), diffed with the part's.
func (pl *planner) queuedPass(ctx context.Context, cfg *config.Config, sp Speaker, snap model.Snapshot,
	touched []netip.Prefix, hcRoutes []model.KernelRouteKey, synced map[string]bool, nr *nbRead) (planView, error) {
	// What peers sent since waits untaken: a sync seen now (an
	// End-of-RIB) may not let held deletes go before the paths sent with
	// it are taken, so the table's sync state stands until then.
	synced = maps.Clone(pl.imp.tableSynced)
	if synced == nil {
		synced = map[string]bool{}
	}
	part := pl.imp.queue.Next(pl.lim.passChunk)
	pl.mu.Lock()
	touched = append(touched, pl.imp.table.Update(part)...)
	pl.mu.Unlock()
	if pl.imp.queue.Len() == 0 {
		pl.imp.queue = nil
	}
	// A peer waiting for its walk (taken after the queue) is not synced.
	for peer := range pl.imp.resync {
		synced[peer] = false
	}
	return pl.diffPass(ctx, cfg, sp, snap, touched, hcRoutes, synced, nr)
}

// diffPass diffs what the table's Update touched and what else changed
// (owned OVN rows, kernel routes, held deletes a sync lets go), at most
// passChunk prefixes a pass in prefix order (the rest waits in toDiff),
// and builds the pass's plan.
func (pl *planner) diffPass(ctx context.Context, cfg *config.Config, sp Speaker, snap model.Snapshot,
	touched []netip.Prefix, hcRoutes []model.KernelRouteKey, synced map[string]bool, nr *nbRead) (planView, error) {
	t := pl.imp.table
	// Prefixes whose owned OVN rows changed in NB (ours just written, or
	// someone's edit) are diffed again too.
	if !slices.Equal(snap.OwnedRoutes, pl.imp.ovnSeen) {
		touched = append(touched, changedOVNPrefixes(pl.imp.ovnSeen, snap.OwnedRoutes)...)
	}
	pl.mu.Lock()
	touched = append(touched, pl.imp.ovnWrote...)
	pl.imp.ovnWrote = nil
	pl.mu.Unlock()
	for _, k := range hcRoutes {
		touched = append(touched, k.Prefix)
	}
	// A peer that synced lets held deletes go: their prefixes are diffed
	// again.
	if !reflect.DeepEqual(synced, pl.imp.tableSynced) {
		for p := range pl.imp.held {
			touched = append(touched, p)
		}
		pl.imp.tableSynced = synced
	}
	if pl.imp.queue != nil || pl.imp.toDiff != nil || len(touched) > pl.lim.passChunk {
		// Diffed later, in prefix order: passChunk a pass once the queue
		// is empty.
		if pl.imp.toDiff == nil {
			pl.imp.toDiff = btree.NewG(32, func(a, b netip.Prefix) bool { return model.ComparePrefix(a, b) < 0 })
		}
		for _, p := range touched {
			pl.imp.toDiff.ReplaceOrInsert(p)
		}
		touched = touched[:0]
		if n := min(pl.lim.passChunk, pl.imp.toDiff.Len()); pl.imp.queue == nil && cap(touched) < n {
			touched = make([]netip.Prefix, 0, n) // no regrowth a pass
		}
		for pl.imp.queue == nil && len(touched) < pl.lim.passChunk {
			p, ok := pl.imp.toDiff.DeleteMin()
			if !ok {
				break
			}
			touched = append(touched, p)
		}
		if pl.imp.toDiff.Len() == 0 {
			pl.imp.toDiff = nil
		}
	}
	if pl.imp.queue != nil || pl.imp.toDiff != nil {
		pl.poke() // the rest next pass; the loop serves what waits first
	}
	slices.SortFunc(touched, model.ComparePrefix)
	touched = slices.Compact(touched)

	tables := t.KernelTables()
	keys := make([]model.KernelRouteKey, 0, len(tables)*len(touched)+len(hcRoutes))
	for _, tb := range tables {
		for _, p := range touched {
			keys = append(keys, model.KernelRouteKey{Table: tb, Prefix: p})
		}
	}
	for _, k := range hcRoutes {
		if !slices.Contains(tables, k.Table) {
			keys = append(keys, k)
		}
	}
	host := pl.imp.hostSnap
	host.Routes = nil
	if len(keys) > 0 {
		ours, _, err := pl.imp.host.Routes(keys)
		if err != nil {
			return planView{}, fmt.Errorf("read the kernel routes of the changed prefixes: %w", err)
		}
		host.Routes = ours
	}
	part := snap
	part.OwnedRoutes = nil
	for _, r := range snap.OwnedRoutes {
		if _, ok := slices.BinarySearchFunc(touched, r.Prefix, model.ComparePrefix); ok {
			part.OwnedRoutes = append(part.OwnedRoutes, r)
		}
	}
	adv := pl.adverts(cfg, sp, snap, nr)
	p := pl.decide(passInput{cfg: cfg, table: t, touched: touched, snap: part, host: host,
		synced: synced, adv: adv, forget: true})
	pl.mu.Lock()
	pl.imp.ovnSeen = snap.OwnedRoutes
	for _, pfx := range touched {
		delete(pl.imp.held, pfx)
	}
	pl.addHeld(p.Held)
	pl.mu.Unlock()
	return planView{plan: p, table: t, snap: snap, host: host, desired: adv.all, held: adv.held, synced: synced, learnedOK: true}, nil
}

// withoutKeys is keys without those in drop.
func withoutKeys(keys, drop []model.Key) []model.Key {
	if len(drop) == 0 || len(keys) == 0 {
		return keys
	}
	skip := make(map[model.Key]bool, len(drop))
	for _, k := range drop {
		skip[k] = true
	}
	return slices.DeleteFunc(keys, func(k model.Key) bool { return skip[k] })
}

// retainStale keeps, stale, the paths of gone (withdrawn or dropped by the
// speaker) that a peer's graceful restart keeps (plan.Retained, windows):
// they move from gone to paths, or stay as they are if already stale. The
// caller holds mu.
func retainStale(t *plan.ImportTable, windows map[string]map[config.Family]plan.StaleWindow,
	paths []model.LearnedPath, gone []model.Key) ([]model.LearnedPath, []model.Key) {
	keeps := keepingPeers(windows)
	if len(keeps) == 0 || len(gone) == 0 {
		return paths, gone
	}
	left := gone[:0:0]
	for _, k := range gone {
		if !slices.Contains(keeps, k.Peer) {
			left = append(left, k)
			continue
		}
		old, ok := t.Learned(k)
		if !ok {
			left = append(left, k)
			continue
		}
		p, keep := plan.Retained(old, windows)
		switch {
		case !keep:
			left = append(left, k)
		case !old.Stale:
			paths = append(paths, p)
		}
	}
	return paths, left
}

// resyncPeer walks one peer's paths and returns how they differ from the
// table's: paths new or changed, and keys gone.
func (pl *planner) resyncPeer(ctx context.Context, sp Speaker, t *plan.ImportTable, peer string) ([]model.LearnedPath, []model.Key, error) {
	pl.mu.Lock()
	had := t.PeerKeys(peer)
	pl.mu.Unlock()
	left := make(map[model.Key]bool, len(had))
	for _, k := range had {
		left[k] = true
	}
	var changed []model.LearnedPath
	err := sp.EachLearned(ctx, peer, func(p model.LearnedPath) error {
		k := model.Key{Peer: p.Peer, Prefix: p.Prefix}
		delete(left, k)
		pl.mu.Lock()
		old, ok := t.Learned(k)
		pl.mu.Unlock()
		if !ok || !reflect.DeepEqual(old, p) {
			changed = append(changed, p)
		}
		return nil
	})
	if err == nil {
		err = endPendingErr(ctx, sp, peer)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("walk the paths of peer %s: %w", peer, err)
	}
	gone := make([]model.Key, 0, len(left))
	for k := range left {
		gone = append(gone, k)
	}
	return changed, gone, nil
}

// changedOVNPrefixes are the prefixes of the rows that differ between two
// lists of owned routes.
func changedOVNPrefixes(old, now []model.OVNRoute) []netip.Prefix {
	count := map[model.OVNRoute]int{}
	for _, r := range old {
		count[r]++
	}
	for _, r := range now {
		count[r]--
	}
	var out []netip.Prefix
	for r, n := range count {
		if n != 0 {
			out = append(out, r.Prefix)
		}
	}
	return out
}
