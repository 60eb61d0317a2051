package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
)

// ownSockets counts this process's sockets that the server side of a
// listener holds: TCP sockets whose local port is port, or unix sockets
// bound to path, that are connected and have a descriptor in /proc/self/fd.
// Connections still in the kernel's accept queue have none.
func ownSockets(t *testing.T, port int, path string) int {
	t.Helper()
	inodes := map[string]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	n := 0
	if path != "" {
		b, err := os.ReadFile("/proc/net/unix")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// Num RefCount Protocol Flags Type St Inode Path; St 03 = connected.
			if len(f) >= 8 && f[5] == "03" && f[7] == path && inodes[f[6]] {
				n++
			}
		}
		return n
	}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st ... inode(9); st 01 = established.
			if len(f) < 10 || f[3] != "01" {
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
			if err == nil && int(p) == port && inodes[f[9]] {
				n++
			}
		}
	}
	return n
}

// TestServersBounded: many more keep-alive clients than the connection cap,
// each sending one request and then holding its connection idle, as the
// user `nobody` did with 20k connections. The daemon never holds more than
// the cap, every idle connection is closed by the idle timeout (the client
// reads EOF), and the API answers throughout.
func TestServersBounded(t *testing.T) {
	const connCap, clients = 4, 24
	h := start(t, "default", func(h *harness) {
		h.lim.controlConns, h.lim.metricsConns = connCap, connCap
		h.lim.idleTimeout, h.lim.readHeaderTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	m, err := h.d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	port := m.ln.Addr().(*net.TCPAddr).Port

	for _, srv := range []struct {
		name  string
		dial  func() (net.Conn, error)
		path  string
		count func() int
	}{
		{"metrics", func() (net.Conn, error) { return net.Dial("tcp", m.ln.Addr().String()) }, "/metrics",
			func() int { return ownSockets(t, port, "") }},
		{"control", func() (net.Conn, error) { return net.Dial("unix", h.sock) }, api.PathStatus,
			func() int { return ownSockets(t, 0, h.sock) }},
	} {
		t.Run(srv.name, func(t *testing.T) {
			if n := srv.count(); n != 0 {
				t.Fatalf("%d server sockets before the test", n)
			}
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			var closed atomic.Int32
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := srv.dial()
					if err != nil {
						errs <- err
						return
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(20 * time.Second))
					fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", srv.path)
					br := bufio.NewReader(c)
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						errs <- fmt.Errorf("client %d: %w", i, err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						errs <- fmt.Errorf("client %d: %s", i, resp.Status)
						return
					}
					// Keep-alive and idle: the server must close it.
					if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
						errs <- fmt.Errorf("client %d: idle connection not closed by the server: %v", i, err)
						return
					}
					closed.Add(1)
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			if srv.name == "metrics" {
				// The flood of one server leaves the other alone.
				if st, err := api.NewClient(h.sock).Status(context.Background()); err != nil || st.Node != "node1" {
					t.Errorf("status during the metrics flood: %+v, %v", st, err)
				}
			}
			peak := 0
			for waiting := true; waiting; {
				select {
				case <-done:
					waiting = false
				case <-time.After(2 * time.Millisecond):
				}
				peak = max(peak, srv.count())
			}
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// The cap counts connections, not descriptors: Go closes a
			// descriptor once its last reader wakes, which can be just after
			// the limiter let the next connection in. So a few closing ones
			// may overlap the cap for an instant; 24 at once never may.
			if peak > 2*connCap {
				t.Errorf("the daemon held %d connections at once; the cap is %d (plus those being closed)", peak, connCap)
			}
			if closed.Load() != clients {
				t.Errorf("%d of %d idle connections closed", closed.Load(), clients)
			}
			t.Logf("%d clients, peak %d server connections", clients, peak)
		})
	}
	// The API still answers.
	if st, err := api.NewClient(h.sock).Status(context.Background()); err != nil || st.Node != "node1" {
		t.Fatalf("status after the flood: %+v, %v", st, err)
	}
	resp, err := http.Get("http://" + m.ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("metrics after the flood: %v", err)
	}
	resp.Body.Close()
}

// TestReloadOfAFIFO: SIGHUP with the config file replaced by a FIFO nobody
// writes (the parse blocks for ever) must not freeze the loop: a new NB
// switch is still advertised, and the status names the failed reload.
func TestReloadOfAFIFO(t *testing.T) {
	h := start(t, `"*"`, func(h *harness) { h.lim.parseTimeout = 500 * time.Millisecond })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")

	if err := os.Remove(h.cfgPath); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(h.cfgPath, 0o600); err != nil {
		t.Fatal(err)
	}
	// Unblock a parse stuck on the FIFO at the end: a writer that closes
	// at once gives the reader EOF.
	t.Cleanup(func() {
		if f, err := os.OpenFile(h.cfgPath, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	h.d.reload <- struct{}{}
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.200.0.0/24")
	h.eventually("the failed reload in status", func() bool { return h.d.status().ConfigError != "" })
	t.Logf("configError: %s", h.d.status().ConfigError)
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
}

// TestReloadParseDeadline: a parse slower than the deadline keeps the
// running config, says so in status, and the loop reconciles meanwhile;
// its late result, once it arrives, is never applied. The slow parse
// blocks on a channel, so the deadline is paid once and can be generous.
func TestReloadParseDeadline(t *testing.T) {
	const deadline = 3 * time.Second
	release := make(chan struct{})
	var slow atomic.Bool
	h := start(t, "default", func(h *harness) {
		h.lim.parseTimeout = deadline
		h.loadConfig = func(path string) (*config.Config, error) {
			if slow.Load() {
				<-release
			}
			return config.Load(path)
		}
	})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	h.nb.set(true, network("default", "10.128.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23")

	slow.Store(true)
	h.writeConfig(cfgText{networks: `"*"`})
	h.d.reload <- struct{}{}
	h.eventually("a parse running", func() bool { return h.d.parses.Load() == 1 })
	h.nb.set(true, network("default", "10.128.0.0/23", "10.129.0.0/23"), network("blue", "10.200.0.0/24"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.129.0.0/23") // the loop runs while the parse hangs
	h.eventually("the parse deadline in status", func() bool {
		return strings.Contains(h.d.status().ConfigError, "not parsed within "+deadline.String())
	})

	// The late parse ends (with the file that selects every network):
	// its result is dropped.
	slow.Store(false)
	close(release)
	released = true
	h.eventually("the late parse to end", func() bool { return h.d.parses.Load() == 0 })
	h.passDone()
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.129.0.0/23")
	if nets := h.d.config().Advertise[0].Networks; len(nets) != 1 || nets[0].String() != "default" {
		t.Fatalf("the late parse was applied: networks %v", nets)
	}

	// A reload once the file parses in time takes effect.
	h.d.reload <- struct{}{}
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.129.0.0/23", "tor 10.200.0.0/24")
	if e := h.d.status().ConfigError; e != "" {
		t.Fatalf("configError %q after a good reload", e)
	}
}

// apiAnswers calls every control API path and the metrics and returns a
// line per path; a panic in a handler shows as a broken connection.
func apiAnswers(t *testing.T, h *harness, metricsAddr string) map[string]string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", h.sock)
	}}, Timeout: 10 * time.Second}
	out := map[string]string{}
	for _, p := range []string{api.PathStatus, api.PathPeers, api.PathAdvertised, api.PathLearned,
		api.PathLearned + "?rejected=true&peer=tor", api.PathConfig, api.PathNetworks} {
		resp, err := hc.Get("http://ovnbgp" + p)
		if err != nil {
			t.Errorf("%s: %v (a panic in the handler?)", p, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Errorf("%s: %v (a panic in the handler?)", p, err)
		}
		out[p] = fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Errorf("metrics: %v", err)
	} else {
		resp.Body.Close()
	}
	return out
}

// TestAPIWhileSpeakerStarts: the control socket is served before the
// speaker exists, and a reload that restarts the speaker leaves it without
// one for a while. Every path answers meanwhile, clearly.
func TestAPIWhileSpeakerStarts(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int32
	h := start(t, "default", func(h *harness) {
		next := h.newSpeaker
		h.newSpeaker = func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error) {
			held.Add(1)
			<-gate
			return next(ctx, cfg, log, notify)
		}
	})
	h.eventually("NewSpeaker called", func() bool { return held.Load() == 1 })
	m, err := h.d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()

	check := func(phase string) {
		t.Helper()
		got := apiAnswers(t, h, m.ln.Addr().String())
		var st api.Status
		if err := json.Unmarshal([]byte(strings.TrimPrefix(got[api.PathStatus], "200 ")), &st); err != nil || st.Phase != phase {
			t.Errorf("status during %s: %s", phase, got[api.PathStatus])
		}
		var peers []api.Peer
		if err := json.Unmarshal([]byte(strings.TrimPrefix(got[api.PathPeers], "200 ")), &peers); err != nil ||
			len(peers) != 1 || peers[0].Name != "tor" || string(peers[0].State) != phase {
			t.Errorf("peers during %s: %s", phase, got[api.PathPeers])
		}
		for _, p := range []string{api.PathAdvertised, api.PathLearned, api.PathLearned + "?rejected=true&peer=tor"} {
			if want := "503 {\"error\":\"ovnbgp is " + phase + ": the BGP speaker is not running yet"; !strings.HasPrefix(got[p], want) {
				t.Errorf("%s during %s: %s; want %s…", p, phase, got[p], want)
			}
		}
		for _, p := range []string{api.PathConfig, api.PathNetworks} {
			if !strings.HasPrefix(got[p], "200 ") {
				t.Errorf("%s during %s: %s", p, phase, got[p])
			}
		}
		// The CLI's client prints the daemon's message.
		if _, err := api.NewClient(h.sock).Learned(context.Background(), "", false); err == nil || !strings.Contains(err.Error(), "ovnbgp is "+phase) {
			t.Errorf("client during %s: %v", phase, err)
		}
	}
	check(api.PhaseStarting)
	gate <- struct{}{}
	h.eventually("NB dialed", func() bool { h.nb.mu.Lock(); defer h.nb.mu.Unlock(); return h.nb.notify != nil })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")

	// A new ASN restarts the speaker: the same window again.
	h.writeConfig(cfgText{networks: "default", asn: 65011})
	h.d.reload <- struct{}{}
	h.eventually("NewSpeaker called again", func() bool { return held.Load() == 2 })
	check(api.PhaseRestarting)
	gate <- struct{}{}
	h.eventually("running again", func() bool { return h.d.status().Phase == api.PhaseRunning })
	h.wantPrefixes("tor 10.128.0.0/23")
}

// TestHeadlessExits: a reload whose new speaker fails and whose old one
// cannot be restored ends the daemon with an error (systemd restarts it)
// instead of running on without BGP.
func TestHeadlessExits(t *testing.T) {
	var calls atomic.Int32
	h := start(t, "default", func(h *harness) {
		next := h.newSpeaker
		h.newSpeaker = func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error) {
			if calls.Add(1) > 1 {
				return nil, errors.New("listen: address in use")
			}
			return next(ctx, cfg, log, notify)
		}
	})
	h.wantRunFail = true
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.writeConfig(cfgText{networks: "default", asn: 65011})
	h.d.reload <- struct{}{}
	select {
	case err := <-h.done:
		if err == nil || !strings.Contains(err.Error(), "could not be restored") {
			t.Fatalf("run ended with %v; want the failed restore", err)
		}
		// The restart sent a Cease: the message must not promise that
		// peers keep the routes.
		if strings.Contains(err.Error(), "keep the routes") || !h.sp.stopped || h.sp.graceful {
			t.Errorf("error %q, old speaker stopped %v graceful %v; want a Cease, said truthfully", err, h.sp.stopped, h.sp.graceful)
		}
		h.once.Do(func() {}) // already stopped
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon runs on without a speaker")
	}
	if calls.Load() != 3 {
		t.Errorf("NewSpeaker called %d times; want start, new settings, old settings", calls.Load())
	}
}

// TestRestoredSpeakerKeepsRunning: when only the new settings fail, the old
// settings are back in a new, empty speaker, which gets the table at once
// (with no NB change to prompt it), and the daemon runs on, reporting the
// error.
func TestRestoredSpeakerKeepsRunning(t *testing.T) {
	var sps speakers
	h := start(t, "default", func(h *harness) {
		sps.fail = func(_ context.Context, n int) error {
			if n == 2 {
				return errors.New("listen: address in use")
			}
			return nil
		}
		sps.install(h)
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.eventually("advertised by the first speaker", func() bool {
		return sps.get(1) != nil && len(sps.get(1).prefixes()) == 1
	})
	h.writeConfig(cfgText{networks: "default", asn: 65011})
	h.d.reload <- struct{}{}
	h.eventually("the failure in status", func() bool { return strings.Contains(h.d.status().ConfigError, "address in use") })
	if st := h.d.status(); st.Phase != api.PhaseRunning {
		t.Fatalf("phase %q after the restore", st.Phase)
	}
	h.eventually("the restored speaker advertising without an NB change", func() bool {
		sp := sps.get(3)
		return sp != nil && slices.Equal(sp.prefixes(), []string{"tor 10.128.0.0/23"})
	})
}

// TestSetPeersRetried: a SetPeers that fails is retried from the loop,
// with backoff, without waiting for a reload.
func TestSetPeersRetried(t *testing.T) {
	h := start(t, "default")
	h.eventually("the speaker", func() bool { return h.d.status().Phase == api.PhaseRunning })
	h.sp.mu.Lock()
	h.sp.failSetPeers = 3
	h.sp.peers = nil
	h.sp.mu.Unlock()
	h.nb.set(true, network("default", "10.128.0.0/23"))
	// The first plan adds the peers (and fails three times).
	h.wantPrefixes("tor 10.128.0.0/23")
	h.sp.mu.Lock()
	calls := h.sp.setPeerCalls
	h.sp.mu.Unlock()
	if calls < 4 {
		t.Fatalf("SetPeers called %d times; want 3 failures and a success", calls)
	}
}

// TestLearnedStreamsWithBoundedMemory: a request for a very large learned
// table holds memory of a few items, not of the table (it was ~0.6 GB per
// concurrent request at 500k prefixes).
func TestLearnedStreamsWithBoundedMemory(t *testing.T) {
	const n = 200_000
	var base, peak uint64
	var ms runtime.MemStats
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.sp.mu.Lock()
	h.sp.learnedN = n
	h.sp.onLearned = func(i int) {
		// Live heap while the handler walks the table.
		if i%20_000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	h.sp.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base = ms.HeapAlloc

	resp, err := unixGet(h.sock, api.PathLearned)
	if err != nil {
		t.Fatal(err)
	}
	// Count the items as they arrive, keeping none.
	dec := json.NewDecoder(resp.Body)
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	items := 0
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		items++
	}
	resp.Body.Close()
	if items != n {
		t.Fatalf("%d items, want %d", items, n)
	}
	// The table as JSON is ~300 bytes a path (60 MB); as Go values, more.
	setSize := uint64(n * 300)
	grew := int64(peak) - int64(base)
	t.Logf("heap before %d MB, peak during the request %d MB; the table is ~%d MB as JSON", base>>20, peak>>20, setSize>>20)
	if grew > int64(setSize/20) {
		t.Fatalf("the live heap grew by %d MB during one request; want far below the table's %d MB", grew>>20, setSize>>20)
	}
}

func unixGet(sock, path string) (*http.Response, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://ovnbgp" + path)
	if err == nil && resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s %s", path, resp.Status, b)
	}
	return resp, err
}

// TestRouteListLimit: limit=N returns N items, a valid JSON array, and says
// it was truncated; without a limit, or with one above the count, it does
// not.
func TestRouteListLimit(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23", "10.129.0.0/23", "10.130.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23", "tor 10.129.0.0/23", "tor 10.130.0.0/23")
	h.sp.mu.Lock()
	h.sp.learnedN = 10
	h.sp.mu.Unlock()
	c := api.NewClient(h.sock)
	ctx := context.Background()
	for _, tt := range []struct {
		limit, wantLearned, wantAdvertised int
		truncLearned, truncAdvertised      bool
	}{
		{0, 10, 3, false, false},
		{2, 2, 2, true, true},
		{3, 3, 3, true, false},
		{10, 10, 3, false, false},
		{11, 10, 3, false, false},
	} {
		l, trunc, err := c.LearnedRoutes(ctx, api.ListOptions{Limit: tt.limit})
		if err != nil || len(l) != tt.wantLearned || trunc != tt.truncLearned {
			t.Errorf("learned limit=%d: %d items, truncated %v, %v; want %d, %v", tt.limit, len(l), trunc, err, tt.wantLearned, tt.truncLearned)
		}
		a, trunc, err := c.AdvertisedRoutes(ctx, api.ListOptions{Limit: tt.limit})
		if err != nil || len(a) != tt.wantAdvertised || trunc != tt.truncAdvertised {
			t.Errorf("advertised limit=%d: %d items, truncated %v, %v; want %d, %v", tt.limit, len(a), trunc, err, tt.wantAdvertised, tt.truncAdvertised)
		}
	}
	// curl sees a plain JSON array, and the trailer.
	resp, err := unixGet(h.sock, api.PathLearned+"?limit=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var arr []map[string]any
	if err := json.Unmarshal(body, &arr); err != nil || len(arr) != 1 || resp.Trailer.Get(api.TrailerTruncated) != "true" {
		t.Errorf("limit=1: %s (%v), trailer %v", body, err, resp.Trailer)
	}
	for _, bad := range []string{"-1", "x"} {
		if _, err := unixGet(h.sock, api.PathLearned+"?limit="+bad); err == nil || !strings.Contains(err.Error(), "limit=") {
			t.Errorf("limit=%s: %v", bad, err)
		}
	}
}

// TestHeavyRequestsCapped: at most heavyRequests route lists stream at
// once; another waits, then gets 503 with advice, and gets a slot once one
// is free.
func TestHeavyRequestsCapped(t *testing.T) {
	h := start(t, "default", func(h *harness) { h.lim.heavyRequests, h.lim.heavyWait = 2, 300*time.Millisecond })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	hold := make(chan struct{})
	var inside atomic.Int32
	h.sp.mu.Lock()
	h.sp.learnedN = 1
	h.sp.onLearned = func(int) { inside.Add(1); <-hold }
	h.sp.mu.Unlock()
	c := api.NewClient(h.sock)
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := c.Learned(context.Background(), "", false); errs <- err }()
	}
	h.eventually("two lists streaming", func() bool { return inside.Load() == 2 })
	if _, err := c.Learned(context.Background(), "", false); err == nil || !strings.Contains(err.Error(), "busy: 2 route lists") {
		t.Fatalf("third list: %v; want busy", err)
	}
	close(hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.Learned(context.Background(), "", false); err != nil || len(l) != 1 {
		t.Fatalf("after the others: %d, %v", len(l), err)
	}
}

// TestReloadLogLevel: log.level from a reload applies to what every logger
// the daemon handed out writes: its own, the speaker's and the NB client's
// (entries are read from the log output, not from the loggers' levels).
func TestReloadLogLevel(t *testing.T) {
	var spLog atomic.Pointer[zap.Logger]
	lvl := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	core, logs := observer.New(lvl)
	h := start(t, "default", func(h *harness) {
		h.level = &lvl
		h.logger = zap.New(core)
		h.cfg.logLevel = "debug"
		next := h.newSpeaker
		h.newSpeaker = func(ctx context.Context, cfg config.BGP, log *zap.Logger, notify func()) (Speaker, error) {
			spLog.Store(log)
			return next(ctx, cfg, log, notify)
		}
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.nb.mu.Lock()
	nbLog := h.dialLog
	h.nb.mu.Unlock()
	loggers := map[string]*zap.Logger{"daemon": h.d.log, "bgp": spLog.Load(), "ovn": nbLog}
	probe := func(when string) {
		for name, l := range loggers {
			l.Debug("probe", zap.String("logger", name), zap.String("when", when))
		}
	}
	written := func(when string) int {
		return logs.FilterMessage("probe").FilterField(zap.String("when", when)).Len()
	}
	probe("debug")
	if n := written("debug"); n != len(loggers) {
		t.Fatalf("%d of %d loggers wrote at debug with log.level debug", n, len(loggers))
	}
	h.writeConfig(cfgText{networks: "default", logLevel: "info"})
	h.d.reload <- struct{}{}
	h.eventually("the reload", func() bool { return logs.FilterMessage("config reloaded").Len() == 1 })
	probe("info")
	if n := written("info"); n != 0 {
		t.Errorf("%d loggers still wrote debug entries after a reload to info: %v", n, logs.FilterMessage("probe").FilterField(zap.String("when", "info")).All())
	}
}

// TestLongStreamNotCut: a route list that takes longer than the write
// deadline is not cut while it makes progress (the deadline is pushed
// forward as items go out).
func TestLongStreamNotCut(t *testing.T) {
	const n = 1500
	h := start(t, "default", func(h *harness) { h.lim.writeTimeout = 200 * time.Millisecond })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	began := time.Now()
	h.sp.mu.Lock()
	h.sp.learnedN = n
	h.sp.onLearned = func(int) { time.Sleep(time.Millisecond) }
	h.sp.mu.Unlock()
	l, trunc, err := api.NewClient(h.sock).LearnedRoutes(context.Background(), api.ListOptions{})
	if err != nil || len(l) != n || trunc {
		t.Fatalf("%d of %d items, truncated %v, %v", len(l), n, trunc, err)
	}
	if took := time.Since(began); took < 400*time.Millisecond {
		t.Fatalf("the list took %v: not longer than the write deadline, the test proves nothing", took)
	}
}

// speakers makes every NewSpeaker call return a fresh fake speaker (with
// the peers of the global config, as bgp.New adds them), recorded in
// order; fail, when set, can refuse call n (1-based).
type speakers struct {
	mu   sync.Mutex
	list []*fakeSpeaker
	fail func(ctx context.Context, n int) error
}

func (s *speakers) install(h *harness) {
	h.newSpeaker = func(ctx context.Context, cfg config.BGP, _ *zap.Logger, _ func()) (Speaker, error) {
		s.mu.Lock()
		n := len(s.list) + 1
		fail := s.fail
		s.mu.Unlock()
		if fail != nil {
			if err := fail(ctx, n); err != nil {
				s.mu.Lock()
				s.list = append(s.list, nil)
				s.mu.Unlock()
				return nil, err
			}
		}
		sp := &fakeSpeaker{}
		if err := sp.SetPeers(ctx, cfg.Peers); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.list = append(s.list, sp)
		s.mu.Unlock()
		return sp, nil
	}
}

func (s *speakers) get(n int) *fakeSpeaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > len(s.list) {
		return nil
	}
	return s.list[n-1]
}

// TestRouteListUsesTheSpeakerAfterTheWait: a route list waiting for a slot
// while a reload restarts the speaker is answered from the new speaker, not
// from the stopped one it would have read before the wait.
func TestRouteListUsesTheSpeakerAfterTheWait(t *testing.T) {
	var sps speakers
	h := start(t, "default", func(h *harness) {
		h.lim.heavyRequests = 1
		h.lim.heavyWait = 30 * time.Second
		sps.install(h)
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.eventually("the first speaker", func() bool { return sps.get(1) != nil })
	h.eventually("advertised by the first speaker", func() bool { return len(sps.get(1).prefixes()) == 1 })
	c := api.NewClient(h.sock)
	for _, list := range []string{"learned", "advertised"} {
		t.Run(list, func(t *testing.T) {
			n := len(sps.list)
			h.d.heavy <- struct{}{} // the one slot is taken
			type result struct {
				n   int
				err error
			}
			res := make(chan result, 1)
			go func() {
				if list == "learned" {
					l, _, err := c.LearnedRoutes(context.Background(), api.ListOptions{})
					res <- result{len(l), err}
					return
				}
				a, _, err := c.AdvertisedRoutes(context.Background(), api.ListOptions{})
				res <- result{len(a), err}
			}()
			h.eventually("the request waiting for a slot", func() bool { return h.d.heavyWaiting.Load() == 1 })
			// A new ASN restarts the speaker meanwhile.
			h.writeConfig(cfgText{networks: "default", asn: uint32(65020 + n)})
			h.d.reload <- struct{}{}
			h.eventually("the new speaker", func() bool { return sps.get(n+1) != nil })
			next := sps.get(n + 1)
			next.mu.Lock()
			next.learnedN = 3
			next.mu.Unlock()
			h.eventually("advertised by the new speaker", func() bool { return len(next.prefixes()) == 1 })
			<-h.d.heavy // the slot is free
			r := <-res
			want := map[string]int{"learned": 3, "advertised": 1}[list]
			if r.err != nil || r.n != want {
				t.Fatalf("%d routes, %v; want %d from the running speaker", r.n, r.err, want)
			}
		})
	}
}

// TestPeersStartingUntilAdded: the speaker runs before its peers are added
// (they are added with the first plan, up to readyGrace later). Meanwhile
// the peers answer lists the configured peers in state "starting", not an
// empty list.
func TestPeersStartingUntilAdded(t *testing.T) {
	h := start(t, "default")
	h.eventually("the speaker", func() bool { return h.d.status().Phase == api.PhaseRunning })
	peers, err := api.NewClient(h.sock).Peers(context.Background())
	if err != nil || len(peers) != 1 || peers[0].Name != "tor" || peers[0].State != api.PeerStarting {
		t.Fatalf("peers before they are added: %+v, %v; want tor in state %q", peers, err, api.PeerStarting)
	}
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	peers, err = api.NewClient(h.sock).Peers(context.Background())
	if err != nil || len(peers) != 1 || peers[0].State != "established" {
		t.Fatalf("peers once added: %+v, %v", peers, err)
	}
}

// TestStopDuringSpeakerRestart: SIGTERM while a reload restarts the
// speaker makes both NewSpeaker calls fail on the cancelled context; that
// is a normal stop (run returns nil, exit 0), not a fatal error.
func TestStopDuringSpeakerRestart(t *testing.T) {
	var sps speakers
	var h *harness
	h = start(t, "default", func(h2 *harness) {
		sps.fail = func(ctx context.Context, n int) error {
			if n == 1 {
				return nil
			}
			h2.cancel() // SIGTERM arrives during the restart
			<-ctx.Done()
			return fmt.Errorf("bgp start: %w", ctx.Err())
		}
		sps.install(h2)
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.eventually("the first speaker", func() bool { return sps.get(1) != nil })
	h.writeConfig(cfgText{networks: "default", asn: 65011})
	h.d.reload <- struct{}{}
	select {
	case err := <-h.done:
		h.once.Do(func() {})
		if err != nil {
			t.Fatalf("run ended with %v; want nil on SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop")
	}
}

// TestRunStopsDuringParse: SIGTERM while the startup config parse waits is
// a normal stop: Run returns nil.
func TestRunStopsDuringParse(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	entered := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{ConfigPath: "/nonexistent/config.yaml", Logger: zaptest.NewLogger(t),
			Deps: Deps{LoadConfig: func(context.Context, string) (*config.Config, error) {
				close(entered)
				<-block
				return nil, errors.New("never")
			}}})
	}()
	<-entered
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v; want nil on SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop")
	}
}

// TestStreamErrorMidway: an error after the first items were sent ends the
// list with the error trailer: the body stays a valid JSON array of what
// was sent, and the client reports an incomplete list.
func TestStreamErrorMidway(t *testing.T) {
	const k = 5
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.sp.mu.Lock()
	h.sp.learnedN, h.sp.failLearnedAfter = 100, k
	h.sp.mu.Unlock()
	resp, err := unixGet(h.sock, api.PathLearned)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(body, &arr); err != nil || len(arr) != k {
		t.Fatalf("body: %d items, %v; want a valid array of %d:\n%s", len(arr), err, k, body)
	}
	if e := resp.Trailer.Get(api.TrailerError); !strings.Contains(e, "table walk failed") {
		t.Fatalf("error trailer %q", e)
	}
	_, _, err = api.NewClient(h.sock).LearnedRoutes(context.Background(), api.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "incomplete list: table walk failed") {
		t.Fatalf("client: %v; want an incomplete list", err)
	}
}

// TestStalledReaderDropped: a client that asks for a long list and stops
// reading is dropped at the write deadline, and its slot is freed.
func TestStalledReaderDropped(t *testing.T) {
	h := start(t, "default", func(h *harness) {
		h.lim.heavyRequests = 1
		h.lim.writeTimeout = 500 * time.Millisecond
	})
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.sp.mu.Lock()
	h.sp.learnedN = 10_000_000 // far more than the socket buffers hold
	h.sp.mu.Unlock()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", api.PathLearned)
	// Read nothing.
	h.eventually("the list streaming", func() bool { return len(h.d.heavy) == 1 })
	h.eventually("the stalled reader dropped", func() bool { return len(h.d.heavy) == 0 })
	h.sp.mu.Lock()
	h.sp.learnedN = 2
	h.sp.mu.Unlock()
	if l, err := api.NewClient(h.sock).Learned(context.Background(), "", false); err != nil || len(l) != 2 {
		t.Fatalf("after the stalled reader: %d, %v", len(l), err)
	}
}

// TestMetricsBounded: at most metricsInFlight scrapes are collected at
// once; another is answered 503 at once instead of piling up.
func TestMetricsBounded(t *testing.T) {
	const inFlight = 2
	h := start(t, "default", func(h *harness) { h.lim.metricsInFlight = inFlight })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	m, err := h.d.serveMetrics("127.0.0.1:0") // registering collects once
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	hold := make(chan struct{})
	var inside atomic.Int32
	h.sp.mu.Lock()
	h.sp.onPeers = func() { inside.Add(1); <-hold }
	h.sp.mu.Unlock()
	url := "http://" + m.ln.Addr().String() + "/metrics"
	hc := &http.Client{Timeout: 20 * time.Second}
	codes := make(chan int, inFlight)
	for range inFlight {
		go func() {
			resp, err := hc.Get(url)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	h.eventually("the scrapes collecting", func() bool { return inside.Load() == inFlight })
	resp, err := hc.Get(url)
	close(hold)
	if err != nil {
		t.Fatalf("one scrape too many: %v; want a 503 at once", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("one scrape too many: %s; want 503", resp.Status)
	}
	for range inFlight {
		if code := <-codes; code != 200 {
			t.Errorf("a held scrape: %d", code)
		}
	}
}

// TestStoppingWording: while stopping, the route lists say the speaker is
// stopped, not that it is "not running yet".
func TestStoppingWording(t *testing.T) {
	h := start(t, "default")
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	h.d.stopSpeaker(false, api.PhaseStopping)
	_, err := api.NewClient(h.sock).Learned(context.Background(), "", false)
	if err == nil || err.Error() != "ovnbgp is stopping: the BGP speaker is stopped" {
		t.Fatalf("learned while stopping: %v", err)
	}
}

// TestParseDeadlineReachesTheLoader: the reload's deadline is passed to the
// loader (config.LoadContext stops decoding when it passes), so a parse
// past it ends instead of piling up.
func TestParseDeadlineReachesTheLoader(t *testing.T) {
	var running atomic.Int32
	load := func(ctx context.Context, path string) (*config.Config, error) {
		<-ctx.Done() // a parse that only the deadline ends
		return nil, ctx.Err()
	}
	r := <-parseConfig(context.Background(), load, "slow.yaml", 50*time.Millisecond, &running, 4)
	if r.err == nil || !strings.Contains(r.err.Error(), "not parsed within") {
		t.Fatalf("parse result %v, want the deadline error", r.err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for running.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the loader never saw the deadline: the parse still runs")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
