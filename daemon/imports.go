package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// importState is what the loop keeps between passes for route import: the
// learned paths as last walked, the import decision, the host, the peers
// that are synced (End-of-RIB, or deferralTime since start), and the last
// plan. Only the loop writes it, under Daemon.mu for what the control API
// reads (everything but synced and alarms).
type importState struct {
	host    Host
	hostErr error
	// hostTried is when opening the host was last tried (hostRetry).
	hostTried time.Time
	// hostDirty says the kernel may have changed since hostSnap was read.
	hostDirty atomic.Bool
	// learned is the last good walk of every peer's paths; learnedGen is
	// the speaker's LearnedGen when it was taken, learnedFrom the speaker.
	learned     []model.LearnedPath
	learnedGen  uint64
	learnedFrom Speaker
	walkErr     string
	// decided is the import decision of the last pass (Paths, targets,
	// alarms, problems); hostSnap the host state it read.
	decided  plan.ImportResult
	hostSnap model.Host
	// synced are the peers whose table is complete since their session
	// was (re)started: End-of-RIB, or deferralTime since addedAt. syncFor
	// is the speaker they belong to: a new speaker starts them all over.
	synced  map[string]bool
	addedAt map[string]time.Time
	syncFor Speaker
	// last is the whole plan of the last pass, manual its part that waits
	// for `ovnbgp apply`.
	last, manual plan.Plan
	// alarms are the import caps reached, by rule and peer, as last logged.
	alarms map[string]bool
}

// hostRetry is how long a failed open of the kernel side waits before the
// next try.
const hostRetry = 30 * time.Second

// openHostOnce opens the kernel side; a failure is reported and retried
// every hostRetry. Meanwhile the next-hop checks reject everything (nothing
// is imported blind) and nothing imported is deleted (planFrom).
func (d *Daemon) openHostOnce(cfg *config.Config) {
	if d.imp.host != nil || (d.imp.hostErr != nil && time.Since(d.imp.hostTried) < hostRetry) {
		return
	}
	d.imp.hostTried = time.Now()
	d.imp.hostDirty.Store(true)
	h, err := d.deps.OpenHost(cfg.Kernel.RouteProtocol, d.log.Named("vrf"), func() {
		d.imp.hostDirty.Store(true)
		d.poke()
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.imp.hostErr = fmt.Errorf("kernel (netlink) unavailable: %w; nothing is imported, since next hops cannot be checked, and nothing imported is deleted; retried every %s", err, hostRetry)
		d.log.Error("route import disabled", zap.Error(d.imp.hostErr))
		return
	}
	d.imp.host, d.imp.hostErr = h, nil
}

// hostState reads the kernel when it may have changed since the last read
// (a netlink event in our tables or on links and addresses, or our own
// apply); on error it keeps the last good state.
func (d *Daemon) hostState() (model.Host, error) {
	if d.imp.host == nil {
		return model.Host{}, d.imp.hostErr
	}
	if !d.imp.hostDirty.Swap(false) {
		return d.imp.hostSnap, nil
	}
	h, err := d.imp.host.Snapshot()
	if err != nil {
		d.imp.hostDirty.Store(true)
		return d.imp.hostSnap, fmt.Errorf("read the kernel's routes: %w", err)
	}
	d.mu.Lock()
	d.imp.hostSnap = h
	d.mu.Unlock()
	return h, nil
}

// learnedPaths walks every peer's paths again when the speaker says they
// may have changed; a failed walk keeps the last good one.
func (d *Daemon) learnedPaths(ctx context.Context, sp Speaker) []model.LearnedPath {
	gen := sp.LearnedGen()
	if d.imp.learnedFrom == sp && d.imp.learned != nil && gen == d.imp.learnedGen {
		return d.imp.learned
	}
	paths := make([]model.LearnedPath, 0, len(d.imp.learned))
	err := sp.EachLearned(ctx, "", func(p model.LearnedPath) error {
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		d.mu.Lock()
		d.imp.walkErr = err.Error()
		d.mu.Unlock()
		d.log.Warn("learned paths not read; deciding on the last good ones", zap.Error(err))
		return d.imp.learned
	}
	d.mu.Lock()
	d.imp.learned, d.imp.learnedGen, d.imp.learnedFrom, d.imp.walkErr = paths, gen, sp, ""
	d.mu.Unlock()
	return paths
}

// syncedPeers says which peers have sent their whole table since their
// session was started by this speaker (End-of-RIB), or for which
// bgp.gracefulRestart.deferralTime has passed since: only then may owned
// routes of their rules that are no longer wanted be deleted. The wait
// starts when the sessions are started (the first plan with NB data) or
// the peer appears in the config; a peer whose addition failed counts from
// then too (after the deferral, like a peer that is down, its routes may
// go). A new speaker (a reload that restarts it) and a session reset by a
// reload start over (resetSync). Once synced, a peer stays synced until
// then. With readOnly (a preview), nothing is recorded. It runs on the loop.
func (d *Daemon) syncedPeers(ctx context.Context, sp Speaker, cfg *config.Config, readOnly bool) map[string]bool {
	if !readOnly {
		d.syncSpeaker(sp, cfg)
	}
	peers, err := sp.Peers(ctx)
	if err != nil {
		d.log.Debug("peer states not read for End-of-RIB", zap.Error(err))
	}
	eor := map[string]bool{}
	for _, p := range peers {
		eor[p.Name] = p.EndOfRIB
	}
	out := make(map[string]bool, len(cfg.BGP.Peers))
	for _, p := range cfg.BGP.Peers {
		if d.imp.syncFor != sp {
			out[p.Name] = false // a preview before the new speaker's first pass
			continue
		}
		added, ok := d.imp.addedAt[p.Name]
		if !ok {
			if readOnly {
				out[p.Name] = false
				continue
			}
			// A peer the running config gained: its wait starts now.
			added = time.Now()
			d.imp.addedAt[p.Name] = added
		}
		synced := d.imp.synced[p.Name] || eor[p.Name] || time.Since(added) >= cfg.BGP.GracefulRestart.DeferralTime
		if !readOnly && synced {
			d.imp.synced[p.Name] = true
		}
		out[p.Name] = synced
	}
	return out
}

// resetSync starts the named peers' sync over: they were just added to the
// speaker, or a reload reset their session, so their table is empty until
// they send it again.
func (d *Daemon) resetSync(sp Speaker, cfg *config.Config, names ...string) {
	d.syncSpeaker(sp, cfg)
	now := time.Now()
	for _, n := range names {
		delete(d.imp.synced, n)
		d.imp.addedAt[n] = now
	}
}

// syncSpeaker starts every peer's sync over when the speaker is new: it
// was just started (at start, or by a reload), with every peer added now
// and an empty table.
func (d *Daemon) syncSpeaker(sp Speaker, cfg *config.Config) {
	if d.imp.syncFor == sp {
		return
	}
	d.imp.syncFor, d.imp.synced, d.imp.addedAt = sp, map[string]bool{}, map[string]time.Time{}
	now := time.Now()
	for _, p := range cfg.BGP.Peers {
		d.imp.addedAt[p.Name] = now
	}
}

// applyAuto applies the part of the plan the loop applies by itself:
// advertisements, and the OVN and kernel operations of auto rules. Each
// target keeps going on per-item errors; the errors are joined.
func (d *Daemon) applyAuto(ctx context.Context, cfg *config.Config, sp Speaker, nb Northbound, p plan.Plan) error {
	auto, manual := p.Split(cfg)
	d.mu.Lock()
	d.imp.last, d.imp.manual = p, manual
	d.mu.Unlock()
	var errs []error
	if !auto.Advertise.Empty() {
		err := sp.Apply(ctx, auto.Advertise)
		d.logDiff(auto.Advertise, err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(auto.OVN) > 0 {
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		applied, err := nb.ApplyRoutes(actx, cfg.Node.Name, auto.OVN, nil)
		cancel()
		d.logOps("ovn", len(auto.OVN), len(applied), err)
		if err != nil {
			errs = append(errs, fmt.Errorf("ovn: %w", err))
		}
	}
	if len(auto.Kernel) > 0 {
		if d.imp.host == nil {
			errs = append(errs, d.imp.hostErr)
		} else {
			actx, cancel := context.WithTimeout(ctx, applyTimeout)
			applied, err := d.imp.host.Apply(actx, auto.Kernel)
			cancel()
			d.imp.hostDirty.Store(true)
			d.logOps("kernel", len(auto.Kernel), len(applied), err)
			if err != nil {
				errs = append(errs, fmt.Errorf("kernel: %w", err))
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
		if !d.imp.alarms[k] {
			d.log.Warn("import cap reached: nothing new is imported from this peer by this rule; the session stays up",
				zap.String("rule", a.Rule), zap.String("peer", a.Peer), zap.Int("maxRoutes", a.Max), zap.Int("offered", a.Wanted))
		}
	}
	for k := range d.imp.alarms {
		if !now[k] {
			d.log.Info("import cap cleared", zap.String("ruleAndPeer", k))
		}
	}
	d.imp.alarms = now
}

// closeHost releases the kernel side when the daemon stops. Imported
// routes stay (fail static).
func (d *Daemon) closeHost() {
	if d.imp.host != nil {
		d.imp.host.Close()
	}
}

// decidedPaths are the learned paths with the last pass's import verdicts,
// sorted by peer and prefix, when import rules decided on what sp sent;
// ok is false without import rules (the caller walks the speaker then).
func (d *Daemon) decidedPaths(sp Speaker) (paths []model.LearnedPath, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cfg.Import) == 0 || d.imp.learnedFrom != sp || d.imp.decided.Paths == nil {
		return nil, false
	}
	paths = slices.Clone(d.imp.decided.Paths)
	slices.SortStableFunc(paths, func(a, b model.LearnedPath) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return paths, true
}

// importCounts fills each peer's Imported count (accepted and installed),
// its accepted count per family, and its ImportAlarm, from the last pass.
func (d *Daemon) importCounts(peers []model.PeerStatus) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cfg.Import) == 0 {
		return
	}
	// Imported counts accepted paths whose next hop is really installed
	// for their prefix, in OVN or in the kernel, not only wanted there.
	type hop struct {
		prefix netip.Prefix
		nh     netip.Addr
	}
	installed := map[hop]bool{}
	for _, r := range d.snapshot.OwnedRoutes {
		installed[hop{r.Prefix, r.NextHop}] = true
	}
	for _, r := range d.imp.hostSnap.Routes {
		for _, nh := range r.NextHops {
			installed[hop{r.Prefix, nh.Addr}] = true
		}
	}
	accepted := map[string]int{}
	byFamily := map[string]map[string]int{}
	for _, p := range d.imp.decided.Paths {
		if p.Accepted {
			if installed[hop{p.Prefix, p.NextHop}] {
				accepted[p.Peer]++
			}
			fam := string(config.IPv4)
			if p.Prefix.Addr().Is6() {
				fam = string(config.IPv6)
			}
			if byFamily[p.Peer] == nil {
				byFamily[p.Peer] = map[string]int{}
			}
			byFamily[p.Peer][fam]++
		}
	}
	alarms := map[string][]string{}
	for _, a := range d.imp.decided.Alarms {
		alarms[a.Peer] = append(alarms[a.Peer], a.String())
	}
	for i := range peers {
		peers[i].Imported = accepted[peers[i].Name]
		for j := range peers[i].Families {
			peers[i].Families[j].Accepted = byFamily[peers[i].Name][peers[i].Families[j].Family]
		}
		peers[i].ImportAlarm = strings.Join(alarms[peers[i].Name], "; ")
	}
}

// importStatus summarises route import for `status`; the caller holds mu.
func (d *Daemon) importStatus() *api.ImportStatus {
	if len(d.cfg.Import) == 0 && len(d.imp.decided.OVN) == 0 && len(d.imp.decided.Kernel) == 0 {
		return nil
	}
	st := &api.ImportStatus{
		OVN: len(d.imp.decided.OVN), Kernel: len(d.imp.decided.Kernel),
		Held: len(d.imp.last.Held), Problems: d.imp.decided.Problems,
	}
	for _, p := range d.imp.decided.Paths {
		if p.Accepted {
			st.Accepted++
		} else {
			st.Rejected++
		}
	}
	c := d.imp.manual.Counts()
	st.Manual = c.OVNAdd + c.OVNReplace + c.OVNDelete + c.KernelAdd + c.KernelReplace + c.KernelDelete + c.VRFAdd + c.RuleAdd + c.RuleDelete
	for _, a := range d.imp.decided.Alarms {
		st.Alarms = append(st.Alarms, a.String())
	}
	if d.imp.hostErr != nil {
		st.Problems = append(slices.Clone(st.Problems), d.imp.hostErr.Error())
	}
	if d.imp.walkErr != "" {
		st.Problems = append(slices.Clone(st.Problems), "learned paths not read (decided on the last good walk; nothing is deleted meanwhile): "+d.imp.walkErr)
	}
	return st
}
