// Package ovn is ovnbgp's only door to the OVN Northbound database and the
// only package that imports libovsdb. No libovsdb type crosses its API: it
// hands out model.Snapshot and plain Go values.
//
// Dial returns a Client that connects in the background, monitors only the
// tables and columns ovnbgp reads, and reconnects with backoff. Snapshot
// builds this node's networks, gateway routers, egress IPs, Service VIPs,
// workload addresses (pods' and KubeVirt VMs' switch ports, read only for
// a workloadIP rule: config.OVN.Workloads), protected prefixes and owned
// static routes from the cached rows; once NB
// was synced, it keeps returning the last good view while NB is away (fail
// static). A row of unexpected shape is skipped, listed in Status and never
// breaks the rest. SnapshotDelta also says what changed since the caller's
// previous snapshot (model.SnapshotDelta): the cache events name their
// rows, readRows reads again only the load-balancer and NAT rows they named
// (of a changed router, only the difference of its nat set), and the
// Service VIPs, egress IPs and workload addresses are kept row by row
// (vipIndex, eipIndex, wlIndex), so
// one Service's or egress IP's change costs O(changed rows × log n) plus a
// copy of the lists touched, not a rebuild. ApplyRoutes is the only write: static routes carrying
// ovnbgp.io/owner=<node> on this node's gateway routers, and nothing else
// (docs/architecture.md, "Ownership markers").
//
// What is read and why: docs/architecture.md, "OVN Northbound: what is
// read", and docs/ovn-nb.md. The lab's NB writers and in-memory server are
// in ovn/labnb, a real ovsdb-server for tests in ovn/ovsdbtest;
// TestNoTestScaffoldingInProduction checks that the daemon imports neither.
package ovn
