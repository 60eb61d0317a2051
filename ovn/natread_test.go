package ovn

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// TestReadNATsByRowRandom: through a random sequence of NB transactions
// on NAT rows and the routers' nat columns (EgressIP SNATs and others
// inserted on a gateway router of node1 or node2 or of the blue network,
// their external_ip or name changed, moved to another router, held by a
// second router, dropped from their router and so gone), the rows the
// client reads row by row are after every step what a full read of the
// cache gives, and the snapshot built from them (egress IPs, protected
// addresses, problems) is the one the builders without the index
// (buildEgressIPs, natProtected) make from those rows.
func TestReadNATsByRowRandom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := zap.NewNop()
	// A real ovsdb-server: a NAT row no router references is gone at
	// the commit (NAT is not a root table).
	srv := ovsdbtest.Start(t, "")
	if err := labnb.Topology(ctx, srv.Endpoint(), "node1", log); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, config.OVN{Northbound: srv.Endpoint()}, log, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli := waitSession(t, c)
	var routers []string // the topology's, GR_node1 twice
	for _, m := range cli.Cache().Table(nbdb.LogicalRouterTable).RowsShallow() {
		routers = append(routers, m.(*nbdb.LogicalRouter).Name)
	}
	slices.Sort(routers)
	routers = append(routers, "GR_node1")
	ips := []string{"172.18.0.100", "172.18.0.101", "172.18.0.102", "fd00:18::5", "127.0.0.1", "bogus"}
	names := []string{"eip1_ns1/pod1", "eip1_ns1/pod2", "eip2_ns2/pod1", "badname"}
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	held := map[string][]string{} // NAT UUID -> the routers holding it, as written here
	bm := &buildMemo{}
	for step := range 80 {
		var ops []ovsdb.Operation
		mutate := func(router, mutator, uuid string) ovsdb.Operation {
			return ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbdb.LogicalRouterTable,
				Where:     []ovsdb.Condition{{Column: "name", Function: ovsdb.ConditionEqual, Value: router}},
				Mutations: []ovsdb.Mutation{{Column: "nat", Mutator: ovsdb.Mutator(mutator), Value: ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: uuid}}}}}}
		}
		uuids := slices.Sorted(func(yield func(string) bool) {
			for u := range held {
				if !yield(u) {
					return
				}
			}
		})
		inserted := false
		for range 1 + r.IntN(3) {
			op := r.IntN(6)
			if len(uuids) == 0 || op == 0 && !inserted {
				if inserted {
					continue
				}
				inserted = true // one per transaction: its named UUID
				kind := "EgressIP"
				if r.IntN(5) == 0 {
					kind = "Other"
				}
				ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.NATTable, UUIDName: "new", Row: ovsdb.Row{
					"type": "snat", "external_ip": pick(ips), "logical_ip": "10.128.0.5",
					"external_ids": ovsdb.OvsMap{GoMap: map[any]any{"k8s.ovn.org/owner-type": kind, "k8s.ovn.org/name": pick(names),
						"k8s.ovn.org/owner-controller": "default-network-controller"}}}},
					mutate(pick(routers), string(ovsdb.MutateOperationInsert), "new"))
				continue
			}
			u := pick(uuids)
			switch op {
			case 1: // changed
				ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: nbdb.NATTable,
					Where: []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: u}}},
					Row:   ovsdb.Row{"external_ip": pick(ips), "external_ids": ovsdb.OvsMap{GoMap: map[any]any{"k8s.ovn.org/owner-type": "EgressIP", "k8s.ovn.org/name": pick(names)}}}})
			case 2: // moved
				// Referenced by the new router first: a row no router
				// holds is gone.
				to := pick(routers)
				ops = append(ops, mutate(to, string(ovsdb.MutateOperationInsert), u))
				for _, from := range held[u] {
					if from != to {
						ops = append(ops, mutate(from, string(ovsdb.MutateOperationDelete), u))
					}
				}
				held[u] = []string{to}
			case 3: // held by another router too
				to := pick(routers)
				ops = append(ops, mutate(to, string(ovsdb.MutateOperationInsert), u))
				if !slices.Contains(held[u], to) {
					held[u] = append(held[u], to)
				}
			default: // gone
				for _, from := range held[u] {
					ops = append(ops, mutate(from, string(ovsdb.MutateOperationDelete), u))
				}
				delete(held, u)
			}
			uuids = slices.DeleteFunc(uuids, func(x string) bool { return x == u })
		}
		res, err := cli.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if inserted {
			for i, op := range ops {
				if op.Op == ovsdb.OperationInsert {
					held[res[i].UUID.GoUUID] = []string{ops[i+1].Where[0].Value.(string)}
				}
			}
		}
		// Every event is read in the end: the rows read by row become
		// what a full read of the cache gives, or the test fails.
		var got, want nbRows
		for deadline := time.Now().Add(10 * time.Second); ; {
			c.memo.mu.Lock()
			idle := reflect.DeepEqual(c.memo.version, c.memo.lastVer)
			gen := c.memo.gen
			c.memo.mu.Unlock()
			c.mu.Lock()
			got = c.rows
			c.mu.Unlock()
			if want, err = readRows(ctx, cli, nil); err != nil {
				t.Fatal(err)
			}
			if idle && got.gen == gen && reflect.DeepEqual(got.NATs, want.NATs) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("step %d: rows read by row\n%+v\nfull read\n%+v", step, got.NATs, want.NATs)
			}
			time.Sleep(5 * time.Millisecond)
		}
		plain := want
		plain.eips, plain.vips = nil, nil
		for _, node := range []string{"node1", "node2"} {
			if g, w := buildNBMemo(got, node, bm), buildNB(plain, node); !reflect.DeepEqual(g, w) {
				t.Fatalf("step %d %s: snapshot with the index\n%+v\nwithout\n%+v", step, node, g, w)
			}
		}
	}
}
