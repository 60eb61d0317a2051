package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// Options configure Run.
type Options struct {
	// ConfigPath is the YAML file; SIGHUP re-reads it.
	ConfigPath string
	// Version is reported by the status API and the metrics.
	Version string
	// Logger, when set, is used instead of one built from the config's
	// log section. Its level follows log.level (at start and on every
	// reload) only through LogLevel.
	Logger *zap.Logger
	// LogLevel is the level of Logger's core, if the caller built it on
	// a zap.AtomicLevel; ignored without Logger.
	LogLevel *zap.AtomicLevel
	// Deps replaces the external systems (zero value: the real ones).
	Deps Deps
	// OnReady is called once, when the first reconcile has run.
	OnReady func()
}

const (
	// resyncInterval bounds how long a missed event can go unnoticed.
	// The loop's only periodic timer (the watchdog's runs under systemd
	// only), kept: the backstop for a missed event, and the pass that
	// finds the import table's full pass due (importResync) on a quiet
	// node. At idle a pass is incremental and finds nothing to do: under
	// 0.5 ms of CPU with 10k imported routes (an execution trace of the
	// idle benchmark, docs/benchmarks.md).
	resyncInterval = 60 * time.Second
	// readyGrace is how long startup waits for the first NB sync before
	// telling systemd it is ready anyway (a missing NB must not make
	// systemd kill and restart us in a loop; BGP sessions are up).
	readyGrace = 15 * time.Second
	// stopTimeout bounds the clean shutdown.
	stopTimeout = 10 * time.Second
)

// limits bound the time and resources the daemon gives to others: config
// parsing, and the control and metrics servers' clients. Run uses
// defaultLimits; tests shrink them.
type limits struct {
	// parseTimeout bounds the parse of a config file. A reload parses in
	// its own goroutine; after this long the running config is kept.
	parseTimeout time.Duration
	// maxParses bounds parses still running after their deadline (a
	// parse cannot be interrupted): beyond it, reloads are refused.
	maxParses int32
	// HTTP servers: per-connection deadlines and sizes.
	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout time.Duration
	maxHeaderBytes                                            int
	// controlConns and metricsConns cap open connections; more wait in
	// the kernel's accept queue, holding no descriptor of ours.
	controlConns, metricsConns int
	// heavyRequests caps route lists streamed at once; a request waits up
	// to heavyWait for a slot, then gets 503.
	heavyRequests int
	heavyWait     time.Duration
	// metricsInFlight caps scrapes collected at once (more get 503);
	// metricsTimeout bounds one (then 503).
	metricsInFlight int
	metricsTimeout  time.Duration
	// peerRetry bounds the backoff of a failed SetPeers.
	peerRetryMin, peerRetryMax time.Duration
	// passChunk bounds the work of one pass over a large change of the
	// learned paths (incremental.go): the path changes decided, and the
	// prefixes diffed and applied.
	passChunk int
}

func defaultLimits() limits {
	return limits{
		parseTimeout:      10 * time.Second,
		maxParses:         4,
		readHeaderTimeout: 5 * time.Second,
		readTimeout:       10 * time.Second,
		// A streamed route list pushes this deadline forward while it
		// makes progress: a stalled reader is dropped after this long.
		writeTimeout:    30 * time.Second,
		idleTimeout:     15 * time.Second,
		maxHeaderBytes:  16 << 10,
		controlConns:    32,
		metricsConns:    32,
		heavyRequests:   2,
		heavyWait:       10 * time.Second,
		metricsInFlight: 4,
		metricsTimeout:  10 * time.Second,
		peerRetryMin:    time.Second,
		peerRetryMax:    60 * time.Second,
		passChunk:       passChunk,
	}
}

// Daemon is one running ovnbgp. Its loop goroutine is the only one that
// changes the speaker, the NB client or the config; the control API reads
// through the mutex.
type Daemon struct {
	opts   Options
	deps   Deps
	lim    limits
	log    *zap.Logger
	logs   *logging
	signal chan struct{} // size 1: "reconcile now"
	reload chan struct{} // size 1: "re-read the config file"
	// reloads are reloads asked through the control API (`ovnbgp
	// reload`): each one's outcome goes to its channel (size 1).
	reloads chan chan<- api.ReloadResult
	// calls are functions the control API runs on the loop (onLoop).
	calls chan func(context.Context)
	// loopDone is closed when the loop has ended: onLoop then answers at
	// once instead of waiting for a loop that never comes back.
	loopDone chan struct{}
	heavy    chan struct{} // a slot per route list being streamed
	// parses counts config parses still running (see limits.maxParses).
	parses atomic.Int32
	// heavyWaiting counts route list requests waiting for a slot.
	heavyWaiting atomic.Int32
	// loopMetrics are the reconcile loop's duration and error metrics.
	loopMetrics loopMetrics

	mu    sync.Mutex
	cfg   *config.Config
	phase string // api.Phase*
	// speaker is nil while it is being started (phase starting or
	// restarting): readers must check.
	speaker  Speaker
	nb       Northbound
	snapshot model.Snapshot
	synced   bool
	// desired are the last pass's advertisements to make, by key (the
	// loop changes a clone, never this one).
	desired *advertTree
	// held is what peers' export caps and a drain hold back (last
	// pass), never changed: the loop replaces it.
	held    heldView
	ready   bool
	peersUp bool // peers added to the speaker (after the first plan)
	// links is neighbour discovery on the links of on-link peers (nil
	// until one is configured; links.go), linksErr why it failed to
	// start; linksChanged (size 1) tells the loop a learned peer changed.
	links        Links
	linksErr     string
	linksChanged chan struct{}
	peersErr     error
	// bmpErr is the last SetBMP's error: retried with the peers.
	bmpErr     error
	startedAt  time.Time
	reconciles uint64
	lastRun    time.Time
	lastErr    string
	cfgErr     string
	// pl computes the loop's passes and keeps what they need between
	// them (planner.go); the loop writes it, readers hold mu.
	pl *planner
	// drain is the drain state (`ovnbgp drain`), read from stateDir
	// before the first plan and persisted there before it changes.
	drain    model.Drain
	stateDir string
}

// Run loads the config and runs the daemon until ctx ends or SIGTERM/SIGINT
// arrives; SIGHUP reloads the config. A config that does not load is the only
// startup error: an unreachable NB or peer is retried, never fatal.
func Run(ctx context.Context, opts Options) error {
	deps, lim := opts.Deps.withDefaults(), defaultLimits()
	var parses atomic.Int32
	r := <-parseConfig(ctx, deps.LoadConfig, opts.ConfigPath, lim.parseTimeout, &parses, lim.maxParses)
	if ctx.Err() != nil {
		return nil // stopped (SIGTERM) before it started: a normal stop
	}
	if r.err != nil {
		return r.err
	}
	cfg := r.cfg
	logs, err := newLogging(cfg.Log, opts.Logger, opts.LogLevel)
	if err != nil {
		return err
	}
	defer logs.sync()
	return newDaemon(opts, deps, lim, logs, cfg).run(ctx)
}

func newDaemon(opts Options, deps Deps, lim limits, logs *logging, cfg *config.Config) *Daemon {
	d := &Daemon{
		opts:         opts,
		deps:         deps,
		lim:          lim,
		log:          logs.logger,
		logs:         logs,
		signal:       make(chan struct{}, 1),
		linksChanged: make(chan struct{}, 1),
		reload:       make(chan struct{}, 1),
		reloads:      make(chan chan<- api.ReloadResult),
		calls:        make(chan func(context.Context)),
		loopDone:     make(chan struct{}),
		heavy:        make(chan struct{}, lim.heavyRequests),
		cfg:          cfg,
		phase:        api.PhaseStarting,
		startedAt:    time.Now(),
		stateDir:     cfg.StateDir,
		loopMetrics:  newLoopMetrics(),
	}
	d.pl = &planner{log: d.log, lim: lim, mu: &d.mu, poke: d.poke, drain: d.drainState, running: d.config,
		openHost: deps.OpenHost, unresolved: d.unresolved}
	return d
}

// parseConfig parses the config file in its own goroutine: a file that
// blocks (a FIFO) or takes exponential time (a YAML bomb) can neither
// freeze the caller nor outlive ctx or the timeout. Its one result arrives
// on the channel. A parse that misses its deadline keeps running (Go cannot
// stop it) and counts in running until it ends; beyond max running parses,
// a new one is refused at once.
func parseConfig(ctx context.Context, load func(context.Context, string) (*config.Config, error), path string,
	timeout time.Duration, running *atomic.Int32, max int32) <-chan parsed {
	out := make(chan parsed, 1)
	if running.Add(1) > max {
		running.Add(-1)
		out <- parsed{err: fmt.Errorf("config %s: %d earlier parses are still running past their deadline; fix the file (is it a FIFO or a device?) and restart ovnbgp", path, max)}
		return out
	}
	done := make(chan parsed, 1)
	// The deadline also reaches the decoder (config.LoadContext), so a
	// parse past it stops working soon after, not only being waited for.
	pctx, cancel := context.WithTimeout(ctx, timeout)
	go func() {
		defer running.Add(-1)
		defer cancel()
		cfg, err := load(pctx, path)
		done <- parsed{cfg, err}
	}()
	late := func() parsed {
		return parsed{err: fmt.Errorf("config %s: not parsed within %s (a FIFO, a device or a pathological YAML file?)", path, timeout)}
	}
	go func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case r := <-done:
			// The loader may see the deadline before this timer fires:
			// the same cause, said the same way.
			if r.err != nil && errors.Is(r.err, context.DeadlineExceeded) && ctx.Err() == nil {
				r = late()
			}
			out <- r
		case <-t.C:
			out <- late()
		case <-ctx.Done():
			out <- parsed{err: fmt.Errorf("config %s: %w", path, context.Cause(ctx))}
		}
	}()
	return out
}

// parsed is the result of parseConfig.
type parsed struct {
	cfg *config.Config
	err error
}

// poke asks the loop for a reconcile; any number of pokes fold into one.
func (d *Daemon) poke() {
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

func (d *Daemon) run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	cfg := d.config()
	d.log.Info("starting", zap.String("version", d.opts.Version), zap.String("node", cfg.Node.Name),
		zap.String("config", d.opts.ConfigPath), zap.Uint32("asn", cfg.BGP.ASN),
		zap.Stringer("routerID", cfg.BGP.RouterID), zap.Int("peers", len(cfg.BGP.Peers)))
	d.warnConfig(cfg)

	// The drain state is read before anything is advertised: a drained
	// node that restarts never sends an untagged UPDATE.
	drain, err := loadDrain(d.stateDir)
	if err != nil {
		d.log.Error("cannot start", zap.Error(err))
		return err
	}
	d.mu.Lock()
	d.drain = drain
	d.mu.Unlock()
	if !drain.Empty() {
		d.log.Info("drained (state read from stateDir)", zap.String("file", filepath.Join(d.stateDir, drainFileName)),
			zap.Any("orders", drain.Peers))
	}
	d.warnUnconfiguredDrains(cfg)

	ctl, err := d.serveControl(cfg.Control.Socket)
	if err != nil {
		return err
	}
	defer ctl.close()
	if cfg.Metrics.Address != "" {
		m, err := d.serveMetrics(cfg.Metrics.Address)
		if err != nil {
			return err
		}
		defer m.close()
	}

	// Neighbour discovery first: an unnumbered peer's address may be
	// known (the neighbour table) by the time the peers are added.
	d.syncLinks(cfg)
	defer d.closeLinks()
	// Peers are added with the first plan (or at the ready grace), so a
	// session starts with the whole table and End-of-RIB follows it: a
	// graceful-restart helper never takes our restart for "no routes".
	if err := d.startSpeaker(ctx, cfg, false); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a normal stop
		}
		return err
	}
	nb, err := d.deps.DialNB(ctx, cfg.OVN, d.log.Named("ovn"), d.poke)
	if err != nil {
		d.stopSpeaker(false, api.PhaseStopping)
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("ovn: %w", err)
	}
	d.mu.Lock()
	d.nb = nb
	d.mu.Unlock()

	err = d.loop(ctx, hup)
	close(d.loopDone)

	d.setPhase(api.PhaseStopping)
	if err != nil {
		d.log.Error("stopping on a fatal error", zap.Error(err))
	}
	d.log.Info("stopping", zap.Bool("gracefulRestart", d.config().BGP.GracefulRestart.Enabled))
	_, _ = sd.SdNotify(false, sd.SdNotifyStopping)
	d.mu.Lock()
	nb = d.nb
	d.mu.Unlock()
	nb.Close()
	d.pl.closeHost() // imported routes stay: fail static
	// With graceful restart, stopping sends no NOTIFICATION: peers keep
	// our routes (stale) until we are back, as a restart should.
	d.stopSpeaker(d.config().BGP.GracefulRestart.Enabled, api.PhaseStopping)
	d.log.Info("stopped")
	return err
}

func (d *Daemon) loop(ctx context.Context, hup <-chan os.Signal) error {
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	grace := time.NewTimer(readyGrace)
	defer grace.Stop()
	peerGrace := time.NewTimer(peerWait(d.config()))
	defer peerGrace.Stop()
	var watchdog <-chan time.Time
	if wd, err := sd.SdWatchdogEnabled(false); err == nil && wd > 0 {
		t := time.NewTicker(wd / 2)
		defer t.Stop()
		watchdog = t.C
	}
	// No hooks (a nil channel) unless built with -tags ovnbgp_testhooks.
	hooks := newTestHooks(d.log)
	defer hooks.close()
	retry := newBackoff(time.Second, 30*time.Second)
	var retryC <-chan time.Time
	trim := newMemTrim()
	defer trim.timer.Stop()
	peerRetry := newBackoff(d.lim.peerRetryMin, d.lim.peerRetryMax)
	var peerRetryC <-chan time.Time
	// A reload parses off the loop; the loop keeps reconciling meanwhile.
	// SIGHUP and `ovnbgp reload` are the same reload: the API's callers
	// wait for the outcome of a parse that started after they asked.
	var parsing <-chan parsed
	reloadAgain := false
	var waiting, queued []chan<- api.ReloadResult
	startReload := func(reply chan<- api.ReloadResult) {
		if parsing != nil {
			reloadAgain = true // once this parse is done
			if reply != nil {
				queued = append(queued, reply)
			}
			return
		}
		if reply != nil {
			waiting = append(waiting, reply)
		}
		parsing = parseConfig(ctx, d.deps.LoadConfig, d.opts.ConfigPath, d.lim.parseTimeout, &d.parses, d.lim.maxParses)
	}

	// The drain's withdraw: the loop plans again at the next withdrawAt
	// (a restarted daemon resumes the persisted deadline).
	var drainT *time.Timer
	var drainC <-chan time.Time
	var drainAt time.Time
	defer func() {
		if drainT != nil {
			drainT.Stop()
		}
	}()
	armDrain := func() {
		next, ok := d.drainState().NextWithdraw(time.Now())
		if ok && next.Equal(drainAt) && drainC != nil {
			return
		}
		if drainT != nil {
			drainT.Stop()
		}
		drainT, drainC, drainAt = nil, nil, time.Time{}
		if ok {
			drainT = time.NewTimer(time.Until(next))
			drainC, drainAt = drainT.C, next
		}
	}

	// Fail static's deadlines: the loop plans again when a peer's
	// deferral ends or its quiet table counts as complete
	// (syncedPeers sets syncWake), not at the next resync.
	syncT := time.NewTimer(time.Hour)
	syncT.Stop()
	defer syncT.Stop()
	var syncAt time.Time
	armSync := func() {
		next := d.pl.imp.syncWake
		if next.Equal(syncAt) {
			return
		}
		syncT.Stop()
		syncAt = next
		if !next.IsZero() {
			syncT.Reset(max(time.Until(next), 0) + time.Millisecond)
		}
	}

	// Live migration: the loop plans again when a workload address's
	// handover hold ends (the node the VM left withdraws it then).
	handT := time.NewTimer(time.Hour)
	handT.Stop()
	defer handT.Stop()
	var handAt time.Time
	armHandover := func() {
		next := d.pl.handoverWake()
		if next.Equal(handAt) {
			return
		}
		handT.Stop()
		handAt = next
		if !next.IsZero() {
			handT.Reset(max(time.Until(next), 0) + time.Millisecond)
		}
	}

	d.poke()
	for {
		armDrain()
		armSync()
		armHandover()
		if peerRetryC == nil && d.peersFailed() {
			wait := peerRetry.next()
			d.log.Info("retrying the peers not added", zap.Duration("in", wait))
			peerRetryC = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			startReload(nil)
			continue
		case <-d.reload:
			startReload(nil)
			continue
		case reply := <-d.reloads:
			startReload(reply)
			continue
		case r := <-parsing:
			parsing = nil
			res, err := d.applyConfig(ctx, r)
			for _, w := range waiting {
				w <- res
			}
			waiting = nil
			if err != nil {
				return err
			}
			if reloadAgain {
				reloadAgain = false
				startReload(nil)
				waiting, queued = queued, nil
			}
			continue
		case <-d.linksChanged:
			// A link's learned peer changed: the speaker gets the
			// peers again, and the pass plans for them.
			d.linksChangedPeers(ctx)
		case <-peerRetryC:
			peerRetryC = nil
			if d.retryPeers(ctx) {
				peerRetry.reset()
			}
			continue
		case <-watchdog:
			_, _ = sd.SdNotify(false, sd.SdNotifyWatchdog)
			continue
		case call := <-d.calls:
			call(ctx)
			continue
		case f := <-hooks.loop:
			f()
			continue
		case <-grace.C:
			if !d.hasSynced() {
				d.markReady("OVN Northbound not synced yet; advertising nothing until it is")
			}
			continue
		case <-peerGrace.C:
			// No table to wait for: the sessions start now.
			d.addPeers(ctx, "OVN Northbound not synced yet", false)
			continue
		case now := <-trim.C():
			trim.idle(now, d.log)
			continue
		case <-trim.Done():
			trim.finished(d.log)
			continue
		case <-syncT.C:
			syncAt = time.Time{}
		case <-handT.C:
			handAt = time.Time{}
		case <-drainC:
			drainC, drainAt = nil, time.Time{}
			d.log.Info("drain wait over: withdrawing the drained peers' advertisements")
		case <-d.signal:
		case <-resync.C:
		case <-retryC:
		}
		if watchdog != nil {
			// A large change takes several passes, each poking the
			// next: the ping is not left to select's random choice.
			select {
			case <-watchdog:
				_, _ = sd.SdNotify(false, sd.SdNotifyWatchdog)
			default:
			}
		}
		began := time.Now()
		err := d.reconcile(ctx)
		d.loopMetrics.duration.Observe(time.Since(began).Seconds())
		if err != nil {
			d.loopMetrics.errors.Inc()
		}
		trim.busy()
		if err != nil {
			wait := retry.next()
			d.log.Warn("reconcile incomplete; retrying", zap.Error(err), zap.Duration("in", wait))
			retryC = time.After(wait)
		} else {
			retry.reset()
			retryC = nil
		}
	}
}

// reconcile makes the advertised set match what the config selects from the
// current OVN snapshot.
func (d *Daemon) reconcile(ctx context.Context) error {
	start := time.Now()
	d.mu.Lock()
	cfg, speaker, nb := d.cfg, d.speaker, d.nb
	d.mu.Unlock()

	if speaker == nil {
		return nil // being restarted: the loop pokes again once it runs
	}
	// A pass `ovnbgp plan` computed ahead is applied as it is; NB is
	// read (what changed since the last pass) only for a pass computed
	// here.
	v, pending := d.pl.takePending(cfg, speaker)
	snap, nr := v.snap, nbRead{}
	if !pending {
		var ok bool
		snap, nr.delta, nr.gen, ok = nb.SnapshotDelta(cfg.Node.Name, d.pl.adv.gen)
		if !ok {
			// Nothing known yet: advertise nothing new and withdraw nothing.
			return nil
		}
	}
	// Peers are added with the first plan, their sessions held until its
	// advertisements are in the speaker: the first UPDATEs carry the whole
	// table and End-of-RIB follows it. (Not held, a session came up and
	// gobgp sent End-of-RIB within milliseconds, before the Apply; a peer
	// that kept our routes stale dropped them all, and learned them again
	// from the Apply: bgp/hold.go.)
	held := d.addPeers(ctx, "first plan ready", true)
	if held {
		defer speaker.ReleaseSessions() // at the latest
	}
	if !pending {
		v = d.pl.loopPlan(ctx, cfg, speaker, snap, nr)
	}
	desired := v.desired
	if v.table != nil {
		d.logAlarms(v.table.Alarms())
	}
	err := errors.Join(d.applyAuto(ctx, cfg, speaker, nb, v.plan, held), v.hostErr)
	if err != nil {
		// What failed is not retried by an incremental pass, which
		// diffs only what changes: the next pass is full.
		d.pl.advDue()
		if v.table != nil {
			d.mu.Lock()
			d.pl.imp.fullDue = true
			d.mu.Unlock()
		}
	}

	d.mu.Lock()
	d.snapshot, d.synced, d.desired = snap, true, desired
	d.reconciles++
	d.lastRun = time.Now()
	d.lastErr = ""
	if err != nil {
		d.lastErr = err.Error()
	}
	d.mu.Unlock()
	d.keepHeld(v.held)
	d.log.Debug("reconciled", zap.Int("advertisements", desired.Len()), zap.Duration("took", time.Since(start)))
	d.markReady(fmt.Sprintf("advertising %d routes", desired.Len()))
	return err
}

// logDiff logs each change at Debug and a summary at Info: a thousand new
// UDNs are one Info line, not a thousand.
func (d *Daemon) logDiff(diff plan.AdvertDiff, err error) {
	if diff.Empty() && err == nil {
		return
	}
	for _, list := range []struct {
		op   string
		advs []model.Advertisement
	}{{"announce", diff.Announce}, {"change", diff.Change}, {"withdraw", diff.Withdraw}} {
		if !d.log.Core().Enabled(zap.DebugLevel) {
			break // the fields cost allocations per prefix even when debug is off
		}
		for _, a := range list.advs {
			d.log.Debug("advertisement", zap.String("op", list.op), zap.String("peer", a.Peer),
				zap.Stringer("prefix", a.Prefix), zap.String("rule", a.Rule), zap.String("network", a.Network))
		}
	}
	fields := []zap.Field{zap.Int("announce", len(diff.Announce)), zap.Int("change", len(diff.Change)),
		zap.Int("withdraw", len(diff.Withdraw))}
	// A few prefixes are worth naming at Info too.
	const named = 8
	if n := len(diff.Announce) + len(diff.Change) + len(diff.Withdraw); n <= named {
		var what []string
		for _, a := range diff.Announce {
			what = append(what, "+"+a.Prefix.String()+"→"+a.Peer)
		}
		for _, a := range diff.Change {
			what = append(what, "~"+a.Prefix.String()+"→"+a.Peer)
		}
		for _, a := range diff.Withdraw {
			what = append(what, "-"+a.Prefix.String()+"→"+a.Peer)
		}
		fields = append(fields, zap.Strings("prefixes", what))
	}
	if err != nil {
		d.log.Warn("advertisements changed, some not applied", append(fields, zap.Error(err))...)
		return
	}
	d.log.Info("advertisements changed", fields...)
}

func (d *Daemon) markReady(status string) {
	d.mu.Lock()
	first := !d.ready
	d.ready = true
	d.mu.Unlock()
	_, _ = sd.SdNotify(false, "STATUS="+status)
	if !first {
		return
	}
	_, _ = sd.SdNotify(false, sd.SdNotifyReady)
	d.log.Info("ready", zap.String("status", status))
	if d.opts.OnReady != nil {
		d.opts.OnReady()
	}
}

// applyConfig applies a reload's parse result and says what it did. A
// config that does not load is logged and the running one kept. The error is
// fatal: the speaker could neither be restarted with the new settings nor
// restored with the old ones, and a daemon without a speaker must not keep
// petting the watchdog.
func (d *Daemon) applyConfig(ctx context.Context, r parsed) (api.ReloadResult, error) {
	res := api.ReloadResult{Config: d.opts.ConfigPath, SessionResets: []config.SessionReset{}}
	next, err := r.cfg, r.err
	if err != nil {
		d.log.Error("reload failed; keeping the running config", zap.String("config", d.opts.ConfigPath), zap.Error(err))
		d.setConfigError(err)
		res.Error = err.Error()
		return res, nil
	}
	old := d.config()
	for _, k := range restartOnly(old, next) {
		d.log.Warn("config change needs a restart to take effect; keeping the running value", zap.String("key", k))
		res.Warnings = append(res.Warnings, k+" changed: it takes effect at the next restart; the running value is kept")
	}
	keepRunning(next, old)
	d.syncLinks(next)

	// The sessions this reload resets are config.SessionResets' answer,
	// the one `ovnbgp plan --config` shows; the speaker decides each
	// peer with config.ResetsSession too. Before the peers are added
	// (the first plan) there is no session to reset.
	peersUp := d.peersAdded()
	if peersUp {
		res.SessionResets = append(res.SessionResets, config.SessionResets(old, next)...)
		for _, p := range next.BGP.Peers {
			if _, had := old.Peer(p.Name); !had {
				res.Added = append(res.Added, p.Name)
			}
		}
	}
	if next.SpeakerChanged(old) {
		// A Cease, not a graceful stop: the new speaker may have another
		// ASN or router ID, and a graceful-restart helper must not keep
		// routes of an identity that is gone. Peers withdraw our routes
		// until the new speaker sends them again.
		d.log.Info("bgp asn, routerID, listenPort or gracefulRestart changed: restarting the speaker (sessions reset, peers withdraw our routes until they are sent again)")
		d.stopSpeaker(false, api.PhaseRestarting)
		if err := d.startSpeaker(ctx, next, peersUp); err != nil {
			if ctx.Err() != nil {
				res.Error = "stopped during the reload"
				return res, nil // SIGTERM during the restart: the loop stops
			}
			d.log.Error("new bgp settings failed; going back to the running ones", zap.Error(err))
			d.syncLinks(old) // neighbour discovery back on the running config's links
			if err2 := d.startSpeaker(ctx, old, peersUp); err2 != nil {
				if ctx.Err() != nil {
					res.Error = "stopped during the reload"
					return res, nil
				}
				fatal := fmt.Errorf("reload: new bgp settings failed (%w) and the running ones could not be restored (%w): exiting so that the service manager restarts ovnbgp (the sessions were already reset: peers advertise nothing from this node until it is back)", err, err2)
				res.Error = fatal.Error()
				return res, fatal
			}
			d.setConfigError(err)
			d.poke() // the restored speaker starts empty: give it the table now
			res.Error = fmt.Sprintf("%v; the running bgp settings were restored (the sessions were reset)", err)
			return res, nil
		}
		// The new speaker's peers start their End-of-RIB wait over
		// (syncSpeaker, at the next pass).
	} else if peersUp {
		// The sessions a reload resets, and the peers it adds, start
		// their End-of-RIB wait over.
		var restart []string
		for _, r := range res.SessionResets {
			restart = append(restart, r.Peer)
		}
		restart = append(restart, res.Added...)
		d.pl.resetSync(d.currentSpeaker(), next, restart...)
		if !d.setPeers(ctx, d.currentSpeaker(), next) {
			res.Warnings = append(res.Warnings, "some peer changes were not applied (the log says why); ovnbgp retries them with backoff")
		}
	}
	if !next.SpeakerChanged(old) && (!slices.Equal(old.BMP.Servers, next.BMP.Servers) || old.Node.Name != next.Node.Name) {
		// (a new speaker got them in startSpeaker)
		if err := d.setBMP(ctx, d.currentSpeaker(), next); err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("bmp: %v; ovnbgp retries with backoff", err))
		}
	}
	if !next.OVN.Equal(old.OVN) {
		d.log.Info("ovn settings changed: reconnecting")
		nb, err := d.deps.DialNB(ctx, next.OVN, d.log.Named("ovn"), d.poke)
		if err != nil {
			d.log.Error("new ovn settings failed; keeping the running ones", zap.Error(err))
			res.Warnings = append(res.Warnings, fmt.Sprintf("ovn: the new settings failed (%v); the running ones are kept", err))
			next.OVN = old.OVN
		} else {
			d.mu.Lock()
			oldNB := d.nb
			d.nb = nb
			d.mu.Unlock()
			oldNB.Close()
		}
	}
	if err := d.logs.setLevel(next.Log.Level); err != nil {
		d.log.Warn("log level not changed", zap.Error(err))
		res.Warnings = append(res.Warnings, fmt.Sprintf("log level not changed: %v", err))
	}
	d.mu.Lock()
	d.cfg = next
	d.cfgErr = ""
	d.mu.Unlock()
	resets := make([]string, 0, len(res.SessionResets))
	for _, r := range res.SessionResets {
		resets = append(resets, r.Peer)
	}
	d.log.Info("config reloaded", zap.String("config", d.opts.ConfigPath), zap.Strings("sessionsReset", resets), zap.Strings("peersAdded", res.Added))
	d.warnUnconfiguredDrains(next)
	res.Warnings = append(res.Warnings, d.warnConfig(next)...)
	d.poke()
	res.Applied = true
	return res, nil
}

func (d *Daemon) setConfigError(err error) {
	d.mu.Lock()
	d.cfgErr = err.Error()
	d.mu.Unlock()
}

func (d *Daemon) setPhase(p string) {
	d.mu.Lock()
	d.phase = p
	d.mu.Unlock()
}

// peerWait is how long the sessions wait for the first NB sync. With
// graceful restart on, peers keep our routes (stale) for restartTime, and a
// session opened with an empty table would make them drop those routes at
// once: better to keep them stale for as long as the peer allows.
func peerWait(cfg *config.Config) time.Duration {
	if gr := cfg.BGP.GracefulRestart; gr.Enabled && gr.RestartTime > readyGrace {
		return gr.RestartTime
	}
	return readyGrace
}

// keepRunning gives next the running values of the keys that only take
// effect on restart (restartOnly): a reload, and `plan --config`'s
// prediction of it, keep them.
func keepRunning(next, old *config.Config) {
	next.Control, next.Metrics, next.Kernel.RouteProtocol, next.StateDir = old.Control, old.Metrics, old.Kernel.RouteProtocol, old.StateDir
}

// restartOnly lists changed keys that only take effect on restart.
func restartOnly(old, next *config.Config) []string {
	var keys []string
	if old.Control != next.Control {
		keys = append(keys, "control")
	}
	if old.Metrics != next.Metrics {
		keys = append(keys, "metrics")
	}
	if old.StateDir != next.StateDir {
		// The drain state in effect was read from the running one.
		keys = append(keys, "stateDir")
	}
	if old.Kernel.RouteProtocol != next.Kernel.RouteProtocol {
		// The routes of the running protocol are ours; switching on the
		// fly would orphan them (they would look foreign).
		keys = append(keys, "kernel.routeProtocol")
	}
	return keys
}

// startSpeaker starts a speaker for cfg, with its peers when withPeers.
func (d *Daemon) startSpeaker(ctx context.Context, cfg *config.Config, withPeers bool) error {
	global := cfg.BGP
	global.Peers = nil // the speaker would add them itself; setPeers does, when it is time
	sp, err := d.deps.NewSpeaker(ctx, global, d.log.Named("bgp"), d.poke)
	if err != nil {
		return fmt.Errorf("bgp: %w", err)
	}
	// The peers before the speaker is published: the API never shows a
	// running speaker without the peers it should have.
	if withPeers {
		d.setPeers(ctx, sp, cfg)
	}
	_ = d.setBMP(ctx, sp, cfg) // logged, and retried from the loop
	d.mu.Lock()
	d.speaker = sp
	d.phase = api.PhaseRunning
	d.mu.Unlock()
	return nil
}

// setBMP gives the speaker cfg's BMP stations. A station that cannot be
// configured is logged; the others stream (a station that does not answer
// is not an error: gobgp keeps dialing it).
// A station that could not be configured is retried from the loop, with
// the peers.
func (d *Daemon) setBMP(ctx context.Context, sp Speaker, cfg *config.Config) error {
	if sp == nil {
		return nil
	}
	err := sp.SetBMP(ctx, cfg.BMP.Servers, cfg.Node.Name, "ovnbgp "+d.opts.Version)
	if err != nil {
		d.log.Warn("some bmp stations were not configured; retrying", zap.Error(err))
	}
	d.mu.Lock()
	d.bmpErr = err
	d.mu.Unlock()
	return err
}

// addPeers adds the configured peers to the speaker, once, and reports
// whether it did now. With hold, their sessions wait until the caller
// releases them (Speaker.ReleaseSessions) or holdBound passes.
func (d *Daemon) addPeers(ctx context.Context, why string, hold bool) bool {
	d.mu.Lock()
	if d.peersUp {
		d.mu.Unlock()
		return false
	}
	sp, cfg := d.speaker, d.cfg
	if sp == nil {
		d.mu.Unlock()
		return false
	}
	d.peersUp = true
	d.mu.Unlock()
	d.log.Info("starting bgp sessions", zap.String("reason", why), zap.Int("peers", len(cfg.BGP.Peers)))
	d.pl.syncSpeaker(sp, cfg) // the deferral starts with the sessions
	if hold {
		sp.HoldSessions(holdBound)
	}
	d.setPeers(ctx, sp, cfg)
	return hold
}

// holdBound bounds how long the first plan may hold the sessions (it
// releases them as soon as its advertisements are applied).
const holdBound = 30 * time.Second

// setPeers gives the speaker cfg's peers. A peer that cannot be added is
// logged and retried from the loop with backoff; the others run.
func (d *Daemon) setPeers(ctx context.Context, sp Speaker, cfg *config.Config) bool {
	err := sp.SetPeers(ctx, d.resolvedPeers(cfg))
	if err != nil {
		d.log.Warn("some peer changes were not applied", zap.Error(err))
	}
	d.mu.Lock()
	d.peersErr = err
	d.mu.Unlock()
	return err == nil
}

// peersFailed is true when the last SetPeers or SetBMP failed.
func (d *Daemon) peersFailed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peersErr != nil || d.bmpErr != nil
}

// retryPeers gives the running speaker the running config's peers, or BMP
// stations, again: whichever failed last.
func (d *Daemon) retryPeers(ctx context.Context) bool {
	d.mu.Lock()
	sp, cfg, peersErr, bmpErr := d.speaker, d.cfg, d.peersErr, d.bmpErr
	d.mu.Unlock()
	if sp == nil {
		return false
	}
	if peersErr != nil {
		if ok := d.setPeers(ctx, sp, cfg); !ok {
			return false
		}
		d.log.Info("peers applied on retry", zap.Int("peers", len(cfg.BGP.Peers)))
		d.poke()
	}
	if bmpErr != nil {
		if err := d.setBMP(ctx, sp, cfg); err != nil {
			return false
		}
		d.log.Info("bmp stations applied on retry", zap.Int("stations", len(cfg.BMP.Servers)))
	}
	return true
}

func (d *Daemon) hasSynced() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced
}

func (d *Daemon) peersAdded() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peersUp
}

// stopSpeaker stops the speaker and leaves none (the API answers in the
// given phase meanwhile).
func (d *Daemon) stopSpeaker(graceful bool, phase string) {
	d.mu.Lock()
	sp := d.speaker
	d.speaker, d.phase = nil, phase
	d.mu.Unlock()
	if sp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := sp.Stop(ctx, graceful); err != nil {
		d.log.Warn("bgp stop", zap.Error(err))
	}
}

func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

func (d *Daemon) currentSpeaker() Speaker {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.speaker
}

// advertised joins what the speaker has in effect with the explanation
// (rule, network, OVN object) of the last plan.
func (d *Daemon) advertised(sp Speaker, peer string) []model.Advertisement {
	d.mu.Lock()
	desired := d.desired
	d.mu.Unlock()
	if desired == nil {
		desired = advTree(nil)
	}
	why := func(k model.Key) (model.Advertisement, bool) {
		return advGet(desired, k)
	}
	var out []model.Advertisement
	for _, a := range sp.Advertised() {
		if peer != "" && a.Peer != peer {
			continue
		}
		if w, ok := why(a.Key()); ok {
			a.Rule, a.Network, a.Source, a.Members, a.Drain = w.Rule, w.Network, w.Source, w.Members, w.Drain
		}
		out = append(out, a)
	}
	// What could not be applied at all (new items a peer never got) is
	// listed too, with its problem; a kept-old item is already above.
	listed := make(map[model.Key]bool, len(out))
	for _, a := range out {
		listed[a.Key()] = true
	}
	for _, a := range sp.NotApplied() {
		if (peer != "" && a.Peer != peer) || listed[a.Key()] {
			continue
		}
		if w, ok := why(a.Key()); ok {
			a.Rule, a.Network, a.Source, a.Members = w.Rule, w.Network, w.Source, w.Members
		}
		out = append(out, a)
	}
	d.mu.Lock()
	held := d.held
	d.mu.Unlock()
	// Listed now, with how many each capped peer selected.
	hl := held.list(peer)
	plan.ShowSelected(hl, held.caps.Selected)
	out = append(out, hl...)
	plan.SortAdvertisements(out)
	return out
}

// exportCapCounts fills each peer's HeldBack from the last pass.
func (d *Daemon) exportCapCounts(peers []model.PeerStatus) {
	d.mu.Lock()
	held := d.held
	d.mu.Unlock()
	for i := range peers {
		peers[i].HeldBack = held.caps.Count(peers[i].Name)
	}
}

// keepHeld keeps what a pass the loop applied holds back, for the views,
// and logs what the export caps began or stopped holding back: O(peers).
func (d *Daemon) keepHeld(held heldView) {
	d.mu.Lock()
	before := d.held
	d.held = held
	d.mu.Unlock()
	d.logExportCaps(before.caps.Counts(), held.caps.Counts(), func(peer string) (string, int) {
		return held.caps.Reason(peer), held.caps.Selected(peer)
	})
}

// logExportCaps logs, per peer, when its export cap starts or stops
// holding prefixes back, and how many (before and now: the counts of the
// peers holding some back); why is a peer's Reason and how many it selected.
func (d *Daemon) logExportCaps(before, now map[string]int, why func(peer string) (string, int)) {
	for peer, n := range now {
		switch b := before[peer]; {
		case b == 0:
			reason, selected := why(peer)
			d.log.Warn("export cap reached: prefixes held back", zap.String("peer", peer), zap.Int("heldBack", n),
				zap.Int("selected", selected), zap.String("why", reason))
		case b != n:
			// Churn at the cap: the metric and `peers` follow the count;
			// the log says it once per onset.
			d.log.Debug("export cap: held back count changed", zap.String("peer", peer), zap.Int("heldBack", n), zap.Int("was", b))
		}
	}
	for peer := range before {
		if _, ok := now[peer]; !ok {
			d.log.Info("export cap no longer holds anything back", zap.String("peer", peer))
		}
	}
}

func (d *Daemon) status() api.Status {
	notApplied := 0
	var bmp []model.BMPStation
	var repairs *model.SessionRepairs
	if sp := d.currentSpeaker(); sp != nil {
		notApplied = len(sp.NotApplied())
		r := sp.SessionRepairs()
		repairs = &r
		ctx, cancel := context.WithTimeout(context.Background(), statusWait)
		var err error
		if bmp, err = sp.BMP(ctx); err != nil {
			d.log.Debug("bmp status", zap.Error(err))
		}
		cancel()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	nb := api.NBStatus{}
	if d.nb != nil {
		nb = d.nb.Status()
	}
	nb.Synced = d.synced
	return api.Status{
		Version: d.opts.Version, Node: d.cfg.Node.Name, ConfigFile: d.opts.ConfigPath,
		StartedAt: d.startedAt, Phase: d.phase, Ready: d.ready, NB: nb,
		Reconciles: d.reconciles, LastReconcile: d.lastRun, LastError: d.lastErr, ConfigError: d.cfgErr,
		NotApplied: notApplied, Import: d.importStatus(), Drained: d.drainStatusLocked(d.cfg, time.Now()).Peers,
		BMP: bmp, SessionRepairs: repairs,
	}
}

// statusWait bounds how long status waits for the speaker's BMP state.
const statusWait = 2 * time.Second

// errNoPeer is returned for a --peer that is not configured.
var errNoPeer = errors.New("no such peer")

func (d *Daemon) checkPeer(name string) error {
	if name == "" {
		return nil
	}
	cfg := d.config()
	if slices.ContainsFunc(cfg.BGP.Peers, func(p config.Peer) bool { return p.Name == name }) {
		return nil
	}
	names := make([]string, 0, len(cfg.BGP.Peers))
	for _, p := range cfg.BGP.Peers {
		names = append(names, p.Name)
	}
	return fmt.Errorf("%w %q (configured: %v)", errNoPeer, name, names)
}

// warnConfig logs what cfg.Warnings finds (valid, but not working as the
// file probably means: a peer whose routes all fail the next-hop check)
// and returns it, one line each.
func (d *Daemon) warnConfig(cfg *config.Config) []string {
	var out []string
	for _, w := range cfg.Warnings() {
		d.log.Warn("config warning", zap.String("config", d.opts.ConfigPath), zap.String("key", w.Path), zap.String("warning", w.Msg))
		out = append(out, w.Error())
	}
	return out
}
