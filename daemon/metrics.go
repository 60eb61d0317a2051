package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// collector reads the daemon's live state at scrape time, so no counter can
// drift from what `ovnbgp peers` shows.
type collector struct {
	d *Daemon

	info, up, peerState, peerSince, prefixes, advertised, notApplied, nbConnected,
	reconciles, lastReconcile, reconcileFailing,
	imported, importCap, importPending, rejected, exportCap, drained, bmpUp, bfdUp *prometheus.Desc
	staleKept, staleUntil         *prometheus.Desc
	workloadRoutes, workloadAddrs *prometheus.Desc
	// all are the descriptions above, for Describe: a metric that has no
	// sample now (no BMP station, no drain) is still described.
	all []*prometheus.Desc
}

func newCollector(d *Daemon) *collector {
	var all []*prometheus.Desc
	n := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc("ovnbgp_"+name, help, labels, nil)
		all = append(all, desc)
		return desc
	}
	c := &collector{
		d:                d,
		info:             n("build_info", "ovnbgp version and node.", "version", "node"),
		up:               n("peer_established", "1 when the BGP session is Established.", "peer"),
		peerState:        n("peer_state", "BGP FSM state: 1 idle, 2 connect, 3 active, 4 opensent, 5 openconfirm, 6 established.", "peer"),
		peerSince:        n("peer_state_since_timestamp_seconds", "Unix time the peer entered its state.", "peer"),
		prefixes:         n("peer_prefixes", "Paths per peer and family: received, accepted or advertised.", "peer", "family", "kind"),
		advertised:       n("advertisements", "Prefixes selected per peer, by state: sent (on the wire), pending (session down), not sent (family not negotiated) or held back (the peer's export cap, maxAdvertised) or drained (withdrawn by ovnbgp drain).", "peer", "state"),
		notApplied:       n("advertisements_not_applied", "Advertisements the speaker could not apply, per peer: each keeps its last good state, or is not sent if new.", "peer"),
		nbConnected:      n("northbound_connected", "1 when connected to the OVN Northbound DB."),
		reconciles:       n("reconciles_total", "Reconcile passes run."),
		lastReconcile:    n("last_reconcile_timestamp_seconds", "Unix time of the last reconcile."),
		reconcileFailing: n("reconcile_failing", "1 when the last reconcile left changes unapplied."),
		imported:         n("imported_routes", "Routes import rules want in each target: ovn (static route rows, one per next hop) or kernel (routes, multipath counted once).", "target"),
		importCap:        n("import_cap_reached", "1 while an import rule's maxRoutes holds back routes of a peer: nothing new is imported, the session stays up.", "rule", "peer"),
		rejected:         n("learned_rejected", "Learned paths not imported, per peer and reason: malformed, loop (our ASN in the AS path, or our router ID as ORIGINATOR_ID), noRule (no import rule lists the peer), noMatch (no accept entry), defaultRoute, protected, nextHop, importCap (held back by maxRoutes), stale (kept stale by the peer's graceful restart past what RFC 4724 allows).", "peer", "reason"),
		staleKept:        n("import_stale_kept", "Per peer and family with graceful restart negotiated: 1 while the peer's stale paths (its session ended gracefully, or it came back and has not sent End-of-RIB) are still imported, 0 when they are not.", "peer", "family"),
		staleUntil:       n("import_stale_until_timestamp_seconds", "Unix time until which a peer's stale paths stay imported at the latest (its restart time after the session ended, or stalePathTime after it came back); present while ovnbgp_import_stale_kept is 1.", "peer", "family"),
		exportCap:        n("export_cap_reached", "Per peer with maxAdvertised: 1 while the export cap holds back prefixes selected for the peer, else 0.", "peer"),
		drained:          n("drained", "1 while the peer is drained and its advertisements carry GRACEFUL_SHUTDOWN, 2 once they are withdrawn (ovnbgp drain); absent when not drained.", "peer"),
		bmpUp:            n("bmp_station_up", "1 while the BMP station (bmp.servers) is connected, 0 while ovnbgp dials it.", "station"),
		bfdUp:            n("peer_bfd_up", "1 while the peer's BFD session is up, 0 otherwise; absent when bfd.enabled is false.", "peer"),
		workloadRoutes:   n("workload_routes", "Host routes of pods and VMs (workloadIP rules) this node advertises, per network: each /32 and /128 once, whatever the peers.", "network"),
		workloadAddrs:    n("workload_addresses", "Addresses of pods and VMs whose ports NB shows on this node, per network and live-migration handover state: none, leaving (a migration away is under way), left (active on another node; advertised until the handover hold ends) or arriving (the target here is not active yet).", "network", "handover"),
		importPending:    n("import_operations_pending", "OVN and kernel operations not applied: manual (waiting for ovnbgp apply) or held (fail static, until End-of-RIB or deferralTime).", "kind"),
	}
	c.all = all
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.all {
		ch <- d
	}
}

func stateNumber(s model.SessionState) float64 {
	switch s {
	case model.StateIdle:
		return 1
	case model.StateConnect:
		return 2
	case model.StateActive:
		return 3
	case model.StateOpenSent:
		return 4
	case model.StateOpenConfirm:
		return 5
	case model.StateEstablished:
		return 6
	}
	return 0
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := c.d.status()
	g(c.info, 1, st.Version, st.Node)
	g(c.nbConnected, b2f(st.NB.Connected))
	ch <- prometheus.MustNewConstMetric(c.reconciles, prometheus.CounterValue, float64(st.Reconciles))
	if !st.LastReconcile.IsZero() {
		g(c.lastReconcile, float64(st.LastReconcile.Unix()))
	}
	g(c.reconcileFailing, b2f(st.LastError != ""))

	c.workloads(g)

	for _, b := range st.BMP {
		g(c.bmpUp, b2f(b.Up), b.Name)
	}

	for _, p := range st.Drained {
		v := 1.0
		if p.Phase == model.DrainWithdrawn {
			v = 2
		}
		g(c.drained, v, p.Peer)
	}

	if imp := st.Import; imp != nil {
		g(c.imported, float64(imp.OVN), "ovn")
		g(c.imported, float64(imp.Kernel), "kernel")
		g(c.importPending, float64(imp.Manual), "manual")
		g(c.importPending, float64(imp.Held), "held")
		c.d.mu.Lock()
		var alarms []plan.ImportAlarm
		if c.d.pl.imp.table != nil {
			alarms = c.d.pl.imp.table.Alarms()
		}
		c.d.mu.Unlock()
		for _, a := range alarms {
			g(c.importCap, 1, a.Rule, a.Peer)
		}
		c.d.mu.Lock()
		stale := c.d.pl.imp.stale
		c.d.mu.Unlock()
		for peer, fams := range stale {
			for f, w := range fams {
				if !w.Negotiated {
					continue
				}
				g(c.staleKept, b2f(w.Keep), peer, string(f))
				if w.Keep && !w.Until.IsZero() {
					g(c.staleUntil, float64(w.Until.Unix()), peer, string(f))
				}
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sp := c.d.currentSpeaker(); sp != nil {
		peers, _ := sp.Peers(ctx)
		for k, n := range c.d.importCounts(peers) {
			g(c.rejected, float64(n), k.Peer, string(k.Cause))
		}
		for _, p := range peers {
			g(c.up, b2f(p.State == model.StateEstablished), p.Name)
			g(c.peerState, stateNumber(p.State), p.Name)
			if p.BFD != nil {
				g(c.bfdUp, b2f(p.BFD.State == model.BFDUp), p.Name)
			}
			if !p.Since.IsZero() {
				g(c.peerSince, float64(p.Since.Unix()), p.Name)
			}
			for _, f := range p.Families {
				g(c.prefixes, float64(f.Received), p.Name, f.Family, "received")
				g(c.prefixes, float64(f.Accepted), p.Name, f.Family, "accepted")
				g(c.prefixes, float64(f.Advertised), p.Name, f.Family, "advertised")
			}
		}
		type peerState struct{ peer, state string }
		count := map[peerState]int{}
		for _, a := range sp.Advertised() {
			count[peerState{a.Peer, string(a.State)}]++
		}
		c.d.mu.Lock()
		held := c.d.held
		c.d.mu.Unlock()
		for peer, n := range held.caps.Counts() {
			count[peerState{peer, string(model.AdvHeldBack)}] += n
		}
		for peer, n := range held.drainN {
			if n > 0 {
				count[peerState{peer, string(model.AdvDrained)}] += n
			}
		}
		for k, n := range count {
			g(c.advertised, float64(n), k.peer, k.state)
		}
		for _, p := range c.d.config().BGP.Peers {
			if p.MaxAdvertised > 0 {
				g(c.exportCap, b2f(count[peerState{p.Name, string(model.AdvHeldBack)}] > 0), p.Name)
			}
		}
		failed := map[string]int{}
		for _, a := range sp.NotApplied() {
			failed[a.Peer]++
		}
		for peer, n := range failed {
			g(c.notApplied, float64(n), peer)
		}
	}
}

// workloads reports the workload host routes advertised and the workload
// addresses NB shows, per network.
func (c *collector) workloads(g func(*prometheus.Desc, float64, ...string)) {
	cfg := c.d.config()
	kinds := map[string]bool{}
	for _, r := range cfg.Advertise {
		if r.Kind == config.KindWorkloadIP {
			kinds[r.Name] = true
		}
	}
	if len(kinds) == 0 {
		return
	}
	routes := map[string]map[netip.Prefix]bool{}
	addrs := map[[2]string]int{}
	c.d.mu.Lock()
	if c.d.desired != nil {
		c.d.desired.Ascend(func(a *model.Advertisement) bool {
			if kinds[a.Rule] && len(a.Members) == 0 {
				if routes[a.Network] == nil {
					routes[a.Network] = map[netip.Prefix]bool{}
				}
				routes[a.Network][a.Prefix] = true
			}
			return true
		})
	}
	for _, w := range c.d.snapshot.WorkloadIPs {
		state := string(w.Handover)
		if state == "" {
			state = "none"
		}
		addrs[[2]string{w.Network, state}]++
	}
	c.d.mu.Unlock()
	for nw, ps := range routes {
		g(c.workloadRoutes, float64(len(ps)), nw)
	}
	for k, n := range addrs {
		g(c.workloadAddrs, float64(n), k[0], k[1])
	}
}

// loopMetrics are what the reconcile loop records as it runs.
type loopMetrics struct {
	duration prometheus.Histogram
	errors   prometheus.Counter
}

func newLoopMetrics() loopMetrics {
	return loopMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ovnbgp_reconcile_duration_seconds", Help: "Time each reconcile pass took (NB snapshot, plan, and applying it).",
			// 0.5 ms .. 16 s
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ovnbgp_reconcile_errors_total", Help: "Reconcile passes that left changes unapplied (each is retried with backoff).",
		}),
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectors are ovnbgp's own metrics (docs/metrics.md lists them; the Go
// runtime's and the process's come on top).
func (d *Daemon) collectors() []prometheus.Collector {
	return []prometheus.Collector{newCollector(d), d.loopMetrics.duration, d.loopMetrics.errors}
}

// serveMetrics serves Prometheus /metrics on addr.
func (d *Daemon) serveMetrics(addr string) (*server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(d.collectors()...)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// Any local user can scrape: a flood of scrapes gets 503s, not a
		// pile of collections each reading every peer.
		MaxRequestsInFlight: d.lim.metricsInFlight,
		Timeout:             d.lim.metricsTimeout,
		ErrorLog:            zap.NewStdLog(d.log.Named("metrics")),
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.address %s: %w (set metrics.address: \"\" to turn metrics off)", addr, err)
	}
	s := d.serve("metrics", ln, d.lim.metricsConns, mux)
	d.log.Info("metrics listening", zap.String("address", ln.Addr().String()))
	return s, nil
}
