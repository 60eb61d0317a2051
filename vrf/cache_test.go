package vrf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// ipRoute is one route as `ip -j route show table all` prints it.
type ipRoute struct {
	Type     string `json:"type"`
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Via      ipVia  `json:"via"`
	Dev      string `json:"dev"`
	Table    string `json:"table"`
	Protocol string `json:"protocol"`
	Metric   *int   `json:"metric"`
	Nexthops []struct {
		Gateway string `json:"gateway"`
		Via     ipVia  `json:"via"`
		Dev     string `json:"dev"`
	} `json:"nexthops"`
}

// ipVia is the next hop of another family (RTA_VIA) as iproute2 prints it:
// an IPv4 route's IPv6 next hop (issue 20, RFC 8950).
type ipVia struct {
	Family string `json:"family"`
	Host   string `json:"host"`
}

// kernelState is the truth, read with iproute2 (not with the package under
// test): ovnbgp's unicast routes at the default metric, merged per key, and
// the keys held by routes not ours, in the given tables.
type kernelState struct {
	ours    map[model.KernelRouteKey]model.KernelRoute
	foreign map[model.KernelRouteKey]bool
}

func (n *testNS) kernel(tables []uint32) kernelState {
	n.t.Helper()
	st := kernelState{ours: map[model.KernelRouteKey]model.KernelRoute{}, foreign: map[model.KernelRouteKey]bool{}}
	for _, fam := range []string{"-4", "-6"} {
		var list []ipRoute
		out := n.ip("-j", fam, "route", "show", "table", "all")
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			n.t.Fatalf("ip -j route: %v: %s", err, out)
		}
		for _, r := range list {
			t, err := strconv.ParseUint(r.Table, 10, 32)
			if err != nil || !slices.Contains(tables, uint32(t)) {
				continue
			}
			var p netip.Prefix
			switch {
			case r.Dst == "default" && fam == "-4":
				p = pfx("0.0.0.0/0")
			case r.Dst == "default":
				p = pfx("::/0")
			case strings.Contains(r.Dst, "/"):
				p = pfx(r.Dst)
			default:
				a := netip.MustParseAddr(r.Dst)
				p = netip.PrefixFrom(a, a.BitLen())
			}
			metric := 0
			if r.Metric != nil {
				metric = *r.Metric
			}
			if metric != 0 && !(fam == "-6" && metric == 1024) {
				continue
			}
			k := model.KernelRouteKey{Table: uint32(t), Prefix: p}
			if r.Protocol != "200" && r.Protocol != "ovnbgp" {
				st.foreign[k] = true
				continue
			}
			if r.Type != "" && r.Type != "unicast" {
				continue
			}
			kr, ok := st.ours[k]
			if !ok {
				kr = model.KernelRoute{Table: k.Table, Prefix: p, Protocol: proto}
			}
			if r.Gateway != "" || r.Via.Host != "" || r.Dev != "" {
				kr.NextHops = append(kr.NextHops, ipHop(r.Gateway+r.Via.Host, r.Dev))
			}
			for _, h := range r.Nexthops {
				kr.NextHops = append(kr.NextHops, ipHop(h.Gateway+h.Via.Host, h.Dev))
			}
			st.ours[k] = kr
		}
	}
	// Like Snapshot: the next hops of our routes at a key, once each.
	for k, r := range st.ours {
		slices.SortFunc(r.NextHops, func(a, b model.NextHop) int {
			if c := a.Addr.Compare(b.Addr); c != 0 {
				return c
			}
			return strings.Compare(a.Dev, b.Dev)
		})
		r.NextHops = slices.Compact(r.NextHops)
		st.ours[k] = r
	}
	return st
}

func ipHop(gw, dev string) model.NextHop {
	h := model.NextHop{Dev: dev}
	if gw != "" {
		h.Addr = netip.MustParseAddr(gw)
	}
	return h
}

func (st kernelState) routes() []model.KernelRoute {
	var out []model.KernelRoute
	for _, r := range st.ours {
		out = append(out, r)
	}
	return out
}

func (st kernelState) foreignKeys() []model.KernelRouteKey {
	var out []model.KernelRouteKey
	for k := range st.foreign {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b model.KernelRouteKey) int {
		if a.Table != b.Table {
			return int(a.Table) - int(b.Table)
		}
		return strings.Compare(a.Prefix.String(), b.Prefix.String())
	})
	return out
}

// changedKeys are the keys whose state differs between two reads.
func changedKeys(a, b kernelState) []model.KernelRouteKey {
	seen := map[model.KernelRouteKey]bool{}
	var out []model.KernelRouteKey
	check := func(k model.KernelRouteKey) {
		if seen[k] {
			return
		}
		seen[k] = true
		ra, oka := a.ours[k]
		rb, okb := b.ours[k]
		if oka != okb || a.foreign[k] != b.foreign[k] || (oka && cmp.Diff(ra, rb, sortRoutes) != "") {
			out = append(out, k)
		}
	}
	for _, s := range []kernelState{a, b} {
		for k := range s.ours {
			check(k)
		}
		for k := range s.foreign {
			check(k)
		}
	}
	return out
}

var sortKeys = cmp.Options{
	cmpopts.SortSlices(func(a, b model.KernelRouteKey) bool {
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Prefix.String() < b.Prefix.String()
	}),
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// waitCache waits until the manager's view (Snapshot, and Routes of every
// key of the universe) equals what iproute2 reads, and returns that state.
// The cache follows the kernel's events, so it may lag a moment behind: the
// wait ends on agreement, and fails after a generous timeout.
func waitCache(t *testing.T, n *testNS, m *vrf.Manager, tables []uint32, keys []model.KernelRouteKey, why string) kernelState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := n.kernel(tables)
		host, err := m.Snapshot()
		if err != nil {
			t.Fatalf("%s: Snapshot: %v", why, err)
		}
		ours, foreign, err := m.Routes(keys)
		if err != nil {
			t.Fatalf("%s: Routes: %v", why, err)
		}
		var snapForeign []model.KernelRouteKey
		for _, k := range host.Foreign {
			if slices.Contains(tables, k.Table) {
				snapForeign = append(snapForeign, k)
			}
		}
		d1 := cmp.Diff(st.routes(), host.Routes, sortRoutes)
		d2 := cmp.Diff(st.foreignKeys(), snapForeign, sortKeys)
		d3 := cmp.Diff(st.routes(), ours, sortRoutes)
		d4 := cmp.Diff(st.foreignKeys(), foreign, sortKeys)
		if d1 == "" && d2 == "" && d3 == "" && d4 == "" {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the cache does not match the kernel after 30s:\nSnapshot routes (-kernel +cache):\n%s\nSnapshot foreign (-kernel +cache):\n%s\nRoutes ours (-kernel +cache):\n%s\nRoutes foreign (-kernel +cache):\n%s\nip route:\n%s",
				why, d1, d2, d3, d4, n.ip("-d", "route", "show", "table", "all"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCacheTruth walks random sequences of ovnbgp's applies and of foreign
// `ip route` adds, appends, replaces and deletes (of routes ours and not
// ours, IPv4 and IPv6, multipath, single next hops of a multipath route),
// and now and then an address removed and put back (the kernel then drops
// IPv4 routes without an event). After each step, Snapshot and Routes of
// every key equal a fresh read of the kernel with iproute2, and every key
// that changed since the previous step was returned by TakeChanges (or All
// was). OVNBGP_WALK_SEED replays a walk.
func TestCacheTruth(t *testing.T) {
	n := newNS(t)
	addForeign(n)
	m := n.open(nil)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OVNBGP_WALK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("OVNBGP_WALK_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (OVNBGP_WALK_SEED=%d replays this walk)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x51ed27))

	tables := []uint32{100, 101, 1000}
	v4 := []string{"0.0.0.0/0", "10.1.0.0/16", "10.2.0.0/16", "10.2.0.0/24", "10.3.0.0/16", "203.0.113.0/24", "10.4.4.4/32"}
	v6 := []string{"::/0", "2001:db8:1::/48", "2001:db8:2::/48", "2001:db8:2::/64", "2001:db8:f::/48"}
	gw4 := []model.NextHop{hop("192.0.2.2", "a0"), hop("192.0.2.3", "a0"), hop("198.51.100.2", "b0"), hop("198.51.100.3", "b0")}
	gw6 := []model.NextHop{hop("2001:db8:a::2", "a0"), hop("2001:db8:a::3", "a0"), hop("2001:db8:b::2", "b0"), hop("2001:db8:b::3", "b0")}
	var keys []model.KernelRouteKey
	for _, tb := range tables {
		for _, p := range slices.Concat(v4, v6) {
			keys = append(keys, model.KernelRouteKey{Table: tb, Prefix: pfx(p)})
		}
	}
	pickKey := func() (model.KernelRouteKey, []model.NextHop) {
		k := keys[rng.IntN(len(keys))]
		if k.Prefix.Addr().Is4() {
			return k, gw4
		}
		return k, gw6
	}
	pickHops := func(all []model.NextHop) []model.NextHop {
		perm := rng.Perm(len(all))
		var out []model.NextHop
		for _, i := range perm[:1+rng.IntN(len(all))] {
			out = append(out, all[i])
		}
		return out
	}
	ipArgs := func(k model.KernelRouteKey) []string {
		args := []string{"-6"}
		if k.Prefix.Addr().Is4() {
			args[0] = "-4"
		}
		return args
	}
	hopArgs := func(hops []model.NextHop) []string {
		if len(hops) == 1 {
			return []string{"via", hops[0].Addr.String(), "dev", hops[0].Dev}
		}
		var out []string
		for _, h := range hops {
			out = append(out, "nexthop", "via", h.Addr.String(), "dev", h.Dev)
		}
		return out
	}
	foreignProto := []string{"static", "bgp", "kernel", "boot"}

	prev := waitCache(t, n, m, tables, keys, "start")
	m.TakeChanges()
	var kinds [8]int
	const steps = 150
	for step := range steps {
		why := ""
		switch c := rng.IntN(10); {
		case c < 3: // our apply: random ops on random keys
			var ops []model.KernelOp
			for range 1 + rng.IntN(6) {
				k, all := pickKey()
				r := model.KernelRoute{Table: k.Table, Prefix: k.Prefix, NextHops: pickHops(all), Protocol: proto}
				switch rng.IntN(3) {
				case 0:
					ops = append(ops, add(r))
				case 1:
					ops = append(ops, rep(r))
				default:
					ops = append(ops, del(r))
				}
			}
			applied, err := m.Apply(context.Background(), ops) // refusals of foreign keys are expected
			var desc []string
			for _, op := range ops {
				desc = append(desc, fmt.Sprintf("%s %d %s via %v", op.Op, op.Route.Table, op.Route.Prefix, op.Route.NextHops))
			}
			why = fmt.Sprintf("apply [%s]: %d applied (err %v)", strings.Join(desc, "; "), len(applied), err)
			kinds[0]++
		case c < 5: // a foreign add, or an add of our protocol by someone else
			k, all := pickKey()
			p := foreignProto[rng.IntN(len(foreignProto))]
			if rng.IntN(4) == 0 {
				p = "200"
			}
			args := slices.Concat(ipArgs(k), []string{"route", "add", k.Prefix.String(), "table", strconv.Itoa(int(k.Table)), "proto", p}, hopArgs(pickHops(all)))
			_, err := n.tryIP(args...)
			why = fmt.Sprintf("ip %s (err %v)", strings.Join(args, " "), err)
			kinds[1]++
		case c < 6: // replace: may take our key over, or take a foreign one
			k, all := pickKey()
			p := foreignProto[rng.IntN(len(foreignProto))]
			if rng.IntN(2) == 0 {
				p = "200"
			}
			args := slices.Concat(ipArgs(k), []string{"route", "replace", k.Prefix.String(), "table", strconv.Itoa(int(k.Table)), "proto", p}, hopArgs(pickHops(all)))
			_, err := n.tryIP(args...)
			why = fmt.Sprintf("ip %s (err %v)", strings.Join(args, " "), err)
			kinds[2]++
		case c < 7: // append (IPv4: a second route at the key; IPv6: another next hop)
			k, all := pickKey()
			p := foreignProto[rng.IntN(len(foreignProto))]
			if k.Prefix.Addr().Is6() || rng.IntN(2) == 0 {
				p = "200"
			}
			h := all[rng.IntN(len(all))]
			args := slices.Concat(ipArgs(k), []string{"route", "append", k.Prefix.String(), "table", strconv.Itoa(int(k.Table)), "proto", p}, hopArgs([]model.NextHop{h}))
			_, err := n.tryIP(args...)
			why = fmt.Sprintf("ip %s (err %v)", strings.Join(args, " "), err)
			kinds[3]++
		case c < 9: // delete: a whole key, or one next hop of it
			k, all := pickKey()
			args := slices.Concat(ipArgs(k), []string{"route", "del", k.Prefix.String(), "table", strconv.Itoa(int(k.Table))})
			if rng.IntN(2) == 0 {
				h := all[rng.IntN(len(all))]
				args = append(args, "via", h.Addr.String(), "dev", h.Dev)
				kinds[5]++
			} else {
				kinds[4]++
			}
			_, err := n.tryIP(args...)
			why = fmt.Sprintf("ip %s (err %v)", strings.Join(args, " "), err)
		default: // an address goes and comes back: IPv4 routes through it vanish silently
			n.ip("addr", "del", "198.51.100.1/24", "dev", "b0")
			waitCache(t, n, m, tables, keys, fmt.Sprintf("step %d: address removed", step))
			n.ip("addr", "add", "198.51.100.1/24", "dev", "b0")
			why = "address 198.51.100.1/24 removed and added"
			kinds[6]++
		}
		cur := waitCache(t, n, m, tables, keys, fmt.Sprintf("step %d: %s", step, why))
		hc := m.TakeChanges()
		if strings.HasPrefix(why, "address") && !hc.Links && !hc.All {
			t.Fatalf("step %d: %s: TakeChanges says no link change", step, why)
		}
		// Our own Apply is not reported (the daemon knows what it wrote);
		// every other change must be.
		if !hc.All && !strings.HasPrefix(why, "apply") {
			for _, k := range changedKeys(prev, cur) {
				if !slices.Contains(hc.Routes, k) {
					t.Fatalf("step %d: %s: key %v changed but TakeChanges did not return it (returned %v)", step, why, k, hc.Routes)
				}
			}
		} else {
			kinds[7]++
		}
		prev = cur
	}
	t.Logf("%d steps: applies %d, adds %d, replaces %d, appends %d, deletes %d, hop deletes %d, address flaps %d, All %d",
		steps, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], kinds[5], kinds[6], kinds[7])
}

// TestDeletedRouteReported: a route of ours deleted by someone else shows
// up in TakeChanges (and notify is called), so the daemon puts it back;
// Routes then says it is gone. A foreign route appearing at a key of a
// watched table shows up too, and Routes names it foreign. Our own
// writes (adds, replaces, deletes through Apply) are not reported.
func TestDeletedRouteReported(t *testing.T) {
	n := newNS(t)
	pokes := make(chan struct{}, 1)
	m := n.open(pokes)
	v4 := route(100, "10.50.0.0/16", hop("192.0.2.2", "a0"))
	v6 := route(100, "2001:db8:50::/48", hop("2001:db8:a::2", "a0"), hop("2001:db8:b::2", "b0"))
	other := route(100, "10.52.0.0/16", hop("192.0.2.2", "a0"))
	ownWritesQuiet := func(why string) {
		t.Helper()
		// Routes syncs: every echo of our writes is in the cache.
		if _, _, err := m.Routes([]model.KernelRouteKey{v4.Key(), v6.Key(), other.Key()}); err != nil {
			t.Fatal(err)
		}
		if hc := m.TakeChanges(); len(hc.Routes) > 0 || hc.All || hc.Links {
			t.Errorf("%s: our own writes are reported by TakeChanges: %+v", why, hc)
		}
	}
	mustApply(t, m, add(v4), add(v6), add(other))
	ownWritesQuiet("adds")
	mustApply(t, m, rep(route(100, "10.52.0.0/16", hop("192.0.2.3", "a0"))))
	ownWritesQuiet("a replace")
	mustApply(t, m, del(other))
	ownWritesQuiet("a delete")
	for _, c := range []struct {
		why  string
		args []string
		key  model.KernelRouteKey
	}{
		{"ip route del of our IPv4 route", []string{"route", "del", "10.50.0.0/16", "table", "100"}, v4.Key()},
		{"ip route del of our IPv6 multipath route", []string{"-6", "route", "del", "2001:db8:50::/48", "table", "100"}, v6.Key()},
		{"a foreign route in table 100", []string{"route", "add", "10.51.0.0/16", "via", "192.0.2.9", "table", "100", "proto", "static"},
			model.KernelRouteKey{Table: 100, Prefix: pfx("10.51.0.0/16")}},
	} {
		drain(pokes)
		n.ip(c.args...)
		var got []model.KernelRouteKey
		for deadline := time.Now().Add(30 * time.Second); !slices.Contains(got, c.key); {
			select {
			case <-pokes:
			case <-time.After(time.Until(deadline)):
				t.Fatalf("%s: TakeChanges never returned %v within 30s (got %v)", c.why, c.key, got)
			}
			hc := m.TakeChanges()
			got = append(got, hc.Routes...)
		}
		ours, foreign, err := m.Routes([]model.KernelRouteKey{c.key})
		if err != nil {
			t.Fatal(err)
		}
		if len(ours) != 0 {
			t.Errorf("%s: Routes still has ours: %+v", c.why, ours)
		}
		if wantForeign := strings.Contains(c.why, "foreign"); wantForeign != (len(foreign) == 1) {
			t.Errorf("%s: Routes foreign = %v", c.why, foreign)
		}
	}
	// The daemon puts them back.
	mustApply(t, m, add(v4), add(v6))
	ownWritesQuiet("putting them back")
	ours, _, err := m.Routes([]model.KernelRouteKey{v4.Key(), v6.Key()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]model.KernelRoute{v4, v6}, ours, sortRoutes); diff != "" {
		t.Errorf("Routes after putting them back (-want +got):\n%s", diff)
	}
}

// TestRoutesUnaskedTable: Routes answers for a key in a table nobody
// asked about or wrote to before (a foreign route there), and the table is
// watched from then on: a change there is reported.
func TestRoutesUnaskedTable(t *testing.T) {
	n := newNS(t)
	n.ip("route", "add", "10.60.0.0/16", "via", "192.0.2.2", "table", "2000", "proto", "static")
	pokes := make(chan struct{}, 1)
	m := n.open(pokes)
	k := model.KernelRouteKey{Table: 2000, Prefix: pfx("10.60.0.0/16")}
	ours, foreign, err := m.Routes([]model.KernelRouteKey{k, {Table: 2001, Prefix: pfx("10.61.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != 0 || !slices.Equal(foreign, []model.KernelRouteKey{k}) {
		t.Fatalf("Routes = %v, %v; want no route of ours and %v foreign", ours, foreign, k)
	}
	m.TakeChanges()
	drain(pokes)
	n.ip("route", "del", "10.60.0.0/16", "table", "2000")
	waitPoke(t, pokes, "a foreign route deleted in a table Routes was asked about")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if slices.Contains(m.TakeChanges().Routes, k) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TakeChanges never returned %v", k)
		}
	}
}
