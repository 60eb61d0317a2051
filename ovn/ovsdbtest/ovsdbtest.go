// Package ovsdbtest runs a real ovsdb-server with an OVN Northbound
// database for tests (package ovn's and test/e2e's). It is test-only code:
// nothing in the ovnbgp binary imports it.
//
// Start skips the test when ovsdb-server, ovsdb-tool or ovn-nbctl are not
// installed, unless the environment variable CI is "true", where it fails:
// CI must run these tests. On Debian, `apt-get install ovn-central` brings
// all three.
//
// Process hygiene: the server is started with --detach and a pidfile; Stop
// signals only that PID, after checking that /proc/PID is still that
// ovsdb-server, and waits until it is gone or a zombie (PID 1 may not be an
// init that reaps promptly, so kill -0 would lie).
package ovsdbtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// DefaultSchema is where Debian's ovn-common installs the NB schema.
const DefaultSchema = "/usr/share/ovn/ovn-nb.ovsschema"

// Server is one ovsdb-server serving an NB database on a unix socket (and,
// with WithSSL, on an ssl port of 127.0.0.1).
type Server struct {
	t      testing.TB
	dir    string
	schema string
	pid    int
	ssl    *sslFiles
}

type sslFiles struct {
	key, cert, ca string
	port          int
}

// Option changes how Start runs the server.
type Option func(*Server)

// WithSSL makes the server also listen for ssl connections on a free port
// of 127.0.0.1 (see SSLEndpoint), with the given PEM files: its private key,
// its certificate, and the CA that signs clients' certificates (ovsdb-server
// requires a client certificate).
func WithSSL(keyFile, certFile, caFile string) Option {
	return func(s *Server) { s.ssl = &sslFiles{key: keyFile, cert: certFile, ca: caFile} }
}

// Start creates a fresh NB database from schemaPath (DefaultSchema if
// empty), starts ovsdb-server on a unix socket in a new temporary directory,
// runs `ovn-nbctl init`, and registers Stop and the directory's removal with
// t.Cleanup.
func Start(t testing.TB, schemaPath string, opts ...Option) *Server {
	t.Helper()
	if schemaPath == "" {
		schemaPath = DefaultSchema
	}
	for _, tool := range []string{"ovsdb-server", "ovsdb-tool", "ovn-nbctl"} {
		if _, err := lookPath(tool); err != nil {
			prereq.Missing(t, tool+" is not installed (apt-get install ovn-central); skipping the real ovsdb-server test")
		}
	}
	if _, err := os.Stat(schemaPath); err != nil {
		prereq.Missing(t, fmt.Sprintf("NB schema: %v (apt-get install ovn-central)", err))
	}
	// A short directory: unix socket paths are limited to 107 bytes, and
	// t.TempDir() paths grow with the test name.
	dir, err := os.MkdirTemp("", "ovsdbtest")
	if err != nil {
		t.Fatalf("ovsdbtest: %v", err)
	}
	s := &Server{t: t, dir: dir, schema: schemaPath}
	for _, o := range opts {
		o(s)
	}
	if s.ssl != nil {
		port, err := freePort()
		if err != nil {
			t.Fatalf("ovsdbtest: %v", err)
		}
		s.ssl.port = port
	}
	t.Cleanup(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	if out, err := run("ovsdb-tool", "create", s.DBPath(), schemaPath); err != nil {
		t.Fatalf("ovsdbtest: ovsdb-tool create: %v: %s", err, out)
	}
	if err := s.start(); err != nil {
		t.Fatalf("ovsdbtest: %v", err)
	}
	if out, err := s.NBCtl("init"); err != nil {
		t.Fatalf("ovsdbtest: ovn-nbctl init: %v: %s", err, out)
	}
	return s
}

// Endpoint is the server's address in OVSDB form, "unix:/path".
func (s *Server) Endpoint() string { return "unix:" + s.sock() }

// SSLEndpoint is the ssl address, "ssl:127.0.0.1:PORT", or "" without
// WithSSL.
func (s *Server) SSLEndpoint() string {
	if s.ssl == nil {
		return ""
	}
	return "ssl:127.0.0.1:" + strconv.Itoa(s.ssl.port)
}

// DBPath is the database file. While the server is stopped, tests may
// change it with `ovsdb-tool transact`.
func (s *Server) DBPath() string { return filepath.Join(s.dir, "nb.db") }

// PID is the running server's process ID, 0 when stopped.
func (s *Server) PID() int { return s.pid }

// NBCtl runs ovn-nbctl against the server and returns its trimmed output.
func (s *Server) NBCtl(args ...string) (string, error) {
	full := append([]string{"--no-leader-only", "--timeout=10", "--db=" + s.Endpoint()}, args...)
	out, err := run("ovn-nbctl", full...)
	if err != nil {
		return out, fmt.Errorf("ovn-nbctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// MustNBCtl is NBCtl that fails the test on error.
func (s *Server) MustNBCtl(args ...string) string {
	s.t.Helper()
	out, err := s.NBCtl(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s) and waits until
// the process is gone. The database file stays. Stopping a stopped server
// does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if s.pid == 0 {
		return
	}
	pid := s.pid
	s.pid = 0
	if !s.isOurs(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, 5*time.Second) {
		return
	}
	if s.isOurs(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if !waitGone(pid, 5*time.Second) {
		s.t.Errorf("ovsdbtest: ovsdb-server pid %d still running after SIGKILL", pid)
	}
}

// Restart starts the server again on the same socket and database (Stop
// first if it runs).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("ovsdbtest: restart: %v", err)
	}
}

func (s *Server) sock() string    { return filepath.Join(s.dir, "nb.sock") }
func (s *Server) pidfile() string { return filepath.Join(s.dir, "ovsdb-server.pid") }

func (s *Server) start() error {
	_ = os.Remove(s.sock())
	_ = os.Remove(s.pidfile())
	args := []string{s.DBPath(),
		"--detach", "--no-chdir",
		"--pidfile=" + s.pidfile(),
		"--log-file=" + filepath.Join(s.dir, "ovsdb-server.log"),
		"--unixctl=" + filepath.Join(s.dir, "ovsdb-server.ctl"),
		"--remote=punix:" + s.sock(),
	}
	if s.ssl != nil {
		args = append(args,
			"--private-key="+s.ssl.key, "--certificate="+s.ssl.cert, "--ca-cert="+s.ssl.ca,
			fmt.Sprintf("--remote=pssl:%d:127.0.0.1", s.ssl.port))
	}
	out, err := run("ovsdb-server", args...)
	if err != nil {
		return fmt.Errorf("ovsdb-server: %w: %s", err, out)
	}
	raw, err := os.ReadFile(s.pidfile())
	if err != nil {
		return fmt.Errorf("ovsdb-server pidfile: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("ovsdb-server pidfile %q: not a pid", raw)
	}
	s.pid = pid
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(s.sock()); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ovsdb-server: no socket %s after 5s", s.sock())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isOurs reports whether pid is alive and still the ovsdb-server serving
// this test's database (not a reused PID).
func (s *Server) isOurs(pid int) bool {
	if !alive(pid) {
		return false
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(cmd, []byte("ovsdb-server")) && bytes.Contains(cmd, []byte(s.DBPath()))
}

// alive reports whether pid exists and is not a zombie (or dead).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain spaces or parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// lookPath finds a tool in PATH or in the sbin directories a non-login
// PATH may lack.
func lookPath(tool string) (string, error) {
	if p, err := exec.LookPath(tool); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(d, tool)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", tool, exec.ErrNotFound)
}

// freePort finds a TCP port of 127.0.0.1 that is free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func run(tool string, args ...string) (string, error) {
	p, err := lookPath(tool)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command(p, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = fmt.Errorf("%s exited %d", tool, ee.ExitCode())
	}
	return strings.TrimSpace(out.String()), err
}
