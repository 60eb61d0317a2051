package daemon

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// planner computes the loop's passes (loopPlan), the plan `ovnbgp plan`
// shows (the loop's next pass, kept pending until the loop applies it) and
// the previews of another config (planFrom). It alone keeps what passes
// need between them: the import table, fail static's sync state, the
// incremental bookkeeping and the kernel side (imp), and the pending pass.
// Package plan decides; the planner chooses what to read and what to
// decide again, so that a pass costs what changed.
//
// Only the loop goroutine calls it. It changes imp under mu, the daemon's
// mutex, which the control API holds while it reads imp.
type planner struct {
	log *zap.Logger
	lim limits
	mu  *sync.Mutex
	// poke asks the loop for another pass; drain is the drain state;
	// running is the running config (a plan of another is a preview,
	// which changes no state); openHost opens the kernel side.
	poke     func()
	drain    func() model.Drain
	running  func() *config.Config
	openHost func(protocol int, log *zap.Logger, notify func()) (Host, error)
	// unresolved are cfg's unnumbered peers without a learned address
	// (Daemon.unresolved): the advertisement side plans nothing for them.
	unresolved func(cfg *config.Config) map[string]bool

	imp importState
	// adv is the advertisement side (adverts.go); withheld its config
	// while some peer's IPv4 is withheld (withhold.go).
	adv      advSide
	withheld withheldIPv4
	// pending is the loop's next pass, computed ahead by `ovnbgp plan`
	// (nextPass.go).
	pending *pendingPass
}

// planView is one computation of the plan and everything it read.
type planView struct {
	plan plan.Plan
	// table is the import decision (nil: none, without import rules).
	table *plan.ImportTable
	snap  model.Snapshot
	host  model.Host
	// desired are every advertisement to make (drain applied), by key.
	desired *advertTree
	// held is what peers' export caps and a drain hold back.
	held    heldView
	hostErr error
	synced  map[string]bool
	// learnedOK is false when the walk of the speaker failed and the
	// last good paths were decided on.
	learnedOK bool
	// stale are the graceful-restart windows the table was decided with.
	stale map[string]map[config.Family]plan.StaleWindow
}

// planFrom computes cfg's whole plan from an NB snapshot already read; it
// runs on the loop. It is the incremental pass from an empty table: a new
// table is given every learned path as one change (ImportTable.Fill, the
// Update an incremental pass gives what changed), and decide diffs what
// that change touched, as for an incremental pass (diffPass), against the
// whole of NB's owned rows and the kernel's owned routes.
// nr is what the loop read of NB for a pass it applies (nil: a view, which
// changes no advertisement state). The paths are the loop's table (what
// the loop decided on), or a walk of the speaker when walk is set (the
// loop's full pass) or there is no table of sp; without import rules only
// walkAlways walks.
func (pl *planner) planFrom(ctx context.Context, cfg *config.Config, sp Speaker, snap model.Snapshot, walkAlways, walk bool, nr *nbRead) planView {
	adv := pl.adverts(cfg, sp, snap, nr)
	pl.openHostOnce(cfg)
	host, hostErr := pl.hostState()
	// End-of-RIB before the paths: a peer's paths reach gobgp's table
	// before its End-of-RIB does, so the walk that follows holds every path
	// sent before the End-of-RIB seen here. The other order could pair a
	// fresh End-of-RIB with an older walk, and fail static would then
	// delete routes the peer had just re-sent.
	// A preview (plan --config) reads the sync state but never changes it.
	preview := cfg != pl.running()
	synced := pl.syncedPeers(ctx, sp, cfg, preview)
	var learned []model.LearnedPath
	learnedOK := true
	if len(cfg.Import) > 0 || walkAlways {
		learned, learnedOK = pl.learnedPaths(ctx, sp, cfg, walk, preview)
	}
	holdAll := ""
	if len(cfg.Import) > 0 && (!learnedOK || pl.imp.host == nil || hostErr != nil) {
		// What peers hold or what the host holds is not known this pass:
		// no walk of this speaker's table succeeded (or this pass's walk
		// failed, and the last good one may predate an End-of-RIB seen
		// now), or the kernel could not be read (every next hop would
		// fail its on-link check). Nothing may be deleted on such input.
		holdAll = "what peers sent or what the kernel holds could not be read this pass, so nothing is deleted (fail static); retried on the next pass"
		for p := range synced {
			synced[p] = false
		}
	}
	if !preview && len(cfg.Import) > 0 && pl.imp.adoptDue && holdAll == "" && pl.imp.syncFor == sp {
		// The sync starts (over): what is installed now is adopted, and
		// waits for its peers; everything learned from here on is not.
		pl.imp.adopted, pl.imp.adoptDue = plan.NewAdopted(snap.OwnedRoutes, host.Routes), false
	}
	// A pass without import rules decides nothing learned: no table (its
	// protected set alone is a pass over every VIP), and an empty
	// decision, whose plan deletes what an earlier config imported.
	var table *plan.ImportTable
	var touched []netip.Prefix
	if len(cfg.Import) > 0 || walkAlways {
		table = plan.NewImportTable(plan.ImportInput{Config: cfg, Snapshot: snap, Host: host, Stale: pl.imp.stale})
		touched = table.Fill(learned, snap.OwnedRoutes, host.Routes)
	}
	// snap and host are whole: what no path names any more is diffed
	// too (its owned rows and routes are deleted).
	p := pl.decide(passInput{cfg: cfg, table: table, touched: touched, whole: true, snap: snap, host: host,
		synced: synced, holdAll: holdAll, adv: adv, forget: !preview && holdAll == ""})
	return planView{plan: p, table: table, snap: snap, host: host, desired: adv.all, held: adv.held, hostErr: hostErr,
		synced: synced, learnedOK: learnedOK, stale: pl.imp.stale}
}

// passInput is what a pass diffs, full or incremental.
type passInput struct {
	cfg *config.Config
	// table is the import decision (nil: none); touched the prefixes
	// decided again, sorted, without repeats: their desired routes are
	// diffed against snap's OwnedRoutes and host's Routes, which hold
	// those of touched only, or all when whole is set (a full pass:
	// every route of a prefix not touched is deleted).
	table   *plan.ImportTable
	touched []netip.Prefix
	whole   bool
	snap    model.Snapshot
	host    model.Host
	synced  map[string]bool
	holdAll string
	adv     advPart
	// forget: the adopted routes desired or gone now are forgotten (a
	// pass of the running config on input read whole).
	forget bool
}

// decide diffs a pass: the desired routes of the touched prefixes against
// what NB and the kernel hold of them, and the advertisements (plan.Build).
// Every pass ends here, the loop's full and incremental ones and the views.
func (pl *planner) decide(in passInput) plan.Plan {
	var imp plan.ImportResult
	if in.table != nil {
		imp.OVN, imp.Kernel = in.table.Desired(in.touched)
		imp.VRFs = in.table.VRFs()
	}
	p := plan.Build(plan.BuildInput{
		Node: in.cfg.Node.Name, Now: time.Now(), Config: in.cfg, Import: imp,
		Adverts: in.adv.desired, Advertised: in.adv.advertised,
		Snapshot: in.snap, Host: in.host, Synced: in.synced, SyncBy: pl.syncBy(in.cfg, in.synced),
		Adopted: pl.imp.adopted, HoldAll: in.holdAll,
	})
	if in.forget {
		prefixes := in.touched
		if in.whole {
			prefixes = nil // every adopted prefix
		}
		pl.forgetAdopted(in.cfg, in.synced, prefixes, imp.OVN, imp.Kernel, in.snap.OwnedRoutes, in.host.Routes)
	}
	return p
}
