package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/bgp"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// reloadOf posts a reload and decodes its outcome.
func reloadOf(t *testing.T, h *harness, wantCode int) api.ReloadResult {
	t.Helper()
	code, body := post(t, h.sock, api.PathReload, struct{}{})
	if code != wantCode {
		t.Fatalf("reload: %d %s, want %d", code, body, wantCode)
	}
	var r api.ReloadResult
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("reload answer %q: %v", body, err)
	}
	return r
}

// reloadNeedsRoot: reload is root's; without root only the refusal is
// checked (TestReloadNotRoot).
func reloadNeedsRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() == 0 {
		return
	}
	prereq.Missing(t, "reload is root's: the rest needs root")
}

// TestReloadAPI: POST /v1/reload runs the SIGHUP path and answers with its
// outcome: a bad file is refused (422, the error, the running config kept);
// a good one is applied with the sessions it reset and why, which are
// config.SessionResets' prediction; keys applied in place reset nothing;
// a new peer is added, not reset; a new ASN resets every session.
func TestReloadAPI(t *testing.T) {
	h := start(t, "default")
	reloadNeedsRoot(t)
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")

	if err := os.WriteFile(h.cfgPath, []byte("bgp: {asn: banana}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := reloadOf(t, h, http.StatusUnprocessableEntity)
	if r.Applied || !strings.Contains(r.Error, "bgp.asn") || r.Config != h.cfgPath || len(r.SessionResets) != 0 {
		t.Errorf("refused reload: %+v", r)
	}
	if st := h.d.status(); !strings.Contains(st.ConfigError, "bgp.asn") {
		t.Errorf("status configError %q after a refused reload", st.ConfigError)
	}
	h.passDone()
	h.wantPrefixes("tor 10.128.0.0/23")

	steps := []struct {
		name   string
		cfg    cfgText
		resets []config.SessionReset
		added  []string
	}{
		{"rule", cfgText{networks: `"*"`}, []config.SessionReset{}, nil},
		{"connectRetry and passive", cfgText{networks: `"*"`, peerExtra: ", connectRetry: 9s, passive: false"}, []config.SessionReset{}, nil},
		{"holdTime", cfgText{networks: `"*"`, peerExtra: ", connectRetry: 9s, holdTime: 30s"},
			[]config.SessionReset{{Peer: "tor", Why: "changed: holdTime, keepaliveTime"}}, nil},
		{"peer added", cfgText{networks: `"*"`, peerExtra: ", connectRetry: 9s, holdTime: 30s}\n    - {name: tor2, address: 192.0.2.3, asn: 65002"},
			[]config.SessionReset{}, []string{"tor2"}},
		{"asn", cfgText{networks: `"*"`, asn: 65011, peerExtra: ", connectRetry: 9s, holdTime: 30s}\n    - {name: tor2, address: 192.0.2.3, asn: 65002"},
			[]config.SessionReset{
				{Peer: "tor", Why: "bgp asn, routerID, listenPort or gracefulRestart changed: the speaker restarts"},
				{Peer: "tor2", Why: "bgp asn, routerID, listenPort or gracefulRestart changed: the speaker restarts"}}, nil},
		{"peer removed", cfgText{networks: `"*"`, asn: 65011, peerExtra: ", connectRetry: 9s, holdTime: 30s"},
			[]config.SessionReset{{Peer: "tor2", Why: "removed from bgp.peers"}}, nil},
	}
	for _, s := range steps {
		h.writeConfig(s.cfg)
		r := reloadOf(t, h, http.StatusOK)
		if !r.Applied || r.Error != "" || !reflect.DeepEqual(r.SessionResets, s.resets) || !reflect.DeepEqual(r.Added, s.added) {
			t.Errorf("%s: reload %+v, want applied, resets %+v, added %v", s.name, r, s.resets, s.added)
		}
		if st := h.d.status(); st.ConfigError != "" {
			t.Errorf("%s: configError %q after a good reload", s.name, st.ConfigError)
		}
	}
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	h.sp.mu.Lock()
	peers := h.sp.peers
	h.sp.mu.Unlock()
	if len(peers) != 1 || peers[0].HoldTime != 30*time.Second || peers[0].ConnectRetry != 9*time.Second {
		t.Errorf("speaker's peers after the reloads: %+v", peers)
	}
}

// TestReloadNotRoot: a reload from a client whose effective uid is not 0
// (SO_PEERCRED) gets 403 and the file's new content is not applied.
func TestReloadNotRoot(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.writeConfig(cfgText{networks: `"*"`})
	var code int
	var body string
	if os.Getuid() == 0 {
		code, body = postAsNobody(t, h.sock, api.PathReload, "{}")
	} else {
		code, body = post(t, h.sock, api.PathReload, struct{}{})
	}
	if code != http.StatusForbidden || !strings.Contains(body, "root only") {
		t.Errorf("reload as non-root: %d %s, want 403", code, body)
	}
	h.passDone()
	h.wantPrefixes("tor 10.128.0.0/23")
}

// TestPlanConfigText: plan --config sends the config's text, and the
// daemon parses it with the one parser (the file need not exist where the
// daemon can see it); the answer names the sessions a reload would reset;
// a bad text is refused naming the key and the name sent; the former
// request by path is refused saying what to send.
func TestPlanConfigText(t *testing.T) {
	h := start(t, "default")
	reloadNeedsRoot(t)
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")
	c := cfgText{networks: `"*"`, peerExtra: ", holdTime: 30s", sock: h.sock, stateDir: h.dir + "/state"}
	code, body := post(t, h.sock, api.PathPlan, api.PlanRequest{Name: "/home/op/new.yaml", Text: c.String()})
	if code != http.StatusOK {
		t.Fatalf("plan --config: %d %s", code, body)
	}
	var pr api.PlanResponse
	if err := json.Unmarshal([]byte(body), &pr); err != nil {
		t.Fatal(err)
	}
	if want := []config.SessionReset{{Peer: "tor", Why: "changed: holdTime, keepaliveTime"}}; !reflect.DeepEqual(pr.SessionResets, want) {
		t.Errorf("plan --config resets %+v, want %+v", pr.SessionResets, want)
	}
	if len(pr.Plan.Advertise.Announce) != 1 || pr.Plan.Advertise.Announce[0].Prefix.String() != "10.200.0.0/24" {
		t.Errorf("plan --config announces %+v, want 10.200.0.0/24", pr.Plan.Advertise.Announce)
	}
	code, body = post(t, h.sock, api.PathPlan, api.PlanRequest{Name: "/home/op/bad.yaml", Text: "bgp: {asn: banana}\n"})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "/home/op/bad.yaml") || !strings.Contains(body, "bgp.asn") {
		t.Errorf("plan --config of a bad text: %d %s", code, body)
	}
	code, body = post(t, h.sock, api.PathPlan, map[string]string{"config": h.cfgPath})
	if code != http.StatusBadRequest || !strings.Contains(body, "text") {
		t.Errorf("plan --config by path: %d %s, want 400 saying to send the text", code, body)
	}
	// Nothing of it was applied.
	h.passDone()
	h.wantPrefixes("tor 10.128.0.0/23")
}

// TestReloadAnswersItsOwnParse: a reload asked while another one's parse
// runs gets the outcome of a parse that read the file after it asked, not
// the running one's.
func TestReloadAnswersItsOwnParse(t *testing.T) {
	called, gate := make(chan struct{}, 2), make(chan struct{})
	h := start(t, "default", func(h *harness) {
		h.loadConfig = func(path string) (*config.Config, error) {
			cfg, err := config.Load(path) // the file as it is now
			called <- struct{}{}
			<-gate
			return cfg, err
		}
	})
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")

	h.writeConfig(cfgText{networks: `"*"`})
	first := make(chan api.ReloadResult, 1)
	h.d.reloads <- first
	<-called // the first parse read the good file
	if err := os.WriteFile(h.cfgPath, []byte("bgp: {asn: banana}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := make(chan api.ReloadResult, 1)
	h.d.reloads <- second // taken by the loop while the first parse runs
	close(gate)
	r1, r2 := <-first, <-second
	if !r1.Applied {
		t.Errorf("first reload: %+v, want applied (it read the good file)", r1)
	}
	if r2.Applied || !strings.Contains(r2.Error, "bgp.asn") {
		t.Errorf("second reload: %+v, want refused with the bad file's error", r2)
	}
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
}

// recordingSpeaker is a real speaker (package bgp, in process) that
// records SetPeers and Apply in order, each with what Advertised lists
// right after it.
type recordingSpeaker struct {
	Speaker
	mu  sync.Mutex
	log []string
}

func advText(advs []model.Advertisement) string {
	var out []string
	for _, a := range advs {
		out = append(out, fmt.Sprintf("%s %v %s", a.Peer, a.Prefix, a.State))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func (r *recordingSpeaker) SetPeers(ctx context.Context, peers []config.Peer) error {
	err := r.Speaker.SetPeers(ctx, peers)
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("setPeers %d -> %s", len(peers), advText(r.Speaker.Advertised())))
	r.mu.Unlock()
	return err
}

func (r *recordingSpeaker) Apply(ctx context.Context, d model.AdvertDiff) error {
	err := r.Speaker.Apply(ctx, d)
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("apply -%s +%s -> %s", advText(d.Withdraw), advText(d.Announce), advText(r.Speaker.Advertised())))
	r.mu.Unlock()
	return err
}

// TestRemovedPeerWithdrawnByPlan: SetPeers withdraws nothing. A reload
// that removes a peer leaves its advertisement installed (listed, pending),
// and the next plan names it as a withdrawal, which the loop applies: the
// real speaker then lists nothing of the peer (no group, set or path of it
// is left, or Advertised would list it).
func TestRemovedPeerWithdrawnByPlan(t *testing.T) {
	var mu sync.Mutex
	var rec *recordingSpeaker
	speaker := func() *recordingSpeaker { mu.Lock(); defer mu.Unlock(); return rec }
	two := cfgText{networks: `"*"`, peerExtra: "}\n    - {name: tor2, address: 192.0.2.3, asn: 65002"}
	h := start(t, "", func(h *harness) {
		h.cfg = two
		h.newSpeaker = func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error) {
			sp, err := bgp.New(ctx, cfg, log, notify)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			rec = &recordingSpeaker{Speaker: sp}
			return rec, nil
		}
	})
	reloadNeedsRoot(t)
	h.nb.set(true, network("default", "10.128.0.0/23"))
	advertised := func() string {
		if sp := speaker(); sp != nil {
			return advText(sp.Advertised())
		}
		return ""
	}
	both := "[tor 10.128.0.0/23 pending, tor2 10.128.0.0/23 pending]"
	// Wait for the log entry, not only for Advertised: the entry is
	// appended after the speaker's Apply returned.
	var from int
	h.eventually("both peers' advertisements applied and logged", func() bool {
		sp := speaker()
		if sp == nil {
			return false
		}
		sp.mu.Lock()
		defer sp.mu.Unlock()
		from = len(sp.log)
		return from > 0 && strings.HasSuffix(sp.log[from-1], "-> "+both)
	})
	sp := speaker()
	h.writeConfig(cfgText{networks: `"*"`})
	if r := reloadOf(t, h, http.StatusOK); !r.Applied {
		t.Fatalf("reload: %+v", r)
	}
	one := "[tor 10.128.0.0/23 pending]"
	h.eventually("tor2's advertisement withdrawn", func() bool { return advertised() == one })
	sp.mu.Lock()
	got := slices.Clone(sp.log[from:])
	sp.mu.Unlock()
	want := []string{
		"setPeers 1 -> " + both,
		"apply -[tor2 10.128.0.0/23 pending] +[] -> " + one,
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls after the reload:\n got %q\nwant %q", got, want)
	}
}
