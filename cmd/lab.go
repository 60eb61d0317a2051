package cmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/bgp/labpeer"
	"github.com/ovnbgp/ovnbgp/daemon"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// The lab's fixed numbers: documentation ASNs and addresses (RFC 5398, 5737).
const (
	labNode        = "node1"
	labNodeASN     = 64512
	labProviderASN = 65001
	// labImportRule accepts labImportPrefix from the provider into the
	// default network's gateway router GR_<node>.
	labImportRule   = "provider-in"
	labImportPrefix = "203.0.113.0/24"
)

// labProviderNextHop is the next hop of the provider's routes: the
// provider network's gateway (172.18.0.1, the default route's next hop on
// GR_<node>), inside the networks of the gateway router's external port,
// so that the OVN target takes it.
var labProviderNextHop = netip.MustParseAddr("172.18.0.1")

// labProviderRoutes are the routes the provider originates: the lab's
// import rule accepts the first (labImportPrefix); the second matches no
// accept entry; the third is the other node's pod subnet (10.128.2.0/23,
// labnb.Topology), which an accept entry covers but which is protected
// whatever a rule says.
var labProviderRoutes = []labpeer.Route{
	{Prefix: netip.MustParsePrefix(labImportPrefix), NextHop: labProviderNextHop},
	{Prefix: netip.MustParsePrefix("198.51.100.0/24"), NextHop: labProviderNextHop},
	{Prefix: netip.MustParsePrefix("10.128.2.0/23"), NextHop: labProviderNextHop},
}

type labOptions struct {
	node    string
	timeout time.Duration
}

func newLabCommand(o *options) *cobra.Command {
	lo := labOptions{node: labNode, timeout: 30 * time.Second}
	c := &cobra.Command{
		Use:   "lab",
		Short: "Run the embedded demo: an in-process OVN NB and provider router, and the daemon between them",
		Long: `Run a self-contained ovnbgp: libovsdb's in-memory OVSDB server loaded with a small
OVN-Kubernetes topology (the default network and a layer3 User Defined Network "blue"), an
in-process BGP "provider router" on loopback, and the daemon wired to both. It prints the
peers and the advertised and learned routes; then the import side: its import rule accepts
one of the provider's routes, the plan adds it to the gateway router GR_<node> (the rule
starts in mode manual; the lab then sets it to auto and reloads), and it shows the route
imported, the row in the NB, and explain for it. Then the commands to try against its
socket, and a live NB change. It runs until Ctrl-C, which stops it at any point. It needs no
root, no OVN and no FRR (the daemon reads fixed links instead of netlink), and picks free
ports.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLab(cmd.Context(), o.stdout, lo)
		},
	}
	c.Flags().StringVar(&lo.node, "node", lo.node, "node name of the demo")
	c.Flags().DurationVar(&lo.timeout, "timeout", lo.timeout, "how long to wait for the session to come up")
	return c
}

// runLab runs the demo until ctx ends (Ctrl-C or SIGTERM), which is a
// normal end at any point: it returns nil. Everything lives in a temporary
// directory that is removed at the end.
func runLab(ctx context.Context, out io.Writer, lo labOptions) error {
	err := runLabSteps(ctx, out, lo)
	if ctx.Err() != nil {
		// Interrupted: whatever step was running was cut short on purpose.
		return nil
	}
	return err
}

func runLabSteps(ctx context.Context, out io.Writer, lo labOptions) error {
	dir, err := os.MkdirTemp("", "ovnbgp-lab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "ovnbgp.log")
	log, err := fileLogger(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	// The terminal shows only the demo: what the standard library logs
	// (net/http's server errors among them) goes to the lab's log file too.
	defer zap.RedirectStdLog(log.Named("stdlib"))()

	nb, err := labnb.NewMemoryServer(log.Named("nb-server"), filepath.Join(dir, "nb.sock"))
	if err != nil {
		return fmt.Errorf("lab: in-memory OVN NB: %w", err)
	}
	defer nb.Close()
	if err := labnb.Topology(ctx, nb.Endpoint(), lo.node, log.Named("nb-topology")); err != nil {
		return fmt.Errorf("lab: OVN topology: %w", err)
	}

	port, err := freePort()
	if err != nil {
		return err
	}
	// The provider pokes events on every session or path change: the lab
	// waits on them instead of polling.
	events := make(chan struct{}, 1)
	provider, err := labpeer.Start(ctx, labpeer.Config{
		ASN: labProviderASN, RouterID: netip.MustParseAddr("192.0.2.1"),
		Listen: netip.MustParseAddr("127.0.0.1"), Port: port,
		Peer: netip.MustParseAddr("127.0.0.1"), PeerASN: labNodeASN, PeerName: lo.node,
		Routes: labProviderRoutes,
	}, log.Named("provider"), func() {
		select {
		case events <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("lab: provider router: %w", err)
	}
	defer provider.Stop()

	cfgPath := filepath.Join(dir, "config.yaml")
	sock := filepath.Join(dir, "ovnbgp.sock")
	if err := os.WriteFile(cfgPath, []byte(labConfig(lo.node, port, nb.Endpoint(), sock, "manual")), 0o600); err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// done is closed when the daemon has returned, and runErr is then its
	// result: any number of waiters may read done, and none blocks on a
	// result that another waiter already took.
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = daemon.Run(runCtx, daemon.Options{ConfigPath: cfgPath, Version: versionString(), Logger: log.Named("daemon"),
			// No netlink: the lab's fixed links (labHost).
			Deps: daemon.Deps{OpenHost: func(int, *zap.Logger, func()) (daemon.Host, error) { return labHost{}, nil }}})
	}()
	daemonErr := func() error { <-done; return runErr }

	client := api.NewClient(sock)
	if err := waitEstablished(ctx, client, provider, lo.timeout, done, daemonErr, events); err != nil {
		return labStopped(stop, done, fmt.Errorf("lab: %w (log: %s)", err, logPath))
	}
	files := labFiles{cfg: cfgPath, sock: sock, log: logPath}
	if err := printLab(ctx, out, client, provider); err != nil {
		return labStopped(stop, done, err)
	}
	imp := labImport{client: client, node: lo.node, nb: nb.Endpoint(), files: files, port: port, done: done,
		daemonErr: daemonErr, log: log.Named("nb-read")}
	if err := imp.run(ctx, out); err != nil {
		return labStopped(stop, done, fmt.Errorf("lab: %w (log: %s)", err, logPath))
	}
	printTry(out, files)
	if err := demoChange(ctx, out, nb.Endpoint(), lo.node, provider, events, log.Named("nb-change")); err != nil {
		return labStopped(stop, done, fmt.Errorf("lab: %w (log: %s)", err, logPath))
	}
	fmt.Fprintln(out, "\nCtrl-C to stop.")
	select {
	case <-ctx.Done():
		stop()
		return daemonErr()
	case <-done:
		return daemonErr()
	}
}

// labStopped stops the daemon and waits for it, then returns err.
func labStopped(stop context.CancelFunc, done <-chan struct{}, err error) error {
	stop()
	<-done
	return err
}

// labConfig is the lab's config; mode is the import rule's mode.
func labConfig(node string, port int, nb, sock, mode string) string {
	return fmt.Sprintf(`# ovnbgp lab: written by 'ovnbgp lab', removed when it stops.
node:
  name: %s
bgp:
  asn: %d
  routerID: 192.0.2.10
  listenPort: -1
  peers:
    - name: provider
      address: 127.0.0.1
      port: %d
      asn: %d
      holdTime: 9s
      keepaliveTime: 3s
      connectRetry: 1s
      families: [ipv4]
ovn:
  northbound: %s
advertise:
  - name: pods
    kind: podNetwork
    networks: [default]
  - name: udn
    kind: podNetwork
    networks: ["*"]
    communities: ["%d:100"]
import:
  - name: %s
    peers: [provider]
    network: default
    accept:
      - prefix: %s
      # Broad on purpose: the other node's pod subnet, which the provider sends
      # too, is protected whatever a rule accepts.
      - prefix: 10.0.0.0/8
        maxLength: 24
    targets:
      ovn: true
    mode: %s
control:
  socket: %s
metrics:
  address: ""
log:
  level: debug
stateDir: %s
`, node, labNodeASN, port, labProviderASN, nb, labNodeASN, labImportRule, labImportPrefix, mode, sock,
		filepath.Join(filepath.Dir(sock), "state"))
}

// waitEstablished waits until the daemon shows an Established peer, says
// every advertisement is sent, the provider router has every one of them,
// and the daemon has every route of the provider's, the import rule's one
// accepted: the summary then shows a settled state, not the session's first
// milliseconds. It checks on every provider event (the session coming up,
// our UPDATEs arriving), and every 250 ms for what only the daemon's API
// shows.
func waitEstablished(ctx context.Context, c *api.Client, provider *labpeer.Peer, timeout time.Duration, done <-chan struct{},
	daemonErr func() error, events <-chan struct{}) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	settled := func() bool {
		peers, err := c.Peers(ctx)
		if err != nil || len(peers) == 0 || peers[0].State != model.StateEstablished {
			return false
		}
		advs, err := c.Advertised(ctx, "")
		if err != nil || len(advs) == 0 {
			return false
		}
		got, err := provider.Received(ctx)
		if err != nil {
			return false
		}
		have := make(map[netip.Prefix]bool, len(got))
		for _, p := range got {
			have[p.Prefix] = true
		}
		for _, a := range advs {
			if a.State != model.AdvSent || !have[a.Prefix] {
				return false
			}
		}
		// And every route of the provider's is decided: the import
		// rule's one accepted.
		learned, err := c.Learned(ctx, "", false)
		if err != nil {
			return false
		}
		decided := map[netip.Prefix]bool{}
		for _, p := range learned {
			decided[p.Prefix] = p.Prefix.String() != labImportPrefix || p.Accepted
		}
		for _, r := range labProviderRoutes {
			if !decided[r.Prefix] {
				return false
			}
		}
		return true
	}
	for {
		if settled() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return fmt.Errorf("daemon stopped: %v", daemonErr())
		case <-deadline:
			return fmt.Errorf("the BGP session did not come up in %s", timeout)
		case <-events:
		case <-tick.C:
		}
	}
}

// labFiles are the paths and endpoints the demo tells the user about.
type labFiles struct{ cfg, sock, log string }

func printLab(ctx context.Context, out io.Writer, c *api.Client, provider *labpeer.Peer) error {
	peers, err := c.Peers(ctx)
	if err != nil {
		return err
	}
	advs, err := c.Advertised(ctx, "")
	if err != nil {
		return err
	}
	learned, err := c.Learned(ctx, "", false)
	if err != nil {
		return err
	}
	seen, err := provider.Received(ctx)
	if err != nil {
		return err
	}
	section := func(title string, table func(*tabwriter.Writer)) {
		fmt.Fprintf(out, "\n== %s\n", title)
		_ = render(out, "table", nil, table)
	}
	fmt.Fprintln(out, "ovnbgp lab: in-memory OVN NB + in-process provider router (AS 65001) + ovnbgp (AS 64512)")
	section("peers", func(w *tabwriter.Writer) { peersTable(w, peers) })
	section("advertised (ovnbgp routes advertised)", func(w *tabwriter.Writer) { advertisedTable(w, advs) })
	section("what the provider router received from ovnbgp", func(w *tabwriter.Writer) { receivedTable(w, seen) })
	section("learned from the provider (ovnbgp routes learned)", func(w *tabwriter.Writer) { learnedTable(w, learned) })
	return nil
}

// printTry prints the commands to try against the lab's socket.
func printTry(out io.Writer, f labFiles) {
	self, _ := os.Executable()
	cli := "ovnbgp"
	if self != "" {
		cli = self
	}
	fmt.Fprintf(out, `
Try, in another terminal:
  %[1]s --socket %[2]s peers
  %[1]s --socket %[2]s routes advertised -o yaml
  %[1]s --socket %[2]s routes learned --rejected
  %[1]s --socket %[2]s routes imported
  %[1]s --socket %[2]s explain %[5]s
  %[1]s --socket %[2]s explain 198.51.100.0/24
  %[1]s --socket %[2]s plan
  %[1]s --socket %[2]s status
  %[1]s --socket %[2]s config show --running
  curl -s --unix-socket %[2]s http://ovnbgp/v1/peers
config: %[3]s
log:    %[4]s
`, cli, f.sock, f.cfg, f.log, labImportPrefix)
}

// demoChange adds a User Defined Network's node switch to the NB, as
// OVN-Kubernetes does when a UDN is created, and measures how long until the
// provider router has the subnet; then deletes it and measures the
// withdrawal. It wakes on the provider's events (a path learned or
// withdrawn), never polls.
func demoChange(ctx context.Context, out io.Writer, endpoint, node string, provider *labpeer.Peer, events <-chan struct{}, log *zap.Logger) error {
	green := netip.MustParsePrefix("10.210.0.0/24")
	sw := labnb.Switch{Network: "green", Topology: labnb.TopologyLayer3, Role: "primary", Node: node,
		Subnets: []netip.Prefix{green}}
	has := func() (bool, error) {
		paths, err := provider.Received(ctx)
		for _, p := range paths {
			if p.Prefix == green {
				return true, err
			}
		}
		return false, err
	}
	// start is when the NB commit returned. Events are drained before the
	// commit, so none that follows it is missed.
	var start time.Time
	wait := func(want bool) (time.Duration, error) {
		timeout := time.After(10 * time.Second)
		for {
			got, err := has()
			if err != nil {
				return 0, err
			}
			if got == want {
				return time.Since(start), nil
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-timeout:
				return 0, fmt.Errorf("the provider did not see %s change in 10 s", green)
			case <-events:
			}
		}
	}
	drain := func() {
		for {
			select {
			case <-events:
			default:
				return
			}
		}
	}
	fmt.Fprintf(out, "\n== a live change: a UDN \"green\" appears on %s in OVN NB (switch %s, %s)\n", node, sw.Name(), green)
	drain()
	name, err := labnb.AddSwitch(ctx, endpoint, sw, log)
	if err != nil {
		return err
	}
	start = time.Now()
	took, err := wait(true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "NB commit → provider router has %s: %s\n", green, took.Round(10*time.Microsecond))
	drain()
	if err := labnb.DeleteSwitch(ctx, endpoint, name, log); err != nil {
		return err
	}
	start = time.Now()
	if took, err = wait(false); err != nil {
		return err
	}
	fmt.Fprintf(out, "switch deleted → withdrawn from the provider router: %s\n", took.Round(10*time.Microsecond))
	return nil
}

// receivedTable shows paths as the provider router sees them: the import
// verdict is the provider's business, the attributes are ours.
func receivedTable(w *tabwriter.Writer, paths []model.LearnedPath) {
	row(w, "FROM", "PREFIX", "NEXT HOP", "AS PATH", "COMMUNITIES")
	for _, p := range paths {
		as := make([]string, len(p.ASPath))
		for i, n := range p.ASPath {
			as[i] = strconv.FormatUint(uint64(n), 10)
		}
		row(w, p.Peer, p.Prefix, p.NextHop, dash(strings.Join(as, " ")), dash(strings.Join(p.Communities, " ")))
	}
}

// fileLogger writes debug JSON logs to path, so the demo's terminal shows
// only the demo.
func fileLogger(path string) (*zap.Logger, error) {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
	zc.OutputPaths = []string{path}
	zc.ErrorOutputPaths = []string{path}
	zc.Sampling = nil
	return zc.Build()
}

// freePort asks the kernel for a free TCP port on loopback.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("lab: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
