package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/plan"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// Issue 19: advertise rules of kind workloadIP send the /32 and /128 of
// each pod and KubeVirt VM whose Logical_Switch_Port is this node's
// (docs/ovn-nb.md, "Workloads"), written into a real ovsdb-server as
// OVN-Kubernetes writes them (ovn/testdata/nb/kubevirt-*.json).

// wlGreen is the layer2 primary UDN of namespace ns2 (NAD ns2/green),
// dual-stack; every node's NB holds every pod's port of it.
var wlGreen = lab.Layer2{Name: "ns2_green", Subnet: netip.MustParsePrefix("10.100.0.0/16"), Subnet6: netip.MustParsePrefix("fd10:100::/64")}

// wlAll is a workloadIP rule for every network.
const wlAll = `  - {name: wl, kind: workloadIP, networks: ["*"]}`

// setupWorkload is setupAdvertise with rules, the layer2 network wlGreen
// and the transit switch naming node2 (interconnect mode).
func setupWorkload(t *testing.T, rules string) *advWorld {
	t.Helper()
	a := setupAdvertise(t, rules)
	a.nb.AddLayer2(wlGreen)
	a.nb.AddTransitSwitch("node2")
	return a
}

// greenPort is a pod's port on wlGreen: this node's (requested-chassis
// chassis-node1) unless remote, then node2's.
func greenPort(pod, mac, ips string, remote bool) lab.PodPort {
	p := lab.PodPort{Switch: wlGreen.Switch(), Network: wlGreen.Name, NAD: "ns2/green", Topology: "layer2",
		Namespace: "ns2", Pod: pod, Addresses: mac + " " + ips, Chassis: "chassis-node1"}
	if remote {
		p.Remote, p.Chassis = true, "chassis-node2"
	}
	return p
}

// defaultPort is a pod's port on node's default-network switch, its
// requested-chassis the node name (OVN-Kubernetes up to v1.2).
func defaultPort(node, ns, pod, mac, ips string) lab.PodPort {
	return lab.PodPort{Switch: node, Namespace: ns, Pod: pod, Addresses: mac + " " + ips, Chassis: node}
}

// hosts are the host prefixes of addresses.
func hosts(addrs ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range addrs {
		out = append(out, hostPrefix(s))
	}
	return out
}

// frrHosts are the host prefixes (/32, /128) FRR has best paths for.
func (a *advWorld) frrHosts() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, fam := range []string{"ipv4", "ipv6"} {
		best, err := a.frr.BestPaths(fam)
		if err != nil {
			return nil, err
		}
		for p := range best {
			if p.IsSingleIP() {
				out = append(out, p)
			}
		}
	}
	lab.SortPrefixes(out)
	return out, nil
}

// waitHosts waits until FRR's host prefixes are exactly want (no rule
// but workloadIP sends any here).
func (a *advWorld) waitHosts(what string, want []netip.Prefix) {
	a.t.Helper()
	want = slices.Clone(want)
	lab.SortPrefixes(want)
	lab.Eventually(a.t, generous, 100*time.Millisecond, what, func() error {
		got, err := a.frrHosts()
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("FRR holds host prefixes %v, want exactly %v", got, want)
		}
		return nil
	})
}

// TestWorkloadLocalRemote: FRR receives the /32 and /128 of exactly this
// node's ports (layer2 with interconnect: not the remote ones; default
// network: the ports on node1's switch), as they are added and deleted.
func TestWorkloadLocalRemote(t *testing.T) {
	t.Parallel()
	a := setupWorkload(t, wlAll)
	a.nb.AddPodPort(greenPort("web-a", "0a:58:0a:64:00:14", "10.100.0.20 fd10:100::20", false))
	remote := a.nb.AddPodPort(greenPort("web-b", "0a:58:0a:64:00:15", "10.100.0.21 fd10:100::21", true))
	api1 := a.nb.AddPodPort(defaultPort("node1", "ns3", "api-1", "0a:58:0a:80:00:14", "10.128.0.20 fd00:10:128:1::20"))
	a.nb.AddPodPort(lab.PodPort{Switch: "node2", Namespace: "ns3", Pod: "api-2",
		Addresses: "0a:58:0a:80:02:14 10.128.2.20 fd00:10:128:2::20", Chassis: "chassis-node2"})
	local := hosts("10.100.0.20", "fd10:100::20", "10.128.0.20", "fd00:10:128:1::20")
	a.waitHosts("the local ports' addresses", local)

	// A port added later, IPv6 only.
	late := a.nb.AddPodPort(greenPort("web-c", "0a:58:0a:64:00:16", "fd10:100::22", false))
	a.waitHosts("the late port's /128 too", append(slices.Clone(local), hostPrefix("fd10:100::22")))

	a.nb.DeletePort(api1)
	a.nb.DeletePort(late)
	a.waitHosts("the deleted ports' addresses withdrawn", hosts("10.100.0.20", "fd10:100::20"))
	// Deleting the remote port changes nothing here.
	a.nb.DeletePort(remote)
	a.nb.DeletePort(greenPort("web-a", "", "", false).Name())
	a.waitHosts("every workload address withdrawn", nil)
	a.waitFRR("the pod subnets stay", []netip.Prefix{lab.DefaultNode1.Subnet, lab.DefaultNode1.Subnet6}, nil)
}

// TestWorkloadSelectors: a rule's namespaces and pods globs select by the
// pod's namespace and namespace/name, and a KubeVirt VM also by its VM's
// name from DHCP_Options; routes advertised names the workload and
// explain says why each address is or is not advertised.
func TestWorkloadSelectors(t *testing.T) {
	t.Parallel()
	a := setupWorkload(t, `  - {name: wl, kind: workloadIP, networks: ["*"], namespaces: ["ns2", "prod*"], pods: ["ns2/web-*", "prod/db-*"]}`)
	a.nb.AddPodPort(greenPort("web-a", "0a:58:0a:64:00:14", "10.100.0.20 fd10:100::20", false))
	a.nb.AddPodPort(greenPort("api-x", "0a:58:0a:64:00:17", "10.100.0.23", false))
	a.nb.AddPodPort(defaultPort("node1", "other", "web-c", "0a:58:0a:80:00:15", "10.128.0.21"))
	vm := defaultPort("node1", "prod", "virt-launcher-db-1-abcde", "0a:58:0a:80:00:1e", "10.128.0.30 fd00:10:128:1::30")
	vm.VM, vm.CIDR = "prod/db-1", "10.128.0.0/14"
	a.nb.AddPodPort(vm)
	cache := defaultPort("node1", "prod", "virt-launcher-cache-1-xyz12", "0a:58:0a:80:00:1f", "10.128.0.31")
	cache.VM, cache.CIDR = "prod/cache-1", "10.128.0.0/14"
	a.nb.AddPodPort(cache)
	a.waitHosts("web-a's and the VM db-1's addresses", hosts("10.100.0.20", "fd10:100::20", "10.128.0.30", "fd00:10:128:1::30"))

	sources := map[string]string{"10.100.0.20/32": "pod ns2/web-a", "fd10:100::20/128": "pod ns2/web-a",
		"10.128.0.30/32": "vm prod/db-1", "fd00:10:128:1::30/128": "vm prod/db-1"}
	for p, want := range sources {
		advs := a.advertised(netip.MustParsePrefix(p))
		if len(advs) == 0 {
			t.Errorf("routes advertised has no %s", p)
		}
		for _, adv := range advs {
			if adv.Rule != "wl" || !strings.Contains(adv.Source, want) {
				t.Errorf("routes advertised %s to %s: rule %q, source %q, want rule wl and a source naming %q", p, adv.Peer, adv.Rule, adv.Source, want)
			}
		}
	}

	// explain: the rule's verdict on each address.
	for _, c := range []struct {
		prefix  string
		selects bool
		why     string
	}{
		{"10.100.0.20/32", true, "pod ns2/web-a"},
		{"10.128.0.30/32", true, "vm prod/db-1"},
		{"10.100.0.23/32", false, "pod ns2/api-x is not in the rule's pods"},
		{"10.128.0.21/32", false, "namespace other is not in the rule's namespaces"},
		{"10.128.0.31/32", false, "neither pod prod/virt-launcher-cache-1-xyz12 nor vm prod/cache-1 is in the rule's pods"},
		{"10.100.0.99/32", false, "not an address of a pod or VM whose port is this node's"},
	} {
		e, err := a.d.Explain(c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range e.AdvertiseRules {
			if v.Rule != "wl" {
				continue
			}
			found = true
			if v.Selects != c.selects || !strings.Contains(v.Why, c.why) {
				t.Errorf("explain %s: rule wl selects=%v why %q; want selects=%v and a why containing %q", c.prefix, v.Selects, v.Why, c.selects, c.why)
			}
		}
		if !found {
			t.Errorf("explain %s: no verdict of rule wl: %+v", c.prefix, e.AdvertiseRules)
		}
	}
}

// TestWorkloadMovesNode: a port whose requested-chassis or type names
// another node is no longer this node's: its addresses are withdrawn, and
// sent again when it comes back.
func TestWorkloadMovesNode(t *testing.T) {
	t.Parallel()
	a := setupWorkload(t, wlAll)
	green := a.nb.AddPodPort(greenPort("web-a", "0a:58:0a:64:00:14", "10.100.0.20 fd10:100::20", false))
	def := a.nb.AddPodPort(defaultPort("node1", "ns3", "api-1", "0a:58:0a:80:00:14", "10.128.0.20 fd00:10:128:1::20"))
	a.waitHosts("both pods' addresses", hosts("10.100.0.20", "fd10:100::20", "10.128.0.20", "fd00:10:128:1::20"))

	// The layer2 pod now runs on node2: its port turns remote.
	a.nb.SetPort(green, "type=remote", `options:requested-chassis="chassis-node2"`)
	a.waitHosts("the layer2 pod's addresses withdrawn", hosts("10.128.0.20", "fd00:10:128:1::20"))
	// The default network's port names node2's chassis (type unchanged).
	a.nb.SetPort(def, `options:requested-chassis="chassis-node2"`)
	a.waitHosts("the default network pod's addresses withdrawn", nil)
	// Back on node1, by node name and by chassis.
	a.nb.SetPort(green, `type=""`, `options:requested-chassis="chassis-node1"`)
	a.nb.SetPort(def, `options:requested-chassis="node1"`)
	a.waitHosts("both back", hosts("10.100.0.20", "fd10:100::20", "10.128.0.20", "fd00:10:128:1::20"))
}

// TestWorkloadOddRows: ports with no address, only a MAC, "dynamic", one
// word, an address that does not parse, or a default-network address outside
// node1's subnets are not advertised, and nothing valid is withdrawn.
// "dynamic" and the unparsable addresses are row problems: logged once
// ("nb row skipped") and in status; the others are skipped without a log
// line (no address and a MAC only are a pod of a network without IPAM; an
// address outside the subnets is a live migration's arriving VM: explain
// says so).
func TestWorkloadOddRows(t *testing.T) {
	t.Parallel()
	a := setupWorkload(t, wlAll)
	a.nb.AddPodPort(greenPort("web-a", "0a:58:0a:64:00:14", "10.100.0.20 fd10:100::20", false))
	a.nb.AddPodPort(defaultPort("node1", "ns3", "api-1", "0a:58:0a:80:00:14", "10.128.0.20 fd00:10:128:1::20"))
	valid := hosts("10.100.0.20", "fd10:100::20", "10.128.0.20", "fd00:10:128:1::20")
	a.waitHosts("the valid ports' addresses", valid)

	// FRR installs what it learns in the tor's kernel: a withdrawal, even
	// for a moment, shows there as "Deleted".
	kmon := a.lab.MonitorRoutes(a.lab.Tor)
	odd := []lab.PodPort{
		{Switch: "node1", Namespace: "ns4", Pod: "noaddr", Chassis: "node1"},
		defaultPort("node1", "ns4", "outside", "0a:58:0a:80:04:07", "10.128.4.7"),
		{Switch: "node1", Namespace: "ns4", Pod: "maconly", Addresses: "0a:58:0a:80:00:33", Chassis: "node1"},
		{Switch: "node1", Namespace: "ns4", Pod: "dynamic", Addresses: "dynamic", Chassis: "node1"},
		defaultPort("node1", "ns4", "garbage", "0a:58:0a:80:00:34", "10.128.0.52 not-an-ip"),
		{Switch: wlGreen.Switch(), Network: wlGreen.Name, NAD: "ns2/green", Topology: "layer2", Namespace: "ns2",
			Pod: "garbage2", Addresses: "0a:58:0a:64:00:35 fd10:100::35%eth0", Chassis: "chassis-node1"},
		// One word: taken as the MAC, with no address after it.
		{Switch: "node1", Namespace: "ns4", Pod: "oneword", Addresses: "not-a-mac", Chassis: "node1"},
	}
	// The ones logged as problems: "dynamic" (OVN's IPAM, never read)
	// and an address that does not parse.
	logged := map[int]bool{3: true, 4: true, 5: true}
	for _, p := range odd {
		a.nb.AddPodPort(p)
	}
	garbage := odd[4].Name()
	// A valid port added after them shows the daemon has read them all.
	a.nb.AddPodPort(greenPort("web-z", "0a:58:0a:64:00:24", "10.100.0.36", false))
	valid = append(valid, hostPrefix("10.100.0.36"))
	a.waitHosts("the valid ports' addresses, no odd one", valid)
	a.noFRR("odd rows", hosts("10.128.4.7", "10.128.0.52", "fd10:100::35"))

	lab.Eventually(t, generous, 100*time.Millisecond, "status lists the unparsable ports", func() error {
		st, err := a.d.Status()
		if err != nil {
			return err
		}
		for _, name := range []string{garbage, odd[5].Name()} {
			if !slices.ContainsFunc(st.NB.Problems, func(s string) bool { return strings.Contains(s, name+" ") }) {
				return fmt.Errorf("status problems %q do not name %s", st.NB.Problems, name)
			}
		}
		return nil
	})
	e, err := a.d.Explain("10.128.4.7/32")
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(e.AdvertiseRules, "wl"); v == nil || v.Selects || !strings.Contains(v.Why, "arriving") {
		t.Errorf("explain 10.128.4.7/32 (outside node1's subnets): rule wl verdict %+v, want not selected as arriving", v)
	}

	// More passes (another port comes and goes): each problem is still
	// logged once, and no other row is named in a log line.
	extra := a.nb.AddPodPort(greenPort("web-y", "0a:58:0a:64:00:25", "10.100.0.37", false))
	a.waitHosts("web-y too", append(slices.Clone(valid), hostPrefix("10.100.0.37")))
	a.nb.DeletePort(extra)
	a.waitHosts("web-y withdrawn", valid)
	// zebra removes the kernel route after bgpd's RIB shows it gone; a
	// withdrawal of a valid address would show before this last one.
	lab.Eventually(t, generous, 100*time.Millisecond, "the tor's kernel loses web-y's route", func() error {
		if out := kmon.Output(); !strings.Contains(out, "Deleted 10.100.0.37 ") {
			return fmt.Errorf("ip monitor route in the tor has no deletion of 10.100.0.37:\n%s", out)
		}
		return nil
	})
	kout := kmon.Stop()
	for _, l := range strings.Split(kout, "\n") {
		for _, p := range valid {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Deleted" && (f[1] == p.String() || f[1] == p.Addr().String()) {
				t.Errorf("a valid port's address was withdrawn: %s", l)
			}
		}
	}
	// A problem is logged once it has stood for a second (problemSettle
	// in ovn/problems.go): wait for the lines, then check them.
	var lines []map[string]any
	lab.Eventually(t, generous, 100*time.Millisecond, "a line per logged odd port", func() error {
		var err error
		if lines, err = a.d.LogLines("nb row skipped"); err != nil {
			return err
		}
		if len(lines) < len(logged) {
			return fmt.Errorf("%d 'nb row skipped' lines, want %d", len(lines), len(logged))
		}
		return nil
	})
	count := map[string]int{}
	for _, l := range lines {
		p, _ := l["problem"].(string)
		named := false
		for _, o := range odd {
			if strings.Contains(p, o.Name()+" ") {
				count[o.Name()]++
				named = true
			}
		}
		if !named {
			t.Errorf("'nb row skipped' log line names no odd port: %q", p)
		}
	}
	for i, o := range odd {
		want := 0
		if logged[i] {
			want = 1
		}
		if count[o.Name()] != want {
			t.Errorf("%d 'nb row skipped' log lines name %s, want %d (lines: %v)", count[o.Name()], o.Name(), want, lines)
		}
	}
}

// TestWorkloadLayer2OutsideSubnet: a layer2 port whose address is outside
// the network's subnets. OVN-Kubernetes never writes one (a layer2 VM
// keeps its address, which is always inside the cluster-wide subnet), so
// advertising it as a /32 sends a peer traffic for an address the network
// does not hold.
func TestWorkloadLayer2OutsideSubnet(t *testing.T) {
	t.Parallel()
	a := setupWorkload(t, wlAll)
	a.nb.AddPodPort(greenPort("web-a", "0a:58:0a:64:00:14", "10.100.0.20", false))
	a.nb.AddPodPort(greenPort("outside", "0a:58:0a:63:00:07", "10.99.0.7", false))
	a.nb.AddPodPort(greenPort("web-z", "0a:58:0a:64:00:24", "10.100.0.36", false))
	a.waitHosts("the valid ports' addresses, not the outside one", hosts("10.100.0.20", "10.100.0.36"))
}

// TestWorkloadBIRD: the local/remote case against BIRD 2 as the tor (an
// IPv4 and an IPv6 session): BIRD holds exactly this node's ports' /32
// and /128, and loses them when the ports go.
func TestWorkloadBIRD(t *testing.T) {
	t.Parallel()
	w := &advWorldR{l: lab.New(t)}
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	w.nb.AddLayer2(wlGreen)
	w.nb.AddTransitSwitch("node2")
	b := w.l.StartBIRD(w.l.Tor, lab.BIRDConfig{Text: birdAdvConfig})
	w.r = birdRouter{bird: b}
	w.d = w.l.StartDaemon(w.nb, lab.DaemonConfig{Peers: advPeers(), GracefulRestart: true,
		Advertise: wlAll + "\n  - {name: pods, kind: podNetwork, networks: [default]}"})
	local := w.nb.AddPodPort(greenPort("web-a", "0a:58:0a:64:00:14", "10.100.0.20 fd10:100::20", false))
	w.nb.AddPodPort(greenPort("web-b", "0a:58:0a:64:00:15", "10.100.0.21 fd10:100::21", true))
	def := w.nb.AddPodPort(defaultPort("node1", "ns3", "api-1", "0a:58:0a:80:00:14", "10.128.0.20 fd00:10:128:1::20"))

	birdHosts := func(want ...string) func() error {
		wantP := hosts(want...)
		lab.SortPrefixes(wantP)
		return func() error {
			var got []netip.Prefix
			for _, f := range advFamilies {
				if err := w.r.Established(f); err != nil {
					return err
				}
				rs, err := w.r.Routes(f)
				if err != nil {
					return err
				}
				if _, ok := rs[prefixOf(lab.DefaultNode1, f)]; !ok {
					return fmt.Errorf("BIRD has no %s yet", prefixOf(lab.DefaultNode1, f))
				}
				for p := range rs {
					if p.IsSingleIP() {
						got = append(got, p)
					}
				}
			}
			lab.SortPrefixes(got)
			if !slices.Equal(got, wantP) {
				return fmt.Errorf("BIRD holds host prefixes %v, want exactly %v", got, wantP)
			}
			return nil
		}
	}
	lab.Eventually(t, generous, 100*time.Millisecond, "BIRD holds the local ports' addresses",
		birdHosts("10.100.0.20", "fd10:100::20", "10.128.0.20", "fd00:10:128:1::20"))
	w.nb.DeletePort(local)
	w.nb.SetPort(def, `options:requested-chassis="chassis-node2"`)
	lab.Eventually(t, generous, 100*time.Millisecond, "BIRD loses them", birdHosts())
}

// verdict is rule's verdict among vs, nil if none.
func verdict(vs []plan.AdvertiseVerdict, rule string) *plan.AdvertiseVerdict {
	for i := range vs {
		if vs[i].Rule == rule {
			return &vs[i]
		}
	}
	return nil
}

// TestNBTransactionReadWhole: one NB transaction (ovn-nbctl, one commit)
// writes a layer2 switch with an IPv6 prefix and the router port that
// gives its length. libovsdb hands the client the update's row events one
// by one after applying it, so a read between the Logical_Switch and the
// Logical_Router_Port event sees the switch without its length and skips
// it for a millisecond. That must never reach the operator as a problem:
// no "nb row skipped" line, even after the settle time (problemSettle,
// ovn/problems.go) has passed.
func TestNBTransactionReadWhole(t *testing.T) {
	t.Parallel()
	a := setupWorkload(t, wlAll)
	for i := range 30 {
		a.nb.AddLayer2(lab.Layer2{Name: fmt.Sprintf("ns9_n%d", i), Subnet6: netip.MustParsePrefix(fmt.Sprintf("fd10:9%02x::/64", i))})
		time.Sleep(20 * time.Millisecond)
	}
	// The last network's port shows the daemon has read them all.
	a.nb.AddPodPort(lab.PodPort{Switch: "ns9_n29_ovn_layer2_switch", Network: "ns9_n29", NAD: "ns9/n29", Topology: "layer2",
		Namespace: "ns9", Pod: "web", Addresses: "0a:58:0a:64:09:01 fd10:91d::5", Chassis: "chassis-node1"})
	a.waitHosts("the last network's pod", hosts("fd10:91d::5"))
	// A problem that stood would be logged a second after it appeared.
	time.Sleep(2 * time.Second)
	lines, err := a.d.LogLines("nb row skipped")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		t.Errorf("nb row skipped, for rows written in one transaction: %v", l["problem"])
	}
}
