package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The chaos suite (issue 9 item 1): the real lab with three peers (two FRR
// routers and a BIRD, each on its own link), advertise and import rules
// (OVN and a kernel table), a foreign OVN static route and foreign kernel
// routes; then peer link flaps, FRR restarts, ovsdb-server restarts,
// SIGKILLs of ovnbgp and config reloads in a random, seeded order. After
// each: convergence, then the checks (see chaosWorld.check and
// chaosWorld.window). `make test` runs a short variant; `make test-chaos`
// the full counts.

// chaosCounts are how many disruptions of each kind a run makes.
type chaosCounts struct {
	Flaps, FRR, OVSDB, Kills, Reloads int
}

var (
	// shortChaos is `make test`'s variant (about a minute and a half on
	// two cores).
	shortChaos = chaosCounts{Flaps: 3, FRR: 2, OVSDB: 2, Kills: 2, Reloads: 2}
	// fullChaos is `make test-chaos` (the counts).
	fullChaos = chaosCounts{Flaps: 100, FRR: 20, OVSDB: 20, Kills: 20, Reloads: 20}
)

// parseChaosCounts reads OVNBGP_CHAOS: "" = short, "full", or
// "flaps=N,frr=N,ovsdb=N,kills=N,reloads=N" (keys left out keep the short
// variant's value).
func parseChaosCounts(s string) (chaosCounts, error) {
	c := shortChaos
	switch strings.TrimSpace(s) {
	case "", "short":
		return c, nil
	case "full":
		return fullChaos, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return c, fmt.Errorf("OVNBGP_CHAOS: %q is not KEY=COUNT (a count >= 0): want full, short or flaps=N,frr=N,ovsdb=N,kills=N,reloads=N", kv)
		}
		switch k {
		case "flaps":
			c.Flaps = n
		case "frr":
			c.FRR = n
		case "ovsdb":
			c.OVSDB = n
		case "kills":
			c.Kills = n
		case "reloads":
			c.Reloads = n
		default:
			return c, fmt.Errorf("OVNBGP_CHAOS: unknown key %q: want flaps, frr, ovsdb, kills or reloads", k)
		}
	}
	return c, nil
}

func TestParseChaosCounts(t *testing.T) {
	for in, want := range map[string]chaosCounts{
		"":                  shortChaos,
		"full":              fullChaos,
		"flaps=7,reloads=0": {Flaps: 7, FRR: 2, OVSDB: 2, Kills: 2, Reloads: 0},
	} {
		got, err := parseChaosCounts(in)
		if err != nil || got != want {
			t.Errorf("parseChaosCounts(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"flaps", "flaps=-1", "storms=3"} {
		if _, err := parseChaosCounts(in); err == nil {
			t.Errorf("parseChaosCounts(%q): no error", in)
		}
	}
}

// The chaos lab's peers: name, the node's and the peer's link address, AS,
// and what each announces. 10.99.1.0/24 comes from all three (three-way
// ECMP); the others from one each.
var (
	chaosTorA = netip.MustParseAddr("192.0.2.1") // FRR, the lab's tor namespace (lab.TorIPv4)
	chaosTorB = netip.MustParseAddr("192.0.2.3") // FRR, namespace torb
	chaosBIRD = netip.MustParseAddr("192.0.2.5") // BIRD, namespace bird

	chaosPeerOf = map[string]string{chaosTorA.String(): "tor-a", chaosTorB.String(): "tor-b", chaosBIRD.String(): "bird"}
	chaosOrig   = map[string][]string{
		"tor-a": {"10.99.1.0/24", "10.99.2.0/24"},
		"tor-b": {"10.99.1.0/24", "10.99.3.0/24"},
		"bird":  {"10.99.1.0/24", "10.99.4.0/24"},
	}
	chaosNextHop = map[string]string{"tor-a": chaosTorA.String(), "tor-b": chaosTorB.String(), "bird": chaosBIRD.String()}
	chaosPeers   = []string{"tor-a", "tor-b", "bird"}
)

const chaosImport = `  - name: chaos
    peers: [tor-a, tor-b, bird]
    network: default
    maxRoutes: 100
    accept:
      - {prefix: 10.99.0.0/%d, maxLength: 24}
    targets: {ovn: true, kernel: {table: 100}}`

// chaosState is a config variant: which import prefix length (16: every
// peer route; 22: not 10.99.4.0/24) and which networks are advertised.
type chaosState struct {
	importBits int
	advertise  []string // networks of the pods rule
}

var chaosBase = chaosState{importBits: 16, advertise: []string{"*"}}

// pair is one desired OVN row: prefix and next hop.
type pair struct{ prefix, nh string }

// desiredImports are the next hops per prefix the import rule lets in.
func (s chaosState) desiredImports() map[string][]string {
	accept := netip.PrefixFrom(netip.MustParseAddr("10.99.0.0"), s.importBits)
	res := map[string][]string{}
	for _, peer := range chaosPeers {
		for _, p := range chaosOrig[peer] {
			if accept.Contains(netip.MustParsePrefix(p).Addr()) {
				res[p] = append(res[p], chaosNextHop[peer])
			}
		}
	}
	for p := range res {
		slices.Sort(res[p])
	}
	return res
}

func (s chaosState) desiredAdverts() []netip.Prefix {
	if slices.Contains(s.advertise, "*") {
		return nodeSubnets4
	}
	return []netip.Prefix{lab.DefaultNode1.Subnet}
}

func (s chaosState) config(base lab.DaemonConfig) lab.DaemonConfig {
	c := base
	c.Import = fmt.Sprintf(chaosImport, s.importBits)
	c.Advertise = fmt.Sprintf(`  - {name: pods, kind: podNetwork, networks: ["%s"]}`, strings.Join(s.advertise, `", "`))
	return c
}

// The foreign state: an NB row that duplicates a desired import exactly
// (tor-b's 10.99.3.0/24 via tor-b: ovnbgp must not add its own beside it),
// one on a prefix nobody announces, and kernel routes of other protocols
// in table 100 (one on a prefix ovnbgp imports, at another metric).
var (
	chaosForeignRows   = []pair{{"10.99.3.0/24", chaosTorB.String()}, {"10.99.50.0/24", chaosBIRD.String()}}
	chaosForeignKernel = [][]string{
		{"ip", "route", "add", "blackhole", "10.99.60.0/24", "table", "100", "proto", "static"},
		{"ip", "route", "add", "10.99.2.0/24", "dev", "lo", "table", "100", "proto", "boot", "metric", "4242"},
	}
)

type chaosWorld struct {
	t          *testing.T
	l          *lab.Lab
	nb         *lab.NB
	frrA, frrB *lab.FRR
	bird       *lab.BIRD
	d          *lab.Daemon
	links      map[string]lab.PeerNamespace // peer name -> its link
	base       lab.DaemonConfig
	state      chaosState

	foreignUUIDs []string
	foreign      string // foreignState at the start

	kmon *lab.RouteMonitor
	// tmon records the kernel routes of each peer's namespace, where zebra
	// and BIRD install the node's subnets: a withdrawal shows as "Deleted".
	tmon       map[string]*lab.RouteMonitor
	tOff       map[string]int
	nbmon      *lab.NBMonitor
	nbmonOld   string // output of the monitors before the last ovsdb restart
	kOff, nOff int    // how far window has read the monitors
	uuidPair   map[string]pair
	win        windowStart // the event's starting point (beginWindow)

	checks, violations int
	canaries           int // flushMonitors' count
	// selfTest: violation records what it found in detected instead of
	// failing the test (the detectors' own test, see selfTest).
	selfTest bool
	detected []string
}

func (w *chaosWorld) violation(format string, args ...any) {
	w.t.Helper()
	if w.selfTest {
		w.detected = append(w.detected, fmt.Sprintf(format, args...))
		return
	}
	w.violations++
	w.t.Errorf("VIOLATION: "+format, args...)
}

// selfTestDetectors proves that the window's checks can fail: an owned row
// and an owned kernel route removed behind ovnbgp's back (as a bug of ours
// would) are seen by the NB monitor, the UUID check and ip monitor, and
// ovnbgp puts both back; a foreign route deleted and added again, and the
// node's subnet deleted from an FRR's kernel (as a withdrawal would), are
// seen too.
func (w *chaosWorld) selfTestDetectors() {
	t := w.t
	t.Helper()
	w.beginWindow()
	prefix, nh := "10.99.2.0/24", chaosTorA.String()
	w.nb.MustNBCtl("lr-route-del", "GR_node1", prefix, nh)
	if out, err := w.l.Exec(w.l.Node, "ip", "route", "del", prefix, "table", "100", "proto", "200"); err != nil {
		t.Fatalf("ip route del %s: %v: %s", prefix, err, out)
	}
	// a foreign route deleted and added again, the same
	for _, op := range []string{"del", "add"} {
		if out, err := w.l.Exec(w.l.Node, "ip", "route", op, "blackhole", "10.99.60.0/24", "table", "100", "proto", "static"); err != nil {
			t.Fatalf("ip route %s blackhole 10.99.60.0/24: %v: %s", op, err, out)
		}
	}
	// the node's subnet deleted from tor-a's kernel (as a withdrawal
	// would) and put back as it was
	sub := lab.DefaultNode1.Subnet.String()
	line, err := w.l.Exec(w.l.Tor, "ip", "route", "show", sub)
	if err != nil || !strings.HasPrefix(line, sub+" ") {
		t.Fatalf("tor-a's route to %s: %v: %q", sub, err, line)
	}
	if out, err := w.l.Exec(w.l.Tor, "ip", "route", "del", sub); err != nil {
		t.Fatalf("ip route del %s: %v: %s", sub, err, out)
	}
	// zebra's route names a nexthop object ("nhid N via A dev D"): ip
	// takes the nhid alone
	again := []string{"ip", "route", "replace"}
	for f := strings.Fields(line); len(f) > 0; f = f[1:] {
		if (f[0] == "via" || f[0] == "dev") && strings.Contains(line, " nhid ") && len(f) > 1 {
			f = f[1:]
			continue
		}
		again = append(again, f[0])
	}
	if out, err := w.l.Exec(w.l.Tor, again...); err != nil {
		t.Fatalf("ip route replace %s: %v: %s", line, err, out)
	}
	w.converge("self-test: ovnbgp restores the row and the route removed behind its back")
	w.selfTest = true
	w.endWindow("self-test", nil, nil)
	w.selfTest = false
	for _, want := range []string{"kernel route " + prefix + " lost next hop " + nh, "the NB monitor saw owned row {" + prefix + " " + nh + "}",
		"owned row {" + prefix + " " + nh + "} was ", "a foreign kernel route changed: \"Deleted blackhole 10.99.60.0/24",
		"peer tor-a lost the node's " + sub} {
		if !slices.ContainsFunc(w.detected, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("self-test: the checks did not see %q; they saw %q", want, w.detected)
		}
	}
	t.Logf("self-test: the checks saw %d violations made on purpose: %q", len(w.detected), w.detected)
}

// TestChaos is the chaos suite: see the top of this file. OVNBGP_CHAOS sets
// the counts (parseChaosCounts), OVNBGP_CHAOS_SEED the seed of the order
// (default: the clock; the summary line prints it).
func TestChaos(t *testing.T) {
	t.Parallel()
	counts, err := parseChaosCounts(os.Getenv("OVNBGP_CHAOS"))
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OVNBGP_CHAOS_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("OVNBGP_CHAOS_SEED: %q is not an unsigned integer", s)
		}
	}
	// make test's short variant runs the race-built daemon (issue 17 item
	// 6): a race report in its log fails the test
	w := startChaos(t, counts == shortChaos)
	rng := rand.New(rand.NewPCG(seed, 0x0c4a05))
	var events []string
	for kind, n := range map[string]int{"flap": counts.Flaps, "frr": counts.FRR, "ovsdb": counts.OVSDB, "kill": counts.Kills, "reload": counts.Reloads} {
		for range n {
			events = append(events, kind)
		}
	}
	slices.Sort(events) // the map's order is random: sort, then shuffle with the seed
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	done := map[string]int{}
	total := 0
	start := time.Now()
	defer func() {
		t.Logf("chaos summary: seed=%d events=%d/%d flaps=%d frr-restarts=%d ovsdb-restarts=%d ovnbgp-kills=%d reloads=%d checks=%d violations=%d elapsed=%v",
			seed, total, len(events), done["flap"], done["frr"], done["ovsdb"], done["kill"], done["reload"], w.checks, w.violations, time.Since(start).Round(time.Second))
	}()
	t.Logf("chaos: seed %d (OVNBGP_CHAOS_SEED=%d repeats this order), %d events: %v", seed, seed, len(events), events)
	for i, ev := range events {
		what := fmt.Sprintf("event %d/%d (%s", i+1, len(events), ev)
		evStart := time.Now()
		var allowed []string // peers whose routes may go during the event
		var allowedPrefixes []string
		w.beginWindow()
		switch ev {
		case "flap":
			peer := chaosPeers[rng.IntN(len(chaosPeers))]
			down := time.Duration(200+rng.IntN(1800)) * time.Millisecond
			long := rng.IntN(4) == 0 // wait until ovnbgp's hold timer ends the session
			kill := rng.IntN(5) == 0 // and kill and restart ovnbgp while the link is down
			what += fmt.Sprintf(" %s for %v, long=%v, kill=%v)", peer, down, long, kill)
			allowed = []string{peer}
			w.flap(peer, down, long, kill)
		case "frr":
			peer := []string{"tor-a", "tor-b"}[rng.IntN(2)]
			what += " " + peer + ")"
			allowed = []string{peer}
			f := w.frrA
			if peer == "tor-b" {
				f = w.frrB
			}
			if err := f.Restart(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case "ovsdb":
			// one in three: ovnbgp is killed and restarted while NB is
			// down (fail static: it starts without NB and deletes nothing)
			withKill := rng.IntN(3) == 0
			what += fmt.Sprintf(" kill=%v)", withKill)
			var during func()
			if withKill {
				during = w.killAndWait
			}
			w.restartOVSDB(time.Duration(rng.IntN(1500))*time.Millisecond, during)
		case "kill":
			what += ")"
			w.kill()
		case "reload":
			v := chaosState{importBits: 22, advertise: []string{"*"}}
			if rng.IntN(2) == 0 {
				v = chaosState{importBits: 16, advertise: []string{"default"}}
			}
			nbDown := rng.IntN(3) == 0 // one in three: to the variant while ovsdb-server is down
			what += fmt.Sprintf(" import /%d, advertise %v, and back; nbDown=%v)", v.importBits, v.advertise, nbDown)
			// the variant, checked, then back to the base
			if v.importBits != 16 {
				allowedPrefixes = []string{"10.99.4.0/24"}
			} else {
				allowedPrefixes = []string{lab.BlueNode1.Subnet.String()}
			}
			if nbDown {
				// while NB is down: the OVN side waits for it
				w.restartOVSDB(0, func() { w.reload(v) })
			} else {
				w.reload(v)
			}
			w.converge(what + ": the variant")
			w.endWindow(what+": the variant", nil, allowedPrefixes)
			w.beginWindow()
			allowedPrefixes = nil
			w.reload(chaosBase)
		}
		w.converge(what)
		w.endWindow(what, allowed, allowedPrefixes)
		done[ev]++
		total++
		t.Logf("%s: converged and checked in %v", what, time.Since(evStart).Round(100*time.Millisecond))
		if i%10 == 9 {
			t.Logf("chaos: %d/%d events, %d violations, %v", i+1, len(events), w.violations, time.Since(start).Round(time.Second))
		}
	}
	// The checks work: they see a deletion made on purpose.
	w.selfTestDetectors()
	if w.violations > 0 {
		t.Errorf("%d violations", w.violations)
	}
}

func startChaos(t *testing.T, race bool) *chaosWorld {
	w := &chaosWorld{t: t, l: lab.New(t), state: chaosBase, uuidPair: map[string]pair{}}
	torb := w.l.AddPeerNamespace("torb", netip.MustParseAddr("192.0.2.2"))
	bird := w.l.AddPeerNamespace("bird", netip.MustParseAddr("192.0.2.4"))
	w.links = map[string]lab.PeerNamespace{
		"tor-a": {NS: w.l.Tor, NodeLink: lab.NodeLink, PeerLink: lab.TorLink, NodeAddr: lab.NodeIPv4, PeerAddr: lab.TorIPv4},
		"tor-b": torb, "bird": bird,
	}
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	w.nb.GatewayRouter("node1", netip.MustParsePrefix("192.0.2.0/31"), netip.MustParsePrefix("192.0.2.2/31"), netip.MustParsePrefix("192.0.2.4/31"))
	for _, r := range chaosForeignRows {
		w.nb.MustNBCtl("lr-route-add", "GR_node1", r.prefix, r.nh)
	}
	rows, err := w.nb.StaticRoutes("GR_node1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		w.foreignUUIDs = append(w.foreignUUIDs, r.UUID) // the cluster's own 10.128.0.0/14 too
		w.uuidPair[r.UUID] = pair{r.Prefix, r.NextHop}
	}
	for _, c := range chaosForeignKernel {
		if out, err := w.l.Exec(w.l.Node, c...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	w.foreign = w.foreignState()
	t.Logf("not ovnbgp's:\n%s", w.foreign)

	orig := func(peer string) []netip.Prefix {
		var res []netip.Prefix
		for _, p := range chaosOrig[peer] {
			res = append(res, netip.MustParsePrefix(p))
		}
		return res
	}
	w.frrA = w.l.StartFRR(lab.FRRConfig{ASN: 65001, GracefulRestart: true, Originate: orig("tor-a"),
		Neighbors: []lab.FRRNeighbor{{Address: lab.NodeIPv4, ASN: 65010, Passive: true}}})
	w.frrB = w.l.StartFRRIn(torb.NS, lab.FRRConfig{ASN: 65003, RouterID: chaosTorB, GracefulRestart: true, Originate: orig("tor-b"),
		Neighbors: []lab.FRRNeighbor{{Address: torb.NodeAddr, ASN: 65010, Passive: true}}})
	w.bird = w.l.StartBIRD(bird.NS, lab.BIRDConfig{RouterID: chaosBIRD, ASN: 65004, Neighbor: bird.NodeAddr,
		Passive: true, GracefulRestart: true, Kernel: true, Originate: orig("bird")})

	w.base = lab.DaemonConfig{
		GracefulRestart: true, RestartTime: 120 * time.Second, DeferralTime: 10 * time.Minute, Race: race,
		Peers: []lab.Peer{
			{Name: "tor-a", Address: chaosTorA, ASN: 65001, Families: []string{"ipv4"}},
			{Name: "tor-b", Address: chaosTorB, ASN: 65003, Families: []string{"ipv4"}},
			{Name: "bird", Address: chaosBIRD, ASN: 65004, Families: []string{"ipv4"}},
		},
	}
	w.d = w.l.StartDaemon(w.nb, chaosBase.config(w.base))
	w.base = w.d.Cfg // with the lab's fill-ins (sockets, state dir)
	w.converge("start")
	w.kmon = w.l.MonitorRoutes(w.l.Node)
	w.tmon = map[string]*lab.RouteMonitor{"tor-a": w.l.MonitorRoutes(w.l.Tor), "tor-b": w.l.MonitorRoutes(torb.NS), "bird": w.l.MonitorRoutes(bird.NS)}
	w.tOff = map[string]int{}
	w.nbmon = w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")
	return w
}

// foreignState is what ovnbgp does not own, as text: the foreign rows
// byte for byte, their references from GR_node1, and table 100's routes of
// other protocols.
func (w *chaosWorld) foreignState() string {
	return foreignOrError(w.l, w.nb, w.foreignUUIDs)
}

// check is one look at the whole world against the desired state: nil when
// it holds. It is polled until it holds (convergence), so it returns the
// first difference.
func (w *chaosWorld) check() error {
	if err := w.d.Exited(); err != nil {
		return err
	}
	// every session up, End-of-RIB received
	peers, err := w.d.Peers()
	if err != nil {
		return err
	}
	up := map[string]bool{}
	for _, p := range peers {
		up[p.Name] = p.State == model.StateEstablished && p.EndOfRIB
	}
	for _, name := range chaosPeers {
		if !up[name] {
			return fmt.Errorf("ovnbgp: peer %s not Established with End-of-RIB: %+v", name, peers)
		}
	}
	// each peer holds exactly the desired advertised set, once, fresh
	adverts := w.state.desiredAdverts()
	for _, f := range []struct {
		name string
		frr  *lab.FRR
		from netip.Addr
	}{{"tor-a", w.frrA, lab.NodeIPv4}, {"tor-b", w.frrB, w.links["tor-b"].NodeAddr}} {
		rib, err := f.frr.RIB("ipv4")
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		var got []netip.Prefix
		for p, paths := range rib {
			for _, path := range paths {
				if path.PeerID != f.from.String() {
					continue
				}
				if !path.Valid || !path.Best || path.Stale {
					return fmt.Errorf("%s (FRR): path %s from the node is valid %v, best %v, stale %v", f.name, p, path.Valid, path.Best, path.Stale)
				}
				got = append(got, p)
			}
		}
		lab.SortPrefixes(got)
		if !slices.Equal(got, adverts) {
			return fmt.Errorf("%s (FRR) holds %v from the node, want exactly %v", f.name, got, adverts)
		}
	}
	if err := w.bird.Established(); err != nil {
		return err
	}
	learned, err := w.bird.Learned()
	if err != nil {
		return err
	}
	got := slices.Collect(maps.Keys(learned))
	lab.SortPrefixes(got)
	if !slices.Equal(got, adverts) {
		return fmt.Errorf("bird holds %v from the node, want exactly %v", got, adverts)
	}
	for p, n := range learned {
		if n != 1 {
			return fmt.Errorf("bird holds %d routes for %s from the node", n, p)
		}
	}
	// and each peer installed them in its kernel (where the window's
	// monitors watch for withdrawals): exactly those of the node's subnets
	for _, peer := range chaosPeers {
		out, err := w.l.Exec(w.links[peer].NS, "ip", "-4", "route", "show")
		if err != nil {
			return fmt.Errorf("%s: ip route: %v: %s", peer, err, out)
		}
		var got []netip.Prefix
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if p, err := netip.ParsePrefix(f[0]); err == nil && slices.Contains(nodeSubnets4, p) {
				got = append(got, p)
			}
		}
		lab.SortPrefixes(got)
		if !slices.Equal(got, adverts) {
			return fmt.Errorf("%s's kernel has %v of the node's subnets, want %v", peer, got, adverts)
		}
	}
	// OVN: the owned rows are exactly the desired pairs but the foreign
	// duplicate, each once
	desired := w.state.desiredImports()
	var want []pair
	for p, nhs := range desired {
		for _, nh := range nhs {
			if !slices.Contains(chaosForeignRows, pair{p, nh}) {
				want = append(want, pair{p, nh})
			}
		}
	}
	owned, err := w.ownedRows()
	if err != nil {
		return err
	}
	var have []pair
	for _, r := range owned {
		have = append(have, pair{r.Prefix, r.NextHop})
		if r.ExternalID["ovnbgp.io/owner"] != "node1" || r.ExternalID["ovnbgp.io/rule"] != "chaos" {
			return fmt.Errorf("owned row %+v: want owner node1, rule chaos", r)
		}
	}
	cmpPair := func(a, b pair) int { return strings.Compare(a.prefix+" "+a.nh, b.prefix+" "+b.nh) }
	slices.SortFunc(want, cmpPair)
	slices.SortFunc(have, cmpPair)
	if !slices.Equal(have, want) {
		return fmt.Errorf("GR_node1's owned rows are %v, want exactly %v", have, want)
	}
	// kernel: one route per desired prefix with exactly its next hops
	lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
	if err != nil {
		return err
	}
	if len(lines) != len(desired) {
		return fmt.Errorf("table %d proto 200 has %d routes, want %d: %q", importTable, len(lines), len(desired), lines)
	}
	for _, line := range lines {
		p, nhs, _ := parseRouteLine(line)
		if !slices.Equal(nhs, desired[p]) {
			return fmt.Errorf("table %d: %q: next hops %v, want %v", importTable, line, nhs, desired[p])
		}
	}
	// and nothing foreign changed
	if f := w.foreignState(); f != w.foreign {
		return fmt.Errorf("what ovnbgp does not own changed:\nbefore:\n%s\nnow:\n%s", w.foreign, f)
	}
	return nil
}

func (w *chaosWorld) ownedRows() ([]lab.StaticRoute, error) {
	rows, err := w.nb.StaticRoutes("GR_node1")
	if err != nil {
		return nil, err
	}
	var res []lab.StaticRoute
	for _, r := range rows {
		if r.ExternalID["ovnbgp.io/owner"] != "" {
			res = append(res, r)
			w.uuidPair[r.UUID] = pair{r.Prefix, r.NextHop}
		}
	}
	return res, nil
}

// parseRouteLine reads a route of `ip route` or `ip monitor route` (a
// multipath route on one line): its prefix, sorted next hops, and whether
// it is a "Deleted" message.
func parseRouteLine(line string) (prefix string, nextHops []string, deleted bool) {
	f := strings.Fields(line)
	if len(f) > 0 && f[0] == "Deleted" {
		deleted, f = true, f[1:]
	}
	if len(f) > 0 && (f[0] == "blackhole" || f[0] == "unreachable" || f[0] == "prohibit" || f[0] == "unicast") {
		f = f[1:]
	}
	if len(f) > 0 {
		prefix = f[0]
	}
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "via" {
			nextHops = append(nextHops, f[i+1])
		}
	}
	slices.Sort(nextHops)
	return prefix, nextHops, deleted
}

// converge waits until check holds; a run that does not converge within a
// generous bound is a violation that ends the test.
func (w *chaosWorld) converge(what string) {
	w.t.Helper()
	if _, err := lab.Poll(2*generous, 100*time.Millisecond, w.check); err != nil {
		w.violation("%s: no convergence in %v: %v", what, 2*generous, err)
		w.t.FailNow()
	}
	w.checks++
}

// window state: the owned rows' UUIDs and the desired imports when the
// event began.
type windowStart struct {
	uuids   map[pair]string
	desired map[string][]string
	adverts []netip.Prefix
}

// beginWindow records the state an event starts from (the world has
// converged): the owned rows' UUIDs and the desired imports.
func (w *chaosWorld) beginWindow() {
	w.t.Helper()
	owned, err := w.ownedRows()
	if err != nil {
		w.t.Fatal(err)
	}
	ws := windowStart{uuids: map[pair]string{}, desired: w.state.desiredImports(), adverts: w.state.desiredAdverts()}
	for _, r := range owned {
		ws.uuids[pair{r.Prefix, r.NextHop}] = r.UUID
	}
	w.win = ws
}

// endWindow checks what changed during the event, once it converged: no
// imported route or row that should have stayed was deleted or changed in
// between. A route through a peer in allowed (its link flapped, it
// restarted) or of a prefix in allowedPrefixes (a reload removed it) may
// go; nothing else may, and no foreign row or route may change at all. The
// kernel side reads `ip monitor route`, the NB side the NB monitor and the
// rows' UUIDs (a row deleted and added again has a new one, even while no
// monitor was connected: across an ovsdb-server restart).
func (w *chaosWorld) endWindow(what string, allowed, allowedPrefixes []string) {
	w.t.Helper()
	ws := w.win
	mayGo := func(prefix, nh string) bool {
		return slices.Contains(allowedPrefixes, prefix) || slices.Contains(allowed, chaosPeerOf[nh])
	}
	w.flushMonitors()
	// the peers' side: no advertised subnet was withdrawn from a peer
	// whose session the event left alone (a graceful restart keeps them
	// stale; an NB outage changes nothing)
	for _, peer := range chaosPeers {
		var msgs []string
		msgs, w.tOff[peer] = monitorMessages(w.tmon[peer].Output(), w.tOff[peer])
		if slices.Contains(allowed, peer) {
			continue
		}
		for _, m := range msgs {
			prefix, _, deleted := parseRouteLine(m)
			p, err := netip.ParsePrefix(prefix)
			if err == nil && deleted && slices.Contains(ws.adverts, p) && !slices.Contains(allowedPrefixes, prefix) {
				w.violation("%s: peer %s lost the node's %s, which should have stayed: %q", what, peer, prefix, m)
			}
		}
	}
	// kernel
	var msgs []string
	msgs, w.kOff = monitorMessages(w.kmon.Output(), w.kOff)
	for _, m := range msgs {
		if !strings.Contains(m, " table 100 ") && !strings.HasSuffix(m, " table 100") {
			continue
		}
		prefix, nhs, deleted := parseRouteLine(m)
		if !strings.Contains(m, " proto 200") {
			w.violation("%s: a foreign kernel route changed: %q", what, m)
			continue
		}
		for _, nh := range ws.desired[prefix] {
			if (deleted || !slices.Contains(nhs, nh)) && !mayGo(prefix, nh) {
				w.violation("%s: kernel route %s lost next hop %s (peer %s), which should have stayed: %q", what, prefix, nh, chaosPeerOf[nh], m)
			}
		}
	}
	// NB: the monitor's deletes and modifications
	nbOut := w.nbmonOld + w.nbmon.Output()
	w.nbmonOld = ""
	for _, line := range strings.Split(nbOut[min(w.nOff, len(nbOut)):], "\n") {
		f := strings.Split(line, ",")
		if len(f) < 2 {
			continue
		}
		uuid, action := f[0], f[1]
		if len(f) >= 4 && (action == "insert" || action == "initial" || action == "new") {
			p := pair{strings.Trim(f[2], `"`), strings.Trim(f[3], `"`)}
			if p.prefix != "" && p.nh != "" {
				w.uuidPair[uuid] = p
			}
		}
		if action != "delete" && action != "old" {
			continue
		}
		p, ok := w.uuidPair[uuid]
		if !ok && len(f) >= 4 {
			p = pair{strings.Trim(f[2], `"`), strings.Trim(f[3], `"`)}
		}
		if slices.Contains(w.foreignUUIDs, uuid) {
			w.violation("%s: the NB monitor saw a foreign row %s (%v) %s: %q", what, uuid, p, action, line)
			continue
		}
		// the row the window started with (a late message about a row
		// of an earlier window names another UUID)
		if ws.uuids[p] == uuid && !mayGo(p.prefix, p.nh) {
			w.violation("%s: the NB monitor saw owned row %v (%s) %s, which should have stayed: %q", what, p, uuid, action, line)
		}
	}
	w.nOff = len(w.nbmon.Output())
	// NB: every row that should have stayed is the same row
	owned, err := w.ownedRows()
	if err != nil {
		w.t.Fatal(err)
	}
	now := map[pair]string{}
	for _, r := range owned {
		now[pair{r.Prefix, r.NextHop}] = r.UUID
	}
	for p, u := range ws.uuids {
		if mayGo(p.prefix, p.nh) {
			continue
		}
		if now[p] != u {
			w.violation("%s: owned row %v was %s before and is %q now: deleted in between", what, p, u, now[p])
		}
	}
	w.checks++
}

// flushMonitors makes sure the route monitors have printed everything
// that happened so far: a canary route added and deleted in each
// namespace, and the monitor has printed its deletion. (A message the
// monitor printed late would count in the next event's window.)
func (w *chaosWorld) flushMonitors() {
	t := w.t
	t.Helper()
	w.canaries++
	canary := fmt.Sprintf("198.51.%d.%d", 100+w.canaries/250%4, w.canaries%250+1)
	mons := map[string]*lab.RouteMonitor{w.l.Node: w.kmon}
	for peer, m := range w.tmon {
		mons[w.links[peer].NS] = m
	}
	for ns := range mons {
		for _, op := range []string{"add", "del"} {
			if out, err := w.l.Exec(ns, "ip", "route", op, canary+"/32", "dev", "lo", "table", "250"); err != nil {
				t.Fatalf("canary route in %s: %v: %s", ns, err, out)
			}
		}
	}
	for ns, m := range mons {
		lab.Eventually(t, 10*time.Second, 10*time.Millisecond, "ip monitor route in "+ns+" printed the canary", func() error {
			if !strings.Contains(m.Output(), "Deleted "+canary+" dev lo table 250") {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
}

// monitorMessages returns the complete messages of `ip monitor route`
// output after offset off (a multipath route's next hop lines joined to
// its first line) and the offset after them.
func monitorMessages(out string, off int) ([]string, int) {
	chunk := out[min(off, len(out)):]
	if i := strings.LastIndexByte(chunk, '\n'); i >= 0 {
		chunk = chunk[:i+1]
	} else {
		chunk = ""
	}
	var msgs []string
	for _, line := range strings.Split(chunk, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case (line[0] == ' ' || line[0] == '\t') && len(msgs) > 0:
			msgs[len(msgs)-1] += " " + strings.TrimSpace(line)
		default:
			msgs = append(msgs, strings.TrimSpace(line))
		}
	}
	return msgs, off + len(chunk)
}

// flap takes peer's link down on the node's side for down (long: until
// ovnbgp says the session is down, its hold timer expired; kill: ovnbgp is
// killed and restarted meanwhile) and up again.
func (w *chaosWorld) flap(peer string, down time.Duration, long, kill bool) {
	t := w.t
	t.Helper()
	link := w.links[peer]
	if err := w.l.SetLink(w.l.Node, link.NodeLink, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down) // the outage itself: there is no event to wait on
	if long {
		lab.Eventually(t, generous, 100*time.Millisecond, "ovnbgp sees "+peer+" down", func() error {
			p, err := w.d.Peer(peer)
			if err != nil {
				return err
			}
			if p.State == model.StateEstablished {
				return fmt.Errorf("%s still Established", peer)
			}
			return nil
		})
	}
	if kill {
		w.killAndWait()
	}
	if err := w.l.SetLink(w.l.Node, link.NodeLink, true); err != nil {
		t.Fatal(err)
	}
}

// restartOVSDB stops ovsdb-server (SIGTERM), leaves it down for down, and
// starts it again on the same database; the NB monitor is restarted with
// it (what it printed so far is kept for the window's check).
//
// during, if not nil, runs while NB is down (e.g. kill and restart
// ovnbgp, or reload it).
func (w *chaosWorld) restartOVSDB(down time.Duration, during func()) {
	t := w.t
	t.Helper()
	if err := w.nb.Stop(); err != nil {
		t.Fatal(err)
	}
	out := w.nbmon.Stop()
	w.nbmonOld = out[min(w.nOff, len(out)):]
	w.nOff = 0
	time.Sleep(down) // the outage itself
	if during != nil {
		during()
	}
	if err := w.nb.Start(); err != nil {
		t.Fatal(err)
	}
	w.nbmon = w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")
}

// killAndWait is kill, then waits until the new ovnbgp answers on its
// control socket (its sessions wait for the first NB sync, up to the
// graceful restart time, so that peers keep our routes stale meanwhile).
func (w *chaosWorld) killAndWait() {
	t := w.t
	t.Helper()
	w.kill()
	lab.Eventually(t, generous, 100*time.Millisecond, "the restarted ovnbgp answers", func() error {
		if err := w.d.Exited(); err != nil {
			return err
		}
		_, err := w.d.Status()
		return err
	})
}

// kill ends ovnbgp with SIGKILL and starts it again.
func (w *chaosWorld) kill() {
	t := w.t
	t.Helper()
	if err := w.d.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "ovnbgp dead after SIGKILL", func() error {
		if w.d.Exited() == nil {
			return fmt.Errorf("pid %d still running", w.d.PID())
		}
		return nil
	})
	if err := w.d.Restart(); err != nil {
		t.Fatal(err)
	}
}

// reload writes the config of state s and runs `ovnbgp reload`.
func (w *chaosWorld) reload(s chaosState) {
	t := w.t
	t.Helper()
	res, err := w.d.ReloadCLI(s.config(w.base))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied {
		t.Fatalf("reload to %+v refused: %s", s, res.Error)
	}
	w.state = s
}
