package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/plan"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// importRule is an import rule of the harness's config: routes of tor in
// 198.51.100.0/22 (up to /24) into the default network's gateway router
// and table 100.
func importRule(mode string) string {
	return `import:
  - name: uplink
    peers: [tor]
    network: default
    accept: [{prefix: 198.51.100.0/22, maxLength: 24}]
    mode: ` + mode + `
    targets: {ovn: true, kernel: {table: 100}}
`
}

var (
	learnedUplink = model.LearnedPath{Peer: "tor", Prefix: netip.MustParsePrefix("198.51.100.0/24"),
		NextHop: netip.MustParseAddr("192.0.2.1"), ASPath: []uint32{65001}, Origin: "igp"}
	gr = model.GatewayRouter{Network: "default", Name: "GR_node1", UUID: "gr1", ExternalPort: "rtoe-GR_node1",
		ExternalNetworks: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}
	uplinkLink = model.Link{Name: "eth0", Index: 2, Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}
)

// startImport starts the harness with an import rule, a gateway router, a
// host link towards the peer, and the given owned state.
func startImport(t *testing.T, mode string, owned []model.OVNRoute, kernel []model.KernelRoute, options ...func(*harness)) *harness {
	t.Helper()
	opts := append([]func(*harness){func(h *harness) {
		h.cfg.extra = importRule(mode)
		h.host.host = model.Host{Links: []model.Link{uplinkLink}, Routes: kernel}
		h.nb.snap = model.Snapshot{Networks: []model.Network{network("default", "10.128.0.0/23")},
			Routers: []model.GatewayRouter{gr}, OwnedRoutes: owned}
		h.nb.ok = true
		h.nb.uuids = 100
		h.nb.syncRouters()
	}}, options...)
	return start(t, "default", opts...)
}

func (h *harness) ovnPrefixes() []string {
	var out []string
	for _, r := range h.nb.ownedRoutes() {
		out = append(out, r.Router+" "+r.Prefix.String()+" via "+r.NextHop.String())
	}
	slices.Sort(out)
	return out
}

func (h *harness) kernelPrefixes() []string {
	var out []string
	for _, r := range h.host.routes() {
		var nhs []string
		for _, nh := range r.NextHops {
			nhs = append(nhs, nh.Addr.String()+"@"+nh.Dev)
		}
		out = append(out, r.Prefix.String()+" via "+strings.Join(nhs, ","))
	}
	slices.Sort(out)
	return out
}

// TestImportAuto: an accepted path lands in OVN and in the kernel table in
// one pass, with the rule; when the peer withdraws it, both go.
func TestImportAuto(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	h.sp.setLearned(learnedUplink)
	h.d.poke()
	h.eventually("the route in OVN", func() bool {
		return slices.Equal(h.ovnPrefixes(), []string{"GR_node1 198.51.100.0/24 via 192.0.2.1"})
	})
	h.eventually("the route in table 100", func() bool {
		return slices.Equal(h.kernelPrefixes(), []string{"198.51.100.0/24 via 192.0.2.1@eth0"})
	})
	if r := h.nb.ownedRoutes()[0]; r.Rule != "uplink" || r.OutputPort != "rtoe-GR_node1" {
		t.Errorf("row = %+v, want rule uplink and output port rtoe-GR_node1", r)
	}
	// The verdict is what routes learned shows.
	paths, _, err := api.NewClient(h.sock).LearnedRoutes(context.Background(), api.ListOptions{})
	if err != nil || len(paths) != 1 || !paths[0].Accepted || paths[0].Rule != "uplink" {
		t.Fatalf("learned = %+v, %v; want the path accepted by uplink", paths, err)
	}
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.sp.setLearned()
	h.d.poke()
	h.eventually("the route gone from OVN and the kernel", func() bool {
		return len(h.ovnPrefixes()) == 0 && len(h.kernelPrefixes()) == 0
	})
}

// TestDeletedRouteComesBack: a kernel route of ours that someone deletes
// is put back by the pass its netlink event starts.
func TestDeletedRouteComesBack(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	h.sp.setLearned(learnedUplink)
	h.d.poke()
	want := []string{"198.51.100.0/24 via 192.0.2.1@eth0"}
	h.eventually("the route in table 100", func() bool { return slices.Equal(h.kernelPrefixes(), want) })
	h.passDone() // a pass that reads the kernel after our own apply
	h.host.deleteByHand(learnedUplink.Prefix)
	h.eventually("the route back in table 100", func() bool { return slices.Equal(h.kernelPrefixes(), want) })
	h.host.mu.Lock()
	n := len(h.host.ops)
	h.host.mu.Unlock()
	if n < 2 {
		t.Errorf("%d kernel applies, want the first and the one that put the route back", n)
	}
}

// TestImportFailStatic: after a restart, owned routes whose peer has not
// sent End-of-RIB yet are adopted, not deleted; they go once it has.
func TestImportFailStatic(t *testing.T) {
	owned := []model.OVNRoute{{UUID: "u1", Router: "GR_node1", Prefix: netip.MustParsePrefix("198.51.101.0/24"),
		NextHop: netip.MustParseAddr("192.0.2.1"), OutputPort: "rtoe-GR_node1", Rule: "uplink"}}
	kernel := []model.KernelRoute{{Table: 100, Prefix: netip.MustParsePrefix("198.51.101.0/24"), Protocol: 200,
		NextHops: []model.NextHop{{Addr: netip.MustParseAddr("192.0.2.1"), Dev: "eth0"}}}}
	h := startImport(t, "auto", owned, kernel)
	h.passDone()
	h.passDone()
	if got := h.ovnPrefixes(); len(got) != 1 {
		t.Fatalf("OVN routes = %v: an owned route was deleted before End-of-RIB", got)
	}
	if got := h.kernelPrefixes(); len(got) != 1 {
		t.Fatalf("kernel routes = %v: an owned route was deleted before End-of-RIB", got)
	}
	var pr api.PlanResponse
	getJSON(t, h.sock, api.PathPlan, &pr)
	if len(pr.Plan.Held) != 2 {
		t.Errorf("plan held = %+v, want the OVN and the kernel delete", pr.Plan.Held)
	}
	h.sp.mu.Lock()
	h.sp.eor = true
	h.sp.mu.Unlock()
	h.d.poke()
	h.eventually("stale routes deleted after End-of-RIB", func() bool {
		return len(h.ovnPrefixes()) == 0 && len(h.kernelPrefixes()) == 0
	})
}

// TestImportManualApply: in manual mode nothing is applied until a saved
// plan is; a plan that went stale changes nothing.
func TestImportManualApply(t *testing.T) {
	h := startImport(t, "manual", nil, nil)
	h.sp.setLearned(learnedUplink)
	h.passDone()
	h.passDone()
	if got := h.ovnPrefixes(); len(got) != 0 {
		t.Fatalf("manual mode applied %v by itself", got)
	}
	var pr api.PlanResponse
	getJSON(t, h.sock, api.PathPlan, &pr)
	if pr.Manual.OVNAdd != 1 || pr.Manual.KernelAdd != 1 {
		t.Fatalf("manual counts = %+v, want one OVN and one kernel add", pr.Manual)
	}
	if os.Getuid() != 0 {
		code, body := post(t, h.sock, api.PathApply, pr.Plan)
		if code != http.StatusForbidden {
			t.Fatalf("apply as uid %d: %d %s, want 403", os.Getuid(), code, body)
		}
		prereq.Missing(t, "apply is root's: the rest needs root")
	}
	stale := pr.Plan
	// Another owned row appears on the router: the saved plan is stale.
	h.nb.mu.Lock()
	h.nb.snap.OwnedRoutes = append(h.nb.snap.OwnedRoutes, model.OVNRoute{UUID: "x9", Router: "GR_node1",
		Prefix: netip.MustParsePrefix("198.51.102.0/24"), NextHop: netip.MustParseAddr("192.0.2.1"), Rule: "uplink"})
	h.nb.syncRouters()
	h.nb.mu.Unlock()
	code, body := post(t, h.sock, api.PathApply, stale)
	if code != http.StatusConflict || !strings.Contains(body, "stale") {
		t.Fatalf("stale apply: %d %s, want 409 naming the stale plan", code, body)
	}
	if got := h.kernelPrefixes(); len(got) != 0 {
		t.Fatalf("a stale plan changed the kernel: %v", got)
	}
	getJSON(t, h.sock, api.PathPlan, &pr)
	code, body = post(t, h.sock, api.PathApply, pr.Plan)
	if code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	if !slices.Contains(h.ovnPrefixes(), "GR_node1 198.51.100.0/24 via 192.0.2.1") ||
		!slices.Equal(h.kernelPrefixes(), []string{"198.51.100.0/24 via 192.0.2.1@eth0"}) {
		t.Fatalf("after apply: OVN %v, kernel %v", h.ovnPrefixes(), h.kernelPrefixes())
	}
	// A plan for another node is refused.
	pr.Plan.Node = "node2"
	if code, body := post(t, h.sock, api.PathApply, pr.Plan); code != http.StatusConflict {
		t.Fatalf("apply of node2's plan: %d %s, want 409", code, body)
	}
}

// TestApplyRechecksThePlan: a saved plan applies only what the running
// config still wants now: after the peer withdrew the route, or for a
// hand-edited operation, it changes nothing.
func TestApplyRechecksThePlan(t *testing.T) {
	if os.Getuid() != 0 {
		prereq.Missing(t, "apply is root's")
	}
	h := startImport(t, "manual", nil, nil)
	h.sp.setLearned(learnedUplink)
	h.passDone()
	var pr api.PlanResponse
	getJSON(t, h.sock, api.PathPlan, &pr)
	if len(pr.Plan.OVN) != 1 || len(pr.Plan.Kernel) != 1 {
		t.Fatalf("plan = %+v, want one OVN and one kernel add", pr.Plan)
	}
	saved := pr.Plan

	// A hand-edited plan: an ip rule that would take over host routing.
	edited := saved
	edited.Kernel = append(slices.Clone(saved.Kernel), model.KernelOp{Op: model.OpAdd,
		PolicyRule: &model.KernelRule{Priority: 0, Src: netip.MustParsePrefix("0.0.0.0/0"), Table: 100, Protocol: 200}})
	if code, body := post(t, h.sock, api.PathApply, edited); code != http.StatusConflict || !strings.Contains(body, "ip rule") {
		t.Fatalf("hand-edited plan: %d %s, want 409 naming the ip rule", code, body)
	}
	// An OVN operation on a router the plan has no guard for.
	unguarded := saved
	unguarded.Guards = nil
	if code, body := post(t, h.sock, api.PathApply, unguarded); code != http.StatusConflict || !strings.Contains(body, "guard") {
		t.Fatalf("unguarded plan: %d %s, want 409", code, body)
	}
	// The peer withdraws the route: the saved plan is stale.
	h.sp.setLearned()
	h.passDone()
	if code, body := post(t, h.sock, api.PathApply, saved); code != http.StatusConflict || !strings.Contains(body, "no longer planned") {
		t.Fatalf("plan of a withdrawn route: %d %s, want 409", code, body)
	}
	if len(h.ovnPrefixes()) != 0 || len(h.kernelPrefixes()) != 0 {
		t.Fatalf("a refused plan changed something: OVN %v, kernel %v", h.ovnPrefixes(), h.kernelPrefixes())
	}
}

// TestImportCapAlarm: above maxRoutes the peer's status carries the alarm
// and routes learned names the cap; the installed route stays.
func TestImportCapAlarm(t *testing.T) {
	h := start(t, "default", func(h *harness) {
		h.cfg.extra = strings.Replace(importRule("auto"), "    mode: auto\n", "    mode: auto\n    maxRoutes: 1\n", 1)
		h.host.host = model.Host{Links: []model.Link{uplinkLink}}
		h.nb.snap = model.Snapshot{Networks: []model.Network{network("default", "10.128.0.0/23")}, Routers: []model.GatewayRouter{gr}}
		h.nb.ok = true
	})
	h.sp.setLearned(learnedUplink)
	h.d.poke()
	h.eventually("the first route in OVN", func() bool { return len(h.ovnPrefixes()) == 1 })
	second := learnedUplink
	second.Prefix = netip.MustParsePrefix("198.51.101.0/24")
	h.sp.setLearned(learnedUplink, second)
	h.d.poke()
	h.eventually("the alarm in peers", func() bool {
		peers, err := api.NewClient(h.sock).Peers(context.Background())
		return err == nil && len(peers) == 1 && strings.Contains(peers[0].ImportAlarm, "at most 1") && peers[0].Imported == 1
	})
	if got := h.ovnPrefixes(); !slices.Equal(got, []string{"GR_node1 198.51.100.0/24 via 192.0.2.1"}) {
		t.Errorf("OVN = %v, want only the first route", got)
	}
	// The alarm is a metric too.
	scrape, _ := metricsScraper(t, h)
	body := scrape()
	for _, l := range []string{`ovnbgp_import_cap_reached{peer="tor",rule="uplink"} 1`, `ovnbgp_imported_routes{target="ovn"} 1`,
		`ovnbgp_peer_prefixes{family="ipv4",kind="accepted",peer="tor"} 1`, `ovnbgp_learned_rejected{peer="tor",reason="importCap"} 1`} {
		if !strings.Contains(body, l+"\n") {
			t.Errorf("metrics lack %q", l)
		}
	}
	paths, _, err := api.NewClient(h.sock).LearnedRoutes(context.Background(), api.ListOptions{Rejected: true})
	if err != nil || len(paths) != 1 || !strings.Contains(paths[0].Reason, "import cap") {
		t.Fatalf("rejected = %+v, %v; want the second path, rejected by the cap", paths, err)
	}
}

// TestExplainAndImported: explain names the rule that accepted a prefix and
// where it is installed; routes imported shows it installed.
func TestExplainAndImported(t *testing.T) {
	h := startImport(t, "auto", nil, nil)
	h.sp.setLearned(learnedUplink)
	h.d.poke()
	h.eventually("the route in OVN", func() bool { return len(h.ovnPrefixes()) == 1 })
	var e api.Explanation
	getJSON(t, h.sock, api.PathExplain+"?prefix=198.51.100.7", &e)
	if len(e.Learned) != 1 || e.Learned[0].Rule != "uplink" || len(e.OVN) != 1 {
		t.Fatalf("explain = %+v", e)
	}
	var imp api.Imported
	getJSON(t, h.sock, api.PathImported, &imp)
	if len(imp.OVN) != 1 || imp.OVN[0].State != api.ImportInstalled || len(imp.Kernel) != 1 || imp.Kernel[0].State != api.ImportInstalled {
		t.Fatalf("imported = %+v", imp)
	}
	code, body := get(t, h.sock, api.PathExplain+"?prefix=nonsense")
	if code != http.StatusBadRequest || !strings.Contains(body, "not a prefix") {
		t.Errorf("explain nonsense: %d %s", code, body)
	}
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

func get(t *testing.T, sock, path string) (int, string) {
	t.Helper()
	resp, err := unixClient(sock).Get("http://ovnbgp" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, sock, path string, out any) {
	t.Helper()
	code, body := get(t, sock, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func post(t *testing.T, sock, path string, v any) (int, string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := unixClient(sock).Post("http://ovnbgp"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var _ = plan.PlanVersion

// TestRouteProtocolNeedsRestart: a reload keeps the running route protocol
// (the kernel routes of the running one are ours) and says it needs a
// restart.
func TestRouteProtocolNeedsRestart(t *testing.T) {
	old, next := &config.Config{}, &config.Config{}
	old.Kernel.RouteProtocol, next.Kernel.RouteProtocol = 200, 201
	if got := restartOnly(old, next); !slices.Contains(got, "kernel.routeProtocol") {
		t.Errorf("restartOnly = %v, want kernel.routeProtocol", got)
	}
}

// TestImportEndOfRIBWithItsPaths: the peer re-sends its table and
// End-of-RIB while the loop is computing a plan. The plan must not pair the
// new End-of-RIB with learned paths read before it: that deleted the owned
// route the peer had just re-sent, and added it back a pass later (test/e2e
// TestImportFailStatic saw the NB row deleted under load). End-of-RIB is
// read first, so every path sent before it is in the walk.
func TestImportEndOfRIBWithItsPaths(t *testing.T) {
	owned := []model.OVNRoute{{UUID: "u1", Router: "GR_node1", Prefix: learnedUplink.Prefix,
		NextHop: learnedUplink.NextHop, OutputPort: "rtoe-GR_node1", Rule: "uplink"}}
	kernel := []model.KernelRoute{{Table: 100, Prefix: learnedUplink.Prefix, Protocol: 200,
		NextHops: []model.NextHop{{Addr: learnedUplink.NextHop, Dev: "eth0"}}}}
	h := startImport(t, "auto", owned, kernel)
	h.passDone()
	// the table and End-of-RIB arrive while the loop reads the peers
	arrived := make(chan struct{})
	h.sp.mu.Lock()
	h.sp.onPeers = func() {
		h.sp.mu.Lock()
		if h.sp.eor {
			h.sp.mu.Unlock()
			return
		}
		h.sp.learned = []model.LearnedPath{learnedUplink}
		h.sp.gen++
		h.sp.eor = true
		h.sp.mu.Unlock()
		close(arrived)
	}
	h.sp.mu.Unlock()
	h.d.poke()
	<-arrived
	h.passDone()
	h.passDone()
	h.nb.mu.Lock()
	var ops []model.OVNOp
	for _, a := range h.nb.applies {
		ops = append(ops, a...)
	}
	h.nb.mu.Unlock()
	if len(ops) > 0 || len(h.ovnPrefixes()) != 1 || len(h.kernelPrefixes()) != 1 {
		t.Errorf("the re-sent route was touched: OVN operations %+v, OVN %v, kernel %v", ops, h.ovnPrefixes(), h.kernelPrefixes())
	}
}

// TestStaleErrorReadsOnce: package ovn's stale-plan error is errStalePlan
// for the API's 409, and says "stale" once.
func TestStaleErrorReadsOnce(t *testing.T) {
	err := fmt.Errorf("ovn: %w", staleError{fmt.Errorf("%w: router GR_node1 changed", ovn.ErrStale)})
	if !errors.Is(err, errStalePlan) || !errors.Is(err, ovn.ErrStale) {
		t.Errorf("%v: want it to be errStalePlan and ovn.ErrStale", err)
	}
	if n := strings.Count(err.Error(), "stale"); n != 1 {
		t.Errorf("%q says stale %d times", err, n)
	}
}

// TestImportedViewNetwork: `routes imported --network N` keeps a stale
// kernel route of a table N's rules target, though the kernel keeps no
// rule name.
func TestImportedViewNetwork(t *testing.T) {
	cfg := &config.Config{Import: []config.ImportRule{
		{Name: "up", Network: "default", Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 100}}},
		{Name: "blue", Network: "blue", Targets: config.ImportTargets{Kernel: config.KernelTarget{Table: 200}}},
	}}
	stale := model.KernelRoute{Table: 100, Prefix: netip.MustParsePrefix("198.51.101.0/24"), Protocol: 200}
	other := model.KernelRoute{Table: 200, Prefix: netip.MustParsePrefix("198.51.102.0/24"), Protocol: 200}
	v := importedView(cfg, "default", plan.ImportResult{}, model.Snapshot{}, model.Host{Routes: []model.KernelRoute{stale, other}}, plan.Plan{}, nil, func(model.LearnedPath) string { return "" })
	if len(v.Kernel) != 1 || v.Kernel[0].Prefix != stale.Prefix || v.Kernel[0].State != api.ImportStale {
		t.Errorf("kernel = %+v, want only the stale route of table 100", v.Kernel)
	}
	if v.Kernel[0].Rule != "up" {
		t.Errorf("the stale kernel row names rule %q, want up (issue 17: it showed \"-\")", v.Kernel[0].Rule)
	}
}

// TestImportedViewGracefulStale: an installed route whose only path its
// peer's graceful restart keeps stale is shown stale, with the window's
// reason and its rule; one with a fresh path too is installed.
func TestImportedViewGracefulStale(t *testing.T) {
	cfg := &config.Config{Import: []config.ImportRule{{Name: "uplink", Network: "default",
		Targets: config.ImportTargets{OVN: true, Kernel: config.KernelTarget{Table: 100}}}}}
	owned, kernel := ownedUplink()
	p := learnedUplink
	p.Accepted, p.Rule, p.Stale = true, "uplink", true
	want := owned[0]
	want.UUID = ""
	res := plan.ImportResult{Paths: []model.LearnedPath{p}, OVN: []model.OVNRoute{want},
		Kernel: []model.KernelRoute{{Table: 100, Prefix: p.Prefix, Protocol: 200, Rule: "uplink", NextHops: kernel[0].NextHops}}}
	why := func(model.LearnedPath) string {
		return "kept stale through peer tor's graceful restart (RFC 4724): until …"
	}
	v := importedView(cfg, "", res, model.Snapshot{OwnedRoutes: owned}, model.Host{Routes: kernel}, plan.Plan{}, nil, why)
	if len(v.OVN) != 1 || v.OVN[0].State != api.ImportStale || v.OVN[0].Reason != why(p) || v.OVN[0].Rule != "uplink" {
		t.Errorf("OVN = %+v, want the row stale with the window's reason and its rule", v.OVN)
	}
	if len(v.Kernel) != 1 || v.Kernel[0].State != api.ImportStale || v.Kernel[0].Reason != why(p) || v.Kernel[0].Rule != "uplink" {
		t.Errorf("kernel = %+v, want the route stale with the window's reason and its rule", v.Kernel)
	}
	fresh := p
	fresh.Peer, fresh.Stale = "tor-b", false
	res.Paths = append(res.Paths, fresh)
	v = importedView(cfg, "", res, model.Snapshot{OwnedRoutes: owned}, model.Host{Routes: kernel}, plan.Plan{}, nil, why)
	if v.OVN[0].State != api.ImportInstalled || v.Kernel[0].State != api.ImportInstalled {
		t.Errorf("with a fresh path too: OVN %+v, kernel %+v; want installed", v.OVN, v.Kernel)
	}
}

// TestExplainWithoutImportRules: with no import rule, explain still shows
// what a peer sent, rejected by default deny (the lab's first question).
func TestExplainWithoutImportRules(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.sp.setLearned(learnedUplink)
	var e api.Explanation
	getJSON(t, h.sock, api.PathExplain+"?prefix=198.51.100.0/24", &e)
	if len(e.Learned) != 1 || e.Learned[0].Accepted || !strings.Contains(e.Learned[0].Reason, "RFC 8212") {
		t.Fatalf("explain = %+v; want the path, rejected by default deny", e.Learned)
	}
}

// TestImportedViewDriftIsThePlansDiff: `routes imported` calls drift what
// the plan's diff would change (plan.DiffKernel, plan.DiffOVN), not a
// comparison of its own: a kernel route with the wanted next hops but
// another protocol is drift (the plan replaces it), as is an OVN row with
// another output port; a duplicate OVN row of a wanted key is shown as
// deleted on the next pass.
func TestImportedViewDriftIsThePlansDiff(t *testing.T) {
	cfg := &config.Config{Import: []config.ImportRule{{Name: "uplink", Network: "default",
		Targets: config.ImportTargets{OVN: true, Kernel: config.KernelTarget{Table: 100}}}}}
	owned, kernel := ownedUplink()
	p := learnedUplink
	p.Accepted, p.Rule = true, "uplink"
	want := owned[0]
	want.UUID = ""
	wantK := model.KernelRoute{Table: 100, Prefix: p.Prefix, Protocol: 200, Rule: "uplink", NextHops: kernel[0].NextHops}
	res := plan.ImportResult{Paths: []model.LearnedPath{p}, OVN: []model.OVNRoute{want}, Kernel: []model.KernelRoute{wantK}}
	none := func(model.LearnedPath) string { return "" }

	other := kernel[0]
	other.Protocol = 201
	v := importedView(cfg, "", res, model.Snapshot{OwnedRoutes: owned}, model.Host{Routes: []model.KernelRoute{other}}, plan.Plan{}, nil, none)
	if len(plan.DiffKernel(res.Kernel, []model.KernelRoute{other})) != 1 {
		t.Fatal("the test's premise: DiffKernel replaces a route of another protocol")
	}
	if len(v.Kernel) != 1 || v.Kernel[0].State != api.ImportDrift || !strings.Contains(v.Kernel[0].Reason, "protocol 201") {
		t.Errorf("kernel = %+v, want drift naming protocol 201 (the plan replaces it)", v.Kernel)
	}

	moved := owned[0]
	moved.OutputPort = "rtoe-other"
	dup := owned[0]
	dup.UUID = "dup-uuid"
	v = importedView(cfg, "", res, model.Snapshot{OwnedRoutes: []model.OVNRoute{moved, dup}}, model.Host{Routes: kernel}, plan.Plan{}, nil, none)
	ops := plan.DiffOVN(res.OVN, []model.OVNRoute{moved, dup})
	var drift, gone int
	for _, r := range v.OVN {
		switch r.State {
		case api.ImportDrift:
			drift++
		case api.ImportStale:
			gone++
		}
	}
	if drift != 1 || gone != 1 || len(ops) != 2 {
		t.Errorf("OVN = %+v (plan: %+v), want one drift row and one duplicate deleted on the next pass", v.OVN, ops)
	}
	if v.Kernel[0].State != api.ImportInstalled {
		t.Errorf("kernel = %+v, want installed", v.Kernel)
	}
}
