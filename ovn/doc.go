// Package ovn is ovnbgp's only door to the OVN Northbound database and the
// only package that imports libovsdb. No libovsdb type crosses its API: it
// hands out model.Snapshot and plain Go values.
//
// Reading. Dial returns a Client that connects in the background, keeps a
// libovsdb monitor on the few columns ovnbgp needs (Logical_Switch name,
// external_ids, other_config; Logical_Router_Port name, networks;
// Logical_Router name, external_ids, static_routes, nat;
// Logical_Router_Static_Route ip_prefix, nexthop, output_port,
// external_ids; Load_Balancer name, vips, external_ids; NAT type,
// external_ip, logical_ip, external_ids) and reconnects with exponential backoff
// (250ms doubling to 30s) while the database is away. Every change of the
// monitored rows and every connect or disconnect calls the caller's notify
// function; the caller re-reads with Snapshot, which builds this node's
// networks from the rows (see build for the OpenShift/OVN-Kubernetes naming
// rules it follows). For import, Snapshot also gives this node's gateway
// routers, the protected prefixes NB holds and the static routes ovnbgp
// owns (buildImport).
//
// Writing. ApplyRoutes is the only write: it adds, changes and deletes
// static routes carrying ovnbgp.io/owner=<node> on this node's gateway
// routers, and nothing else (ARCHITECTURE.md, "Ownership markers"). Each
// ownership check against the cache is repeated by an OVSDB wait inside
// the same transaction, so a row someone else changed meanwhile is never
// written.
//
// Fail static. Once a first full sync has happened, Snapshot keeps
// returning the last good view with ok=true while the database is
// disconnected, so the daemon never withdraws routes just because NB went
// away; Connected and Status say whether the view is live.
//
// Bad rows. A row of unexpected shape (a CIDR that does not parse, host bits
// set, a default route, a prefix of the wrong family for its column, a node
// switch without a subnet, two rows with one name) is skipped and
// never breaks the rest of the snapshot. A pod subnet, egress IP or Service
// VIP in special-purpose address space (model.SpecialPurposeOverlap), and
// a pod subnet holding a node address, are left out of what is advertised
// (special.go), the rest of the row kept. Each distinct problem is logged once
// when it appears and once when it goes away, and the current list is in
// Status().Problems.
//
// This package holds no test scaffolding: the lab's writers and libovsdb's in-memory server live in
// ovn/labnb (for `ovnbgp lab` and tests), the ovsdbtest sub-package runs a
// real ovsdb-server for tests, and the OVN-Kubernetes names both sides use
// are in ovn/internal/ovnk. TestNoTestScaffoldingInProduction checks that
// neither this package nor the daemon depends on them.
package ovn
