package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for one writer and one poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLab runs the whole product in-process, as `make lab` does: the
// in-memory NB, the provider speaker and the daemon, and checks that the
// session comes up and both networks' subnets reach the provider.
func TestLab(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- runLab(ctx, &out, labOptions{node: labNode, timeout: 60 * time.Second}) }()

	deadline := time.After(90 * time.Second)
	for !strings.Contains(out.String(), "Ctrl-C to stop.") {
		select {
		case err := <-done:
			t.Fatalf("lab ended early: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("lab printed no summary in 90 s:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	got := out.String()
	for _, want := range []string{
		"provider  127.0.0.1  65001  established",
		"provider  10.128.0.0/23  sent   default  pods",
		"provider  10.200.0.0/24  sent   blue     udn   communities=64512:100",
		"node1  10.200.0.0/24  127.0.0.1  64512    64512:100", // the provider got the community
		"203.0.113.0/24",
		"NB commit → provider router has 10.210.0.0/24:",
		"switch deleted → withdrawn from the provider router:",
		// The import half: one of the provider's routes accepted by the
		// lab's rule, the plan that installs it on GR_node1, the row in
		// the in-memory NB, and explain for it; the others rejected.
		"provider  203.0.113.0/24   172.18.0.1  65001    ",
		"accepted: accepted by rule provider-in (203.0.113.0/24 length 24)",
		"rejected: no accept entry matches 198.51.100.0/24 from peer provider",
		"rejected: 10.128.2.0/23 is protected",
		// the plan in mode manual, before the lab switches to auto
		"ovn     add  GR_node1  203.0.113.0/24  172.18.0.1  provider-in",
		"ovn     GR_node1  203.0.113.0/24  172.18.0.1  provider-in  installed",
		// the row as the in-memory NB holds it
		"GR_node1  203.0.113.0/24  172.18.0.1  rtoe-GR_node1  provider-in  node1",
		"== explain 203.0.113.0/24",
		"installed in OVN: 203.0.113.0/24 on GR_node1 via 172.18.0.1, output port rtoe-GR_node1 (rule provider-in",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lab output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "no import rule") {
		t.Errorf("a learned route still says \"no import rule\":\n%s", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lab stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("lab did not stop")
	}
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRootCommand(&out)
	root.SetArgs(args)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("node: {name: n1}\nbgp:\n  asn: 64512\n  routerID: 192.0.2.10\n  peers:\n    - {name: tor, address: 192.0.2.1, asn: 65001}\n"), 0o600)
	os.WriteFile(bad, []byte("node: {name: n1}\nbgp:\n  asn: 64512\n  routerID: 192.0.2.10\n  peers:\n    - {name: tor, address: 192.0.2.300, asn: 65001}\n    - {name: tor, address: 192.0.2.3, asn: 65001, pasword: x}\n"), 0o600)

	out, err := run(t, "config", "validate", good)
	if err != nil || !strings.Contains(out, "valid (node n1, AS 64512, 1 peers, 0 advertise rules)") {
		t.Fatalf("validate good: %q, %v", out, err)
	}
	_, err = run(t, "config", "validate", bad)
	if err == nil {
		t.Fatal("validate bad: no error")
	}
	for _, want := range []string{
		`bad.yaml:6: bgp.peers[0].address: "192.0.2.300" is not an IP address`,
		`bad.yaml:7: bgp.peers[1].pasword: unknown key`,
		`bgp.peers[1].name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate bad: error lacks %q:\n%v", want, err)
		}
	}
	if _, err := run(t, "-o", "xml", "version"); err == nil || !strings.Contains(err.Error(), `unknown output format`) {
		t.Errorf("-o xml: %v", err)
	}
	out, err = run(t, "--config", good, "config", "show", "-o", "json")
	if err != nil || !strings.Contains(out, `"asn": 64512`) || !strings.Contains(out, `"holdTime": "1m30s"`) && !strings.Contains(out, `"holdTime": "90s"`) {
		t.Fatalf("config show: %q, %v", out, err)
	}
}

func TestNoDaemon(t *testing.T) {
	_, err := run(t, "--socket", filepath.Join(t.TempDir(), "none.sock"), "peers")
	if err == nil || !strings.Contains(err.Error(), "no ovnbgp daemon is listening") {
		t.Fatalf("peers without a daemon: %v", err)
	}
}

func TestSocketFromEnv(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "env.sock")
	t.Setenv("OVNBGP_SOCKET", sock)
	if _, err := run(t, "peers"); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("OVNBGP_SOCKET ignored: %v", err)
	}
	flag := filepath.Join(t.TempDir(), "flag.sock")
	if _, err := run(t, "--socket", flag, "peers"); err == nil || !strings.Contains(err.Error(), flag) {
		t.Fatalf("--socket does not win over OVNBGP_SOCKET: %v", err)
	}
}

// TestConfigValidateWarnsPeerInsideProtected: a peer an import rule lists,
// at an address inside OVN-Kubernetes' default join subnet, is valid but
// `config validate` says plainly that its routes will be refused as "next
// hop inside protected", and how to fix it; the exit status stays 0.
func TestConfigValidateWarnsPeerInsideProtected(t *testing.T) {
	f := filepath.Join(t.TempDir(), "join.yaml")
	os.WriteFile(f, []byte(`node: {name: n1}
bgp:
  asn: 64512
  routerID: 192.0.2.10
  peers:
    - {name: tor, address: 100.64.0.1, asn: 65001}
import:
  - {name: up, peers: [tor], network: default, accept: [{prefix: 10.0.0.0/8, maxLength: 24}]}
`), 0o600)
	out, err := run(t, "config", "validate", f)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	for _, want := range []string{
		"valid (node n1",
		f + `: bgp.peers[0].address: warning: 100.64.0.1 is inside 100.64.0.0/16, OVN-Kubernetes' default join subnet`,
		`every route from peer tor whose next hop is its own address is refused as "next hop inside protected"`,
		"ovnbgp doctor",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}
