package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// needRoot: drain is root's; without root only the refusal is checked.
func needRoot(t *testing.T, h *harness) {
	t.Helper()
	if os.Getuid() == 0 {
		return
	}
	if code, body := post(t, h.sock, api.PathDrain, api.DrainRequest{}); code != http.StatusForbidden {
		t.Fatalf("drain as uid %d: %d %s, want 403", os.Getuid(), code, body)
	}
	prereq.Missing(t, "drain is root's: the rest needs root")
}

func drainOf(t *testing.T, h *harness, req any) api.DrainStatus {
	t.Helper()
	code, body := post(t, h.sock, api.PathDrain, req)
	if code != http.StatusOK {
		t.Fatalf("drain %+v: %d %s", req, code, body)
	}
	var st api.DrainStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// torAdvs is what the fake speaker holds for tor.
func (f *fakeSpeaker) torAdvs() []model.Advertisement {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.advs)
}

func tagged(a model.Advertisement) bool {
	return slices.Contains(a.Attrs.Communities, plan.CommunityGracefulShutdown)
}

// TestDrainPersistsAndResumes: a drain tags every advertisement at once and
// is written to stateDir/drain.json (0600); status, peers and routes
// advertised show it. The daemon restarted on that state sends tagged
// advertisements from its very first Apply (never an untagged one), and
// withdraws at the persisted deadline; routes advertised then lists them
// as drained. Undrain restores them untagged and removes the file.
func TestDrainPersistsAndResumes(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	withState := func(h *harness) { h.cfg.stateDir = state }
	h := start(t, "default", withState)
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")
	needRoot(t, h)

	// Long enough for the restart below (its first Apply must still
	// announce, tagged), short enough for a test.
	wait := 6 * time.Second
	// A request that does not say how long waits the default, as the CLI
	// does: never "withdraw at once" by omission.
	st := drainOf(t, h, map[string]any{})
	if len(st.Peers) != 1 || st.Peers[0].WithdrawAt.Sub(st.Peers[0].Since) != api.DefaultDrainWait {
		t.Fatalf("drain {} answered %+v, want tor withdrawn %s after it was drained", st, api.DefaultDrainWait)
	}
	st = drainOf(t, h, api.DrainRequest{Wait: api.DrainWait(time.Hour)})
	if len(st.Peers) != 1 || st.Peers[0].Peer != "tor" || st.Peers[0].Phase != model.DrainTagged {
		t.Fatalf("drain answered %+v, want tor tagged", st)
	}
	h.eventually("tor's advertisement tagged graceful-shutdown", func() bool {
		advs := h.sp.torAdvs()
		return len(advs) == 1 && tagged(advs[0])
	})
	fi, err := os.Stat(filepath.Join(state, "drain.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("drain.json: %v, mode %v, want 0600", err, fi)
	}
	var peers []model.PeerStatus
	getJSON(t, h.sock, api.PathPeers, &peers)
	if len(peers) != 1 || peers[0].Drain != model.DrainTagged {
		t.Errorf("peers: %+v, want tor drain tagged", peers)
	}
	var status api.Status
	getJSON(t, h.sock, api.PathStatus, &status)
	if len(status.Drained) != 1 || status.Drained[0].WithdrawAt.IsZero() {
		t.Errorf("status drained = %+v", status.Drained)
	}
	var advs []model.Advertisement
	getJSON(t, h.sock, api.PathAdvertised, &advs)
	if len(advs) != 1 || !strings.Contains(advs[0].Drain, "graceful-shutdown") {
		t.Errorf("routes advertised: %+v, want the drain named", advs)
	}
	// Drain again, sooner: the withdraw moves earlier.
	st = drainOf(t, h, api.DrainRequest{Wait: api.DrainWait(wait)})
	withdrawAt := st.Peers[0].WithdrawAt
	h.stop()

	// A restart within the wait: tagged from the first Apply on, and
	// withdrawn at the persisted deadline, not a whole wait later.
	h2 := start(t, "default", withState)
	h2.nb.set(true, network("default", "10.128.0.0/23"))
	h2.eventually("the restarted daemon withdraws tor's advertisement", func() bool {
		h2.sp.mu.Lock()
		defer h2.sp.mu.Unlock()
		return h2.sp.sets > 0 && len(h2.sp.advs) == 0
	})
	gone := time.Now()
	h2.sp.mu.Lock()
	applies := slices.Clone(h2.sp.applies)
	h2.sp.mu.Unlock()
	if len(applies) == 0 || len(applies[0].Announce) == 0 {
		t.Fatalf("the restarted daemon's first Apply announced nothing: %+v", applies)
	}
	for i, d := range applies {
		for _, a := range slices.Concat(d.Announce, d.Change) {
			if !tagged(a) {
				t.Errorf("Apply %d after the restart sent %s to %s untagged: %+v", i, a.Prefix, a.Peer, a.Attrs)
			}
		}
	}
	if gone.Before(withdrawAt) {
		t.Errorf("withdrawn at %v, before withdrawAt %v", gone, withdrawAt)
	}
	getJSON(t, h2.sock, api.PathAdvertised, &advs)
	if len(advs) != 1 || advs[0].State != model.AdvDrained || !strings.Contains(advs[0].Reason, "ovnbgp undrain") {
		t.Errorf("routes advertised once withdrawn: %+v", advs)
	}
	getJSON(t, h2.sock, api.PathPeers, &peers)
	if len(peers) != 1 || peers[0].Drain != model.DrainWithdrawn || peers[0].HeldBack != 0 {
		t.Errorf("peers once withdrawn: %+v, want drain withdrawn and nothing held back by a cap", peers)
	}

	code, body := post(t, h2.sock, api.PathUndrain, api.UndrainRequest{})
	if code != http.StatusOK {
		t.Fatalf("undrain: %d %s", code, body)
	}
	h2.eventually("tor's advertisement back, untagged", func() bool {
		advs := h2.sp.torAdvs()
		return len(advs) == 1 && !tagged(advs[0])
	})
	if _, err := os.Stat(filepath.Join(state, "drain.json")); !os.IsNotExist(err) {
		t.Errorf("drain.json after undrain: %v, want it gone", err)
	}
}

// TestDrainRequests: an unknown peer, a negative wait and an undrain of
// one peer under the drain of every peer are refused with what to do, and
// change nothing; --wait 0 withdraws at once, and the metrics say so.
func TestDrainRequests(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	needRoot(t, h)
	for _, tc := range []struct {
		path string
		req  any
		code int
		want string
	}{
		{api.PathDrain, api.DrainRequest{Peer: "tor-x"}, http.StatusNotFound, `(configured: [tor]): name one of them`},
		{api.PathDrain, map[string]any{"wait": "-1s"}, http.StatusBadRequest, "negative"},
		{api.PathDrain, map[string]any{"wait": "soon"}, http.StatusBadRequest, "write e.g. 30s"},
		{api.PathDrain, map[string]any{"peers": "tor"}, http.StatusBadRequest, "unknown field"},
		{api.PathUndrain, api.UndrainRequest{Peer: "tor-x"}, http.StatusNotFound, "no such peer"},
	} {
		code, body := post(t, h.sock, tc.path, tc.req)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %+v: %d %s, want %d with %q", tc.path, tc.req, code, body, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, "state", "drain.json")); !os.IsNotExist(err) {
		t.Fatalf("a refused request wrote the state: %v", err)
	}
	scrape, _ := metricsScraper(t, h)
	if body := scrape(); strings.Contains(body, "ovnbgp_drained{") {
		t.Errorf("metrics show a drain before any:\n%s", body)
	}
	drainOf(t, h, api.DrainRequest{Wait: api.DrainWait(0)})
	h.wantPrefixes()
	body := scrape()
	for _, want := range []string{`ovnbgp_drained{peer="tor"} 2`, `ovnbgp_advertisements{peer="tor",state="drained"} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	code, body := post(t, h.sock, api.PathUndrain, api.UndrainRequest{Peer: "tor"})
	if code != http.StatusConflict || !strings.Contains(body, "undrain` without --peer") {
		t.Errorf("undrain tor under the drain of every peer: %d %s", code, body)
	}
	h.wantPrefixes()
}

// TestDrainCorruptStateRefusesStart: a drain.json that does not parse
// stops the daemon before anything is advertised, with an error naming the
// file and the fix.
func TestDrainCorruptStateRefusesStart(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":     "{not json",
		"version":     `{"version": 9, "peers": []}`,
		"unknown key": `{"version": 1, "peers": [], "extra": 1}`,
		"withdraw before since": `{"version": 1, "peers": [{"peer": "", "since": "2026-12-01T06:00:00Z",
			"withdrawAt": "2026-12-01T05:00:00Z"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			state := t.TempDir()
			file := filepath.Join(state, "drain.json")
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadDrain(state)
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "delete the file") {
				t.Fatalf("loadDrain: %v, want an error naming %s and the fix", err, file)
			}
		})
	}
	// The daemon itself: run ends with that error and no Apply was made.
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "drain.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	hh := startFailing(t, state)
	if hh.runErr == nil || !strings.Contains(hh.runErr.Error(), "drain.json") {
		t.Fatalf("run = %v, want the corrupt drain state named", hh.runErr)
	}
	if hh.sp.sets != 0 {
		t.Errorf("%d Apply calls with a corrupt drain state", hh.sp.sets)
	}
}

// startFailing starts the harness's daemon on state and waits for run to
// end (it must, on the corrupt state).
func startFailing(t *testing.T, state string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), sp: &fakeSpeaker{}, nb: &fakeNB{}, host: &fakeHost{}}
	h.cfgPath, h.sock = filepath.Join(h.dir, "config.yaml"), filepath.Join(h.dir, "ctl.sock")
	h.writeConfig(cfgText{networks: "default", stateDir: state})
	cfgDone := make(chan error, 1)
	go func() {
		cfgDone <- Run(t.Context(), Options{ConfigPath: h.cfgPath, Version: "test", Deps: Deps{
			NewSpeaker: func(_ context.Context, _ config.BGP, _ *zap.Logger, _ func()) (Speaker, error) { return h.sp, nil },
		}})
	}()
	select {
	case h.runErr = <-cfgDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon runs on a corrupt drain state")
	}
	return h
}

// TestDrainNotRoot: drain and undrain from a client whose effective uid
// is not 0 (SO_PEERCRED) get 403 and change nothing. As root, the client
// connects from a thread whose effective uid is nobody's.
func TestDrainNotRoot(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	for _, path := range []string{api.PathDrain, api.PathUndrain} {
		var code int
		var body string
		if os.Getuid() == 0 {
			code, body = postAsNobody(t, h.sock, path, "{}")
		} else {
			code, body = post(t, h.sock, path, struct{}{})
		}
		if code != http.StatusForbidden || !strings.Contains(body, "root only") {
			t.Errorf("%s as non-root: %d %s, want 403", path, code, body)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, "state", "drain.json")); !os.IsNotExist(err) {
		t.Errorf("a refused drain wrote the state: %v", err)
	}
	h.passDone()
	h.wantPrefixes("tor 10.128.0.0/23")
}

// postAsNobody connects to sock with effective uid 65534 (file-system uid
// 0, so the socket's mode lets it in: SO_PEERCRED reports the effective
// uid) on a locked thread that is thrown away afterwards, and posts body.
func postAsNobody(t *testing.T, sock, path, body string) (int, string) {
	t.Helper()
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, with its
		// changed credentials.
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, 0, 65534, 0); e != 0 {
			ch <- result{err: e}
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0); e != 0 {
			ch <- result{err: e}
			return
		}
		c, err := net.Dial("unix", sock)
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("connect as nobody: %v", r.err)
	}
	defer r.conn.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://ovnbgp"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := req.Write(r.conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(r.conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestUndrainUnconfiguredPeer: a drain order naming a peer that is no
// longer configured (removed or renamed while drained) is named in a
// warning at start and after a reload that drops the peer, shows in
// status, and `ovnbgp undrain --peer OLD` removes it (not "no such peer",
// which left only `undrain` of everything to clear it).
func TestUndrainUnconfiguredPeer(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	orders := model.Drain{}.Add("tor-old", now, time.Hour).Add("tor", now, time.Hour)
	if err := saveDrain(state, orders); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	h := start(t, "default", func(h *harness) { h.cfg.stateDir = state; h.logger = zap.New(core) })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	needRoot(t, h)
	stale := func() []string {
		var peers []string
		for _, e := range logs.FilterMessageSnippet("drain order for a peer that is not configured").All() {
			peers = append(peers, fmt.Sprint(e.ContextMap()["peer"]))
		}
		return peers
	}
	if got := stale(); !slices.Equal(got, []string{"tor-old"}) {
		t.Errorf("warnings at start name %v, want [tor-old]", got)
	}

	code, body := post(t, h.sock, api.PathUndrain, api.UndrainRequest{Peer: "tor-old"})
	if code != http.StatusOK {
		t.Fatalf("undrain --peer tor-old (drained, then removed from the config): %d %s", code, body)
	}
	var st api.DrainStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Orders) != 1 || st.Orders[0].Peer != "tor" || len(st.Peers) != 1 {
		t.Errorf("after undrain --peer tor-old: %+v, want only tor's order", st)
	}
	got, err := loadDrain(state)
	if err != nil || len(got.Peers) != 1 || got.Peers[0].Peer != "tor" {
		t.Errorf("drain.json after undrain --peer tor-old: %+v, %v; want only tor's order", got, err)
	}
	// A peer that is neither configured nor drained is still refused.
	if code, body := post(t, h.sock, api.PathUndrain, api.UndrainRequest{Peer: "tor-x"}); code != http.StatusNotFound {
		t.Errorf("undrain --peer tor-x: %d %s, want 404", code, body)
	}

	// A reload that renames tor: its order now names no configured peer.
	logs.TakeAll()
	h.writeConfig(cfgText{networks: "default", stateDir: state, extra: ""})
	text, err := os.ReadFile(h.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.cfgPath, []byte(strings.Replace(string(text), "{name: tor,", "{name: tor-b,", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	h.d.reload <- struct{}{}
	h.eventually("a warning naming tor's order after the reload", func() bool { return slices.Equal(stale(), []string{"tor"}) })
}

// TestDrainStateNotRegularFile: a drain.json that is not a regular file
// (a FIFO, a directory) is refused at once, naming it; a FIFO used to
// block the start forever in open(2), before the regular-file check.
func TestDrainStateNotRegularFile(t *testing.T) {
	for name, mk := range map[string]func(string) error{
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		t.Run(name, func(t *testing.T) {
			state := t.TempDir()
			file := filepath.Join(state, "drain.json")
			if err := mk(file); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := loadDrain(state); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("loadDrain: %v, want %s named as not a regular file", err, file)
				}
			case <-time.After(10 * time.Second):
				// Unblock the reader before failing: a writer opens
				// and closes the FIFO.
				if w, err := os.OpenFile(file, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatal("loadDrain blocked on a FIFO: the daemon would never start")
			}
		})
	}
}
