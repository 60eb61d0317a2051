package ovn

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// defaultBatchSize is the most route operations ApplyRoutes puts in one
// transaction outside a manual apply: a transaction is applied whole or not
// at all, and a large one holds the (possibly clustered) NB longer.
const defaultBatchSize = 500

// cacheWait bounds how long ApplyRoutes waits for its own cache to show
// what it wrote, so that the next Snapshot (and plan) sees it.
const cacheWait = 10 * time.Second

// ErrStale is wrapped by the error of a manual apply whose plan no longer
// matches NB: nothing was written.
var ErrStale = errors.New("the plan is stale")

// checkedOp is an operation that passed the checks against the cache.
type checkedOp struct {
	op     model.OVNOp
	router model.GatewayRouter
	// row is the owned row a replace or delete changes, as the cache has it.
	row model.OVNRoute
}

// ApplyRoutes writes ops, operations on the static routes node owns
// (ovnbgp.io/owner=node), to node's gateway routers, and returns the ones
// really applied.
//
//   - OpAdd inserts a row (ip_prefix, nexthop, output_port, external_ids
//     ovnbgp.io/owner and ovnbgp.io/rule; never a k8s.ovn.org/* key) and
//     adds it to the router's static_routes in the same transaction.
//   - OpReplace changes output_port and ovnbgp.io/rule of the row
//     Route.UUID in place; OpDelete removes the router's reference and the
//     row together. Both only for a row node owns, checked against the
//     cache and again by an OVSDB wait in the transaction.
//   - An operation on a router that is not a gateway router of node
//     (GR_<p><node>), or whose ForeignImport is set, is refused: nothing is
//     written for it and the error says why.
//
// Without guards (auto mode) the operations go in transactions of at most
// batchSize; a failing batch does not stop the next, and the error joins
// every failure. With guards (manual mode) everything goes in one
// transaction that first waits (OVSDB wait, timeout 0) for each guarded
// router to reference exactly the guard's static routes, and for each
// replaced or deleted row to be as the plan read it: if NB moved, nothing
// is written and the error (wrapping ErrStale) says what changed. A refused
// operation in manual mode refuses the whole apply.
//
// ApplyRoutes needs a live session: disconnected, it fails at once and
// writes nothing. It returns once its cache, and so Snapshot, shows what
// it wrote.
func (c *Client) ApplyRoutes(ctx context.Context, node string, ops []model.OVNOp, guards []model.OVNGuard) (applied []model.OVNOp, err error) {
	c.mu.Lock()
	cli, connected, size, hook := c.cli, c.connected, c.batchSize, c.txnHook
	c.mu.Unlock()
	if !connected || cli == nil {
		return nil, fmt.Errorf("ovn northbound is not connected: none of %d static route operations written; they are retried after the reconnect", len(ops))
	}
	if node == "" {
		return nil, errors.New("apply routes: no node name")
	}
	if len(ops) == 0 && len(guards) == 0 {
		return nil, nil
	}
	if size <= 0 {
		size = defaultBatchSize
	}
	c.mu.Lock()
	c.writing++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.writing--
		c.mu.Unlock()
		// The session skipped the cache events of the write: re-read.
		c.poke()
	}()
	rows, err := readRows(ctx, cli, c.memo)
	if err != nil {
		return nil, fmt.Errorf("apply routes: read the nb cache: %w", err)
	}
	imp := buildImport(rows, node)
	exists := func(id string) bool { return cacheHasRoute(cli, id) }
	good, refused := checkOps(imp, parseNorthdVersion(rows.Northd), node, ops, exists, len(guards) > 0)
	log := c.log.With(zap.String("node", node))

	if len(guards) > 0 {
		if len(refused) > 0 {
			return nil, fmt.Errorf("manual apply refused, nothing written: %w", errors.Join(refused...))
		}
		if err := staleInCache(rows, guards, good); err != nil {
			return nil, err
		}
		t := buildTxn(node, good, guards, true)
		done, err := c.transact(ctx, cli, t, 0, hook)
		if err != nil {
			return nil, err
		}
		c.settle(ctx, cli, done, log)
		log.Info("static routes written (manual apply)", zap.Int("applied", len(done)), zap.Int("ops", len(ops)))
		return done, nil
	}

	errs := refused
	for b, start := 0, 0; start < len(good); b, start = b+1, start+size {
		items := good[start:min(start+size, len(good))]
		t := buildTxn(node, items, nil, false)
		done, err := c.transact(ctx, cli, t, b, hook)
		if err != nil {
			log.Warn("static route batch failed", zap.Int("batch", b), zap.Int("ops", len(items)), zap.Error(err))
			errs = append(errs, fmt.Errorf("batch %d (%d operations): %w", b, len(items), err))
		}
		applied = append(applied, done...)
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
	}
	if len(applied) > 0 {
		c.settle(ctx, cli, applied, log)
	}
	if len(ops) > 0 {
		log.Info("static routes written", zap.Int("applied", len(applied)), zap.Int("ops", len(ops)),
			zap.Int("refused", len(refused)), zap.Int("failed", len(good)-len(applied)))
	}
	return applied, errors.Join(errs...)
}

// checkOps sorts ops into those that may be written and the refused ones
// (one error each); northd is NB's, as read now. In manual mode (strict)
// a row that changed since the plan is left to staleInCache, which says
// the plan is stale.
func checkOps(imp importResult, northd model.NorthdVersion, node string, ops []model.OVNOp, exists func(string) bool, strict bool) (good []checkedOp, refused []error) {
	routers := make(map[string]model.GatewayRouter, len(imp.Routers))
	for _, r := range imp.Routers {
		routers[r.Name] = r
	}
	owned := make(map[string]model.OVNRoute, len(imp.Owned))
	for _, r := range imp.Owned {
		owned[r.UUID] = r
	}
	for _, op := range ops {
		r := op.Route
		what := fmt.Sprintf("%s %s via %s on %s", op.Op, r.Prefix, r.NextHop, r.Router)
		refuse := func(format string, args ...any) {
			refused = append(refused, fmt.Errorf("%s refused: %s", what, fmt.Sprintf(format, args...)))
		}
		gr, ok := routers[r.Router]
		switch {
		case !ok:
			refuse("router %q is not a gateway router of node %s (GR_<network prefix>%s in NB); nothing written for it", r.Router, node, node)
			continue
		case gr.ForeignImport != "":
			refuse("%s", gr.ForeignImport)
			continue
		}
		switch op.Op {
		case model.OpAdd:
			if err := validRoute(r, northd); err != nil {
				refuse("%v", err)
				continue
			}
			good = append(good, checkedOp{op: op, router: gr})
		case model.OpReplace, model.OpDelete:
			row, mine := owned[r.UUID]
			switch {
			case r.UUID == "":
				refuse("no row UUID")
			case !mine && !exists(r.UUID):
				refuse("static route %s no longer exists", r.UUID)
			case !mine:
				refuse("static route %s is not owned by %s (external_ids has no %s=%s): ovnbgp never changes it", r.UUID, node, extIDOwner, node)
			case row.Router != r.Router:
				refuse("static route %s is on router %s, not %s", r.UUID, row.Router, r.Router)
			case !strict && (row.Prefix != r.Prefix || row.NextHop != r.NextHop):
				refuse("static route %s is now %s via %s: not written (the next plan starts from it)", r.UUID, row.Prefix, row.NextHop)
			case op.Op == model.OpReplace && validRoute(r, northd) != nil:
				refuse("%v", validRoute(r, northd))
			default:
				good = append(good, checkedOp{op: op, router: gr, row: row})
			}
		default:
			refuse("unknown operation %q (want add, replace or delete)", op.Op)
		}
	}
	return good, refused
}

// validRoute checks what a written row is made of: an IPv4 prefix via an
// IPv6 next hop only while northd takes one (plan decides the same from
// the snapshot; this holds if northd changed since).
func validRoute(r model.OVNRoute, northd model.NorthdVersion) error {
	mixed := r.Prefix.Addr().Is4() && r.NextHop.Is6() && !r.NextHop.Is4In6()
	switch {
	case !r.Prefix.IsValid():
		return errors.New("no prefix")
	case r.Prefix.Masked() != r.Prefix:
		return fmt.Errorf("prefix %s has host bits set", r.Prefix)
	case !r.NextHop.IsValid():
		return errors.New("no next hop")
	case mixed && !northd.MixedFamilyRoutes():
		who := "northd " + northd.String()
		if !northd.Known() {
			who = "northd (version unknown)"
		}
		return fmt.Errorf("next hop %s is IPv6 but the prefix %s is IPv4, and %s takes no such route (OVN 25.03 is the first that does)", r.NextHop, r.Prefix, who)
	case r.NextHop.Is4() != r.Prefix.Addr().Is4() && !mixed || r.NextHop.Is4In6():
		return fmt.Errorf("next hop %s is not of the family of %s", r.NextHop, r.Prefix)
	case r.NextHop.Zone() != "":
		return fmt.Errorf("next hop %s has a zone", r.NextHop)
	}
	return nil
}

// staleInCache checks a manual plan against the cache before anything is
// sent: each guarded router references exactly the guard's static routes,
// and each row to replace or delete is as the plan read it. The OVSDB waits
// in the transaction check the same on the server, where the cache may lag.
func staleInCache(rows nbRows, guards []model.OVNGuard, items []checkedOp) error {
	byUUID := make(map[string]routerRow, len(rows.Routers))
	for _, r := range rows.Routers {
		byUUID[r.UUID] = r
	}
	for _, g := range guards {
		r, ok := byUUID[g.RouterUUID]
		if !ok {
			return fmt.Errorf("%w: router %s (%s) is gone or was recreated since the plan read it: make a new plan", ErrStale, g.Router, g.RouterUUID)
		}
		want := slices.Sorted(slices.Values(g.StaticRoutes))
		if !slices.Equal(want, r.StaticRoutes) {
			return fmt.Errorf("%w: %s", ErrStale, routerStale(g.Router, want, r.StaticRoutes))
		}
	}
	for _, it := range items {
		if it.op.Op == model.OpAdd {
			continue
		}
		if msg := rowStale(it); msg != "" {
			return fmt.Errorf("%w: %s", ErrStale, msg)
		}
	}
	return nil
}

// routerStale says how a router's static routes moved since a plan.
func routerStale(router string, plan, now []string) string {
	var added, removed []string
	for _, id := range now {
		if !slices.Contains(plan, id) {
			added = append(added, id)
		}
	}
	for _, id := range plan {
		if !slices.Contains(now, id) {
			removed = append(removed, id)
		}
	}
	msg := fmt.Sprintf("router %s no longer has the static routes the plan read: make a new plan", router)
	if len(added)+len(removed) > 0 {
		msg += fmt.Sprintf(" (added since: %s; removed since: %s)", listOrNone(added), listOrNone(removed))
	}
	return msg
}

func listOrNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	if len(ids) > 5 {
		return strings.Join(ids[:5], ", ") + fmt.Sprintf(" and %d more", len(ids)-5)
	}
	return strings.Join(ids, ", ")
}

// rowStale says how an owned row differs from what a plan's replace or
// delete read, "" if it does not.
func rowStale(it checkedOp) string {
	want, now := it.op.Route, it.row
	same := want.Prefix == now.Prefix && want.NextHop == now.NextHop
	if it.op.Op == model.OpDelete {
		same = same && want.OutputPort == now.OutputPort && want.Rule == now.Rule
	}
	if same {
		return ""
	}
	return fmt.Sprintf("%s changed since the plan read it: make a new plan (plan: %s; now: %s)",
		rowName(want), describeRow(want), describeRow(now))
}

func rowName(r model.OVNRoute) string {
	return fmt.Sprintf("static route %s on %s", r.UUID, r.Router)
}

func describeRow(r model.OVNRoute) string {
	return fmt.Sprintf("%s via %s output_port %q rule %q", r.Prefix, r.NextHop, r.OutputPort, r.Rule)
}

// txn is one transaction and what each of its operations means.
type txn struct {
	ops []ovsdb.Operation
	// desc[i] says what ops[i] checks or does, for errors; stale[i] is
	// set for the waits of a manual plan (their failure: the plan is stale).
	desc  []string
	stale []bool
	items []checkedOp
	// mutOf is the index in ops of the static_routes mutation of each
	// router UUID.
	mutOf map[string]int
}

func (t *txn) add(op ovsdb.Operation, desc string, stale bool) int {
	t.ops = append(t.ops, op)
	t.desc = append(t.desc, desc)
	t.stale = append(t.stale, stale)
	return len(t.ops) - 1
}

func uuidCond(id string) ovsdb.Condition {
	return ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: id})
}

func uuidSet(ids []string) ovsdb.OvsSet {
	s := make([]any, len(ids))
	for i, id := range ids {
		s[i] = ovsdb.UUID{GoUUID: id}
	}
	return ovsdb.OvsSet{GoSet: s}
}

func optString(s string) ovsdb.OvsSet {
	if s == "" {
		return ovsdb.OvsSet{GoSet: []any{}}
	}
	return ovsdb.OvsSet{GoSet: []any{s}}
}

func strMap(kv ...string) ovsdb.OvsMap {
	m := map[any]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return ovsdb.OvsMap{GoMap: m}
}

// buildTxn makes the transaction of items: the waits (guards, then the
// rows to change), the inserts, the in-place updates, one static_routes
// mutation per router, then the row deletes (after their reference is
// gone). strict (manual mode) also waits for a deleted row's output_port
// and rule.
func buildTxn(node string, items []checkedOp, guards []model.OVNGuard, strict bool) txn {
	t := txn{items: items, mutOf: map[string]int{}}
	zero := 0
	for _, g := range guards {
		t.add(ovsdb.Operation{
			Op: ovsdb.OperationWait, Table: nbdb.LogicalRouterTable, Timeout: &zero,
			Where:   []ovsdb.Condition{uuidCond(g.RouterUUID)},
			Columns: []string{"static_routes"}, Until: string(ovsdb.WaitConditionEqual),
			Rows: []ovsdb.Row{{"static_routes": uuidSet(g.StaticRoutes)}},
		}, fmt.Sprintf("router %s no longer has the static routes the plan read: make a new plan", g.Router), true)
	}
	for _, it := range items {
		if it.op.Op == model.OpAdd {
			continue
		}
		id := it.op.Route.UUID
		where := []ovsdb.Condition{
			uuidCond(id),
			ovsdb.NewCondition("external_ids", ovsdb.ConditionIncludes, strMap(extIDOwner, node)),
			ovsdb.NewCondition("ip_prefix", ovsdb.ConditionEqual, it.row.Prefix.String()),
			ovsdb.NewCondition("nexthop", ovsdb.ConditionEqual, it.row.NextHop.String()),
		}
		desc := fmt.Sprintf("%s is no longer owned by %s as %s", rowName(it.op.Route), node, describeRow(it.row))
		if strict {
			want := it.op.Route
			where[2] = ovsdb.NewCondition("ip_prefix", ovsdb.ConditionEqual, want.Prefix.String())
			where[3] = ovsdb.NewCondition("nexthop", ovsdb.ConditionEqual, want.NextHop.String())
			if it.op.Op == model.OpDelete {
				where = append(where, ovsdb.NewCondition("output_port", ovsdb.ConditionEqual, optString(want.OutputPort)))
				if want.Rule != "" {
					where = append(where, ovsdb.NewCondition("external_ids", ovsdb.ConditionIncludes, strMap(extIDRule, want.Rule)))
				}
			}
			desc = fmt.Sprintf("%s changed since the plan read it: make a new plan", rowName(want))
		}
		t.add(ovsdb.Operation{
			Op: ovsdb.OperationWait, Table: nbdb.LogicalRouterStaticRouteTable, Timeout: &zero,
			Where: where, Columns: []string{"_uuid"}, Until: string(ovsdb.WaitConditionEqual),
			Rows: []ovsdb.Row{{"_uuid": ovsdb.UUID{GoUUID: id}}},
		}, desc, strict)
	}

	type mut struct{ ins, del []string }
	var order []string
	muts := map[string]*mut{}
	mutFor := func(router string) *mut {
		m, ok := muts[router]
		if !ok {
			m = &mut{}
			muts[router] = m
			order = append(order, router)
		}
		return m
	}
	for i, it := range items {
		r := it.op.Route
		switch it.op.Op {
		case model.OpAdd:
			name := fmt.Sprintf("ovnbgp_route_%d", i)
			ids := []string{extIDOwner, node}
			if r.Rule != "" {
				ids = append(ids, extIDRule, r.Rule)
			}
			row := ovsdb.Row{"ip_prefix": r.Prefix.String(), "nexthop": r.NextHop.String(), "external_ids": strMap(ids...)}
			if r.OutputPort != "" {
				row["output_port"] = r.OutputPort
			}
			t.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalRouterStaticRouteTable, UUIDName: name, Row: row},
				fmt.Sprintf("insert %s via %s on %s", r.Prefix, r.NextHop, r.Router), false)
			m := mutFor(it.router.UUID)
			m.ins = append(m.ins, name)
		case model.OpReplace:
			t.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: nbdb.LogicalRouterStaticRouteTable,
				Where: []ovsdb.Condition{uuidCond(r.UUID)}, Row: ovsdb.Row{"output_port": optString(r.OutputPort)}},
				"update "+rowName(r), false)
			muts := []ovsdb.Mutation{*ovsdb.NewMutation("external_ids", ovsdb.MutateOperationDelete, ovsdb.OvsSet{GoSet: []any{extIDRule}})}
			if r.Rule != "" {
				muts = append(muts, *ovsdb.NewMutation("external_ids", ovsdb.MutateOperationInsert, strMap(extIDRule, r.Rule)))
			}
			t.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterStaticRouteTable,
				Where: []ovsdb.Condition{uuidCond(r.UUID)}, Mutations: muts},
				"set the rule of "+rowName(r), false)
		case model.OpDelete:
			m := mutFor(it.router.UUID)
			m.del = append(m.del, r.UUID)
		}
	}
	names := map[string]string{}
	for _, it := range items {
		names[it.router.UUID] = it.router.Name
	}
	for _, router := range order {
		m := muts[router]
		var ms []ovsdb.Mutation
		if len(m.ins) > 0 {
			ms = append(ms, *ovsdb.NewMutation("static_routes", ovsdb.MutateOperationInsert, uuidSet(m.ins)))
		}
		if len(m.del) > 0 {
			ms = append(ms, *ovsdb.NewMutation("static_routes", ovsdb.MutateOperationDelete, uuidSet(m.del)))
		}
		t.mutOf[router] = t.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
			Where: []ovsdb.Condition{uuidCond(router)}, Mutations: ms},
			"change the static routes of router "+names[router], false)
	}
	for _, it := range items {
		if it.op.Op == model.OpDelete {
			t.add(ovsdb.Operation{Op: ovsdb.OperationDelete, Table: nbdb.LogicalRouterStaticRouteTable,
				Where: []ovsdb.Condition{uuidCond(it.op.Route.UUID)}}, "delete "+rowName(it.op.Route), false)
		}
	}
	return t
}

// transact sends t and returns the operations it applied. A failed
// operation fails the whole transaction (OVSDB): the error names the first
// one, and says the plan is stale when a manual plan's wait failed.
func (c *Client) transact(ctx context.Context, cli client.Client, t txn, batch int, hook func(int, []ovsdb.Operation) []ovsdb.Operation) ([]model.OVNOp, error) {
	ops := t.ops
	if hook != nil {
		ops = hook(batch, slices.Clone(ops))
	}
	if len(ops) == 0 {
		return nil, nil
	}
	res, err := cli.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		// The hook may have put operations in front: align from the end.
		off := len(ops) - len(t.ops)
		for i, r := range res {
			if r.Error == "" || i >= len(ops) {
				continue
			}
			j := i - off
			if j < 0 || j >= len(t.ops) {
				return nil, fmt.Errorf("operation %d: %s: %s", i, r.Error, r.Details)
			}
			if t.stale[j] {
				return nil, fmt.Errorf("%w: %s (nothing written)", ErrStale, t.desc[j])
			}
			return nil, fmt.Errorf("%s: %s %s (nothing in this transaction written)", t.desc[j], r.Error, r.Details)
		}
		return nil, fmt.Errorf("nothing in this transaction written: %w", err)
	}
	// A router deleted meanwhile: its mutation matched nothing, and the
	// rows inserted for it were garbage-collected with the transaction.
	off := len(ops) - len(t.ops)
	var gone []string
	var done []model.OVNOp
	for _, it := range t.items {
		if i, ok := t.mutOf[it.router.UUID]; ok && res[i+off].Count == 0 {
			if !slices.Contains(gone, it.router.Name) {
				gone = append(gone, it.router.Name)
			}
			continue
		}
		done = append(done, it.op)
	}
	if len(gone) > 0 {
		return done, fmt.Errorf("router(s) %s vanished before the write: their operations are not applied", strings.Join(gone, ", "))
	}
	return done, nil
}

// cacheHasRoute reports whether the cache holds the static route id.
func cacheHasRoute(cli client.Client, id string) bool {
	t := cli.Cache().Table(nbdb.LogicalRouterStaticRouteTable)
	return t != nil && t.Row(id) != nil
}

// settle waits (at most cacheWait) until the cache shows what done wrote,
// then refreshes the rows Snapshot reads, so that the next plan starts from
// it rather than from the state before the write.
func (c *Client) settle(ctx context.Context, cli client.Client, done []model.OVNOp, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	for {
		rows, err := readRows(ctx, cli, c.memo)
		if err == nil && showsAll(rows, cli, done) {
			if c.install(cli, rows) {
				c.notify()
			}
			return
		}
		select {
		case <-ctx.Done():
			log.Debug("nb cache does not show the static routes written yet", zap.Error(ctx.Err()))
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// showsAll reports whether rows show every operation in done.
func showsAll(rows nbRows, cli client.Client, done []model.OVNOp) bool {
	byKey := map[model.OVNRouteKey][]routeRow{}
	byUUID := map[string]routeRow{}
	for _, r := range rows.Routes {
		byUUID[r.UUID] = r
		p, err1 := netip.ParsePrefix(r.IPPrefix)
		a, err2 := netip.ParseAddr(r.Nexthop)
		if err1 == nil && err2 == nil {
			k := model.OVNRouteKey{Router: r.Router, Prefix: p, NextHop: a}
			byKey[k] = append(byKey[k], r)
		}
	}
	for _, op := range done {
		r := op.Route
		switch op.Op {
		case model.OpAdd:
			if len(byKey[r.Key()]) == 0 {
				return false
			}
		case model.OpReplace:
			row, ok := byUUID[r.UUID]
			if !ok || row.OutputPort != r.OutputPort || row.Rule != r.Rule {
				return false
			}
		case model.OpDelete:
			if cacheHasRoute(cli, r.UUID) {
				return false
			}
		}
	}
	return true
}
