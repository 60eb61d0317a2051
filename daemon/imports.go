package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// importState is what the loop keeps between passes for route import: the
// import decision (the table, which holds the learned paths), the host,
// the peers that are synced (End-of-RIB, or deferralTime since start), and
// the last plan. Only the loop writes it, under Daemon.mu for what the
// control API reads (everything but synced, alarms and the table's
// bookkeeping).
type importState struct {
	host    Host
	hostErr error
	// hostTried is when opening the host was last tried (hostRetry).
	hostTried time.Time
	// hostSnap is the host as last read in full: its links, VRFs and
	// rules are current (a change of them makes the next pass full), its
	// routes only as of that read.
	hostSnap model.Host
	// table is the import decision of every learned path; tableFor is the
	// speaker whose paths it holds (nil: none yet), tableCfg the config,
	// tableEnv the NB snapshot it was decided against (importEnv: what
	// changes with every write, the egress IPs, VIPs and protected
	// prefixes aside; the protected prefixes follow each pass through
	// ImportTable.SetSnapshotProtected) and tableSynced the synced peers
	// it was last fully planned with;
	// fullAt is when. fullDue makes the next pass full (a failed walk or
	// apply). ovnSeen are the owned OVN routes the last pass diffed, and
	// ovnWrote the prefixes of the OVN operations applied since: the next
	// pass diffs them again (a row added and deleted by hand before the
	// next snapshot leaves no trace in a comparison of the two).
	table       *plan.ImportTable
	tableFor    Speaker
	tableCfg    *config.Config
	tableEnv    model.Snapshot
	tableSynced map[string]bool
	fullAt      time.Time
	fullDue     bool
	ovnSeen     []model.OVNRoute
	ovnWrote    []netip.Prefix
	walkErr     string
	// resync are the peers to walk again (LearnedDelta.Resync) not walked
	// yet.
	resync map[string]bool
	// queue is the rest of a change too large for one pass (a large
	// peer's drop), decided passChunk changes a pass; toDiff are the
	// prefixes decided and not diffed yet, diffed passChunk a pass once
	// the queue is empty (so that nothing is applied from a half-decided
	// table). Both nil: nothing waits.
	queue  *plan.ChangeQueue
	toDiff *btree.BTreeG[netip.Prefix]
	// synced are the peers whose table is complete since their session
	// was (re)started: End-of-RIB, or deferralTime since addedAt. syncFor
	// is the speaker they belong to: a new speaker starts them all over.
	synced  map[string]bool
	addedAt map[string]time.Time
	syncFor Speaker
	// syncWake is when the sync state may change next (a deferral ends,
	// a quiet peer's table counts as complete): the loop plans again
	// then. Zero: nothing to wait for.
	syncWake time.Time
	// adopted are the owned routes found installed when the sync started
	// and not announced again since (plan.Adopted): only their deletes
	// are held by fail static. adoptDue: the next full pass adopts what
	// is installed (the speaker or a peer's session started over).
	adopted  *plan.Adopted
	adoptDue bool
	// stale are the peers' graceful-restart windows of this pass
	// (plan.StaleWindows), tableStale those the table was decided with:
	// when they differ, the pass is full.
	stale, tableStale map[string]map[config.Family]plan.StaleWindow
	// staleFrom is the speaker's Sync that stale was computed from.
	staleFrom map[string]model.PeerSync
	// withdrawn are the keys a full pass's discarded take had as gone:
	// its walk keeps none of them stale (fullPass).
	withdrawn []model.Key
	// manual is the part of the last full plan that waits for `ovnbgp
	// apply`, held the operations held back, by prefix.
	manual plan.Plan
	held   map[netip.Prefix][]plan.Held
	// alarms are the import caps reached, by rule and peer, as last logged.
	alarms map[string]bool
}

// hostRetry is how long a failed open of the kernel side waits before the
// next try.
const hostRetry = 30 * time.Second

// openHostOnce opens the kernel side; a failure is reported and retried
// every hostRetry. Meanwhile the next-hop checks reject everything (nothing
// is imported blind) and nothing imported is deleted (planFrom).
func (pl *planner) openHostOnce(cfg *config.Config) {
	if pl.imp.host != nil || (pl.imp.hostErr != nil && time.Since(pl.imp.hostTried) < hostRetry) {
		return
	}
	pl.imp.hostTried = time.Now()
	h, err := pl.openHost(cfg.Kernel.RouteProtocol, pl.log.Named("vrf"), pl.poke)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if err != nil {
		pl.imp.hostErr = fmt.Errorf("kernel (netlink) unavailable: %w; nothing is imported, since next hops cannot be checked, and nothing imported is deleted; retried every %s", err, hostRetry)
		pl.log.Error("route import disabled", zap.Error(pl.imp.hostErr))
		return
	}
	pl.imp.host, pl.imp.hostErr = h, nil
}

// hostState reads the whole host (links, VRFs, rules, our routes); on
// error it keeps the last good state.
func (pl *planner) hostState() (model.Host, error) {
	if pl.imp.host == nil {
		return model.Host{}, pl.imp.hostErr
	}
	h, err := pl.imp.host.Snapshot()
	if err != nil {
		return pl.imp.hostSnap, fmt.Errorf("read the kernel's routes: %w", err)
	}
	return h, nil
}

// learnedPaths are every peer's paths: from the table when it holds what
// sp sent and a full walk is not asked for (walk), else from a walk; ok
// is false when the walk failed and the last good table was used.
func (pl *planner) learnedPaths(ctx context.Context, sp Speaker, cfg *config.Config, walk, readOnly bool) (paths []model.LearnedPath, ok bool) {
	pl.mu.Lock()
	table := pl.imp.table
	if pl.imp.tableFor != sp {
		table = nil
	}
	pl.mu.Unlock()
	if !walk && table != nil {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return table.LearnedPaths(), true
	}
	n := 0
	if table != nil {
		n = table.Len()
	}
	paths = make([]model.LearnedPath, 0, n)
	err := sp.EachLearned(ctx, "", func(p model.LearnedPath) error {
		paths = append(paths, p)
		return nil
	})
	if err == nil {
		err = endPendingErr(ctx, sp, "")
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if err != nil {
		pl.imp.walkErr = err.Error()
		pl.log.Warn("learned paths not read; deciding on the last good ones", zap.Error(err))
		if table == nil {
			return nil, false
		}
		return table.LearnedPaths(), false
	}
	pl.imp.walkErr = ""
	if table != nil {
		if !readOnly {
			pl.mu.Unlock()
			pl.sessionsEnded(sp, cfg)
			pl.mu.Lock()
		}
		paths = retainWalked(table, pl.imp.stale, paths, pl.imp.withdrawn)
	}
	return paths, true
}

// endPendingErr fails a walk just made when gobgp had already ended a
// session the speaker still sees Established (Speaker.SessionEndPending):
// the walk may lack its paths, and decided on it with windows that say
// Established, routes a graceful restart keeps would be deleted. A failed
// walk deletes nothing; the next pass walks again.
func endPendingErr(ctx context.Context, sp Speaker, peer string) error {
	pending, err := sp.SessionEndPending(ctx, peer)
	switch {
	case err != nil:
		return err
	case pending:
		return errors.New("a session ended during the walk of the learned paths (gobgp reported it before its event reached ovnbgp): walked again on the next pass")
	}
	return nil
}

// keepingPeers are the peers (sorted) with a window that keeps anything.
func keepingPeers(windows map[string]map[config.Family]plan.StaleWindow) []string {
	var peers []string
	for peer, fams := range windows {
		for _, w := range fams {
			if w.Keep {
				peers = append(peers, peer)
				break
			}
		}
	}
	slices.Sort(peers)
	return peers
}

// sessionsEnded reads the speaker's sessions again and says whether one
// left Established (or entered it) since the read the graceful-restart
// windows came from
// (syncedPeers): what was taken or walked after that read may already
// lack the paths gobgp dropped with the session, and the windows must say
// how it ended before anything is decided on them (else the routes a
// graceful restart keeps would be deleted, and added back on the next
// pass). The windows of those peers are then computed from the new read;
// the others keep the old one, whose End-of-RIB came before what was
// taken. It runs on the loop.
func (pl *planner) sessionsEnded(sp Speaker, cfg *config.Config) bool {
	pl.mu.Lock()
	seen := pl.imp.staleFrom
	pl.mu.Unlock()
	if seen == nil {
		return false
	}
	now := sp.Sync()
	var merged map[string]model.PeerSync
	for name, was := range seen {
		cur := now[name]
		if was.Established == cur.Established && (!was.Established || cur.Since.Equal(was.Since)) {
			continue // no session ended or started since
		}
		if merged == nil {
			merged = maps.Clone(seen)
		}
		merged[name] = cur
	}
	if merged == nil {
		return false
	}
	stale, next := plan.StaleWindows(cfg, merged, time.Now())
	pl.mu.Lock()
	pl.imp.stale, pl.imp.staleFrom = stale, merged
	pl.mu.Unlock()
	if !next.IsZero() && (pl.imp.syncWake.IsZero() || next.Before(pl.imp.syncWake)) {
		pl.imp.syncWake = next
	}
	return true
}

// retainWalked adds to a walk's paths those of the table it lacks that a
// peer's graceful restart keeps, stale (plan.Retained): the speaker
// dropped them with the session, the daemon keeps its copy. Only the paths
// of peers with a window that keeps anything are looked at. The caller
// holds mu.
func retainWalked(t *plan.ImportTable, windows map[string]map[config.Family]plan.StaleWindow, paths []model.LearnedPath, withdrawn []model.Key) []model.LearnedPath {
	peers := keepingPeers(windows)
	if len(peers) == 0 {
		return paths
	}
	walked := map[model.Key]bool{}
	for _, k := range withdrawn {
		walked[k] = true // never kept: the peer withdrew it
	}
	for _, p := range paths {
		if slices.Contains(peers, p.Peer) {
			walked[model.Key{Peer: p.Peer, Prefix: p.Prefix}] = true
		}
	}
	for _, peer := range peers {
		for _, k := range t.PeerKeys(peer) {
			if walked[k] {
				continue
			}
			if old, ok := t.Learned(k); ok {
				if p, keep := plan.Retained(old, windows); keep {
					paths = append(paths, p)
				}
			}
		}
	}
	return paths
}

// tableSettle is how long a peer that negotiated no graceful restart (and
// so need not send End-of-RIB: FRR and ExaBGP send none) must have been
// quiet, Established and sending no UPDATE, for its table to count as
// complete. It bounds how long an adopted route the peer no longer sends
// stays after a restart of ovnbgp; a peer that pauses longer in its first
// table transfer costs a delete and re-add of what it had not re-sent yet,
// never a route kept that it withdrew.
const tableSettle = 2 * time.Second

// syncedPeers says which peers have sent their whole table since their
// session was started by this speaker: End-of-RIB; for a peer with which
// no graceful restart was negotiated (it need send none), tableSettle of
// quiet while Established; or bgp.gracefulRestart.deferralTime since the
// start. Only then may adopted routes of their rules that they did not
// announce again be deleted (plan.Build). The wait starts when the
// sessions are started (the first plan with NB data) or the peer appears
// in the config; a peer whose addition failed counts from then too (after
// the deferral, like a peer that is down, its routes may go). A new
// speaker (a reload that restarts it) and a session reset by a reload
// start over (resetSync). Once synced, a peer stays synced until then.
// With readOnly (a preview), nothing is recorded. It also sets
// d.pl.imp.syncWake, when the answer may change next (the loop plans again
// then). It runs on the loop.
func (pl *planner) syncedPeers(ctx context.Context, sp Speaker, cfg *config.Config, readOnly bool) map[string]bool {
	if !readOnly {
		pl.syncSpeaker(sp, cfg)
	}
	now := time.Now()
	state := sp.Sync()
	out := make(map[string]bool, len(cfg.BGP.Peers))
	var wake time.Time
	soonest := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for _, p := range cfg.BGP.Peers {
		if pl.imp.syncFor != sp {
			out[p.Name] = false // a preview before the new speaker's first pass
			continue
		}
		added, ok := pl.imp.addedAt[p.Name]
		if !ok {
			if readOnly {
				out[p.Name] = false
				continue
			}
			// A peer the running config gained: its wait starts now.
			added = now
			pl.imp.addedAt[p.Name] = added
		}
		ps := state[p.Name]
		deferral := added.Add(cfg.BGP.GracefulRestart.DeferralTime)
		synced := pl.imp.synced[p.Name] || (ps.Established && ps.EndOfRIB) || !now.Before(deferral)
		if !synced && ps.Established && ps.GR == nil {
			quiet := latest(ps.Since, ps.LastUpdate, added).Add(tableSettle)
			if !now.Before(quiet) {
				synced = true
			} else {
				soonest(quiet)
			}
		}
		if !synced {
			soonest(deferral)
		}
		if !readOnly && synced {
			pl.imp.synced[p.Name] = true
		}
		out[p.Name] = synced
	}
	if !readOnly {
		// Graceful restart, receiving side: which peers' stale paths
		// may still be imported, and until when.
		stale, next := plan.StaleWindows(cfg, state, now)
		pl.mu.Lock() // the metrics read it
		pl.imp.stale, pl.imp.staleFrom = stale, state
		pl.mu.Unlock()
		if !next.IsZero() {
			soonest(next)
		}
		pl.imp.syncWake = wake
	}
	return out
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// syncBy is, per configured peer not yet synced, when its deferral ends.
func (pl *planner) syncBy(cfg *config.Config, synced map[string]bool) map[string]time.Time {
	out := map[string]time.Time{}
	for _, p := range cfg.BGP.Peers {
		if added, ok := pl.imp.addedAt[p.Name]; ok && !synced[p.Name] {
			out[p.Name] = added.Add(cfg.BGP.GracefulRestart.DeferralTime)
		}
	}
	return out
}

// forgetAdopted drops from the adopted routes those of prefixes (nil:
// all) that the desired routes hold again or that are not installed any
// more; once every configured peer is synced, nothing is adopted any more.
func (pl *planner) forgetAdopted(cfg *config.Config, synced map[string]bool, prefixes []netip.Prefix,
	desiredOVN []model.OVNRoute, desiredKernel []model.KernelRoute, observedOVN []model.OVNRoute, observedKernel []model.KernelRoute) {
	if pl.imp.adopted == nil {
		return
	}
	if !slices.ContainsFunc(cfg.BGP.Peers, func(p config.Peer) bool { return !synced[p.Name] }) {
		pl.imp.adopted = nil
		return
	}
	pl.imp.adopted.Forget(prefixes, desiredOVN, desiredKernel, observedOVN, observedKernel)
}

// resetSync starts the named peers' sync over: they were just added to the
// speaker, or a reload reset their session, so their table is empty until
// they send it again.
func (pl *planner) resetSync(sp Speaker, cfg *config.Config, names ...string) {
	pl.syncSpeaker(sp, cfg)
	now := time.Now()
	for _, n := range names {
		delete(pl.imp.synced, n)
		pl.imp.addedAt[n] = now
	}
	if len(names) > 0 {
		pl.imp.adoptDue = true // what is installed now waits for them again
	}
}

// syncSpeaker starts every peer's sync over when the speaker is new: it
// was just started (at start, or by a reload), with every peer added now
// and an empty table.
func (pl *planner) syncSpeaker(sp Speaker, cfg *config.Config) {
	if pl.imp.syncFor == sp {
		return
	}
	pl.imp.syncFor, pl.imp.synced, pl.imp.addedAt = sp, map[string]bool{}, map[string]time.Time{}
	pl.imp.adoptDue = true
	now := time.Now()
	for _, p := range cfg.BGP.Peers {
		pl.imp.addedAt[p.Name] = now
	}
}

// applyAuto applies the part of the plan the loop applies by itself:
// advertisements, and the OVN and kernel operations of auto rules. Each
// target keeps going on per-item errors; the errors are joined. With held,
// the speaker's sessions wait for the first table (addPeers): they are
// released once the advertisements are applied, before OVN and the kernel.
func (d *Daemon) applyAuto(ctx context.Context, cfg *config.Config, sp Speaker, nb Northbound, p plan.Plan, held bool) error {
	auto, manual := p.Split(cfg)
	d.mu.Lock()
	d.pl.imp.manual = manual
	d.mu.Unlock()
	var errs []error
	if !auto.Advertise.Empty() {
		err := applyAdvertise(ctx, cfg, sp, auto.Advertise)
		d.logDiff(auto.Advertise, err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if held {
		sp.ReleaseSessions()
	}
	if len(auto.OVN) > 0 {
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		applied, err := nb.ApplyRoutes(actx, cfg.Node.Name, auto.OVN, nil)
		cancel()
		d.mu.Lock()
		for _, op := range auto.OVN {
			d.pl.imp.ovnWrote = append(d.pl.imp.ovnWrote, op.Route.Prefix)
		}
		d.mu.Unlock()
		d.logOps("ovn", len(auto.OVN), len(applied), err)
		if err != nil {
			errs = append(errs, fmt.Errorf("ovn: %w", err))
		}
	}
	if len(auto.Kernel) > 0 {
		if d.pl.imp.host == nil {
			errs = append(errs, d.pl.imp.hostErr)
		} else {
			actx, cancel := context.WithTimeout(ctx, applyTimeout)
			applied, err := d.pl.imp.host.Apply(actx, auto.Kernel)
			cancel()
			d.logOps("kernel", len(auto.Kernel), len(applied), err)
			if err != nil {
				errs = append(errs, fmt.Errorf("kernel: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// applyAdvertise applies an advertisement diff in the steps
// plan.AdvertSteps orders it into, one after the other. When a step fails,
// the announcements and changes of the peers it holds wait for the next
// pass.
func applyAdvertise(ctx context.Context, cfg *config.Config, sp Speaker, diff model.AdvertDiff) error {
	var errs []error
	held := map[string]bool{}
	for _, st := range plan.AdvertSteps(cfg, diff) {
		d := plan.Without(st.Diff, held)
		if d.Empty() {
			continue
		}
		if err := sp.Apply(ctx, d); err != nil {
			errs = append(errs, err)
			for _, p := range st.Holds {
				held[p] = true
			}
		}
	}
	return errors.Join(errs...)
}

func (d *Daemon) logOps(target string, planned, applied int, err error) {
	if err != nil {
		d.log.Warn("imported routes changed, some not applied", zap.String("target", target),
			zap.Int("planned", planned), zap.Int("applied", applied), zap.Error(err))
		return
	}
	d.log.Info("imported routes changed", zap.String("target", target), zap.Int("applied", applied))
}

// logAlarms logs each import cap when it is reached and when it clears.
func (d *Daemon) logAlarms(alarms []plan.ImportAlarm) {
	now := make(map[string]bool, len(alarms))
	for _, a := range alarms {
		k := a.Rule + "\x00" + a.Peer
		now[k] = true
		if !d.pl.imp.alarms[k] {
			d.log.Warn("import cap reached: nothing new is imported from this peer by this rule; the session stays up",
				zap.String("rule", a.Rule), zap.String("peer", a.Peer), zap.Int("maxRoutes", a.Max), zap.Int("offered", a.Wanted))
		}
	}
	for k := range d.pl.imp.alarms {
		if !now[k] {
			d.log.Info("import cap cleared", zap.String("ruleAndPeer", k))
		}
	}
	d.pl.imp.alarms = now
}

// closeHost releases the kernel side when the daemon stops. Imported
// routes stay (fail static).
func (pl *planner) closeHost() {
	if pl.imp.host != nil {
		pl.imp.host.Close()
	}
}

// decidedPaths are the learned paths with their import verdicts, sorted
// by peer and prefix, when import rules decided on what sp sent; ok is
// false without import rules (the caller walks the speaker then).
func (d *Daemon) decidedPaths(sp Speaker) (paths []model.LearnedPath, ok bool) {
	d.mu.Lock()
	if len(d.cfg.Import) == 0 || d.pl.imp.tableFor != sp || d.pl.imp.table == nil {
		d.mu.Unlock()
		return nil, false
	}
	// Copied under the lock, the reasons made and sorted after it.
	decided := d.pl.imp.table.Decided()
	d.mu.Unlock()
	paths = decided.Paths()
	slices.SortFunc(paths, func(a, b model.LearnedPath) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return paths, true
}

// importCounts fills each peer's Imported count (accepted and installed),
// its accepted count per family, and its ImportAlarm, and returns the
// rejected paths by peer and cause (nil without import).
func (d *Daemon) importCounts(peers []model.PeerStatus) map[plan.Rejection]int {
	d.mu.Lock()
	table, owned, host := d.pl.imp.table, d.snapshot.OwnedRoutes, d.pl.imp.host
	if len(d.cfg.Import) == 0 || table == nil {
		d.mu.Unlock()
		return nil
	}
	// Imported counts accepted paths whose next hop is really installed
	// for their prefix, in OVN or in the kernel, not only wanted there.
	type hop struct {
		prefix netip.Prefix
		nh     netip.Addr
	}
	installed := map[hop]bool{}
	for _, r := range owned {
		installed[hop{r.Prefix, r.NextHop}] = true
	}
	var keys []model.KernelRouteKey
	tables := table.KernelTables()
	table.EachAccepted(func(pfx netip.Prefix) {
		for _, t := range tables {
			keys = append(keys, model.KernelRouteKey{Table: t, Prefix: pfx})
		}
	})
	d.mu.Unlock()
	if host != nil && len(keys) > 0 {
		if ours, _, err := host.Routes(keys); err == nil {
			for _, r := range ours {
				for _, nh := range r.NextHops {
					installed[hop{r.Prefix, nh.Addr}] = true
				}
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pl.imp.table != table {
		return nil // a new table meanwhile: the next call counts it
	}
	c := table.Count(func(p netip.Prefix, nh netip.Addr) bool { return installed[hop{p, nh}] })
	alarms := map[string][]string{}
	for _, a := range table.Alarms() {
		alarms[a.Peer] = append(alarms[a.Peer], a.String())
	}
	for i := range peers {
		pc := c.ByPeer[peers[i].Name]
		peers[i].Imported = pc.Installed
		for j := range peers[i].Families {
			switch peers[i].Families[j].Family {
			case string(config.IPv4):
				peers[i].Families[j].Accepted = pc.IPv4
			case string(config.IPv6):
				peers[i].Families[j].Accepted = pc.IPv6
			}
		}
		peers[i].ImportAlarm = strings.Join(alarms[peers[i].Name], "; ")
	}
	return c.RejectedBy
}

// importStatus summarises route import for `status`; the caller holds mu.
func (d *Daemon) importStatus() *api.ImportStatus {
	if len(d.cfg.Import) == 0 && d.pl.imp.table == nil {
		return nil
	}
	st := &api.ImportStatus{}
	for _, h := range d.pl.imp.held {
		st.Held += len(h)
	}
	if t := d.pl.imp.table; t != nil {
		st.OVN, st.Kernel = t.Sizes()
		st.Problems = t.Problems()
		c := t.Count(nil)
		st.Accepted, st.Rejected = c.Accepted, c.Rejected
		for _, a := range t.Alarms() {
			st.Alarms = append(st.Alarms, a.String())
		}
	}
	c := d.pl.imp.manual.Counts()
	st.Manual = c.OVNAdd + c.OVNReplace + c.OVNDelete + c.KernelAdd + c.KernelReplace + c.KernelDelete + c.VRFAdd + c.RuleAdd + c.RuleDelete
	if d.pl.imp.hostErr != nil {
		st.Problems = append(st.Problems, d.pl.imp.hostErr.Error())
	}
	if d.pl.imp.walkErr != "" {
		st.Problems = append(st.Problems, "learned paths not read (decided on the last good walk; nothing is deleted meanwhile): "+d.pl.imp.walkErr)
	}
	return st
}
