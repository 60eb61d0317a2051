package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// NB is a real OVN Northbound ovsdb-server (no systemd, no northd) serving
// one database file on a unix socket in the lab directory. It runs in the
// root namespace: a path unix socket is reachable from every namespace.
type NB struct {
	t      testing.TB
	Dir    string
	DBFile string
	Sock   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartNB creates a fresh NB database from NBSchema, starts ovsdb-server on
// it and initializes it (`ovn-nbctl init`). The server is stopped at the end
// of the test; on failure the test log gets the tail of its log.
func (l *Lab) StartNB() *NB {
	t := l.T
	t.Helper()
	nb := l.NewNB()
	if err := nb.Start(); err != nil {
		t.Fatal(err)
	}
	if err := nb.Init(); err != nil {
		t.Fatal(err)
	}
	return nb
}

// NewNB creates a fresh NB database from NBSchema but starts no server:
// nothing listens on Sock until Start. Call Init after the first Start.
// The server, once started, is stopped at the end of the test.
func (l *Lab) NewNB() *NB {
	t := l.T
	t.Helper()
	dir := l.MkdirUnique("nb")
	nb := &NB{t: t, Dir: dir, DBFile: filepath.Join(dir, "nb.db"), Sock: filepath.Join(dir, "nb.sock")}
	if out, err := run("ovsdb-tool", "create", nb.DBFile, NBSchema); err != nil {
		t.Fatalf("ovsdb-tool create: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- ovsdb-server log (last 30 lines)\n%s", Tail(filepath.Join(dir, "ovsdb-server.log"), 30))
		}
		if err := nb.Stop(); err != nil {
			t.Log(err)
		}
	})
	return nb
}

// Init initializes a fresh database (`ovn-nbctl init`).
func (nb *NB) Init() error {
	if out, err := nb.NBCtl("init"); err != nil {
		return fmt.Errorf("ovn-nbctl init: %v: %s", err, out)
	}
	return nil
}

// Endpoint is the OVSDB address of the server, "unix:PATH".
func (nb *NB) Endpoint() string { return "unix:" + nb.Sock }

// Start starts ovsdb-server on the database file (again, after Stop) and
// waits until it accepts connections.
func (nb *NB) Start() error {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.cmd != nil {
		return fmt.Errorf("ovsdb-server already running (pid %d)", nb.cmd.Process.Pid)
	}
	stderr, err := os.OpenFile(filepath.Join(nb.Dir, "ovsdb-server.stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	// In the foreground, as our child: we stop it by PID and reap it.
	cmd := exec.Command("ovsdb-server", nb.DBFile,
		"--remote=punix:"+nb.Sock,
		"--unixctl="+filepath.Join(nb.Dir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(nb.Dir, "ovsdb-server.log"),
		"-vconsole:off")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start ovsdb-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	nb.cmd, nb.done = cmd, done
	_, err = Poll(10*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-done:
			return fmt.Errorf("ovsdb-server exited: %s", Tail(filepath.Join(nb.Dir, "ovsdb-server.stderr"), 10))
		default:
		}
		c, err := net.Dial("unix", nb.Sock)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("ovsdb-server not serving %s: %w", nb.Sock, err)
	}
	return nil
}

// PID is the server's process id, 0 when it is stopped.
func (nb *NB) PID() int {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.cmd == nil {
		return 0
	}
	return nb.cmd.Process.Pid
}

// Stop ends the server by PID (SIGTERM, SIGKILL after 5 s) and reaps it.
func (nb *NB) Stop() error {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.cmd == nil {
		return nil
	}
	_ = nb.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nb.done:
	case <-time.After(5 * time.Second):
		_ = nb.cmd.Process.Kill()
		<-nb.done
	}
	nb.cmd = nil
	return nil
}

// NBCtl runs ovn-nbctl against the server and returns its trimmed output.
func (nb *NB) NBCtl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ovn-nbctl", append([]string{"--db=" + nb.Endpoint(), "--timeout=15"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(out.String()), fmt.Errorf("ovn-nbctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// MustNBCtl is NBCtl that fails the test on error.
func (nb *NB) MustNBCtl(args ...string) string {
	nb.t.Helper()
	out, err := nb.NBCtl(args...)
	if err != nil {
		nb.t.Fatal(err)
	}
	return out
}

// Transact applies an OVSDB transaction (JSON array of operations, without
// the database name) to the database file directly with ovsdb-tool, which
// only works while the server is stopped: it changes the DB "offline".
func (nb *NB) Transact(ops string) (string, error) {
	return run("ovsdb-tool", "transact", nb.DBFile, `["OVN_Northbound",`+ops+`]`)
}

// LoadFixture applies an NB fixture to the running server with OVN's own
// `ovsdb-client transact`: a JSON array of OVSDB operations without the
// database name, the format of ovn/testdata/nb/*.json (golden NB shapes of
// what OVN-Kubernetes writes, see docs/ovn-nb.md).
func (nb *NB) LoadFixture(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var ops []json.RawMessage
	if err := json.Unmarshal(raw, &ops); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	txn, err := json.Marshal(append([]json.RawMessage{json.RawMessage(`"OVN_Northbound"`)}, ops...))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovsdb-client", "transact", nb.Endpoint(), string(txn)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ovsdb-client transact %s: %w: %s", path, err, out)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("ovsdb-client transact %s: %s", path, out)
	}
	return nil
}
