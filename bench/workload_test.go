package bench

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Issue 19: workload host routes (rule kind workloadIP), the /32 of each
// pod whose Logical_Switch_Port is node1's, as OVN-Kubernetes writes the
// port (docs/ovn-nb.md, "Workloads").

// The knobs of BenchmarkAdvertiseWorkload.
const (
	// envWLPods is how many pods run on node1 (default 10000): the bulk
	// adds that many, the changes run among that many.
	envWLPods = "OVNBGP_BENCH_WL_PODS"
	// envWLChanges is the number of measured changes (default 200).
	envWLChanges = "OVNBGP_BENCH_WL_CHANGES"
	// envWLProfile names files for CPU profiles of ovnbgp (the pprof
	// build and OVNBGP_PPROF, as profileDaemon says): FILE-bulk over 8 s
	// from just before the bulk add, FILE-changes over 8 s of the changes.
	envWLProfile = "OVNBGP_BENCH_WL_PROFILE"
)

// wlNet is the network the pods are on: node1's switch of the layer3
// primary UDN bench/green, with a /18 so that 10,000 pods fit in node1's
// subnet (the harness's default network has a /23 per node).
var wlNet = lab.Network{Name: "bench_green", Node: "node1", Subnet: netip.MustParsePrefix("10.72.0.0/18")}

// wlNAD is the network's NAD key (external_ids:k8s.ovn.org/nad; the
// prefix of its port names).
const wlNAD = "bench/green"

// maxWLPods is how many pod addresses wlNet's subnet holds between the
// router port's (.1) and the broadcast address; the last one is the
// warm-up's.
const maxWLPods = 1<<14 - 3

// wlPodAddr is the i-th pod's address: 10.72.0.2 onwards.
func wlPodAddr(i int) netip.Addr {
	n := 2 + i
	return netip.AddrFrom4([4]byte{10, 72, byte(n >> 8), byte(n)})
}

// wlPodIndex is the pod index of a, or false when a is none of
// wlPodAddr's.
func wlPodIndex(a netip.Addr) (int, bool) {
	if !a.Is4() || !wlNet.Subnet.Contains(a) {
		return 0, false
	}
	b := a.As4()
	i := int(b[2])<<8 | int(b[3]) - 2
	return i, i >= 0 && i < maxWLPods
}

// wlPods are the first n pods' /32s, in address order: the bulk's
// generator.
func wlPods(n int) []netip.Prefix {
	ps := make([]netip.Prefix, n)
	for i := range ps {
		ps[i] = host(wlPodAddr(i))
	}
	return ps
}

// insertPod is the Logical_Switch_Port OVN-Kubernetes writes for pod
// bench/pod-<i> on wlNet (BaseNetworkController.addLogicalPortToNetwork):
// named ref in its transaction, "<NAD key with . for / and ->_<ns>_<pod>",
// the MAC derived from the address (0a:58 + the IPv4 bytes), addresses and
// port_security "<MAC> <IP>", external_ids namespace, pod=true and the
// UDN's keys, options iface-id-ver and requested-chassis (the node's name:
// up to v1.2 and in OpenShift; the harness's NB has no transit switch, so
// a chassis-id would not be taken as node1's).
func insertPod(i int, ref string) any {
	a := wlPodAddr(i).As4()
	mac := fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3])
	pod := fmt.Sprintf("pod-%d", i)
	addr := mac + " " + netip.AddrFrom4(a).String()
	return map[string]any{"op": "insert", "table": "Logical_Switch_Port", "uuid-name": ref, "row": map[string]any{
		"name":          "bench.green_bench_" + pod,
		"addresses":     []any{"set", []string{addr}},
		"port_security": []any{"set", []string{addr}},
		"external_ids": []any{"map", [][]string{
			{"namespace", "bench"}, {"pod", "true"},
			{"k8s.ovn.org/network", wlNet.Name}, {"k8s.ovn.org/nad", wlNAD}, {"k8s.ovn.org/topology", "layer3"}}},
		"options": []any{"map", [][]string{
			{"iface-id-ver", fmt.Sprintf("8d2f0000-0000-4c1e-9d7e-%012d", i)}, {"requested-chassis", wlNet.Node}}},
	}}
}

// wlNB writes pods' ports onto wlNet's switch and remembers their rows.
type wlNB struct {
	sock  string
	ports map[netip.Addr]string // pod address -> Logical_Switch_Port row UUID
}

// switchPorts is the mutation of wlNet's switch's ports by mutator
// ("insert", "delete") with refs (["named-uuid", ...] or ["uuid", ...]).
func switchPorts(mutator string, refs []any) any {
	return map[string]any{"op": "mutate", "table": "Logical_Switch", "where": []any{[]any{"name", "==", wlNet.Switch()}},
		"mutations": []any{[]any{"ports", mutator, []any{"set", refs}}}}
}

// add inserts the pods' ports and adds them to the switch, in one
// transaction (Logical_Switch_Port is not a root table).
func (n *wlNB) add(pods []int) error {
	ops := make([]any, 0, len(pods)+1)
	refs := make([]any, 0, len(pods))
	for _, i := range pods {
		ref := fmt.Sprintf("lsp%d", i)
		ops = append(ops, insertPod(i, ref))
		refs = append(refs, []any{"named-uuid", ref})
	}
	ops = append(ops, switchPorts("insert", refs))
	res, err := nbTransactResults(n.sock, ops)
	if err != nil {
		return err
	}
	for j, i := range pods {
		u, err := insertedUUID(res[j])
		if err != nil {
			return err
		}
		n.ports[wlPodAddr(i)] = u
	}
	return nil
}

// remove takes the pods' ports off the switch and deletes them by UUID,
// in one transaction, as OVN-Kubernetes does (libovsdb ops
// DeleteLogicalSwitchPorts).
func (n *wlNB) remove(pods []int) error {
	ops := make([]any, 0, len(pods)+1)
	refs := make([]any, 0, len(pods))
	for _, i := range pods {
		u, ok := n.ports[wlPodAddr(i)]
		if !ok {
			return fmt.Errorf("no switch port for pod %d (%s)", i, wlPodAddr(i))
		}
		refs = append(refs, []any{"uuid", u})
		ops = append(ops, map[string]any{"op": "delete", "table": "Logical_Switch_Port",
			"where": []any{[]any{"_uuid", "==", []any{"uuid", u}}}})
	}
	ops = append([]any{switchPorts("delete", refs)}, ops...)
	if err := nbTransact(n.sock, ops); err != nil {
		return err
	}
	for _, i := range pods {
		delete(n.ports, wlPodAddr(i))
	}
	return nil
}

// wlContender: ovnbgp gets each prefix (a pod's /32 of wlNet) as the
// pod's switch port, all in one OVSDB transaction.
type wlContender struct {
	nb *wlNB
	d  *daemon
}

func (c *wlContender) announce(ps []netip.Prefix) (op, error) { return c.transact(ps, c.nb.add) }
func (c *wlContender) withdraw(ps []netip.Prefix) (op, error) { return c.transact(ps, c.nb.remove) }

func (c *wlContender) transact(ps []netip.Prefix, do func([]int) error) (op, error) {
	pods := make([]int, len(ps))
	for j, p := range ps {
		i, ok := wlPodIndex(p.Addr())
		if !p.IsSingleIP() || !ok {
			return op{}, fmt.Errorf("%s is not a pod address of %s", p, wlNet.Subnet)
		}
		pods[j] = i
	}
	o := op{start: time.Now()}
	err := do(pods)
	o.end = time.Now()
	o.commit = o.end
	return o, err
}

func (c *wlContender) daemons() map[string]int { return map[string]int{"ovnbgp": c.d.pid()} }
func (c *wlContender) alive() error            { return c.d.exited() }

// workloadRules advertise the pods' /32s and the pod subnets of every
// network (node1's default, blue and bench_green subnets: 3 prefixes).
const workloadRules = `  - {name: pods-hosts, kind: workloadIP, networks: ["*"]}
` + podsRule

// BenchmarkAdvertiseWorkload (issue 19): node1 runs 10,000 pods
// (OVNBGP_BENCH_WL_PODS) on its switch of a layer3 UDN, each a
// Logical_Switch_Port as OVN-Kubernetes writes it; ovnbgp advertises their
// /32s (rule kind workloadIP), FRR(vtysh) and BIRD(configure) get the same
// /32s as `network` statements and static routes. Per contender, in one
// lab: first the bulk (wlRun), then the changes.
func BenchmarkAdvertiseWorkload(b *testing.B) {
	gate(b)
	pods := envInt(b, envWLPods, 10000, 1, maxWLPods-5) // wlRun checks pods and changes together
	changes := envInt(b, envWLChanges, 200, 4, 2000)
	for _, c := range []struct{ id, world, name string }{
		{"ovnbgp", "ovnbgp-wl", ovnbgpName},
		{"frr-vtysh", "frr-vtysh", vtyshName},
		{"bird-configure", "bird-configure", birdConfName},
	} {
		b.Run(c.id, func(b *testing.B) {
			r := benchRun(b)
			wlRun(r, newWorld(r, c.world, c.name), pods, changes, bulkVIPSettle)
		})
	}
}

// wlRun is the workload job in w:
//   - bulk: pods pods added in one operation (for ovnbgp one NB transaction
//     of their switch ports), then withdrawn, as BenchmarkAdvertiseBulk
//     (bulkRun with settle: the RSS per workload route);
//   - changes: the pods preloaded in one operation, then changes changes
//     (at least 4), in turn: a new pod added, an old one removed, each
//     timed from the commit and the command's start to the ToR's log of the
//     UPDATE (changeRun).
func wlRun(b jobRun, w *world, pods, changes int, settle time.Duration) {
	// The changes add pods pods to pods+changes+3 and remove pods 0 to
	// changes+3 of the preload.
	if pods+changes+4 >= maxWLPods || pods < changes+4 {
		b.Fatalf("%s %d and %s %d: want at least changes + 4 pods, and at most %d pods and changes together", envWLPods, pods, envWLChanges, changes, maxWLPods-5)
	}
	var bulkProf, changesProf string
	if out := os.Getenv(envWLProfile); out != "" && w.name == ovnbgpName {
		bulkProf, changesProf = out+"-bulk", out+"-changes"
	}
	wait := profileDaemon(b, w.l, "CPU profile over the bulk add", bulkProf, "/debug/pprof/profile?seconds=8")
	bulkRun(b, w, []int{pods}, wlPods, "pod /32", settle)
	wait()
	var plan []change
	for k := 0; len(plan) < 2*(changes+4); k++ {
		plan = append(plan, change{"pod added", true, wlPodAddr(pods + k)}, change{"pod removed", false, wlPodAddr(k)})
	}
	changeRun(b, w, wlPods(pods), "pods", plan, changes, fmt.Sprintf("one pod added or removed, %d pods", pods), changesProf)
}
