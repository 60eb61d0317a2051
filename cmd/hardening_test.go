package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// TestMain lets a test run this binary as the real `ovnbgp` (Execute with
// its signal handling) in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("OVNBGP_TEST_EXECUTE") == "1" {
		Execute()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proc is a child process running this test binary as `ovnbgp`.
type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer  // read it only after done
	done   chan struct{} // closed when the process ended and stderr is complete
}

// child starts this test binary as `ovnbgp args...`.
func child(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "OVNBGP_TEST_EXECUTE=1")
	p.cmd.Stderr = &p.stderr
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitExit waits for the child and returns its exit code and stderr.
func (p *proc) waitExit(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("the command did not end within 15 s; stderr: %s", p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// silentSocket is a control socket that reads a request and never
// answers; got receives a value for each request read.
func silentSocket(t *testing.T) (sock string, got <-chan struct{}) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				buf := make([]byte, 4096)
				if n, _ := c.Read(buf); n > 0 {
					ch <- struct{}{} // the request: now answer nothing
				}
			}()
		}
	}()
	return sock, ch
}

// TestInterruptEndsCLI: SIGINT or SIGTERM ends a command that waits on a
// control socket that never answers, with the shell's code for the signal
// (130, 143) and a message saying why.
func TestInterruptEndsCLI(t *testing.T) {
	for _, tt := range []struct {
		sig  os.Signal
		name string
		code int
	}{{os.Interrupt, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}} {
		t.Run("silent control socket/"+tt.name, func(t *testing.T) {
			sock, got := silentSocket(t)
			c := child(t, "--socket", sock, "peers")
			select {
			case <-got:
			case <-time.After(15 * time.Second):
				t.Fatal("the CLI sent no request")
			}
			if err := c.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			code, stderr := c.waitExit(t)
			if code != tt.code || !strings.Contains(stderr, "interrupted by "+tt.name) {
				t.Fatalf("exit %d, stderr %q; want %d and the interruption named", code, stderr, tt.code)
			}
		})
	}
}

// TestFIFOConfigRefused: a FIFO as the config file is refused at once
// (config.Load reads only regular files), naming the file: neither
// `config validate` nor `daemon` waits on it.
func TestFIFOConfigRefused(t *testing.T) {
	for _, args := range [][]string{{"config", "validate"}, {"daemon", "--config"}} {
		t.Run(args[0], func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "config.yaml")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			code, stderr := child(t, append(args, fifo)...).waitExit(t)
			if code != 1 || !strings.Contains(stderr, fifo) || !strings.Contains(stderr, "FIFO") {
				t.Fatalf("exit %d, stderr %q; want 1 and the FIFO named", code, stderr)
			}
		})
	}
}

// TestDaemonStopsCleanlyOnSignal: `ovnbgp daemon` stopped by SIGTERM
// (systemctl stop) or SIGINT (Ctrl-C) exits 0: that is its normal stop.
func TestDaemonStopsCleanlyOnSignal(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(signalName(sig), func(t *testing.T) {
			dir := t.TempDir()
			sock, cfg := filepath.Join(dir, "ctl.sock"), filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(cfg, []byte(`node: {name: node1}
bgp:
  asn: 65010
  routerID: 192.0.2.0
  listenPort: -1
  peers:
    - {name: tor, address: 192.0.2.1, asn: 65001}
ovn: {northbound: "unix:`+filepath.Join(dir, "nb.sock")+`"}
advertise:
  - {name: pods, kind: podNetwork, networks: [default]}
control: {socket: `+sock+`}
metrics: {address: ""}
stateDir: `+filepath.Join(dir, "state")+`
`), 0o600); err != nil {
				t.Fatal(err)
			}
			c := child(t, "daemon", "--config", cfg)
			// The proving event: the daemon answers on its control socket.
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := api.NewClient(sock).Status(context.Background()); err == nil {
					break
				}
				select {
				case <-c.done:
					code, stderr := c.waitExit(t)
					t.Fatalf("the daemon exited %d before answering: %s", code, stderr)
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("the daemon never answered on its control socket")
				}
			}
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code, stderr := c.waitExit(t); code != 0 {
				t.Fatalf("exit %d on %s; want 0: %s", code, signalName(sig), stderr)
			}
		})
	}
}

// TestSecondSignalExits: the first signal cancels the command, naming it;
// the second exits at once.
func TestSecondSignalExits(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ctx, cancel := context.WithCancelCause(context.Background())
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	go onSignals(sigs, cancel, &stderr, func(code int) { exited <- code })
	sigs <- syscall.SIGTERM
	<-ctx.Done()
	if err := context.Cause(ctx); err == nil || err.Error() != "interrupted by SIGTERM" {
		t.Fatalf("cause %v", err)
	}
	select {
	case code := <-exited:
		t.Fatalf("exit(%d) at the first signal", code)
	default:
	}
	sigs <- os.Interrupt
	select {
	case code := <-exited:
		if code != 130 || !strings.Contains(stderr.String(), "second SIGINT") {
			t.Fatalf("exit(%d), stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit at the second signal")
	}
}

// fakeControl serves the route lists as the daemon does (a JSON array,
// limit=, the truncation trailer) from fixed data.
func fakeControl(t *testing.T, advs []model.Advertisement, peers []model.PeerStatus) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	list := func(w http.ResponseWriter, r *http.Request, items []any) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		w.Header().Set("Trailer", api.TrailerTruncated)
		if limit > 0 && len(items) > limit {
			items = items[:limit]
			defer w.Header().Set(api.TrailerTruncated, "true")
		}
		_ = json.NewEncoder(w).Encode(items)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathAdvertised, func(w http.ResponseWriter, r *http.Request) {
		var items []any
		for _, a := range advs {
			items = append(items, a)
		}
		list(w, r, items)
	})
	mux.HandleFunc("GET "+api.PathLearned, func(w http.ResponseWriter, r *http.Request) {
		items := []any{}
		for i := range 5 {
			items = append(items, model.LearnedPath{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 32)})
		}
		list(w, r, items)
	})
	mux.HandleFunc("GET "+api.PathPeers, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(peers)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func runSplit(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := NewRootCommand(&out)
	root.SetArgs(args)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestRoutesLimit: --limit N shows N routes, says on stderr that more
// exist, and -o json stays one valid JSON array.
func TestRoutesLimit(t *testing.T) {
	var advs []model.Advertisement
	for i := range 4 {
		advs = append(advs, model.Advertisement{Peer: "tor", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)})
	}
	sock := fakeControl(t, advs, nil)
	for _, verb := range []string{"advertised", "learned"} {
		out, errOut, err := runSplit("--socket", sock, "routes", verb, "--limit", "2", "-o", "json")
		var items []json.RawMessage
		if err != nil || json.Unmarshal([]byte(out), &items) != nil || len(items) != 2 {
			t.Errorf("%s --limit 2 -o json: %v, %d items in %q", verb, err, len(items), out)
		}
		if !strings.Contains(errOut, "only the first 2 routes are shown (--limit 2); more exist") {
			t.Errorf("%s --limit 2: stderr %q lacks the truncation note", verb, errOut)
		}
		out, errOut, err = runSplit("--socket", sock, "routes", verb, "--limit", "10")
		if err != nil || errOut != "" || strings.Count(out, "\n") != 1+map[string]int{"advertised": 4, "learned": 5}[verb] {
			t.Errorf("%s --limit 10: %v, stderr %q, out %q", verb, err, errOut, out)
		}
	}
}

// TestRoutesNegativeLimit: --limit -1 is refused with a clear error, not
// taken as "show everything".
func TestRoutesNegativeLimit(t *testing.T) {
	sock := fakeControl(t, []model.Advertisement{{Peer: "tor", Prefix: netip.MustParsePrefix("10.0.0.0/16")}}, nil)
	for _, verb := range []string{"advertised", "learned"} {
		out, _, err := runSplit("--socket", sock, "routes", verb, "--limit", "-1")
		if err == nil || !strings.Contains(err.Error(), "--limit -1: want the number of routes to show, 0 or more") || out != "" {
			t.Errorf("%s --limit -1: %v, out %q; want a refusal", verb, err, out)
		}
	}
}

// TestTableEscapesControlChars: names from NB (or anywhere) with newlines,
// tabs, escape sequences or bidi overrides cannot forge table rows or
// drive the terminal.
func TestTableEscapesControlChars(t *testing.T) {
	evil := "blue\ntor  10.66.0.0/16  default  pods  -  forged\x1b[2K\x1b[31m\t\u202eabc"
	sock := fakeControl(t, []model.Advertisement{{
		Peer: "tor", Prefix: netip.MustParsePrefix("10.200.0.0/24"), Network: evil, Rule: "udn", Source: "Logical_Switch " + evil,
	}}, []model.PeerStatus{{Name: "tor", State: model.StateActive, LastError: "bad\r\nline"}})
	out, _, err := runSplit("--socket", sock, "routes", "advertised")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("%d lines for a header and one route:\n%s", n, out)
	}
	for _, bad := range []string{"\x1b", "\u202e", "\r"} {
		if strings.Contains(out, bad) {
			t.Errorf("raw %q in the table:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, `"blue\ntor  10.66.0.0/16  default  pods  -  forged\x1b[2K\x1b[31m\t\u202eabc"`) {
		t.Errorf("the name is not shown escaped:\n%s", out)
	}
	out, _, err = runSplit("--socket", sock, "peers")
	if err != nil || !strings.Contains(out, `"bad\r\nline"`) || strings.Count(out, "\n") != 2 {
		t.Errorf("peers: %v\n%s", err, out)
	}
	// JSON keeps the exact value (encoded by the JSON encoder).
	out, _, err = runSplit("--socket", sock, "routes", "advertised", "-o", "json")
	var got []model.Advertisement
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].Network != evil {
		t.Errorf("json: %v %q", err, out)
	}
	for _, tt := range []struct{ in, want string }{
		{"plain name", "plain name"},
		{"münchen-1", "münchen-1"},
		{"a\tb", `"a\tb"`},
		{"\xff", `"\xff"`},
	} {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
