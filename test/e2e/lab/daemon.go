package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
)

// Peer is one BGP peer in the daemon's configuration.
type Peer struct {
	Name    string
	Address netip.Addr
	ASN     uint32
	Passive bool
	// Password, when set, is written to a 0600 file named by passwordFile.
	Password string
	// Families: empty = the daemon's default.
	Families []string

	PasswordFile string // filled by StartDaemon
}

// DaemonConfig is the part of ovnbgp's config.yaml a test chooses; the rest
// (node1, the lab's NB socket, control socket, debug JSON logs, no metrics)
// is filled in.
type DaemonConfig struct {
	// Node defaults to "node1", ASN to 65010, RouterID to NodeIPv4.
	Node     string
	ASN      uint32
	RouterID netip.Addr
	// ListenPort: 0 means -1 (never listen); use 179 when FRR dials.
	ListenPort int
	// Peers default to one peer "tor" at TorIPv4, AS 65001.
	Peers []Peer
	// Advertise is the YAML list of advertise rules; default: one rule
	// "pods" of kind podNetwork for every network.
	Advertise string

	Northbound string // filled by StartDaemon
	Socket     string // filled by StartDaemon
}

// DefaultTor is the usual peer: FRR at TorIPv4, AS 65001.
func DefaultTor() Peer { return Peer{Name: "tor", Address: TorIPv4, ASN: 65001} }

var configTemplate = template.Must(template.New("config.yaml").Parse(`node: {name: {{.Node}}}
bgp:
  asn: {{.ASN}}
  routerID: {{.RouterID}}
  listenPort: {{.ListenPort}}
  peers:
{{- range .Peers}}
    - name: {{.Name}}
      address: "{{.Address}}"
      asn: {{.ASN}}
      holdTime: 9s
      keepaliveTime: 3s
      connectRetry: 2s
{{- if .Passive}}
      passive: true
{{- end}}
{{- if .PasswordFile}}
      passwordFile: {{.PasswordFile}}
{{- end}}
{{- if .Families}}
      families: [{{range $i, $f := .Families}}{{if $i}}, {{end}}{{$f}}{{end}}]
{{- end}}
{{- end}}
ovn: {northbound: "{{.Northbound}}"}
advertise:
{{.Advertise}}
control: {socket: {{.Socket}}}
metrics: {address: ""}
log: {level: debug, format: json}
`))

// Render returns the config.yaml text.
func (c DaemonConfig) Render() (string, error) {
	var b bytes.Buffer
	err := configTemplate.Execute(&b, c)
	return b.String(), err
}

// Daemon is `ovnbgp daemon` running in the lab's node namespace.
type Daemon struct {
	t      testing.TB
	Bin    string
	Dir    string
	Config string // path of config.yaml
	Socket string // control socket
	Log    string // stderr and stdout
	// Started is when the process was started.
	Started time.Time

	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, valid after done
}

// StartDaemon writes the config and starts `ovnbgp daemon --config F` in the
// node namespace, connected to nb. At the end of the test it is stopped with
// SIGTERM (by PID), and on failure the last 100 lines of its log are printed.
func (l *Lab) StartDaemon(nb *NB, cfg DaemonConfig) *Daemon {
	t := l.T
	t.Helper()
	bin := Binary(t)
	dir := l.Mkdir("ovnbgp")
	if cfg.Node == "" {
		cfg.Node = "node1"
	}
	if cfg.ASN == 0 {
		cfg.ASN = 65010
	}
	if !cfg.RouterID.IsValid() {
		cfg.RouterID = NodeIPv4
	}
	if cfg.ListenPort == 0 {
		cfg.ListenPort = -1
	}
	if len(cfg.Peers) == 0 {
		cfg.Peers = []Peer{DefaultTor()}
	}
	if cfg.Advertise == "" {
		cfg.Advertise = `  - {name: pods, kind: podNetwork, networks: ["*"]}`
	}
	cfg.Northbound = nb.Endpoint()
	cfg.Socket = filepath.Join(dir, "ovnbgp.sock")
	cfg.Peers = append([]Peer(nil), cfg.Peers...)
	for i := range cfg.Peers {
		p := &cfg.Peers[i]
		if p.Password != "" {
			p.PasswordFile = filepath.Join(dir, p.Name+".password")
			if err := os.WriteFile(p.PasswordFile, []byte(p.Password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	text, err := cfg.Render()
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{t: t, Bin: bin, Dir: dir, Config: filepath.Join(dir, "config.yaml"),
		Socket: cfg.Socket, Log: filepath.Join(dir, "ovnbgp.log"), done: make(chan struct{})}
	if err := os.WriteFile(d.Config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// `ip netns exec` execs the daemon: cmd's PID is the daemon's PID.
	d.cmd = exec.Command("ip", "netns", "exec", l.Node, bin, "daemon", "--config", d.Config)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.Started = time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start ovnbgp daemon: %v", err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		if _, _, err := d.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping ovnbgp daemon: %v", err)
		}
		if t.Failed() {
			t.Logf("--- ovnbgp config\n%s--- ovnbgp daemon log (last 100 lines)\n%s", text, tail(d.Log, 100))
		}
	})
	return d
}

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Exited returns a non-nil error if the daemon is no longer running.
func (d *Daemon) Exited() error {
	select {
	case <-d.done:
		return fmt.Errorf("ovnbgp daemon exited: %v", d.err)
	default:
		return nil
	}
}

// Stop sends SIGTERM and waits up to grace for the daemon to exit, then
// kills it. It returns the exit code (-1 if killed by a signal) and how long
// the daemon took to exit after SIGTERM. Calling it again returns the first
// result with took = 0.
func (d *Daemon) Stop(grace time.Duration) (code int, took time.Duration, err error) {
	select {
	case <-d.done:
		return exitCode(d.err), 0, nil
	default:
	}
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, 0, err
	}
	select {
	case <-d.done:
		return exitCode(d.err), time.Since(start), nil
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.done
		return exitCode(d.err), time.Since(start), fmt.Errorf("ovnbgp daemon still running %v after SIGTERM: killed", grace)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// CLI runs `ovnbgp --socket SOCK args...` and returns its stdout; the error
// carries stderr.
func (d *Daemon) CLI(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.Bin, append([]string{"--socket", d.Socket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("ovnbgp %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// Peers returns `ovnbgp peers -o json`.
func (d *Daemon) Peers() ([]model.PeerStatus, error) {
	var res []model.PeerStatus
	return res, d.cliJSON(&res, "peers", "-o", "json")
}

// Peer returns the status of the peer named name.
func (d *Daemon) Peer(name string) (model.PeerStatus, error) {
	peers, err := d.Peers()
	if err != nil {
		return model.PeerStatus{}, err
	}
	for _, p := range peers {
		if p.Name == name {
			return p, nil
		}
	}
	return model.PeerStatus{}, fmt.Errorf("no peer %q in ovnbgp peers: %+v", name, peers)
}

// Advertised returns `ovnbgp routes advertised -o json`.
func (d *Daemon) Advertised() ([]model.Advertisement, error) {
	var res []model.Advertisement
	return res, d.cliJSON(&res, "routes", "advertised", "-o", "json")
}

func (d *Daemon) cliJSON(v any, args ...string) error {
	out, err := d.CLI(args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("ovnbgp %s: output is not the JSON expected: %w: %.500s", strings.Join(args, " "), err, out)
	}
	return nil
}
