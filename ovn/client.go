package ovn

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	libmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/internal/ovnk"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// Timings of the connection loop.
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 30 * time.Second
	// backoffMaxLocal caps the wait for a NB on this host (unix: endpoints,
	// OVN-Kubernetes interconnect mode): no other client is spared by
	// waiting longer, and the NB is back seconds after ovnkube restarts.
	backoffMaxLocal = 4 * time.Second
	// connectTimeout bounds one attempt: dial, TLS, list_dbs, get_schema
	// and the initial monitor reply.
	connectTimeout = 30 * time.Second
	// echoInterval is how often a live session probes the server, to notice
	// a peer that vanished without closing the connection, and checks that
	// libovsdb still has a connection (its disconnect notification can be
	// missed, see session). It is the session's only timer: the rows are
	// re-read on cache events alone (see eventsDropped for why no periodic
	// re-read is needed).
	echoInterval = 10 * time.Second
	echoTimeout  = 5 * time.Second
)

// Client reads the OVN Northbound database and writes the static routes
// ovnbgp owns (ApplyRoutes). It is safe for concurrent use. It writes
// nothing else.
type Client struct {
	log    *zap.Logger
	target config.NBTarget // configured endpoints, or the sockets to look for
	tls    *tls.Config
	notify func()

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// changed is poked by libovsdb's cache event handler; the session
	// goroutine then re-reads the rows.
	changed chan struct{}
	// probs keeps and logs the row problems of the last snapshot.
	probs *problemLog
	// memo keeps the rows of the last read, per table, and the parsed
	// load-balancer rows between reads (readRows).
	memo *rowMemo
	// build keeps the egress IPs and Service VIPs of the last Snapshot
	// (buildNBMemo).
	build *buildMemo
	// probe starts the session's echo timer (a ticker every d; tests
	// drive it by hand) and returns its channel and its stop.
	probe func(d time.Duration) (<-chan time.Time, func())
	// batchSize is the most route operations ApplyRoutes puts in one
	// transaction (defaultBatchSize; tests set it small).
	batchSize int
	// txnHook, if set (tests only), sees and may change each transaction
	// ApplyRoutes sends; batch counts from 0.
	txnHook func(batch int, ops []ovsdb.Operation) []ovsdb.Operation

	mu sync.Mutex
	// endpoint is what the last attempt dialled (config.Endpoints.String):
	// the configured endpoints, or the sockets found; tried is what the
	// last look for sockets found at each path (discovered only).
	endpoint  string
	tried     []config.NBCandidate
	connected bool
	synced    bool          // a first full sync has happened
	rows      nbRows        // last good rows; replaced, never mutated
	current   string        // endpoint of the live session
	since     time.Time     // when connected last changed
	lastErr   string        // "" while connected: cleared on every successful connect
	lastErrAt time.Time     // when lastErr happened
	attempts  int           // failed attempts since the last successful connect
	logged    string        // last connection state logged: "", "connected", "disconnected"
	cli       client.Client // the live session's client, nil when disconnected (ApplyRoutes writes through it)
	base      *deltaBase    // the last SnapshotDelta's snapshot, nil before one
	// writing counts the ApplyRoutes calls under way: the session does not
	// re-read the rows on every cache event meanwhile (a write of 10k rows
	// would re-read them hundreds of times); ApplyRoutes re-reads them
	// itself when it is done.
	writing int
}

// Status describes the connection to NB, for `ovnbgp` status output.
type Status struct {
	// Endpoint is the endpoint list dialled: the configured one, or
	// (discovered) the sockets the last look found, "" when it found none.
	Endpoint string `json:"endpoint"`
	// Source says whether Endpoint is ovn.northbound (configured) or was
	// found among ovn.northboundSockets (discovered).
	Source config.NBSource `json:"source"`
	// Tried is, for a discovered endpoint, every socket path the last look
	// tried, in order, and what was there.
	Tried []config.NBCandidate `json:"tried,omitempty"`
	// Current is the endpoint of the live connection, "" when disconnected.
	Current string `json:"current,omitempty"`
	// Connected is true while a monitor session is live.
	Connected bool `json:"connected"`
	// Synced is true once a first full sync has happened; from then on
	// Snapshot serves the last good data even while disconnected.
	Synced bool `json:"synced"`
	// Since is when Connected last changed (or when Dial was called).
	Since time.Time `json:"since"`
	// LastError is the error that ended the last session or failed the
	// last attempt; it is cleared when a connection succeeds, so it is ""
	// while connected.
	LastError string `json:"lastError,omitempty"`
	// LastErrorAt is when LastError happened (zero when there is none).
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Attempts counts failed connection attempts since the last session
	// (lost or never made); losing a live session is not an attempt, so it
	// is 0 right after a disconnect.
	Attempts int `json:"attempts"`
	// Problems are the NB rows the last Snapshot skipped, and why.
	Problems []string `json:"problems,omitempty"`
	// Northd is the version of ovn-northd NB gives; nil before a first
	// full sync.
	Northd *model.NorthdVersion `json:"northd,omitempty"`
}

// Dial returns a Client at once; it connects in the background and keeps
// reconnecting with exponential backoff (250ms doubling to 30s, or to 4s
// when every endpoint is a local unix socket) while the
// database is away. With ovn.northbound unset, each attempt first looks
// for the sockets of ovn.northboundSockets (config.NBTarget.Find) and
// dials those that exist, in order; with none there the attempt fails with
// an error naming every path, and the next one looks again. notify is called on every change of the monitored rows
// and on every connect and disconnect; it must not block (the daemon pokes a
// size-1 channel). notify may be nil.
//
// Dial fails only for a configuration that can never work: endpoint syntax,
// or TLS files that cannot be read. The client lives until Close or until ctx
// is done.
func Dial(ctx context.Context, cfg config.OVN, log *zap.Logger, notify func()) (*Client, error) {
	c, err := newClient(ctx, cfg, log, notify)
	if err != nil {
		return nil, err
	}
	go c.run()
	return c, nil
}

// newClient is Dial without starting the connection loop (c.run).
func newClient(ctx context.Context, cfg config.OVN, log *zap.Logger, notify func()) (*Client, error) {
	target, err := cfg.Target()
	if err != nil {
		return nil, fmt.Errorf("ovn.northbound: %w", err)
	}
	var tc *tls.Config
	if target.Configured.NeedTLS() {
		if tc, err = tlsConfig(cfg.TLS); err != nil {
			return nil, err
		}
	}
	if log == nil {
		log = zap.NewNop()
	}
	if notify == nil {
		notify = func() {}
	}
	c := &Client{
		log:       log,
		target:    target,
		endpoint:  target.Configured.String(),
		tls:       tc,
		notify:    notify,
		done:      make(chan struct{}),
		changed:   make(chan struct{}, 1),
		memo:      newRowMemo(),
		probs:     newProblemLog(log),
		build:     &buildMemo{},
		since:     time.Now(),
		batchSize: defaultBatchSize,
		probe: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
	}
	c.memo.workloads = cfg.Workloads
	c.ctx, c.cancel = context.WithCancel(ctx)
	return c, nil
}

// Snapshot builds node's networks from the rows last read from NB.
//
// ok is false until a first full sync has happened. After that, while the
// database is disconnected, Snapshot keeps returning the last good data with
// ok=true: the daemon must not withdraw routes because NB went away. Use
// Connected or Status to tell whether the data is live.
//
// Rows of unexpected shape are skipped; each distinct problem is logged once
// when it appears and is listed in Status().Problems. SnapshotDelta is the
// same snapshot with what changed since the caller's previous one.
func (c *Client) Snapshot(node string) (snap model.Snapshot, ok bool) {
	c.mu.Lock()
	rows, synced := c.rows, c.synced
	c.mu.Unlock()
	if !synced {
		return model.Snapshot{Node: node, Networks: []model.Network{}}, false
	}
	res := buildNBMemo(rows, node, c.build)
	c.setProblems(res.Problems)
	return res.Snapshot, true
}

// ClusterSubnets returns every pod subnet of every network on every node,
// the prefixes ovnbgp must never import (docs/architecture.md, "Safety
// rules", rule 2).
// It follows Snapshot's rules: ok=false before the first sync, the last good
// data while disconnected. Malformed prefixes are left out (Snapshot
// reports them).
func (c *Client) ClusterSubnets() (subnets []model.Subnet, ok bool) {
	c.mu.Lock()
	rows, synced := c.rows, c.synced
	c.mu.Unlock()
	if !synced {
		return []model.Subnet{}, false
	}
	return buildNB(rows, "").Cluster, true
}

// Connected reports whether a monitor session with NB is live.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// Status describes the connection and the current row problems.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	var northd *model.NorthdVersion
	if c.synced {
		v := parseNorthdVersion(c.rows.Northd)
		northd = &v
	}
	return Status{
		Northd:      northd,
		Endpoint:    c.endpoint,
		Source:      c.target.Source,
		Tried:       slices.Clone(c.tried),
		Current:     c.current,
		Connected:   c.connected,
		Synced:      c.synced,
		Since:       c.since,
		LastError:   c.lastErr,
		LastErrorAt: c.lastErrAt,
		Attempts:    c.attempts,
		Problems:    c.probs.list(),
	}
}

// Close stops the client and waits for its goroutine. The last good data
// stays readable.
func (c *Client) Close() {
	c.once.Do(c.cancel)
	<-c.done
}

// backoffMax is the longest wait between attempts: short for a local NB,
// long (and jittered) for a remote one that many nodes share.
func (c *Client) backoffMax() time.Duration {
	for _, ep := range c.target.Configured {
		if ep.Scheme != config.SchemeUnix {
			return backoffMax
		}
	}
	return backoffMaxLocal
}

// run is the connection loop: one session at a time, exponential backoff
// between failed attempts, reset after a session that got connected.
func (c *Client) run() {
	defer close(c.done)
	var wg sync.WaitGroup
	wg.Go(func() { c.probs.run(c.ctx) })
	defer wg.Wait()
	wait := backoffMin
	for {
		connected, err := c.session()
		if c.ctx.Err() != nil {
			c.setDown(nil)
			return
		}
		if connected {
			wait = backoffMin
		}
		c.setDown(err)
		// Jitter ±20% so that many nodes do not hammer a restarted NB in step.
		d := time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		c.log.Debug("nb retry scheduled", zap.String("endpoint", c.target.String()), zap.Duration("in", d), zap.Error(err))
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(d):
		}
		wait = min(wait*2, c.backoffMax())
	}
}

// session connects, monitors and serves until the connection is lost or
// the client is closed. connected says whether it got as far as a full sync.
func (c *Client) session() (connected bool, err error) {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return false, fmt.Errorf("nb model: %w", err)
	}
	eps := c.find()
	if len(eps) == 0 {
		c.mu.Lock()
		tried := c.tried
		c.mu.Unlock()
		return false, c.target.NotFound(tried)
	}
	opts := []client.Option{
		// Always pass a logger: without one libovsdb sets stdr's verbosity
		// to 5 process-wide.
		// It also tells of cache events libovsdb dropped (eventsDropped).
		client.WithLogger(newLogr(c.log, c.eventsDropped)),
		// Any member of a clustered NB serves reads; do not insist on the
		// leader.
		client.WithLeaderOnly(false),
	}
	for _, ep := range eps.Strings() {
		opts = append(opts, client.WithEndpoint(ep))
	}
	if c.tls != nil {
		opts = append(opts, client.WithTLSConfig(c.tls))
	}
	// No client.WithReconnect: each session is a fresh libovsdb client, so
	// the cache is rebuilt from a full monitor reply after every reconnect,
	// the first connection is retried like any other, and the loop, not
	// libovsdb, owns backoff, logging and status.
	cli, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return false, fmt.Errorf("nb client: %w", err)
	}
	defer cli.Close()

	rows, err := c.start(cli)
	if err != nil {
		return false, err
	}
	c.setUp(cli, rows)
	defer c.clearSession(cli)

	probe, stopProbe := c.probe(echoInterval)
	defer stopProbe()
	for {
		select {
		case <-c.ctx.Done():
			return true, nil
		case <-cli.DisconnectNotify():
			return true, errors.New("connection closed")
		case <-c.changed:
			if err := c.refresh(cli); err != nil {
				return true, err
			}
		case <-probe:
			// Not c.ctx: libovsdb v0.7.0's Echo compares its reply
			// after its context ends even when the reply has not come
			// (client.go, Echo; rpc2's CallWithContext returns on
			// ctx.Done while its read loop may still write the reply):
			// a data race the race detector saw when Close cancelled
			// c.ctx during an echo. A timeout alone ends it early only
			// when the server is dead, and Close waits at most
			// echoTimeout for an echo under way.
			ectx, ecancel := context.WithTimeout(context.Background(), echoTimeout)
			err := cli.Echo(ectx)
			ecancel()
			if err != nil && c.ctx.Err() == nil {
				return true, fmt.Errorf("echo: %w", err)
			}
		}
		// libovsdb clears its connection, then sends the disconnect
		// notification without waiting for a receiver
		// (handleDisconnectNotification in libovsdb's client/client.go):
		// one sent while this loop was not in select is lost, and shows
		// here, or at the next probe at the latest.
		if cli.CurrentEndpoint() == "" {
			return true, errors.New("connection closed")
		}
	}
}

// start connects cli, starts the monitor and reads the first full copy of
// the rows, within connectTimeout.
func (c *Client) start(cli client.Client) (nbRows, error) {
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	defer cancel()
	if err := cli.Connect(ctx); err != nil {
		return nbRows{}, fmt.Errorf("connect: %w", err)
	}
	// Each event names its table and row: readRows reads again only the
	// tables that changed, and of the load balancers only the rows
	// (rowMemo).
	cli.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, m libmodel.Model) { c.memo.event(table, m); c.poke() },
		UpdateFunc: func(table string, _, m libmodel.Model) { c.memo.event(table, m); c.poke() },
		DeleteFunc: func(table string, m libmodel.Model) { c.memo.event(table, m); c.poke() },
	})
	// Only the columns the snapshot reads: on a big cluster the other
	// Logical_Switch columns (ports, ACLs, QoS...) are most of the data.
	// Router ports carry the real length of a layer2 IPv6 subnet (and a
	// family a dual-stack layer2 switch lost); routers name the interconnect
	// routes, which protect other nodes' subnets. Switch ports (one per
	// pod) are monitored only for a workloadIP rule (config.OVN.Workloads),
	// and Logical_Switch.ports never: a layer2 switch holds every pod's
	// port of the network, and libovsdb clones that set on each change.
	// Of NB_Global only options (northd's version, readNBGlobal): nb_cfg
	// and the other counters move on every `ovn-nbctl --wait`.
	ls := &nbdb.LogicalSwitch{}
	lrp := &nbdb.LogicalRouterPort{}
	lr := &nbdb.LogicalRouter{}
	lrsr := &nbdb.LogicalRouterStaticRoute{}
	lb := &nbdb.LoadBalancer{}
	nat := &nbdb.NAT{}
	nbg := &nbdb.NBGlobal{}
	tables := []client.MonitorOption{
		client.WithTable(ls, &ls.Name, &ls.ExternalIDs, &ls.OtherConfig),
		client.WithTable(lrp, &lrp.Name, &lrp.Networks),
		client.WithTable(lr, &lr.Name, &lr.ExternalIDs, &lr.StaticRoutes, &lr.Nat),
		client.WithTable(lrsr, &lrsr.IPPrefix, &lrsr.Nexthop, &lrsr.OutputPort, &lrsr.ExternalIDs),
		client.WithTable(lb, &lb.Name, &lb.Vips, &lb.ExternalIDs),
		client.WithTable(nat, &nat.Type, &nat.ExternalIP, &nat.LogicalIP, &nat.ExternalIDs),
		client.WithTable(nbg, &nbg.Options),
	}
	if c.memo.workloads {
		lsp := &nbdb.LogicalSwitchPort{}
		dhcp := &nbdb.DHCPOptions{}
		tables = append(tables,
			client.WithTable(lsp, &lsp.Name, &lsp.Type, &lsp.Addresses, &lsp.PortSecurity, &lsp.Enabled,
				&lsp.ExternalIDs, &lsp.Options, &lsp.Dhcpv4Options, &lsp.Dhcpv6Options),
			client.WithTable(dhcp, &dhcp.ExternalIDs))
	}
	mon := cli.NewMonitor(tables...)
	if _, err := cli.Monitor(ctx, mon); err != nil {
		return nbRows{}, fmt.Errorf("monitor NB: %w", err)
	}
	return readRows(ctx, cli, c.memo)
}

// poke tells the session goroutine that the cache changed. It never
// blocks: libovsdb calls it from its cache event loop.
func (c *Client) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// refresh re-reads the rows and notifies if they changed.
func (c *Client) refresh(cli client.Client) error {
	ctx, cancel := context.WithTimeout(c.ctx, echoTimeout)
	defer cancel()
	c.mu.Lock()
	busy := c.writing > 0
	c.mu.Unlock()
	if busy {
		return nil
	}
	rows, err := readRows(ctx, cli, c.memo)
	if err != nil {
		if c.ctx.Err() != nil {
			return nil
		}
		return err
	}
	if c.install(cli, rows) {
		c.notify()
	}
	return nil
}

// install makes rows, read from cli, the rows Snapshot reads, unless a
// later read is there already or cli's session is over. It says whether
// they differ from the rows there before (another generation).
func (c *Client) install(cli client.Client, rows nbRows) (changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cli != cli || rows.gen < c.rows.gen {
		return false
	}
	changed = rows.gen != c.rows.gen
	// Kept even when of the same generation: these rows share the
	// tables of the next read (rowMemo), the older ones nothing.
	c.rows = rows
	return changed
}

// readRows copies the monitored rows out of the cache, keeping only what
// ovnbgp reads. It reads the cached models in place (RowsShallow: libovsdb
// replaces, never mutates, a cached model), because List clones every row
// through reflection: on 5000 switches that was most of the time from an
// NB commit to the BGP UPDATE.
//
// memo (may be nil: everything is read) keeps the rows of the last read: a
// table no cache event touched since is not read again (its rows are the
// last read's, shared), the Service load balancers, the egress IP SNATs and
// the routers' nat columns are read again only at the rows the events named
// (readLoadBalancers, readNATs), and the rows returned
// carry their generation, which moves only when they differ from the last
// read's (rowMemo). Reads are serialized.
func readRows(ctx context.Context, cli client.Client, memo *rowMemo) (nbRows, error) {
	var out nbRows
	if err := ctx.Err(); err != nil {
		return out, err
	}
	cache := cli.Cache()
	if cache == nil {
		return out, errors.New("no cache: not connected")
	}
	if memo == nil {
		memo = newRowMemo()
	}
	memo.read.Lock()
	defer memo.read.Unlock()
	st := memo.begin(cache)
	prev := st.prev
	// same says whether none of the tables changed since the last read.
	same := func(tables ...string) bool {
		for _, t := range tables {
			if !st.fresh(t) {
				return false
			}
		}
		return true
	}
	table := func(name string) (map[string]libmodel.Model, error) {
		t := cache.Table(name)
		if t == nil {
			return nil, fmt.Errorf("no %s table in the cache", name)
		}
		return t.RowsShallow(), nil
	}
	if err := readSwitches(&out, table, prev, same); err != nil {
		return out, err
	}
	if err := readPorts(&out, table, prev, same); err != nil {
		return out, err
	}
	if err := readRouters(&out, table, prev, same); err != nil {
		return out, err
	}
	if err := readNBGlobal(&out, table, prev, same); err != nil {
		return out, err
	}
	nat, err := readNATs(&out, st)
	if err != nil {
		return out, err
	}
	lb, err := readLoadBalancers(&out, st)
	if err != nil {
		return out, err
	}
	wl, err := readWorkloads(&out, st)
	if err != nil {
		return out, err
	}
	st.done(&out, lb, nat, wl)
	return out, nil
}

// tableRows returns a table's cached models.
type tableRows func(name string) (map[string]libmodel.Model, error)

// readSwitches, readPorts, readRouters and readLoadBalancers fill their
// part of out: the last read's rows (prev) when their tables did not
// change, else a copy out of the cache.
func readSwitches(out *nbRows, table tableRows, prev *nbRows, same func(...string) bool) error {
	if prev != nil && same(nbdb.LogicalSwitchTable) {
		out.Switches = prev.Switches
		return nil
	}
	switches, err := table(nbdb.LogicalSwitchTable)
	if err != nil {
		return err
	}
	out.Switches = make([]switchRow, 0, len(switches))
	for _, m := range switches {
		s, ok := m.(*nbdb.LogicalSwitch)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", nbdb.LogicalSwitchTable, m)
		}
		out.Switches = append(out.Switches, switchRow{
			UUID:       s.UUID,
			Name:       s.Name,
			Network:    s.ExternalIDs[extIDNetwork],
			Topology:   s.ExternalIDs[extIDTopology],
			Role:       s.ExternalIDs[extIDRole],
			Subnet:     s.OtherConfig[cfgSubnet],
			IPv6Prefix: s.OtherConfig[cfgIPv6Prefix],
		})
	}
	slices.SortFunc(out.Switches, func(a, b switchRow) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UUID, b.UUID))
	})
	return nil
}

func readPorts(out *nbRows, table tableRows, prev *nbRows, same func(...string) bool) error {
	if prev != nil && same(nbdb.LogicalRouterPortTable) {
		out.Ports = prev.Ports
		return nil
	}
	ports, err := table(nbdb.LogicalRouterPortTable)
	if err != nil {
		return err
	}
	for _, m := range ports {
		p, ok := m.(*nbdb.LogicalRouterPort)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", nbdb.LogicalRouterPortTable, m)
		}
		// Only the ports joining a router to a switch (pod subnets), to the
		// join or transit switch (protected), or to the external switch
		// (the output port of imported routes) matter.
		if !keepPort(p.Name) {
			continue
		}
		nets := slices.Clone(p.Networks)
		slices.Sort(nets)
		out.Ports = append(out.Ports, routerPortRow{UUID: p.UUID, Name: p.Name, Networks: nets})
	}
	slices.SortFunc(out.Ports, func(a, b routerPortRow) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UUID, b.UUID))
	})
	return nil
}

// readRouters reads the routers and static routes: a static route is
// named by the router holding it. The NATs are readNATs'.
func readRouters(out *nbRows, table tableRows, prev *nbRows, same func(...string) bool) error {
	if prev != nil && same(nbdb.LogicalRouterTable, nbdb.LogicalRouterStaticRouteTable) {
		out.Routers, out.Routes, out.VMRoutes = prev.Routers, prev.Routes, prev.VMRoutes
		return nil
	}
	routers, err := table(nbdb.LogicalRouterTable)
	if err != nil {
		return err
	}
	routerOf := map[string]string{}
	for _, m := range routers {
		r, ok := m.(*nbdb.LogicalRouter)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", nbdb.LogicalRouterTable, m)
		}
		for _, id := range r.StaticRoutes {
			routerOf[id] = r.Name
		}
		if !strings.HasPrefix(r.Name, ovnk.GatewayRouterPrefix) {
			continue
		}
		ids := slices.Clone(r.StaticRoutes)
		slices.Sort(ids)
		out.Routers = append(out.Routers, routerRow{UUID: r.UUID, Name: r.Name, Network: r.ExternalIDs[extIDNetwork], StaticRoutes: ids})
	}
	slices.SortFunc(out.Routers, func(a, b routerRow) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UUID, b.UUID))
	})
	routes, err := table(nbdb.LogicalRouterStaticRouteTable)
	if err != nil {
		return err
	}
	out.Routes = make([]routeRow, 0, len(routes))
	out.VMRoutes = nil
	for _, m := range routes {
		r, ok := m.(*nbdb.LogicalRouterStaticRoute)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", nbdb.LogicalRouterStaticRouteTable, m)
		}
		row := routeRow{
			UUID: r.UUID, Router: routerOf[r.UUID], IPPrefix: r.IPPrefix, Nexthop: r.Nexthop,
			ICNode:          r.ExternalIDs[ovnk.ExtIDICNode],
			Owner:           r.ExternalIDs[extIDOwner],
			Rule:            r.ExternalIDs[extIDRule],
			OwnerController: ownerController(r.ExternalIDs),
		}
		if r.OutputPort != nil {
			row.OutputPort = *r.OutputPort
		}
		// KubeVirt's routes for a VM away from the node owning its
		// subnet (docs/ovn-nb.md, "Workloads").
		if vm := r.ExternalIDs[extIDVM]; vm != "" && row.Router == ovnk.ClusterRouter {
			out.VMRoutes = append(out.VMRoutes, vmRouteRow{UUID: r.UUID, IPPrefix: r.IPPrefix, Zone: r.ExternalIDs[extIDZone], VM: vm})
		}
		// Only interconnect routes (protected), ours, OVN-Kubernetes'
		// imported ones (ForeignImport), and any on a gateway router (import
		// adds no duplicate of one) matter.
		if row.ICNode == "" && row.Owner == "" && row.OwnerController != ovnk.RouteImportController &&
			!strings.HasPrefix(row.Router, ovnk.GatewayRouterPrefix) {
			continue
		}
		out.Routes = append(out.Routes, row)
	}
	slices.SortFunc(out.VMRoutes, func(a, b vmRouteRow) int { return strings.Compare(a.UUID, b.UUID) })
	if prev != nil && slices.Equal(out.VMRoutes, prev.VMRoutes) {
		// Shared: readWorkloads then knows the context did not change.
		out.VMRoutes = prev.VMRoutes
	}
	// By UUID only: one comparison (this runs on every NB change, with
	// every owned route); the builders sort what they return.
	slices.SortFunc(out.Routes, func(a, b routeRow) int { return strings.Compare(a.UUID, b.UUID) })
	return nil
}

// find returns the endpoints to dial now (config.NBTarget.Find) and
// records them; a change of the sockets found is logged.
func (c *Client) find() config.Endpoints {
	eps, tried := c.target.Find()
	c.mu.Lock()
	changed := c.target.Source == config.NBDiscovered && (eps.String() != c.endpoint || c.tried == nil)
	c.endpoint, c.tried = eps.String(), tried
	c.mu.Unlock()
	if changed && len(eps) > 0 {
		c.log.Info("nb socket discovered", zap.String("endpoint", eps.String()), zap.Stringers("tried", tried))
	}
	return eps
}

// setUp records a live, fully synced session and says so once.
func (c *Client) setUp(cli client.Client, rows nbRows) {
	endpoint := cli.CurrentEndpoint()
	c.mu.Lock()
	c.connected, c.synced, c.rows = true, true, rows
	c.cli = cli
	c.current, c.since, c.attempts = endpoint, time.Now(), 0
	// Recovered: the error is history (the log has it).
	c.lastErr, c.lastErrAt = "", time.Time{}
	changed := c.logged != "connected"
	c.logged = "connected"
	c.mu.Unlock()
	if changed {
		c.log.Info("nb connected", zap.String("endpoint", endpoint), zap.Int("switches", len(rows.Switches)))
	}
	c.notify()
}

// clearSession forgets cli when its session ends, so that ApplyRoutes
// never writes through a closed client.
func (c *Client) clearSession(cli client.Client) {
	c.mu.Lock()
	if c.cli == cli {
		c.cli = nil
	}
	c.mu.Unlock()
}

// setDown records the end of a session or a failed attempt. The state
// change is logged once; further failures only at debug level.
func (c *Client) setDown(err error) {
	c.mu.Lock()
	wasUp := c.connected
	c.connected, c.current, c.cli = false, "", nil
	if wasUp {
		c.since = time.Now()
	}
	if err != nil {
		c.lastErr, c.lastErrAt = err.Error(), time.Now()
		if !wasUp {
			// A lost session is not a failed attempt; a failed connect is.
			c.attempts++
		}
	}
	changed := c.logged != "disconnected" && c.ctx.Err() == nil
	if changed {
		c.logged = "disconnected"
	}
	synced := c.synced
	c.mu.Unlock()
	if changed {
		c.log.Info("nb disconnected", zap.String("endpoint", c.target.String()), zap.Error(err),
			zap.Bool("servingLastGood", synced))
	} else if err != nil && c.ctx.Err() == nil {
		c.log.Debug("nb connect failed", zap.String("endpoint", c.target.String()), zap.Error(err))
	}
	if wasUp {
		c.notify()
	}
}

// setProblems records the current row problems; each change is logged
// once it has settled (problemLog).
func (c *Client) setProblems(p []string) { c.probs.set(p, time.Now()) }

// eventsDropped has the session re-read every table: libovsdb dropped
// cache events, so the tables they named are not known. It is the only
// case in which the events miss a change of the cache: libovsdb's event
// processor queues each event in a buffered channel (bufferSize, 65536)
// and drops it, logging droppedEventsMsg, only when that is full
// (eventProcessor.AddEvent in libovsdb's cache/cache.go, v0.7.0); the
// handler here never blocks (touch, poke). So the rows are re-read on
// events alone, with no periodic full re-read.
func (c *Client) eventsDropped() {
	c.memo.touchAll()
	c.poke()
}

// droppedEventsMsg is what libovsdb logs (at V(0)) for each cache event
// it drops (eventProcessor.AddEvent in its cache/cache.go);
// TestLogrSeesDroppedEvents overflows a real libovsdb cache to pin it.
const droppedEventsMsg = "dropping event because event buffer is full"

// newLogr adapts zap for libovsdb. Its V(n) levels map to zap levels
// below debug, so only its errors and V(0) messages get through.
// onDrop is called for each cache event libovsdb says it dropped,
// whatever the log level.
func newLogr(log *zap.Logger, onDrop func()) *logr.Logger {
	l := logr.New(dropSink{LogSink: zapr.NewLogger(log.Named("libovsdb")).GetSink(), onDrop: onDrop})
	return &l
}

// dropSink passes everything to zapr's sink and calls onDrop for
// droppedEventsMsg.
type dropSink struct {
	logr.LogSink
	onDrop func()
}

// Init counts this wrapper's frame in zap's caller skip.
func (d dropSink) Init(info logr.RuntimeInfo) {
	info.CallDepth++
	d.LogSink.Init(info)
}

// Enabled is true at V(0) whatever zap's level, so that Info sees
// droppedEventsMsg.
func (d dropSink) Enabled(level int) bool { return level == 0 || d.LogSink.Enabled(level) }

func (d dropSink) Info(level int, msg string, kv ...any) {
	if msg == droppedEventsMsg && d.onDrop != nil {
		d.onDrop()
	}
	if d.LogSink.Enabled(level) {
		d.LogSink.Info(level, msg, kv...)
	}
}

func (d dropSink) WithName(name string) logr.LogSink {
	return dropSink{LogSink: d.LogSink.WithName(name), onDrop: d.onDrop}
}

func (d dropSink) WithValues(kv ...any) logr.LogSink {
	return dropSink{LogSink: d.LogSink.WithValues(kv...), onDrop: d.onDrop}
}

// WithCallDepth keeps zap's caller right through this wrapper.
func (d dropSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := d.LogSink.(logr.CallDepthLogSink); ok {
		return dropSink{LogSink: cd.WithCallDepth(depth + 1), onDrop: d.onDrop}
	}
	return d
}
