package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/google/btree"
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
	// table is the import decision, res its whole result (nil in an
	// incremental pass, which has only what changed).
	table *plan.ImportTable
	res   *plan.ImportResult
	snap  model.Snapshot
	host  model.Host
	// desired are every advertisement to make (drain applied), by key.
	desired *btree.BTreeG[model.Advertisement]
	// heldAdv are the advertisements peers' export caps hold back.
	heldAdv []model.Advertisement
	hostErr error
	synced  map[string]bool
	// learnedOK is false when the walk of the speaker failed and the
	// last good paths were decided on.
	learnedOK bool
	// stale are the graceful-restart windows the table was decided with.
	stale map[string]map[config.Family]plan.StaleWindow
}

// planFrom computes cfg's whole plan from an NB snapshot already read,
// deciding every learned path anew; it runs on the loop. nr is what the
// loop read of NB for a pass it applies (nil: a view, which changes no
// advertisement state). The paths are the
// loop's table (what the loop decided on), or a walk of the speaker when
// walk is set (the loop's full pass) or there is no table of sp; without
// import rules only walkAlways walks.
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
	synced := pl.syncedPeers(ctx, sp, cfg, cfg != pl.running())
	var learned []model.LearnedPath
	learnedOK := true
	if len(cfg.Import) > 0 || walkAlways {
		learned, learnedOK = pl.learnedPaths(ctx, sp, cfg, walk, cfg != pl.running())
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
	preview := cfg != pl.running()
	if !preview && len(cfg.Import) > 0 && pl.imp.adoptDue && holdAll == "" && pl.imp.syncFor == sp {
		// The sync starts (over): what is installed now is adopted, and
		// waits for its peers; everything learned from here on is not.
		pl.imp.adopted, pl.imp.adoptDue = plan.NewAdopted(snap.OwnedRoutes, host.Routes), false
	}
	// A pass without import rules decides nothing learned: no table (its
	// protected set alone is a pass over every VIP), and an empty result,
	// whose plan deletes what an earlier config imported.
	var table *plan.ImportTable
	var res plan.ImportResult
	if len(cfg.Import) > 0 || walkAlways {
		table = plan.NewImportTable(plan.ImportInput{Config: cfg, Snapshot: snap, Host: host, Learned: learned, Stale: pl.imp.stale})
		res = table.Result()
	}
	p := plan.Build(plan.BuildInput{
		Node: cfg.Node.Name, Now: time.Now(), Config: cfg, Import: res,
		Adverts: adv.desired, Advertised: adv.advertised,
		Snapshot: snap, Host: host, Synced: synced, SyncBy: pl.syncBy(cfg, synced),
		Adopted: pl.imp.adopted, HoldAll: holdAll,
	})
	if !preview && holdAll == "" {
		pl.forgetAdopted(cfg, synced, nil, res.OVN, res.Kernel, snap.OwnedRoutes, host.Routes)
	}
	return planView{plan: p, table: table, res: &res, snap: snap, host: host, desired: adv.all, heldAdv: adv.held, hostErr: hostErr,
		synced: synced, learnedOK: learnedOK, stale: pl.imp.stale}
}
