package cmd

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
)

// fakeReloadDaemon answers POST /v1/reload with result (422 when not
// applied, as the daemon does) and records what POST /v1/plan receives.
type fakeReloadDaemon struct {
	sock   string
	mu     sync.Mutex
	result api.ReloadResult
	plans  []api.PlanRequest
}

func newFakeReloadDaemon(t *testing.T) *fakeReloadDaemon {
	t.Helper()
	f := &fakeReloadDaemon{sock: filepath.Join(t.TempDir(), "ctl.sock")}
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathReload, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		res := f.result
		f.mu.Unlock()
		if !res.Applied {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		_ = json.NewEncoder(w).Encode(res)
	})
	mux.HandleFunc("POST "+api.PathPlan, func(w http.ResponseWriter, r *http.Request) {
		var req api.PlanRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.plans = append(f.plans, req)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(api.PlanResponse{SessionResets: []config.SessionReset{{Peer: "tor", Why: "changed: holdTime"}}})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// TestReloadCommand: reload prints what the daemon did (the sessions it
// reset and why, the peers added, warnings) as a table or JSON; a refused
// reload prints the error line by line and exits 1.
func TestReloadCommand(t *testing.T) {
	f := newFakeReloadDaemon(t)
	f.result = api.ReloadResult{Config: "/etc/ovnbgp/config.yaml", Applied: true,
		SessionResets: []config.SessionReset{{Peer: "tor-b", Why: "changed: holdTime"}}, Added: []string{"tor-c"},
		Warnings: []string{"metrics changed: it takes effect at the next restart; the running value is kept"}}
	out, err := run(t, "--socket", f.sock, "reload")
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	for _, want := range []string{"applied: /etc/ovnbgp/config.yaml", "session reset: peer tor-b (changed: holdTime)", "peer added: tor-c", "warning: metrics changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("reload table lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, "--socket", f.sock, "reload", "-o", "json")
	var got api.ReloadResult
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || !got.Applied || len(got.SessionResets) != 1 || got.SessionResets[0].Peer != "tor-b" {
		t.Errorf("reload -o json: %v\n%s", err, out)
	}

	f.mu.Lock()
	f.result = api.ReloadResult{Config: "/etc/ovnbgp/config.yaml", Error: "config.yaml:3: bgp.asn: not a number\nconfig.yaml:9: bgp.peers[0].address: not an IP address", SessionResets: []config.SessionReset{}}
	f.mu.Unlock()
	out, err = run(t, "--socket", f.sock, "reload")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("refused reload: err %v, want exit code 1", err)
	}
	for _, want := range []string{"refused: /etc/ovnbgp/config.yaml not applied", "error: config.yaml:3: bgp.asn: not a number", "error: config.yaml:9: bgp.peers[0].address"} {
		if !strings.Contains(out, want) {
			t.Errorf("refused reload output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "no session reset") {
		t.Errorf("a refused reload says 'no session reset':\n%s", out)
	}
	if _, err := run(t, "--socket", filepath.Join(t.TempDir(), "none.sock"), "reload"); err == nil || !strings.Contains(err.Error(), "no ovnbgp daemon is listening") {
		t.Errorf("reload without a daemon: %v", err)
	}
}

// TestPlanConfigSendsText: plan --config reads the file (the daemon may be
// sandboxed away from it) and sends its text and absolute path; what is
// not a regular file, or is too large, is refused before the daemon is
// asked.
func TestPlanConfigSendsText(t *testing.T) {
	f := newFakeReloadDaemon(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "new.yaml")
	text := "node: {name: n1}\n# whatever the daemon makes of it\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	out, err := run(t, "--socket", f.sock, "plan", "--config", "new.yaml")
	if err != nil || !strings.Contains(out, "session reset: peer tor (changed: holdTime)") {
		t.Fatalf("plan --config: %v\n%s", err, out)
	}
	f.mu.Lock()
	plans := f.plans
	f.mu.Unlock()
	if len(plans) != 1 || plans[0].Text != text || plans[0].Name != path {
		t.Errorf("plan requests %+v, want the text of %s", plans, path)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, config.MaxConfigSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{fifo, big, dir, filepath.Join(dir, "missing.yaml")} {
		if _, err := run(t, "--socket", f.sock, "plan", "--config", bad); err == nil || !strings.Contains(err.Error(), "plan --config") {
			t.Errorf("plan --config %s: %v, want a refusal", bad, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.plans) != 1 {
		t.Errorf("refused files reached the daemon: %+v", f.plans[1:])
	}
}
