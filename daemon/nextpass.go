package daemon

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
)

// pendingPass is a pass of the loop computed ahead of it: `ovnbgp plan`
// computes the loop's next pass and shows it, and the loop's next pass
// applies it as it is, so that what plan printed is the operation list
// applied (docs/architecture.md, "Data flow").
type pendingPass struct {
	v   planView
	cfg *config.Config
	sp  Speaker
}

// nextPass is the plan the loop applies next; it runs on the loop. It is
// the pending pass when one waits, else it computes the loop's next pass
// and leaves it pending. With import rules that pass is full (every learned
// path decided, the whole kernel read and diffed): a plan asked for shows
// drift that no event reported, and the loop then repairs exactly that.
// It fails only when there is nothing to plan from yet.
func (d *Daemon) nextPass(ctx context.Context, cfg *config.Config) (planView, error) {
	d.mu.Lock()
	sp, nb := d.speaker, d.nb
	d.mu.Unlock()
	if p := d.pl.pending; p != nil && p.cfg == cfg && p.sp == sp {
		return p.v, nil
	}
	d.pl.dropPending("the config or the speaker changed")
	if sp == nil || nb == nil {
		return planView{}, fmt.Errorf("%w: the BGP speaker is not running yet; try again in a few seconds", errNotReady)
	}
	var nr nbRead
	snap, delta, gen, ok := nb.SnapshotDelta(cfg.Node.Name, d.pl.adv.gen)
	if !ok {
		return planView{}, fmt.Errorf("%w: OVN Northbound is not synced yet, so nothing is planned; try again once `ovnbgp status` says synced", errNotReady)
	}
	nr.delta, nr.gen = delta, gen
	// The pass is whole: every advertisement and, with import rules,
	// every learned path and kernel route is diffed.
	d.pl.advDue()
	if len(cfg.Import) > 0 {
		d.mu.Lock()
		d.pl.imp.fullDue = true
		d.mu.Unlock()
	}
	v := d.pl.loopPlan(ctx, cfg, sp, snap, nr)
	d.pl.pending = &pendingPass{v: v, cfg: cfg, sp: sp}
	d.poke() // applied by the loop's next pass, at once
	return v, nil
}

// takePending hands the pending pass to the loop when it was computed for
// cfg and sp (and drops it when not); it runs on the loop. What changed
// after it was computed is the next pass's: the loop is poked.
func (pl *planner) takePending(cfg *config.Config, sp Speaker) (planView, bool) {
	p := pl.pending
	if p == nil {
		return planView{}, false
	}
	if p.cfg != cfg || p.sp != sp {
		pl.dropPending("the config or the speaker changed")
		return planView{}, false
	}
	pl.pending = nil
	pl.poke()
	return p.v, true
}

// dropPending discards the pending pass unapplied, when what it was
// computed against changed (an apply, a drain, a reload); it runs on the
// loop. The changes it took from the speaker and the kernel are in no
// other pass: the next pass is full.
func (pl *planner) dropPending(why string) {
	if pl.pending == nil {
		return
	}
	pl.log.Debug("plan: the pending pass is dropped; the next pass is full", zap.String("why", why))
	pl.advDue()
	if pl.pending.v.table != nil {
		pl.mu.Lock()
		pl.imp.fullDue = true
		pl.mu.Unlock()
	}
	pl.pending = nil
}
