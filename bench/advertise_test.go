package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Issue 7, item 8: egress IPs and Service VIPs (loadBalancerIP), as
// OVN-Kubernetes writes them into NB (docs/ovn-nb.md, "Advertise: egress
// IPs and Service VIPs").

// The knobs of these jobs.
const (
	// envAdvChanges is the number of measured changes of
	// BenchmarkAdvertiseChange (default 200).
	envAdvChanges = "OVNBGP_BENCH_ADV_CHANGES"
	// envAdvBase lists how many egress IPs + VIPs the node advertises
	// before them, a run each (default "1000,10000", half each).
	envAdvBase = "OVNBGP_BENCH_ADV_BASE"
	// envAdvProfile names files (FILE-BASE) for CPU profiles of ovnbgp
	// over BenchmarkAdvertiseChange's changes (8 s, and FILE-BASE-allocs
	// for what they allocate over the same 8 s; the pprof build and
	// OVNBGP_PPROF, as profileDaemon says), and FILE-bulk over
	// BenchmarkAdvertiseBulk's add when OVNBGP_BENCH_BULKVIP names one size.
	envAdvProfile = "OVNBGP_BENCH_ADV_PROFILE"
	// envScaleProfile names a file for a CPU profile of the daemon over
	// BenchmarkAdvertiseNBScale's changes (8 s; the pprof build and
	// OVNBGP_PPROF, as profileDaemon says).
	envScaleProfile = "OVNBGP_BENCH_SCALE_PROFILE"
	// envAdvTrace names a file for an execution trace of ovnbgp over
	// BenchmarkAdvertiseBulk's add (3 s, under the same conditions as
	// envAdvProfile's bulk profile): where the pipeline waits, not only
	// where the CPU goes (issue 18).
	envAdvTrace = "OVNBGP_BENCH_ADV_TRACE"
	// envBulkVIP lists the sizes of BenchmarkAdvertiseBulk (default
	// "5000,10000").
	envBulkVIP = "OVNBGP_BENCH_BULKVIP"
)

// advertiseRules: egress IPs, Service VIPs, and the pod subnets of every
// network (node1's default and blue subnets: 2 prefixes).
const advertiseRules = `  - {name: eips, kind: egressIP}
  - {name: vips, kind: loadBalancerIP}
` + podsRule

// maxAdvAddrs is how many addresses each range below holds.
const maxAdvAddrs = 1 << 16

// vipAddr is the i-th VIP: 198.18.0.0/16 (outside the service CIDRs,
// OpenShift's default 172.30.0.0/16, and the node's addresses: an external
// or LoadBalancer ingress IP).
func vipAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}) }

// eipRange holds the egress IPs eipAddr makes.
var eipRange = netip.MustParsePrefix("198.19.0.0/16")

// eipAddr is the i-th egress IP: 198.19.0.0/16.
func eipAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}) }

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// dashed is a for names: 198.18.0.1 -> 198-18-0-1.
func dashed(a netip.Addr) string { return strings.ReplaceAll(a.String(), ".", "-") }

// insertVIP is the Service load balancer row the services controller
// writes for a LoadBalancer Service bench/vip-<a> whose ingress IP is a
// (one TCP port, one endpoint): Service_<ns>/<name>_TCP_cluster.
func insertVIP(a netip.Addr) any {
	owner := "bench/vip-" + dashed(a)
	return map[string]any{"op": "insert", "table": "Load_Balancer", "row": map[string]any{
		"name":     "Service_" + owner + "_TCP_cluster",
		"protocol": "tcp",
		"vips":     []any{"map", [][]string{{a.String() + ":80", "10.128.0.10:8080"}}},
		"external_ids": []any{"map", [][]string{
			{"k8s.ovn.org/kind", "Service"}, {"k8s.ovn.org/owner", owner}}},
	}}
}

// deleteVIP deletes the Service load balancer row uuid, by its UUID as
// OVN-Kubernetes does (a delete by name makes ovsdb-server scan the table
// once per row: seconds for 10,000 rows, none of it the daemon's).
func deleteVIP(uuid string) any {
	return map[string]any{"op": "delete", "table": "Load_Balancer",
		"where": []any{[]any{"_uuid", "==", []any{"uuid", uuid}}}}
}

// insertEIP is the EgressIP SNAT OVN-Kubernetes writes on node1's gateway
// router of the default network for EgressIP eip-<a> serving pod
// bench/pod-<a>, as a named row ("nat<ref>") and the mutation that
// references it (NAT is not a root table: both in one transaction).
func insertEIP(a netip.Addr, ref string) []any {
	name := "eip-" + dashed(a) + "_bench/pod-" + dashed(a)
	return []any{
		map[string]any{"op": "insert", "table": "NAT", "uuid-name": ref, "row": map[string]any{
			"type": "snat", "external_ip": a.String(), "logical_ip": "10.128.0.10", "logical_port": "k8s-node1",
			"external_ids": []any{"map", [][]string{
				{"k8s.ovn.org/owner-type", "EgressIP"},
				{"k8s.ovn.org/owner-controller", "default-network-controller"},
				{"k8s.ovn.org/name", name},
				{"ip-family", "ip4"},
				{"k8s.ovn.org/id", "default-network-controller:EgressIP:" + name + ":ip4"},
			}},
		}},
		map[string]any{"op": "mutate", "table": "Logical_Router", "where": []any{[]any{"name", "==", "GR_node1"}},
			"mutations": []any{[]any{"nat", "insert", []any{"set", []any{[]any{"named-uuid", ref}}}}}},
	}
}

// deleteEIP removes NAT row uuid from GR_node1 (the row goes with its last
// reference).
func deleteEIP(uuid string) any {
	return map[string]any{"op": "mutate", "table": "Logical_Router", "where": []any{[]any{"name", "==", "GR_node1"}},
		"mutations": []any{[]any{"nat", "delete", []any{"set", []any{[]any{"uuid", uuid}}}}}}
}

// insertedUUID is the UUID an insert's result names.
func insertedUUID(res json.RawMessage) (string, error) {
	var r struct {
		UUID []string `json:"uuid"` // ["uuid", "<uuid>"]
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.UUID) != 2 {
		return "", fmt.Errorf("not an insert's result: %.200s", res)
	}
	return r.UUID[1], nil
}

// advNB writes egress IPs and VIPs into NB and remembers the NAT and load
// balancer rows.
type advNB struct {
	sock string
	nats map[netip.Addr]string // egress IP -> NAT row UUID
	lbs  map[netip.Addr]string // VIP -> Load_Balancer row UUID
}

// add inserts the egress IPs and VIPs in one transaction.
func (n *advNB) add(eips, vips []netip.Addr) error {
	var ops []any
	for i, a := range eips {
		ops = append(ops, insertEIP(a, "nat"+strconv.Itoa(i))...)
	}
	for _, a := range vips {
		ops = append(ops, insertVIP(a))
	}
	res, err := nbTransactResults(n.sock, ops)
	if err != nil {
		return err
	}
	for i, a := range eips {
		u, err := insertedUUID(res[2*i])
		if err != nil {
			return err
		}
		n.nats[a] = u
	}
	if n.lbs == nil {
		n.lbs = map[netip.Addr]string{}
	}
	for j, a := range vips {
		u, err := insertedUUID(res[2*len(eips)+j])
		if err != nil {
			return err
		}
		n.lbs[a] = u
	}
	return nil
}

// remove deletes the egress IPs and VIPs in one transaction.
func (n *advNB) remove(eips, vips []netip.Addr) error {
	var ops []any
	for _, a := range eips {
		u, ok := n.nats[a]
		if !ok {
			return fmt.Errorf("no NAT row for egress IP %s", a)
		}
		ops = append(ops, deleteEIP(u))
	}
	for _, a := range vips {
		u, ok := n.lbs[a]
		if !ok {
			return fmt.Errorf("no load balancer row for VIP %s", a)
		}
		ops = append(ops, deleteVIP(u))
	}
	if err := nbTransact(n.sock, ops); err != nil {
		return err
	}
	for _, a := range eips {
		delete(n.nats, a)
	}
	for _, a := range vips {
		delete(n.lbs, a)
	}
	return nil
}

func envInt(b *testing.B, name string, def, lo, hi int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		b.Fatalf("%s=%q: want %d to %d", name, v, lo, hi)
	}
	return n
}

// BenchmarkAdvertiseChange (issue 7, item 8; issue 18, item 7): on a node
// that already advertises 1,000, then 10,000 egress IPs and VIPs
// (OVNBGP_BENCH_ADV_BASE, a comma-separated list), 200 changes
// (OVNBGP_BENCH_ADV_CHANGES), in turn: one egress IP added, the same
// removed, one VIP added, the same removed, each one operation. ovnbgp gets
// them as NB transactions (an EgressIP SNAT row on GR_node1, a Service load
// balancer row; it also advertises node1's pod subnets); FRR(vtysh) and
// BIRD(configure) as a /32 each (a `network` statement; a line of the
// rendered static file and `birdc configure`). Reported, as p50, p99 and
// max, from the commit (the transaction's reply; vtysh's or birdc's
// return):
//   - received: the ToR's bgpd logged the UPDATE (announcement or
//     withdrawal) for the prefix: `debug bgp updates in`, with its log
//     timestamps in microseconds, read from its log file once the RIB
//     shows the change (same host clock; no packet capture);
//   - RIB: the ToR's answer to `show bgp ipv4 unicast P json`, asked every
//     millisecond, first shows the path as best (announcement) or shows
//     no path from the node (withdrawal).
func BenchmarkAdvertiseChange(b *testing.B) {
	gate(b)
	changes := envInt(b, envAdvChanges, 200, 4, 4000)
	for _, base := range envSizes(b, envAdvBase, []int{1000, 10000}, 0, 20000) {
		b.Run(fmt.Sprintf("base=%d", base), func(b *testing.B) {
			for _, c := range []struct{ id, world, name string }{
				{"ovnbgp", "ovnbgp-vip", ovnbgpName},
				{"frr-vtysh", "frr-vtysh", vtyshName},
				{"bird-configure", "bird-configure", birdConfName},
			} {
				b.Run(c.id, func(b *testing.B) {
					r := benchRun(b)
					advChangeRun(r, newWorld(r, c.world, c.name), changes, base)
				})
			}
		})
	}
}

// advChangeRun is the advertise-change job in w: base egress IPs and VIPs
// preloaded, then changes changes (at least 4), each timed from the ToR's
// UPDATE log (and, in a second phase, its RIB).
func advChangeRun(b jobRun, w *world, changes, base int) {
	var preload []netip.Prefix
	for i := range base / 2 {
		preload = append(preload, host(eipAddr(i)))
	}
	for i := range base - base/2 {
		preload = append(preload, host(vipAddr(i)))
	}
	next := base / 2
	nextVIP := base - base/2
	var plan []change
	for len(plan) < 2*(changes+4) {
		e, v := eipAddr(next), vipAddr(nextVIP)
		next, nextVIP = next+1, nextVIP+1
		plan = append(plan, change{"egress IP", true, e}, change{"egress IP", false, e},
			change{"VIP", true, v}, change{"VIP", false, v})
	}
	if next > maxAdvAddrs || nextVIP > maxAdvAddrs {
		b.Fatalf("%s %d and %s %d: too many addresses", envAdvBase, base, envAdvChanges, changes)
	}
	profile := ""
	if out := os.Getenv(envAdvProfile); out != "" {
		profile = fmt.Sprintf("%s-%d", out, base)
	}
	changeRun(b, w, preload, "egress IPs and VIPs", plan, changes,
		fmt.Sprintf("one egress IP or VIP changed, %d advertised", base), profile)
}

// change is one operation of a change job: the address a added (add) or
// removed; what names its kind in messages.
type change struct {
	what string
	add  bool
	a    netip.Addr
}

// changeRun is the body of the change jobs (BenchmarkAdvertiseChange,
// BenchmarkAdvertiseWorkload) in w: preload (what names it) announced in
// one operation and awaited, then plan, at least 2*(changes+4) changes of
// one /32 each, in two phases of changes+4 (the first 4 of each not
// counted), each timed from the ToR's UPDATE log (and, in the second
// phase, its RIB). The rows are named job; with profile set, a CPU profile
// of ovnbgp over the changes goes there (profileDaemon).
func changeRun(b jobRun, w *world, preload []netip.Prefix, what string, plan []change, changes int, job, profile string) {
	name := w.name
	if len(plan) < 2*(changes+4) {
		b.Fatalf("%s: %d changes planned, want %d", job, len(plan), 2*(changes+4))
	}
	if _, err := w.c.announce(preload); err != nil {
		b.Fatalf("%s: preload %d %s: %v", name, len(preload), what, err)
	}
	want := w.base + len(preload)
	if _, err := waitFor(time.Now(), 50*time.Millisecond, b.timeout(2*time.Minute), w.c.alive, until(func() (bool, error) {
		n, err := w.tor.bestCount()
		return n == want, err
	})); err != nil {
		b.Fatalf("%s: the ToR never had the node's %d prefixes: %v", name, want, err)
	}
	ul, err := watchUpdates(w.tor.frr)
	if err != nil {
		b.Fatal(err)
	}
	if profile != "" && name == ovnbgpName {
		// A CPU profile over the changes, for where one change's time
		// goes at this size.
		defer profileDaemon(b, w.l, "CPU profile over the changes", profile, "/debug/pprof/profile?seconds=8")()
		// and what they allocate over the same 8 s (a delta profile:
		// alloc_space and alloc_objects per change, issue 18).
		defer profileDaemon(b, w.l, "allocation profile over the changes", profile+"-allocs", "/debug/pprof/allocs?seconds=8")()
	}
	// Two phases of changes+4 changes each, the first 4 of each not
	// counted: "quiet", where nothing asks the ToR anything (the received
	// instants: bgpd is not kept busy answering polls), then "polled",
	// where the ToR's RIB is asked every millisecond (the RIB instants;
	// the received instants of this phase are reported apart).
	recv := map[string][]time.Duration{}
	rib := map[string][]time.Duration{}
	for i, c := range plan[:2*(changes+4)] {
		polled := i >= changes+4
		n := i % (changes + 4)
		p := host(c.a)
		off, err := ul.offset()
		if err != nil {
			b.Fatal(err)
		}
		do := w.c.withdraw
		if c.add {
			do = w.c.announce
		}
		o, err := do([]netip.Prefix{p})
		if err != nil {
			b.Fatalf("%s: %s %v (add %v): %v", name, c.what, c.a, c.add, err)
		}
		var at reached
		if polled {
			at, err = waitFor(o.start, singleInterval, singleTimeout, w.c.alive, func() (progress, error) {
				received, selected, err := w.tor.fromNode(p)
				if c.add {
					return progress{received: received, done: selected}, err
				}
				return progress{received: !received, done: !received && !selected}, err
			})
			if err != nil {
				b.Fatalf("%s: %s %v (add %v): the ToR never showed it: %v", name, c.what, c.a, c.add, err)
			}
		}
		got, line, err := ul.awaitLine(off, p, !c.add, 30*time.Second)
		if err != nil {
			b.Fatalf("%s: %s %v (add %v): %v", name, c.what, c.a, c.add, err)
		}
		if n < 4 {
			if i < 2 {
				b.Logf("the ToR logged (add %v): %s", c.add, line)
			}
			continue // warm-up
		}
		kind := "add"
		if !c.add {
			kind = "withdraw"
		}
		if polled {
			rib[kind] = append(rib[kind], o.start.Add(at.done).Sub(o.commit))
			recv["polled"] = append(recv["polled"], got.Sub(o.commit))
			continue
		}
		recv[kind] = append(recv[kind], got.Sub(o.commit))
		recv["all"] = append(recv["all"], got.Sub(o.commit))
		recv["from start"] = append(recv["from start"], got.Sub(o.start))
	}
	for _, x := range []struct {
		label string
		s     []time.Duration
	}{
		{"commit→ToR received (all " + strconv.Itoa(changes) + ")", recv["all"]},
		{"command start→ToR received (all " + strconv.Itoa(changes) + ")", recv["from start"]},
		{"add, commit→ToR received", recv["add"]},
		{"withdraw, commit→ToR received", recv["withdraw"]},
		{"commit→ToR received, while its RIB is polled (all " + strconv.Itoa(changes) + ")", recv["polled"]},
		{"add, commit→ToR RIB", rib["add"]},
		{"withdraw, commit→ToR RIB", rib["withdraw"]},
	} {
		for _, q := range []struct {
			label string
			pct   float64
		}{{"p50", 50}, {"p99", 99}, {"max", 100}} {
			v := percentile(x.s, q.pct)
			b.record(job+": "+x.label+" "+q.label, "ms", false, name, ms(v))
		}
		metric := strings.NewReplacer(" ", "-", ",", "", "→", "-", "(", "", ")", "").Replace(x.label)
		b.metric(ms(percentile(x.s, 50)), metric+"-p50-ms")
		b.metric(ms(percentile(x.s, 99)), metric+"-p99-ms")
		b.Logf("%s %s: %s (%d): p50 %v p99 %v max %v\n  in order: %s", name, job, x.label, len(x.s),
			pretty(percentile(x.s, 50)), pretty(percentile(x.s, 99)), pretty(percentile(x.s, 100)), list(x.s))
	}
	b.metric(0, "ns/op")
}

// updateLog reads the UPDATEs a ToR logs (`debug bgp updates in`).
type updateLog struct{ path string }

// watchUpdates turns on the ToR's UPDATE debugging, into its log file
// with microsecond timestamps.
func watchUpdates(f *lab.FRR) (updateLog, error) {
	path := f.Dir + "/frr.log"
	for _, cmd := range []string{"enable", "configure terminal", "log file " + path + " debugging",
		"log timestamp precision 6", "end", "debug bgp updates in"} {
		if _, err := f.VTY(cmd); err != nil {
			return updateLog{}, fmt.Errorf("ToR: %s: %w", cmd, err)
		}
	}
	return updateLog{path: path}, nil
}

func (u updateLog) offset() (int64, error) {
	fi, err := os.Stat(u.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// await waits until the log, from offset off, has the UPDATE announcing
// (or withdrawing) p, and returns its timestamp.
func (u updateLog) await(off int64, p netip.Prefix, withdrawn bool, timeout time.Duration) (time.Time, error) {
	at, _, err := u.awaitLine(off, p, withdrawn, timeout)
	return at, err
}

// awaitLine is await that also returns the line.
func (u updateLog) awaitLine(off int64, p netip.Prefix, withdrawn bool, timeout time.Duration) (time.Time, string, error) {
	deadline := time.Now().Add(timeout)
	for {
		data, err := readFrom(u.path, off)
		if err != nil {
			return time.Time{}, "", err
		}
		if len(data) > 0 {
			for _, line := range strings.Split(string(data), "\n") {
				if at, ok := updateLine(line, p, withdrawn); ok {
					return at, line, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, "", fmt.Errorf("the ToR's log %s has no UPDATE %s %v (withdrawn %v) after %v; "+
				"is `debug bgp updates in` on?", u.path, "for", p, withdrawn, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readFrom reads the file at path from offset off to its end.
func readFrom(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// frrTimeLayout is FRR's log timestamp with `log timestamp precision 6`.
const frrTimeLayout = "2006/01/02 15:04:05.000000"

// updateLine parses one line of bgpd's log: whether it tells that the
// UPDATE announcing p (withdrawn false) or withdrawing it (true) was
// received, and when. FRR 8.4 writes
//
//	2026/12/01 05:40:12.123456 BGP: [...] 192.0.2.0(node) rcvd 198.18.0.1/32 IPv4 unicast
//	2026/12/01 05:40:12.123456 BGP: [...] 192.0.2.0(node) rcvd UPDATE about 198.18.0.1/32 IPv4 unicast -- withdrawn
func updateLine(line string, p netip.Prefix, withdrawn bool) (time.Time, bool) {
	if len(line) < len(frrTimeLayout) {
		return time.Time{}, false
	}
	rest := line[len(frrTimeLayout):]
	i := strings.Index(rest, " rcvd ")
	if i < 0 {
		return time.Time{}, false
	}
	msg := rest[i+len(" rcvd "):]
	isWithdraw := strings.HasSuffix(strings.TrimSpace(msg), "-- withdrawn")
	if isWithdraw != withdrawn {
		return time.Time{}, false
	}
	msg = strings.TrimPrefix(msg, "UPDATE about ")
	if f := strings.Fields(msg); len(f) == 0 || f[0] != p.String() {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation(frrTimeLayout, line[:len(frrTimeLayout)], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return at, true
}

// vipContender: ovnbgp gets each prefix (a /32) as the ingress IP of a
// LoadBalancer Service (one Service load balancer row per VIP) or, for an
// address of eipRange, as an egress IP (its EgressIP SNAT row on GR_node1),
// all in one OVSDB transaction.
type vipContender struct {
	nb *advNB
	d  *daemon
}

func (c *vipContender) announce(ps []netip.Prefix) (op, error) { return c.transact(ps, c.nb.add) }
func (c *vipContender) withdraw(ps []netip.Prefix) (op, error) { return c.transact(ps, c.nb.remove) }

func (c *vipContender) transact(ps []netip.Prefix, do func(eips, vips []netip.Addr) error) (op, error) {
	var eips, vips []netip.Addr
	for _, p := range ps {
		switch {
		case !p.IsSingleIP():
			return op{}, fmt.Errorf("a VIP or an egress IP is an address, not %s", p)
		case eipRange.Contains(p.Addr()):
			eips = append(eips, p.Addr())
		default:
			vips = append(vips, p.Addr())
		}
	}
	o := op{start: time.Now()}
	err := do(eips, vips)
	o.end = time.Now()
	o.commit = o.end
	return o, err
}

func (c *vipContender) daemons() map[string]int { return map[string]int{"ovnbgp": c.d.pid()} }
func (c *vipContender) alive() error            { return c.d.exited() }

// bulkVIPs are the first n VIPs as /32s, in address order.
func bulkVIPs(n int) []netip.Prefix {
	ps := make([]netip.Prefix, n)
	for i := range ps {
		ps[i] = host(vipAddr(i))
	}
	return ps
}

// bulkVIPSettle is how long after a bulk add the RSS is read again: more
// than the daemon's trimEvery (10 s), so that it has returned the burst's
// free memory (daemon/trim.go), and bgpd has settled too.
const bulkVIPSettle = 12 * time.Second

func bulkVIPSizes(b *testing.B) []int {
	return envSizes(b, envBulkVIP, []int{5000, 10000}, 1, maxAdvAddrs-1)
}

// envSizes reads a comma-separated list of sizes from env name, each from
// lo to hi; def when it is unset.
func envSizes(b *testing.B, name string, def []int, lo, hi int) []int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			b.Fatalf("%s=%q: want sizes from %d to %d, comma-separated", name, v, lo, hi)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// BenchmarkAdvertiseBulk (issue 7, item 8): 5000, then 10000 VIPs
// (OVNBGP_BENCH_BULKVIP) added in one operation, then withdrawn: for
// ovnbgp one NB transaction of Service load balancer rows (rule kind
// loadBalancerIP), for FRR(vtysh) one vtysh with a `network A/32` line per
// VIP, for BIRD(configure) one static file with a route per VIP and
// `birdc configure`. Reported as BenchmarkBulk, plus the RSS per advertised prefix:
// (RSS 12 s after the add - RSS before) / N.
func BenchmarkAdvertiseBulk(b *testing.B) {
	gate(b)
	for _, c := range []struct{ id, world, name string }{
		{"ovnbgp", "ovnbgp-vip", ovnbgpName},
		{"frr-vtysh", "frr-vtysh", vtyshName},
		{"bird-configure", "bird-configure", birdConfName},
	} {
		b.Run(c.id, func(b *testing.B) {
			sizes := bulkVIPSizes(b)
			r := benchRun(b)
			w := newWorld(r, c.world, c.name)
			// One size: a CPU profile of ovnbgp over its bulk add, to set
			// beside BenchmarkAdvertiseWorkload's (issue 19).
			cpu, trace := func() {}, func() {}
			if c.name == ovnbgpName && len(sizes) == 1 {
				if out := os.Getenv(envAdvProfile); out != "" {
					cpu = profileDaemon(b, w.l, "CPU profile over the bulk add", out+"-bulk", "/debug/pprof/profile?seconds=8")
				}
				trace = profileDaemon(b, w.l, "execution trace over the bulk add", os.Getenv(envAdvTrace), "/debug/pprof/trace?seconds=3")
			}
			bulkRun(r, w, sizes, bulkVIPs, "VIP", bulkVIPSettle)
			cpu()
			trace()
		})
	}
}

// nbScale is the NB of BenchmarkAdvertiseNBScale and how it is measured.
type nbScale struct {
	services, backends, nodes int
	// changes is how many VIP changes are timed (after one add and remove
	// of warm-up).
	changes int
	// settle is how long the synced daemon idles before its RSS is read.
	settle time.Duration
}

// openShiftScale (issue 7, item 8): OpenShift's tested maximum of
// Services, with 10 endpoints each, and 250 nodes.
var openShiftScale = nbScale{services: 10000, backends: 10, nodes: 250, changes: 40, settle: bulkVIPSettle}

// envScaleChanges is how many VIP changes BenchmarkAdvertiseNBScale times
// (default 40).
const envScaleChanges = "OVNBGP_BENCH_SCALE_CHANGES"

// maxScaleNodes: scaleSubnet's /23s of 10.128.0.0/9.
const maxScaleNodes = 1<<14 - 1

// scaleSubnet is node i's pod subnet (i from 1): node1 and node2 are the
// harness's (10.128.0.0/23, 10.128.2.0/23); the others follow from
// 10.128.6.0/23.
func scaleSubnet(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>7), byte(i & 127 << 1), 0}), 23)
}

// scaleOps are nodes 3 to s.nodes' default-network node switches and
// s.services ClusterIP Services (172.30.0.0/16, OpenShift's default
// service CIDR: never advertised) on two TCP ports with s.backends
// endpoints each, spread over the nodes, as the services controller's
// cluster-wide rows.
func scaleOps(s nbScale) [][]any {
	var batches [][]any
	var sws []any
	for i := 3; i <= s.nodes; i++ {
		sws = append(sws, map[string]any{"op": "insert", "table": "Logical_Switch", "row": map[string]any{
			"name":         fmt.Sprintf("node%d", i),
			"other_config": []any{"map", [][]string{{"subnet", scaleSubnet(i).String()}}},
		}})
	}
	batches = append(batches, sws)
	var lbs []any
	for i := range s.services {
		vip := netip.AddrFrom4([4]byte{172, 30, byte(i >> 8), byte(i)}).String()
		var b80, b443 []string
		for j := range s.backends {
			sub := scaleSubnet(1 + (i+j)%s.nodes)
			a := sub.Addr().As4()
			a[3] = byte(10 + j)
			be := netip.AddrFrom4(a).String()
			b80 = append(b80, be+":8080")
			b443 = append(b443, be+":8443")
		}
		owner := fmt.Sprintf("ns%d/svc%d", i%100, i)
		lbs = append(lbs, map[string]any{"op": "insert", "table": "Load_Balancer", "row": map[string]any{
			"name":     "Service_" + owner + "_TCP_cluster",
			"protocol": "tcp",
			"vips": []any{"map", [][]string{
				{vip + ":80", strings.Join(b80, ",")},
				{vip + ":443", strings.Join(b443, ",")},
			}},
			"external_ids": []any{"map", [][]string{{"k8s.ovn.org/kind", "Service"}, {"k8s.ovn.org/owner", owner}}},
		}})
		if len(lbs) == 2000 {
			batches = append(batches, lbs)
			lbs = nil
		}
	}
	if len(lbs) > 0 {
		batches = append(batches, lbs)
	}
	return batches
}

// BenchmarkAdvertiseNBScale (issue 7, item 8, "NB at OpenShift scale"): the daemon
// on node1 of an NB holding 10,000 ClusterIP Services of 10 endpoints and
// 250 node switches (a central NB, as OVN-Kubernetes' non-interconnect
// mode has; with interconnect each node's NB is smaller), advertising pod
// subnets, egress IPs and VIPs. Reported: the daemon's RSS once synced
// (and idle 12 s), and, for 40 changes of one VIP (OVNBGP_BENCH_SCALE_CHANGES) (a LoadBalancer
// Service's row added, then removed), commit→ToR received: the whole path
// the daemon takes after one NB change (libovsdb decode, the copy of the
// monitored rows and their comparison, the snapshot, the plan, gobgp, one
// UPDATE), an upper bound of "rebuild the snapshot and plan".
func BenchmarkAdvertiseNBScale(b *testing.B) {
	gate(b)
	s := openShiftScale
	s.changes = envInt(b, envScaleChanges, s.changes, 2, 10000)
	scaleRun(benchRun(b), s)
}

// scaleRun is the NB-at-scale job with NB s.
func scaleRun(b jobRun, s nbScale) {
	if s.nodes < 2 || s.nodes > maxScaleNodes || s.services < 0 || s.backends < 1 || s.changes < 2 {
		b.Fatalf("NB at scale: %+v: want 2 to %d nodes, a backend or more per Service, 2 changes or more", s, maxScaleNodes)
	}
	l := lab.New(b)
	tf := l.StartFRR(lab.FRRConfig{Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: nodeASN, Passive: true}}})
	t := tor{frr: tf, from: lab.NodeIPv4}
	nb := l.StartNB()
	nb.PopulateOVNK()
	loadStart := time.Now()
	for _, ops := range scaleOps(s) {
		if err := nbTransact(nb.Sock, ops); err != nil {
			b.Fatalf("load the NB: %v", err)
		}
	}
	b.Logf("NB loaded with %d Services (%d endpoints each) and %d node switches in %v",
		s.services, s.backends, s.nodes, pretty(time.Since(loadStart)))
	start := time.Now()
	d := startOvnbgpConfig(b, l, nb, lab.DaemonConfig{Peers: []lab.Peer{lab.DefaultTor()}, Advertise: advertiseRules}, "")
	const base = 2 // node1's default and blue subnets
	if _, err := waitFor(start, 50*time.Millisecond, b.timeout(5*time.Minute), d.exited, until(func() (bool, error) {
		n, err := t.bestCount()
		return n == base, err
	})); err != nil {
		b.Fatalf("the ToR never had node1's %d subnets: %v", base, err)
	}
	b.Logf("daemon started, synced and advertising in %v", pretty(time.Since(start)))
	// A measurement, not an assertion: nothing to wait on but time.
	time.Sleep(b.pause(s.settle))
	synced, err := usageOf(map[string]int{"ovnbgp": d.pid()})
	if err != nil {
		b.Fatal(err)
	}
	ul, err := watchUpdates(tf)
	if err != nil {
		b.Fatal(err)
	}
	w := &advNB{sock: nb.Sock, nats: map[netip.Addr]string{}}
	// A CPU profile over the changes (OVNBGP_BENCH_SCALE_PROFILE), for
	// where one change's time goes at this size.
	prof := profileDaemon(b, l, "CPU profile over the changes", os.Getenv(envScaleProfile), "/debug/pprof/profile?seconds=8")
	defer prof()
	var recv []time.Duration
	for i := range s.changes + 2 {
		a := vipAddr(i / 2)
		add := i%2 == 0
		p := host(a)
		off, err := ul.offset()
		if err != nil {
			b.Fatal(err)
		}
		if add {
			err = w.add(nil, []netip.Addr{a})
		} else {
			err = w.remove(nil, []netip.Addr{a})
		}
		commit := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		got, err := ul.await(off, p, !add, time.Minute)
		if err != nil {
			b.Fatalf("VIP %v (add %v): %v", a, add, err)
		}
		if i >= 2 { // the first add and remove warm up
			recv = append(recv, got.Sub(commit))
		}
	}
	after, err := usageOf(map[string]int{"ovnbgp": d.pid()})
	if err != nil {
		b.Fatal(err)
	}
	job := fmt.Sprintf("NB at scale (%d Services × %d endpoints, %d nodes)", s.services, s.backends, s.nodes)
	for _, q := range []struct {
		label string
		pct   float64
	}{{"p50", 50}, {"p99", 99}, {"max", 100}} {
		b.record(fmt.Sprintf("%s: one VIP changed, commit→ToR received %s", job, q.label), "ms", false, ovnbgpName, ms(percentile(recv, q.pct)))
	}
	b.record(job+": daemon RSS synced, idle", "MiB", false, ovnbgpName, mib(synced.mem.rss))
	b.record(job+": daemon RSS after the changes (peak)", "MiB", false, ovnbgpName, mib(after.mem.peak))
	b.metric(ms(percentile(recv, 50)), "change-received-p50-ms")
	b.metric(ms(percentile(recv, 99)), "change-received-p99-ms")
	b.metric(mib(synced.mem.rss), "rss-MiB")
	b.metric(mib(after.mem.peak), "rss-peak-MiB")
	b.Logf("%s: one VIP changed (%d), commit→ToR received p50 %v p99 %v max %v; daemon RSS %.1f MiB synced and idle, %.1f MiB now, peak %.1f MiB, CPU %v\n  in order: %s",
		job, len(recv), pretty(percentile(recv, 50)), pretty(percentile(recv, 99)), pretty(percentile(recv, 100)),
		mib(synced.mem.rss), mib(after.mem.rss), mib(after.mem.peak), pretty(after.cpu), list(recv))
	b.metric(0, "ns/op")
}
