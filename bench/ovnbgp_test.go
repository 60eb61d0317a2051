package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// daemon is `ovnbgp daemon` in the lab's node namespace. It is the harness's
// lab.StartDaemon with one change: info-level logs, as in production (the
// harness logs at debug level, one line per prefix and per reconcile more
// than a deployment would write).
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, valid after done
}

// envDebugLog=1 keeps the daemon at debug level (a line per prefix and
// per pass, with its duration: slower, for finding where time goes), and
// its log is kept in $TMPDIR/ovnbgp-bench-daemon.log.
const envDebugLog = "OVNBGP_BENCH_DEBUGLOG"

// startOvnbgp starts the daemon for node1, AS 65010, with the usual tor peer
// and one rule advertising the pod subnets of every network. It is stopped
// by PID at the end of the benchmark.
func startOvnbgp(b testing.TB, l *lab.Lab, nb *lab.NB) *daemon {
	b.Helper()
	return startOvnbgpWith(b, l, nb, lab.DefaultTor(), "")
}

// podsRule advertises the pod subnets of every network.
const podsRule = `  - {name: pods, kind: podNetwork, networks: ["*"]}`

// startOvnbgpWith is startOvnbgp with the given tor peer and extra
// top-level YAML (e.g. an import: section) appended to the config.
func startOvnbgpWith(b testing.TB, l *lab.Lab, nb *lab.NB, peer lab.Peer, extra string) *daemon {
	b.Helper()
	return startOvnbgpConfig(b, l, nb, lab.DaemonConfig{Peers: []lab.Peer{peer}, Advertise: podsRule}, extra)
}

// startOvnbgpConfig starts the daemon for node1, AS 65010, with cfg's
// peers, advertise rules and service CIDRs, and extra top-level YAML.
func startOvnbgpConfig(b testing.TB, l *lab.Lab, nb *lab.NB, cfg lab.DaemonConfig, extra string) *daemon {
	b.Helper()
	return startOvnbgpEnv(b, l, nb, cfg, extra, nil)
}

// startOvnbgpEnv is startOvnbgpConfig with env ("KEY=value") added to the
// daemon's environment.
func startOvnbgpEnv(b testing.TB, l *lab.Lab, nb *lab.NB, cfg lab.DaemonConfig, extra string, env []string) *daemon {
	b.Helper()
	bin := lab.Binary(b)
	dir := l.Mkdir("ovnbgp")
	cfg.Node, cfg.ASN, cfg.RouterID, cfg.ListenPort = "node1", 65010, lab.NodeIPv4, -1
	cfg.Northbound = nb.Endpoint()
	cfg.Socket = filepath.Join(dir, "ovnbgp.sock")
	text, err := cfg.Render()
	if err != nil {
		b.Fatal(err)
	}
	const debug, info = "log: {level: debug, format: json}", "log: {level: info, format: json}"
	if !strings.Contains(text, debug) {
		b.Fatalf("the harness's daemon config no longer has %q: update startOvnbgp\n%s", debug, text)
	}
	if os.Getenv(envDebugLog) != "1" {
		text = strings.Replace(text, debug, info, 1)
	}
	text += extra
	conf, logPath := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "ovnbgp.log")
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	d := &daemon{done: make(chan struct{})}
	// `ip netns exec` execs the daemon: cmd's PID is the daemon's PID.
	d.cmd = exec.Command("ip", "netns", "exec", l.Node, bin, "daemon", "--config", conf)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if len(env) > 0 {
		d.cmd.Env = append(os.Environ(), env...)
	}
	if err := d.cmd.Start(); err != nil {
		b.Fatalf("start ovnbgp daemon: %v", err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	b.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			b.Errorf("ovnbgp daemon (pid %d) still running 10 s after SIGTERM: killing it", d.cmd.Process.Pid)
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if os.Getenv(envDebugLog) == "1" {
			if data, err := os.ReadFile(logPath); err == nil {
				keep := filepath.Join(os.TempDir(), "ovnbgp-bench-daemon.log")
				if os.WriteFile(keep, data, 0o644) == nil {
					b.Logf("the daemon's debug log is kept in %s", keep)
				}
			}
		}
		if b.Failed() {
			b.Logf("--- ovnbgp config\n%s--- ovnbgp daemon log (last 40 lines)\n%s", text, lab.Tail(logPath, 40))
		}
	})
	return d
}

// stop ends the daemon (SIGTERM) and waits for it.
func (d *daemon) stop(b testing.TB) {
	b.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		b.Fatalf("ovnbgp daemon (pid %d) still running 30 s after SIGTERM", d.cmd.Process.Pid)
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// exited returns an error once the daemon is no longer running.
func (d *daemon) exited() error {
	select {
	case <-d.done:
		return fmt.Errorf("ovnbgp daemon exited: %v", d.err)
	default:
		return nil
	}
}

// udn is the layer3 primary UDN whose node1 switch has subnet p: its name is
// derived from p, so every prefix has its own network and switch.
func udn(p netip.Prefix) lab.Network {
	return lab.Network{Name: "bench-" + strings.NewReplacer(".", "-", "/", "-").Replace(p.String()),
		Node: "node1", Subnet: p}
}

// nbTransact commits one OVSDB transaction (RFC 7047 "transact") of ops on
// the OVN_Northbound database served on the unix socket sock, and returns
// when the server has replied: the change is then committed. It speaks
// JSON-RPC itself: no process to start, and no command line to outgrow
// (ovn-nbctl and ovsdb-client take the whole transaction there, and 5000
// switches do not fit).
func nbTransact(sock string, ops []any) error {
	_, err := nbTransactResults(sock, ops)
	return err
}

// nbTransactResults is nbTransact that also returns the result of each
// operation (an insert's carries the new row's "uuid").
func nbTransactResults(sock string, ops []any) ([]json.RawMessage, error) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	req := map[string]any{"id": 1, "method": "transact", "params": append([]any{"OVN_Northbound"}, ops...)}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(c)
	for {
		var msg struct {
			ID     json.RawMessage   `json:"id"`
			Method string            `json:"method"`
			Params json.RawMessage   `json:"params"`
			Result []json.RawMessage `json:"result"`
			Error  json.RawMessage   `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			return nil, fmt.Errorf("OVSDB transact reply: %w", err)
		}
		if msg.Method == "echo" { // the server checks we are alive
			if err := json.NewEncoder(c).Encode(map[string]any{"id": msg.ID, "result": msg.Params, "error": nil}); err != nil {
				return nil, err
			}
			continue
		}
		if string(msg.ID) != "1" {
			continue
		}
		if len(msg.Error) > 0 && string(msg.Error) != "null" {
			return nil, fmt.Errorf("OVSDB transact: %s", msg.Error)
		}
		// One result per operation; a failed one carries "error" (and the
		// transaction was not committed).
		for i, r := range msg.Result {
			var res struct {
				Error   string `json:"error"`
				Details string `json:"details"`
			}
			if json.Unmarshal(r, &res) == nil && res.Error != "" {
				return nil, fmt.Errorf("OVSDB transact: operation %d: %s: %s", i, res.Error, res.Details)
			}
		}
		if len(msg.Result) < len(ops) {
			return nil, errors.New("OVSDB transact: fewer results than operations")
		}
		return msg.Result, nil
	}
}

// insertSwitch is the OVSDB insert of n's node switch, as OVN-Kubernetes
// writes it for a layer3 primary UDN: the row `ovn-nbctl ls-add S -- set
// logical_switch S other_config:subnet=... external_ids:...` (the
// harness's Network.NBCtlArgs) creates.
func insertSwitch(n lab.Network) any {
	return map[string]any{"op": "insert", "table": "Logical_Switch", "row": map[string]any{
		"name":         n.Switch(),
		"other_config": []any{"map", [][]string{{"subnet", n.Subnet.String()}}},
		"external_ids": []any{"map", [][]string{
			{"k8s.ovn.org/network", n.Name}, {"k8s.ovn.org/topology", "layer3"}, {"k8s.ovn.org/role", "primary"}}},
	}}
}

func deleteSwitch(n lab.Network) any {
	return map[string]any{"op": "delete", "table": "Logical_Switch", "where": []any{[]any{"name", "==", n.Switch()}}}
}
