package daemon

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// maxPlanBody bounds a plan sent to `apply` (a plan of a full table is a
// few tens of MB).
const maxPlanBody = 256 << 20

// errNotReady is answered 503 by the import endpoints.
var errNotReady = errors.New("not ready")

// onLoop runs fn on the loop goroutine, between reconciles, and waits for
// it: the loop is the only goroutine that reads and writes the world, so a
// plan, an apply or an explanation never races a reconcile. fn gets the
// loop's context; it must only write variables its caller reads after
// onLoop returns nil.
func (d *Daemon) onLoop(ctx context.Context, fn func(ctx context.Context)) error {
	done := make(chan struct{})
	call := func(lctx context.Context) {
		defer close(done)
		fn(lctx)
	}
	stopping := errors.New("ovnbgp is stopping: its loop has ended")
	select {
	case d.calls <- call:
	case <-d.loopDone:
		return stopping
	case <-ctx.Done():
		return fmt.Errorf("the daemon's loop is busy: %w", context.Cause(ctx))
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the daemon's loop is busy: %w", context.Cause(ctx))
	}
}

// computePlan computes the plan of cfg against the world now; it runs on
// the loop. It fails only when there is nothing to plan from yet.
func (d *Daemon) computePlan(ctx context.Context, cfg *config.Config) (planView, error) {
	d.mu.Lock()
	sp, nb := d.speaker, d.nb
	d.mu.Unlock()
	if sp == nil || nb == nil {
		return planView{}, fmt.Errorf("%w: the BGP speaker is not running yet; try again in a few seconds", errNotReady)
	}
	snap, ok := nb.Snapshot(cfg.Node.Name)
	if !ok {
		return planView{}, fmt.Errorf("%w: OVN Northbound is not synced yet, so nothing is planned; try again once `ovnbgp status` says synced", errNotReady)
	}
	// What is shown walks the learned table even without import rules:
	// explain and plan show what peers sent and why it is not imported.
	return d.pl.planFrom(ctx, cfg, sp, snap, true, false, nil), nil
}

// maxPlanRequest bounds a plan request: a config of config.MaxConfigSize
// bytes, JSON-escaped.
const maxPlanRequest = 8 * config.MaxConfigSize

// importHandlers adds the endpoints of route import to mux.
func (d *Daemon) importHandlers(mux *http.ServeMux) {
	mux.HandleFunc("GET "+api.PathPlan, func(w http.ResponseWriter, r *http.Request) {
		// The running config's plan is the loop's next pass (the config
		// read on the loop: a reload may come first).
		d.replyPlan(w, r, d.config, nil, d.nextPass)
	})
	mux.HandleFunc("POST "+api.PathPlan, func(w http.ResponseWriter, r *http.Request) {
		if !requireRoot(w, r, "plan --config") {
			return
		}
		var req api.PlanRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, maxPlanRequest)).Decode(&req); err != nil {
			replyError(w, http.StatusBadRequest, fmt.Errorf("plan request: %w", err))
			return
		}
		if req.Text == "" {
			replyError(w, http.StatusBadRequest, errors.New("plan request without the config's text: send {\"name\": FILE, \"text\": CONTENT} (ovnbgp plan --config FILE does; the daemon does not open the caller's files)"))
			return
		}
		name := req.Name
		if name == "" {
			name = "plan --config"
		}
		parse := func(ctx context.Context, name string) (*config.Config, error) {
			return config.ParseContext(ctx, []byte(req.Text), name)
		}
		res := <-parseConfig(r.Context(), parse, name, d.lim.parseTimeout, &d.parses, d.lim.maxParses)
		if res.err != nil {
			replyError(w, http.StatusUnprocessableEntity, res.err)
			return
		}
		old := d.config()
		keepRunning(res.cfg, old) // what a reload keeps from the running config
		d.replyPlan(w, r, func() *config.Config { return res.cfg }, config.SessionResets(old, res.cfg), d.computePlan)
	})
	mux.HandleFunc("POST "+api.PathApply, func(w http.ResponseWriter, r *http.Request) {
		if !requireRoot(w, r, "apply") {
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPlanBody+1))
		if err != nil {
			replyError(w, http.StatusBadRequest, fmt.Errorf("read the plan: %w", err))
			return
		}
		if len(body) > maxPlanBody {
			replyError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("plan larger than %d MiB", maxPlanBody>>20))
			return
		}
		var p plan.Plan
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			replyError(w, http.StatusBadRequest, fmt.Errorf("not a plan saved by `ovnbgp plan --out`: %w", err))
			return
		}
		var out api.ApplyResult
		var aerr error
		if err := d.onLoop(r.Context(), func(ctx context.Context) { out, aerr = d.applySaved(ctx, p) }); err != nil {
			replyError(w, http.StatusServiceUnavailable, fmt.Errorf("%w; if the apply was already queued it may still run: check `ovnbgp routes imported` before you apply again", err))
			return
		}
		if aerr != nil {
			code := http.StatusInternalServerError
			if errors.Is(aerr, errStalePlan) || errors.Is(aerr, errWrongPlan) {
				code = http.StatusConflict
			}
			replyError(w, code, aerr)
			return
		}
		reply(w, out, nil)
	})
	mux.HandleFunc("GET "+api.PathImported, func(w http.ResponseWriter, r *http.Request) {
		network := r.URL.Query().Get("network")
		var out api.Imported
		var ierr error
		if err := d.onLoop(r.Context(), func(ctx context.Context) { out, ierr = d.imported(network) }); err != nil {
			replyError(w, http.StatusServiceUnavailable, err)
			return
		}
		if ierr != nil {
			replyError(w, http.StatusServiceUnavailable, ierr)
			return
		}
		reply(w, out, nil)
	})
	mux.HandleFunc("GET "+api.PathExplain, func(w http.ResponseWriter, r *http.Request) {
		prefix, err := parsePrefixArg(r.URL.Query().Get("prefix"))
		if err != nil {
			replyError(w, http.StatusBadRequest, err)
			return
		}
		release, ok := d.heavySlot(w, r)
		if !ok {
			return
		}
		defer release()
		cfg := d.config()
		var v planView
		var res plan.ImportResult
		var perr error
		if err := d.onLoop(r.Context(), func(ctx context.Context) {
			if v, perr = d.computePlan(ctx, cfg); perr == nil {
				res = v.table.Result() // on the loop: the table may be the loop's
			}
		}); err != nil {
			replyError(w, http.StatusServiceUnavailable, err)
			return
		}
		if perr != nil {
			replyError(w, http.StatusServiceUnavailable, perr)
			return
		}
		reply(w, plan.Explain(cfg, prefix, res, slices.Concat(advList(v.desired), v.held.list("")), v.plan, v.snap, v.host, time.Now()), nil)
	})
}

// parsePrefixArg reads `explain`'s PREFIX: a prefix, or an address (its
// host prefix).
func parsePrefixArg(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, errors.New("prefix=: give a prefix (10.0.0.0/8) or an address")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("prefix=%q: not a prefix (10.0.0.0/8, 2001:db8::/32) nor an address", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// replyPlan computes the plan of cfgOf's config, read on the loop, with
// compute (nextPass for the running config, computePlan for a preview) and
// answers it. A plan is as
// heavy as a route list (a pass over every learned path): it takes one of
// their slots.
func (d *Daemon) replyPlan(w http.ResponseWriter, r *http.Request, cfgOf func() *config.Config, resets []config.SessionReset,
	compute func(context.Context, *config.Config) (planView, error)) {
	release, ok := d.heavySlot(w, r)
	if !ok {
		return
	}
	defer release()
	var v planView
	var perr error
	var cfg *config.Config
	var problems []string
	if err := d.onLoop(r.Context(), func(ctx context.Context) {
		cfg = cfgOf()
		if v, perr = compute(ctx, cfg); perr == nil && v.table != nil {
			problems = v.table.Problems() // on the loop: the next pass changes the loop's table
		}
	}); err != nil {
		replyError(w, http.StatusServiceUnavailable, err)
		return
	}
	if perr != nil {
		replyError(w, http.StatusServiceUnavailable, perr)
		return
	}
	_, manual := v.plan.Split(cfg)
	if v.hostErr != nil {
		problems = append(problems, v.hostErr.Error())
	}
	reply(w, api.PlanResponse{
		Plan: v.plan, Counts: v.plan.Counts(), Manual: manual.Counts(),
		SessionResets: resets, Problems: problems,
	}, nil)
}

// The ways an apply refuses a plan; nothing is changed then.
var (
	errStalePlan = errors.New("the plan is stale")
	errWrongPlan = errors.New("the plan does not fit this daemon")
)

// applySaved applies a saved plan's OVN and kernel operations; it runs on
// the loop. Nothing is applied when the plan is for another node or format,
// or when what it read has changed since: the kernel routes it touches are
// checked first, then the OVN operations go in one transaction behind OVSDB
// wait operations on the gateway routers and rows it read. Advertisements
// are not part of an apply: the loop keeps them current by itself.
func (d *Daemon) applySaved(ctx context.Context, p plan.Plan) (api.ApplyResult, error) {
	d.pl.dropPending("a saved plan is applied")
	cfg := d.config()
	var out api.ApplyResult
	switch {
	case p.Version != plan.PlanVersion:
		return out, fmt.Errorf("%w: format version %d, this ovnbgp reads %d; make a new plan", errWrongPlan, p.Version, plan.PlanVersion)
	case p.Node != cfg.Node.Name:
		return out, fmt.Errorf("%w: it was made on node %q, this is %q", errWrongPlan, p.Node, cfg.Node.Name)
	case len(p.OVN) > 0 && len(p.Guards) == 0:
		return out, fmt.Errorf("%w: it has OVN operations but no guards (what it read), so staleness cannot be checked; make a new plan", errWrongPlan)
	}
	if err := guarded(p); err != nil {
		return out, fmt.Errorf("%w: %w; make a new plan", errWrongPlan, err)
	}
	// What the running config wants now, from the world now: every saved
	// operation must still be part of it, exactly. A withdrawn route, a
	// prefix protected since, a plan of a previewed config (--config) or
	// a hand-edited one changes nothing.
	now, err := d.computePlan(ctx, cfg)
	if err != nil {
		return out, err
	}
	if err := sameOps(p, now.plan); err != nil {
		return out, fmt.Errorf("%w: %w; make a new plan (nothing was changed)", errStalePlan, err)
	}
	d.mu.Lock()
	nb := d.nb
	d.mu.Unlock()
	if len(p.Kernel) > 0 {
		if d.pl.imp.host == nil {
			if d.pl.imp.hostErr != nil {
				return out, d.pl.imp.hostErr
			}
			return out, fmt.Errorf("%w: the kernel side is not open yet; try again in a few seconds", errNotReady)
		}
		if err := kernelStale(p.Kernel, now.host); err != nil {
			return out, fmt.Errorf("%w: %w; make a new plan (nothing was changed)", errStalePlan, err)
		}
	}
	if len(p.OVN) > 0 {
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		applied, err := nb.ApplyRoutes(actx, cfg.Node.Name, p.OVN, p.Guards)
		cancel()
		out.OVN = applied
		switch {
		case err != nil && len(applied) == 0:
			// One guarded transaction: nothing was written.
			return out, fmt.Errorf("ovn: %w (nothing was changed)", err)
		case err != nil:
			return out, fmt.Errorf("ovn: %w", err)
		}
		d.log.Info("saved plan applied to OVN", zap.Int("ops", len(applied)))
	}
	if len(p.Kernel) > 0 {
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		applied, err := d.pl.imp.host.Apply(actx, p.Kernel)
		cancel()
		out.Kernel = applied
		if err != nil {
			return out, fmt.Errorf("kernel: %w", err)
		}
		d.log.Info("saved plan applied to the kernel", zap.Int("ops", len(applied)))
	}
	d.poke()
	return out, nil
}

// applyTimeout bounds one apply to OVN or the kernel, so that a database
// that hangs cannot hold the loop (and every call waiting on it) for ever.
const applyTimeout = time.Minute

// guarded checks that every gateway router a plan's OVN operations touch
// has a guard: the routes the plan read there.
func guarded(p plan.Plan) error {
	has := make(map[string]bool, len(p.Guards))
	for _, g := range p.Guards {
		has[g.Router] = true
	}
	for _, op := range p.OVN {
		if !has[op.Route.Router] {
			return fmt.Errorf("its OVN operations on router %s have no guard (what the plan read there)", op.Route.Router)
		}
	}
	return nil
}

// sameOps checks that every OVN and kernel operation of a saved plan is an
// operation of the plan now, exactly (same kind, key, contents and row).
func sameOps(saved, now plan.Plan) error {
	key := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	ovnNow := make(map[string]bool, len(now.OVN))
	for _, op := range now.OVN {
		ovnNow[key(op)] = true
	}
	kernelNow := make(map[string]bool, len(now.Kernel))
	for _, op := range now.Kernel {
		kernelNow[key(op)] = true
	}
	var errs []error
	seen := make(map[string]bool, len(saved.OVN)+len(saved.Kernel))
	for _, k := range append(mapKeys(saved.OVN, key), mapKeys(saved.Kernel, key)...) {
		if seen[k] {
			return fmt.Errorf("it repeats an operation (%s): not a plan ovnbgp made", k)
		}
		seen[k] = true
	}
	for _, op := range saved.OVN {
		if !ovnNow[key(op)] {
			errs = append(errs, fmt.Errorf("OVN %s %s via %s on %s is no longer planned", op.Op, op.Route.Prefix, op.Route.NextHop, op.Route.Router))
		}
	}
	for _, op := range saved.Kernel {
		if !kernelNow[key(op)] {
			what := "an operation"
			switch {
			case op.Route != nil:
				what = fmt.Sprintf("%s %s in table %d", op.Op, op.Route.Prefix, op.Route.Table)
			case op.VRF != nil:
				what = fmt.Sprintf("%s VRF %s", op.Op, op.VRF.Name)
			case op.PolicyRule != nil:
				what = fmt.Sprintf("%s ip rule %d", op.Op, op.PolicyRule.Priority)
			}
			errs = append(errs, fmt.Errorf("kernel %s is no longer planned", what))
		}
	}
	if len(errs) > 3 {
		return fmt.Errorf("%w (and %d more)", errors.Join(errs[:3]...), len(errs)-3)
	}
	return errors.Join(errs...)
}

// mapKeys is f of each element.
func mapKeys[T any](ops []T, f func(any) string) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = f(op)
	}
	return out
}

// kernelStale says what a plan's kernel operations assumed that is no
// longer true: an add's key is taken, a replaced route is gone, a deleted
// route is not as the plan read it, a VRF to create exists.
func kernelStale(ops []model.KernelOp, host model.Host) error {
	have := make(map[model.KernelRouteKey]model.KernelRoute, len(host.Routes))
	for _, r := range host.Routes {
		have[r.Key()] = r
	}
	var errs []error
	for _, op := range ops {
		switch {
		case op.Route != nil:
			r := *op.Route
			cur, ok := have[r.Key()]
			switch op.Op {
			case model.OpAdd:
				if ok {
					errs = append(errs, fmt.Errorf("table %d now has %v (the plan adds it)", r.Table, r.Prefix))
				}
			case model.OpReplace:
				if !ok {
					errs = append(errs, fmt.Errorf("table %d no longer has %v (the plan replaces it)", r.Table, r.Prefix))
				}
			case model.OpDelete:
				if !ok || !plan.SameNextHops(cur.NextHops, r.NextHops) {
					errs = append(errs, fmt.Errorf("table %d: %v is not as the plan read it (the plan deletes it)", r.Table, r.Prefix))
				}
			}
		case op.VRF != nil && op.Op == model.OpAdd:
			if slices.ContainsFunc(host.VRFs, func(v model.VRFDevice) bool { return v.Name == op.VRF.Name }) {
				errs = append(errs, fmt.Errorf("VRF %s exists now (the plan creates it)", op.VRF.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// imported is `routes imported`: what the last pass wants in OVN and the
// kernel next to what is there; it runs on the loop.
func (d *Daemon) imported(network string) (api.Imported, error) {
	cfg := d.config()
	d.mu.Lock()
	nb := d.nb
	var res plan.ImportResult
	staleWhy := func(model.LearnedPath) string { return "" }
	if t := d.pl.imp.table; t != nil {
		res = t.Result()
		staleWhy = t.StaleWhy
	}
	manual, held := d.pl.imp.manual, d.pl.heldOps()
	d.mu.Unlock()
	if nb == nil {
		return api.Imported{}, fmt.Errorf("%w: OVN Northbound is not dialled yet", errNotReady)
	}
	snap, ok := nb.Snapshot(cfg.Node.Name)
	if !ok {
		return api.Imported{}, fmt.Errorf("%w: OVN Northbound is not synced yet", errNotReady)
	}
	host, _ := d.pl.hostState()
	return importedView(cfg, network, res, snap, host, manual, held, staleWhy), nil
}

// rulesTargeting are the import rules whose kernel target is r's table or
// VRF, in config order.
func rulesTargeting(cfg *config.Config, host model.Host, r model.KernelRoute) []string {
	var out []string
	for _, rule := range cfg.Import {
		k := rule.Targets.Kernel
		table := uint32(k.Table)
		for _, v := range host.VRFs {
			if k.VRF != "" && v.Name == k.VRF {
				table = v.Table
			}
		}
		if (k.VRF != "" && k.VRF == r.VRF) || (table != 0 && table == r.Table) {
			out = append(out, rule.Name)
		}
	}
	return out
}

// pathKey is a route's source: a prefix and next hop accepted by a rule.
type pathKey struct {
	rule    string
	prefix  netip.Prefix
	nextHop netip.Addr
}

// staleSources says, per accepted (rule, prefix, next hop), why it is kept
// stale when every path behind it is stale (graceful restart), and is
// absent when one is fresh.
func staleSources(res plan.ImportResult, staleWhy func(model.LearnedPath) string) map[pathKey]string {
	out := map[pathKey]string{}
	fresh := map[pathKey]bool{}
	for _, p := range res.Paths {
		if !p.Accepted {
			continue
		}
		k := pathKey{p.Rule, p.Prefix, p.NextHop}
		if !p.Stale {
			fresh[k] = true
			continue
		}
		if why := staleWhy(p); why != "" {
			out[k] = why
		}
	}
	for k := range fresh {
		delete(out, k)
	}
	return out
}

// importedView joins wanted and installed routes, OVN and kernel.
func importedView(cfg *config.Config, network string, res plan.ImportResult, snap model.Snapshot, host model.Host,
	manual plan.Plan, held []plan.Held, staleWhy func(model.LearnedPath) string) api.Imported {
	out := api.Imported{OVN: []api.ImportedOVN{}, Kernel: []api.ImportedKernel{}}
	heldOVN := map[model.OVNRouteKey]string{}
	heldKernel := map[model.KernelRouteKey]plan.Held{}
	for _, h := range held {
		if h.OVN != nil {
			heldOVN[h.OVN.Route.Key()] = h.Reason
		}
		if h.Kernel != nil && h.Kernel.Route != nil {
			heldKernel[h.Kernel.Route.Key()] = h
		}
	}
	grStale := staleSources(res, staleWhy)
	manualOVN := map[model.OVNRouteKey]bool{}
	for _, op := range manual.OVN {
		manualOVN[op.Route.Key()] = true
	}
	manualKernel := map[model.KernelRouteKey]bool{}
	for _, op := range manual.Kernel {
		if op.Route != nil {
			manualKernel[op.Route.Key()] = true
		}
	}
	const waitApply = "waiting for `ovnbgp apply` (its rule is mode manual)"

	networkOf := map[string]string{}
	for _, gr := range snap.Routers {
		networkOf[gr.Name] = gr.Network
	}
	// What is drift, missing or left over is what the plan's own diff
	// would change (plan.DiffOVN, plan.DiffKernel): one comparison, the
	// one that is applied.
	owned := make([]model.OVNRoute, len(snap.OwnedRoutes))
	for i, r := range snap.OwnedRoutes {
		if r.Network == "" {
			r.Network = networkOf[r.Router]
		}
		owned[i] = r
	}
	ovnOps := map[model.OVNRouteKey]model.OVNOp{}
	var ovnGone []model.OVNRoute
	for _, op := range plan.DiffOVN(res.OVN, owned) {
		if op.Op == model.OpDelete {
			ovnGone = append(ovnGone, op.Route)
			continue
		}
		ovnOps[op.Route.Key()] = op
	}
	installed := map[model.OVNRouteKey]model.OVNRoute{}
	for _, r := range owned {
		if _, seen := installed[r.Key()]; !seen {
			installed[r.Key()] = r // the row DiffOVN keeps of duplicates
		}
	}
	wanted := map[model.OVNRouteKey]bool{}
	for _, want := range res.OVN {
		if want.Network == "" {
			want.Network = networkOf[want.Router]
		}
		if wanted[want.Key()] {
			continue
		}
		wanted[want.Key()] = true
		row := api.ImportedOVN{OVNRoute: want, State: api.ImportInstalled}
		cur, have := installed[want.Key()]
		if have {
			row.OVNRoute.UUID = cur.UUID
		}
		switch op, changes := ovnOps[want.Key()]; {
		case changes && op.Op == model.OpAdd:
			row.State = api.ImportMissing
			if manualOVN[want.Key()] {
				row.Reason = waitApply
			}
		case changes:
			row.State, row.Reason = api.ImportDrift, fmt.Sprintf("installed with output port %q and rule %q", cur.OutputPort, cur.Rule)
		default:
			if why, ok := grStale[pathKey{want.Rule, want.Prefix, want.NextHop}]; ok {
				row.State, row.Reason = api.ImportStale, why
			}
		}
		out.OVN = append(out.OVN, row)
	}
	for _, cur := range ovnGone {
		row := api.ImportedOVN{OVNRoute: cur, State: api.ImportStale, Reason: "no longer wanted: deleted on the next pass"}
		if wanted[cur.Key()] {
			row.Reason = "a duplicate of an installed row: deleted on the next pass"
		}
		if why, ok := heldOVN[cur.Key()]; ok {
			row.Reason = "held: " + why
		} else if manualOVN[cur.Key()] {
			row.Reason = waitApply
		}
		out.OVN = append(out.OVN, row)
	}

	ruleNetwork := map[string]string{}
	tableNetwork := map[uint32]string{}
	vrfNetwork := map[string]string{}
	for _, r := range cfg.Import {
		ruleNetwork[r.Name] = r.Network
		if t := r.Targets.Kernel.Table; t > 0 {
			tableNetwork[uint32(t)] = r.Network
		}
		if v := r.Targets.Kernel.VRF; v != "" {
			vrfNetwork[v] = r.Network
		}
	}
	kernelNetwork := func(k api.ImportedKernel) string {
		if n, ok := ruleNetwork[k.Rule]; ok {
			return n
		}
		if n, ok := vrfNetwork[k.VRF]; ok && k.VRF != "" {
			return n
		}
		return tableNetwork[k.Table]
	}
	haveK := map[model.KernelRouteKey]model.KernelRoute{}
	for _, r := range host.Routes {
		haveK[r.Key()] = r
	}
	kernelOps := map[model.KernelRouteKey]model.OpKind{}
	var kernelGone []model.KernelRoute
	for _, op := range plan.DiffKernel(res.Kernel, host.Routes) {
		if op.Op == model.OpDelete {
			kernelGone = append(kernelGone, *op.Route)
			continue
		}
		kernelOps[op.Route.Key()] = op.Op
	}
	seenK := map[model.KernelRouteKey]bool{}
	for _, want := range res.Kernel {
		if seenK[want.Key()] {
			continue
		}
		seenK[want.Key()] = true
		row := api.ImportedKernel{KernelRoute: want, State: api.ImportInstalled}
		cur := haveK[want.Key()]
		switch op, changes := kernelOps[want.Key()]; {
		case changes && op == model.OpAdd:
			row.State = api.ImportMissing
			if manualKernel[want.Key()] {
				row.Reason = waitApply
			}
		case changes && !plan.SameNextHops(cur.NextHops, want.NextHops):
			row.State, row.Want = api.ImportDrift, want.NextHops
			row.KernelRoute.NextHops = cur.NextHops
			row.Reason = "installed with other next hops or weights"
		case changes && cur.Metric != want.Metric:
			row.State = api.ImportDrift
			row.KernelRoute.Metric = cur.Metric
			row.Reason = fmt.Sprintf("installed with metric %d, want %d (import[].accept[].metric; 0 = the kernel's default)", cur.Metric, want.Metric)
		case changes:
			row.State = api.ImportDrift
			row.Reason = fmt.Sprintf("installed with protocol %d, want %d", cur.Protocol, want.Protocol)
		default:
			var whys []string
			for _, nh := range want.NextHops {
				if why, ok := grStale[pathKey{want.Rule, want.Prefix, nh.Addr}]; ok && !slices.Contains(whys, why) {
					whys = append(whys, why)
				} else if !ok {
					whys = nil
					break
				}
			}
			if len(whys) > 0 {
				row.State, row.Reason = api.ImportStale, strings.Join(whys, "; ")
			}
		}
		out.Kernel = append(out.Kernel, row)
	}
	for _, cur := range kernelGone {
		row := api.ImportedKernel{KernelRoute: cur, State: api.ImportStale, Reason: "no longer wanted: deleted on the next pass"}
		// The kernel keeps no rule name: the held operation's rules,
		// else the rules whose target is the route's table or VRF.
		if h, ok := heldKernel[cur.Key()]; ok {
			row.Reason = "held: " + h.Reason
			row.Rule = strings.Join(h.Rules, ",")
		} else if manualKernel[cur.Key()] {
			row.Reason = waitApply
		}
		if row.Rule == "" {
			row.Rule = strings.Join(rulesTargeting(cfg, host, cur), ",")
		}
		out.Kernel = append(out.Kernel, row)
	}
	if network != "" {
		out.OVN = slices.DeleteFunc(out.OVN, func(r api.ImportedOVN) bool { return r.Network != network })
		out.Kernel = slices.DeleteFunc(out.Kernel, func(r api.ImportedKernel) bool { return kernelNetwork(r) != network })
	}
	slices.SortFunc(out.OVN, func(a, b api.ImportedOVN) int {
		return cmp.Or(strings.Compare(a.Router, b.Router), a.Prefix.Addr().Compare(b.Prefix.Addr()),
			cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), a.NextHop.Compare(b.NextHop))
	})
	slices.SortFunc(out.Kernel, func(a, b api.ImportedKernel) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), a.Prefix.Addr().Compare(b.Prefix.Addr()),
			cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return out
}
