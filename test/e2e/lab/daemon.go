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
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// Peer is one BGP peer in the daemon's configuration.
type Peer struct {
	Name    string
	Address netip.Addr
	ASN     uint32
	// Port is the peer's TCP port; 0 = the daemon's default (179).
	Port    int
	Passive bool
	// Password, when set, is written to a 0600 file named by passwordFile.
	Password string
	// Families: empty = the daemon's default.
	Families []string
	// HoldTime and KeepaliveTime default to 9s and 3s (0 = those), so that
	// a dead session is noticed quickly.
	HoldTime, KeepaliveTime time.Duration
	// ConnectRetry defaults to 2s (0 = that).
	ConnectRetry time.Duration
	// SourceAddress, Interface, EBGPMultihop, TTLSecurity and MaxPrefixes
	// are written only when set (the daemon's defaults otherwise).
	SourceAddress netip.Addr
	Interface     string
	EBGPMultihop  int
	TTLSecurity   bool
	MaxPrefixes   int
	// MaxAdvertised sets the peer's export cap (maxAdvertised) when > 0.
	MaxAdvertised int
	// BFD enables bfd at 300ms x 3.
	BFD bool
	// NoEnforceFirstAS writes enforceFirstAS: false (a route server).
	NoEnforceFirstAS bool

	PasswordFile string // filled by StartDaemon
}

// DaemonConfig is the part of ovnbgp's config.yaml a test chooses; the rest
// (node1, the lab's NB socket, control socket, debug JSON logs, no metrics
// unless Metrics is set)
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
	// GracefulRestart turns on bgp.gracefulRestart with RestartTime (0 =
	// the daemon's default, 120 s).
	GracefulRestart bool
	RestartTime     time.Duration
	// DeferralTime sets bgp.gracefulRestart.deferralTime (fail static for
	// imports), whether or not GracefulRestart is set; 0 = the default.
	DeferralTime time.Duration
	// Import is the YAML list of import rules (the lines under
	// "import:", indented two spaces); "" = no import section.
	Import string
	// ProtectedPrefixes and ServiceCIDRs set protectedPrefixes and
	// cluster.serviceCIDRs when not empty.
	ProtectedPrefixes []netip.Prefix
	ServiceCIDRs      []netip.Prefix
	// RouteProtocol sets kernel.routeProtocol (0 = the default, 200).
	RouteProtocol int
	// Metrics sets metrics.address, e.g. 127.0.0.1:9479 (inside the node
	// namespace: read it with Lab.HTTPGet); "" = no metrics.
	Metrics string
	// Race runs the daemon from the race-built binary (RaceBinary:
	// $OVNBGP_RACE_BIN), with GORACE=halt_on_error=0.
	Race bool

	Northbound string // filled by StartDaemon when it is given an NB
	// NorthboundSockets sets ovn.northboundSockets (the sockets looked for
	// while ovn.northbound is unset) when Northbound is "".
	NorthboundSockets []string
	Socket            string // filled by StartDaemon
	// StateDir is filled by StartDaemon: the daemon's own directory, so
	// that no test reads or writes /var/lib/ovnbgp (a drain there would
	// drain every other test's daemon).
	StateDir string
}

// DefaultTor is the usual peer: FRR at TorIPv4, AS 65001.
func DefaultTor() Peer { return Peer{Name: "tor", Address: TorIPv4, ASN: 65001} }

var configTemplate = template.Must(template.New("config.yaml").Parse(`node: {name: {{.Node}}}
bgp:
  asn: {{.ASN}}
  routerID: {{.RouterID}}
  listenPort: {{.ListenPort}}
{{- if or .GracefulRestart .DeferralTime}}
  gracefulRestart: {enabled: {{.GracefulRestart}}{{if .RestartTime}}, restartTime: {{.RestartTime}}{{end}}{{if .DeferralTime}}, deferralTime: {{.DeferralTime}}{{end}}}
{{- end}}
  peers:
{{- range .Peers}}
    - name: {{.Name}}
{{- if .Address.IsValid}}
      address: "{{.Address}}"
{{- end}}
      asn: {{.ASN}}
{{- if .Port}}
      port: {{.Port}}
{{- end}}
      holdTime: {{if .HoldTime}}{{.HoldTime}}{{else}}9s{{end}}
      keepaliveTime: {{if .KeepaliveTime}}{{.KeepaliveTime}}{{else}}3s{{end}}
      connectRetry: {{if .ConnectRetry}}{{.ConnectRetry}}{{else}}2s{{end}}
{{- if .SourceAddress.IsValid}}
      sourceAddress: "{{.SourceAddress}}"
{{- end}}
{{- if .Interface}}
      interface: {{.Interface}}
{{- end}}
{{- if .EBGPMultihop}}
      ebgpMultihop: {{.EBGPMultihop}}
{{- end}}
{{- if .TTLSecurity}}
      ttlSecurity: true
{{- end}}
{{- if .MaxPrefixes}}
      maxPrefixes: {{.MaxPrefixes}}
{{- end}}
{{- if .MaxAdvertised}}
      maxAdvertised: {{.MaxAdvertised}}
{{- end}}
{{- if .Passive}}
      passive: true
{{- end}}
{{- if .NoEnforceFirstAS}}
      enforceFirstAS: false
{{- end}}
{{- if .BFD}}
      bfd: {enabled: true, minTx: 300ms, minRx: 300ms, multiplier: 3}
{{- end}}
{{- if .PasswordFile}}
      passwordFile: {{.PasswordFile}}
{{- end}}
{{- if .Families}}
      families: [{{range $i, $f := .Families}}{{if $i}}, {{end}}{{$f}}{{end}}]
{{- end}}
{{- end}}
{{- if .Northbound}}
ovn: {northbound: "{{.Northbound}}"}
{{- else if .NorthboundSockets}}
ovn: {northboundSockets: [{{range $i, $p := .NorthboundSockets}}{{if $i}}, {{end}}"{{$p}}"{{end}}]}
{{- end}}
advertise:
{{.Advertise}}
{{- if .Import}}
import:
{{.Import}}
{{- end}}
{{- if .ProtectedPrefixes}}
protectedPrefixes: [{{range $i, $p := .ProtectedPrefixes}}{{if $i}}, {{end}}"{{$p}}"{{end}}]
{{- end}}
{{- if .ServiceCIDRs}}
cluster: {serviceCIDRs: [{{range $i, $p := .ServiceCIDRs}}{{if $i}}, {{end}}"{{$p}}"{{end}}]}
{{- end}}
{{- if .RouteProtocol}}
kernel: {routeProtocol: {{.RouteProtocol}}}
{{- end}}
control: {socket: {{.Socket}}}
metrics: {address: "{{.Metrics}}"}
log: {level: debug, format: json}
stateDir: {{.StateDir}}
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
	lab    *Lab
	Bin    string
	Dir    string
	Config string // path of config.yaml
	Socket string // control socket
	Log    string // stderr and stdout, of every run (Restart appends)
	// Cfg is the configuration as written, with every default filled in:
	// copy it, change it and pass it to Reload.
	Cfg DaemonConfig
	// Started is when the process was last started.
	Started time.Time

	mu   sync.Mutex
	proc *process // the current (or last) run
	race bool     // Bin is the race-built binary (DaemonConfig.Race)
}

// process is one run of the daemon.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, valid after done
}

// fill sets the defaults StartDaemon documents; nb may be nil when the
// test sets Northbound itself.
func (cfg DaemonConfig) fill(dir string, nb *NB) DaemonConfig {
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
	if nb != nil {
		cfg.Northbound = nb.Endpoint()
	}
	cfg.Socket = filepath.Join(dir, "ovnbgp.sock")
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Peers = append([]Peer(nil), cfg.Peers...)
	return cfg
}

// StartDaemon writes the config and starts `ovnbgp daemon --config F` in the
// node namespace, connected to nb (which need not be running yet). At the
// end of the test it is stopped with SIGTERM (by PID), and on failure the
// last 100 lines of its log are printed.
func (l *Lab) StartDaemon(nb *NB, cfg DaemonConfig) *Daemon {
	t := l.T
	t.Helper()
	bin, race := Binary(t), false
	if cfg.Race {
		bin, race = RaceBinary(t)
	}
	dir := l.MkdirUnique("ovnbgp")
	d := &Daemon{t: t, lab: l, Bin: bin, Dir: dir, Config: filepath.Join(dir, "config.yaml"),
		Log: filepath.Join(dir, "ovnbgp.log"), race: race}
	if err := d.writeConfig(cfg.fill(dir, nb)); err != nil {
		t.Fatal(err)
	}
	d.Socket = d.Cfg.Socket
	if err := os.WriteFile(d.Log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, _, err := d.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping ovnbgp daemon: %v", err)
		}
		d.checkRaces() // any race report in the log fails the test
		if t.Failed() {
			text, _ := os.ReadFile(d.Config)
			t.Logf("--- ovnbgp config\n%s--- ovnbgp daemon log (last 100 lines)\n%s", text, Tail(d.Log, 100))
		}
	})
	return d
}

// writeConfig renders cfg (already filled) to the config file, with the
// password files of its peers.
func (d *Daemon) writeConfig(cfg DaemonConfig) error {
	for i := range cfg.Peers {
		p := &cfg.Peers[i]
		if p.Password != "" {
			p.PasswordFile = filepath.Join(d.Dir, p.Name+".password")
			if err := os.WriteFile(p.PasswordFile, []byte(p.Password+"\n"), 0o600); err != nil {
				return err
			}
		}
	}
	text, err := cfg.Render()
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(d.Config, []byte(text)); err != nil {
		return err
	}
	d.Cfg = cfg
	return nil
}

// WriteFileAtomic replaces path with data by renaming a temporary file over
// it, as an editor or a config-management tool would: a reader never sees
// half a file.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// start starts one run of the daemon, its output appended to the log.
func (d *Daemon) start() error {
	logf, err := os.OpenFile(d.Log, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// `ip netns exec` execs the daemon: cmd's PID is the daemon's PID.
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command("ip", "netns", "exec", d.lab.Node, d.Bin, "daemon", "--config", d.Config)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if d.race {
		p.cmd.Env = append(os.Environ(), raceEnv)
	}
	started := time.Now()
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start ovnbgp daemon: %w", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	d.mu.Lock()
	d.proc, d.Started = p, started
	d.mu.Unlock()
	return nil
}

// Restart starts the daemon again, with the config file as it is, after
// it exited (Stop). Its log goes on in the same file.
func (d *Daemon) Restart() error {
	if d.Exited() == nil {
		return fmt.Errorf("ovnbgp daemon (pid %d) is still running", d.PID())
	}
	return d.start()
}

// Reload writes cfg (as Render makes it; fill in from d.Cfg) over the config
// file and sends SIGHUP.
func (d *Daemon) Reload(cfg DaemonConfig) error {
	if err := d.writeConfig(cfg); err != nil {
		return err
	}
	return d.Signal(syscall.SIGHUP)
}

// ReloadCLI writes cfg over the config file and runs `ovnbgp reload -o
// json`: the outcome, applied or refused (the CLI then exits 1, with the
// outcome on stdout); err when there is no outcome.
func (d *Daemon) ReloadCLI(cfg DaemonConfig) (api.ReloadResult, error) {
	var res api.ReloadResult
	if err := d.writeConfig(cfg); err != nil {
		return res, err
	}
	out, err := d.CLI("reload", "-o", "json")
	if jerr := json.Unmarshal(out, &res); jerr != nil || res.Config == "" {
		return res, fmt.Errorf("ovnbgp reload: no outcome (%v): %v: %.500s", jerr, err, out)
	}
	if res.Applied != (err == nil) {
		return res, fmt.Errorf("ovnbgp reload: applied %v but the CLI's exit says %v", res.Applied, err)
	}
	return res, nil
}

// ReloadText writes text over the config file and sends SIGHUP: for configs
// DaemonConfig cannot express, such as invalid ones.
func (d *Daemon) ReloadText(text string) error {
	if err := WriteFileAtomic(d.Config, []byte(text)); err != nil {
		return err
	}
	return d.Signal(syscall.SIGHUP)
}

// Signal sends sig to the running daemon.
func (d *Daemon) Signal(sig syscall.Signal) error {
	if err := d.Exited(); err != nil {
		return err
	}
	return d.current().cmd.Process.Signal(sig)
}

func (d *Daemon) current() *process {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.proc
}

// PID is the daemon's process id (of the current or last run).
func (d *Daemon) PID() int { return d.current().cmd.Process.Pid }

// Exited returns a non-nil error if the daemon is no longer running.
func (d *Daemon) Exited() error {
	p := d.current()
	select {
	case <-p.done:
		return fmt.Errorf("ovnbgp daemon exited: %v", p.err)
	default:
		return nil
	}
}

// Stop sends SIGTERM and waits up to grace for the daemon to exit, then
// kills it. It returns the exit code (-1 if killed by a signal) and how long
// the daemon took to exit after SIGTERM. Calling it again returns the first
// result with took = 0.
func (d *Daemon) Stop(grace time.Duration) (code int, took time.Duration, err error) {
	p := d.current()
	select {
	case <-p.done:
		return exitCode(p.err), 0, nil
	default:
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, 0, err
	}
	select {
	case <-p.done:
		return exitCode(p.err), time.Since(start), nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return exitCode(p.err), time.Since(start), fmt.Errorf("ovnbgp daemon still running %v after SIGTERM: killed", grace)
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

// Status returns `ovnbgp status -o json`.
func (d *Daemon) Status() (api.Status, error) {
	var res api.Status
	return res, d.cliJSON(&res, "status", "-o", "json")
}

// LogLines returns the daemon's JSON log lines (of every run) whose "msg"
// is msg, decoded.
func (d *Daemon) LogLines(msg string) ([]map[string]any, error) {
	b, err := os.ReadFile(d.Log)
	if err != nil {
		return nil, err
	}
	var res []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			res = append(res, m)
		}
	}
	return res, nil
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
