package labnb

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// StaticRoute is a static route for RawInsertStaticRoutes.
type StaticRoute struct {
	Prefix     netip.Prefix
	NextHop    netip.Addr
	OutputPort string
}

// RawInsertStaticRoutes inserts routes into the router named router with
// one plain libovsdb transaction: every row with a named UUID, then one
// mutation of the router's static_routes. It is the baseline the OVN import
// benchmark compares ovn.Client.ApplyRoutes with (bench/), and marks the
// rows with external_ids ovnbgp.io/owner=node like ovnbgp does. It returns
// how long the transaction took, from sending it to its checked reply.
//
// With monitor, the client first monitors Logical_Router and
// Logical_Router_Static_Route, as a daemon that reads what it writes must:
// the server then also sends every new row back, and libovsdb decodes them
// into its cache before it reads the transaction's reply.
func RawInsertStaticRoutes(ctx context.Context, endpoint, router, node string, routes []StaticRoute, monitor bool, log *zap.Logger) (time.Duration, error) {
	var took time.Duration
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		if monitor {
			if _, err := cli.Monitor(ctx, cli.NewMonitor(
				client.WithTable(&nbdb.LogicalRouter{}), client.WithTable(&nbdb.LogicalRouterStaticRoute{}))); err != nil {
				return fmt.Errorf("monitor: %w", err)
			}
		}
		ops := make([]ovsdb.Operation, 0, len(routes)+1)
		refs := make([]any, 0, len(routes))
		for i, r := range routes {
			name := fmt.Sprintf("raw_route_%d", i)
			row := ovsdb.Row{
				"ip_prefix": r.Prefix.String(), "nexthop": r.NextHop.String(),
				"external_ids": ovsdb.OvsMap{GoMap: map[any]any{"ovnbgp.io/owner": node, "ovnbgp.io/rule": "raw"}},
			}
			if r.OutputPort != "" {
				row["output_port"] = r.OutputPort
			}
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.LogicalRouterStaticRouteTable, UUIDName: name, Row: row})
			refs = append(refs, ovsdb.UUID{GoUUID: name})
		}
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
			Where:     []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, router)},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("static_routes", ovsdb.MutateOperationInsert, ovsdb.OvsSet{GoSet: refs})}})
		start := time.Now()
		res, err := cli.Transact(ctx, ops...)
		if err != nil {
			return err
		}
		if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
			return err
		}
		took = time.Since(start)
		if res[len(ops)-1].Count != 1 {
			return fmt.Errorf("no router %q", router)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("raw insert of %d static routes into %s: %w", len(routes), router, err)
	}
	return took, nil
}

// RouterRoute is one Logical_Router_Static_Route row of a router, as
// RouterStaticRoutes reads it.
type RouterRoute struct {
	Prefix     string
	NextHop    string
	OutputPort string
	// ExternalIDs holds ovnbgp.io/owner and ovnbgp.io/rule on ovnbgp's
	// rows.
	ExternalIDs map[string]string
}

// RouterStaticRoutes reads the static routes of the router named router
// from the NB at endpoint, in the order of the router's static_routes
// column, by prefix, straight from the database: what
// `ovnbgp lab` shows as what OVN holds.
func RouterStaticRoutes(ctx context.Context, endpoint, router string, log *zap.Logger) ([]RouterRoute, error) {
	var out []RouterRoute
	err := withWriter(ctx, endpoint, log, func(ctx context.Context, cli client.Client) error {
		sel := []ovsdb.Operation{
			{Op: ovsdb.OperationSelect, Table: nbdb.LogicalRouterTable, Columns: []string{"static_routes"},
				Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, router)}},
			{Op: ovsdb.OperationSelect, Table: nbdb.LogicalRouterStaticRouteTable, Where: []ovsdb.Condition{},
				Columns: []string{"_uuid", "ip_prefix", "nexthop", "output_port", "external_ids"}},
		}
		res, err := cli.Transact(ctx, sel...)
		if err != nil {
			return err
		}
		if _, err := ovsdb.CheckOperationResults(res, sel); err != nil {
			return err
		}
		if len(res[0].Rows) != 1 {
			return fmt.Errorf("%d routers named %s", len(res[0].Rows), router)
		}
		var refs []string
		switch v := res[0].Rows[0]["static_routes"].(type) {
		case ovsdb.OvsSet:
			for _, u := range v.GoSet {
				if id, ok := u.(ovsdb.UUID); ok {
					refs = append(refs, id.GoUUID)
				}
			}
		case ovsdb.UUID:
			refs = append(refs, v.GoUUID)
		}
		rows := make(map[string]ovsdb.Row, len(res[1].Rows))
		for _, r := range res[1].Rows {
			if id, ok := r["_uuid"].(ovsdb.UUID); ok {
				rows[id.GoUUID] = r
			}
		}
		for _, id := range refs {
			r, ok := rows[id]
			if !ok {
				continue
			}
			rr := RouterRoute{ExternalIDs: map[string]string{}}
			rr.Prefix, _ = r["ip_prefix"].(string)
			rr.NextHop, _ = r["nexthop"].(string)
			switch p := r["output_port"].(type) {
			case string:
				rr.OutputPort = p
			case ovsdb.OvsSet:
				if len(p.GoSet) == 1 {
					rr.OutputPort, _ = p.GoSet[0].(string)
				}
			}
			if m, ok := r["external_ids"].(ovsdb.OvsMap); ok {
				for k, v := range m.GoMap {
					ks, _ := k.(string)
					vs, _ := v.(string)
					rr.ExternalIDs[ks] = vs
				}
			}
			out = append(out, rr)
		}
		slices.SortFunc(out, func(a, b RouterRoute) int { return strings.Compare(a.Prefix, b.Prefix) })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the static routes of %s: %w", router, err)
	}
	return out, nil
}
