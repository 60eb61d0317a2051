// Package labnb writes OVN-Kubernetes-shaped rows into an OVN Northbound
// database and serves one in memory, for `ovnbgp lab` and tests only. The
// daemon's read-only client (package ovn) never imports it: a test in
// package ovn checks that neither this package nor libovsdb's server is
// among its dependencies.
//
//   - MemoryServer is libovsdb's in-memory OVSDB server with the NB subset
//     of ovn/nbdb, on a unix socket.
//   - Switch, AddSwitch, AddSwitches, DeleteSwitch and Topology write rows as
//     OVN-Kubernetes does (the k8s.ovn.org/* external IDs that ovnbgp itself
//     never writes in production).
//   - Transact applies an OVSDB transaction given as JSON, the format of the
//     golden NB fixtures in ovn/testdata, to any NB (in memory or
//     ovsdb-server).
//
// libovsdb's server package sets stdr's verbosity to 5 in its init, which
// would make its in-memory database log every row to stderr. This package's
// init, which Go runs after that one, puts it back to 0, so a binary that
// links the lab logs as if it did not (TestImportKeepsLibovsdbQuiet).
package labnb

import "github.com/go-logr/stdr"

func init() {
	// Undo libovsdb/server's init (stdr.SetVerbosity(5)), once, before
	// main: only libovsdb logs through stdr in ovnbgp.
	stdr.SetVerbosity(0)
}
