// Package vrf is ovnbgp's kernel target: it reads and writes the host's
// routing tables, VRF devices and policy-routing rules over netlink. It is
// the only package that imports github.com/vishvananda/netlink.
//
// The daemon uses exactly this API:
//
//	func Open(protocol int, log *zap.Logger, notify func()) (*Manager, error)
//	func OpenAt(ns netns.NsHandle, protocol int, log *zap.Logger, notify func()) (*Manager, error)
//	func (m *Manager) Snapshot() (model.Host, error)
//	func (m *Manager) Apply(ctx context.Context, ops []model.KernelOp) (applied []model.KernelOp, err error)
//	func (m *Manager) Close()
//
// Open keeps one long-lived netlink handle and one subscription each to
// route, link and address changes; protocol is kernel.routeProtocol (200 by
// default). OpenAt does the same inside another network namespace (tests).
// notify must not block: it is called on any route change in a table where
// ovnbgp has routes or that carries its protocol (so a route someone deleted
// is put back by the next reconcile), on every link and address change, and
// after a lost subscription was renewed (events may have been missed).
//
// Snapshot and Apply may be called from several goroutines (they take turns
// on the handle); neither may be called after Close.
//
// Snapshot returns every link (name, index, up, addresses with prefix
// length, VRF master), every VRF device with its table, every route that
// carries ovnbgp's protocol in any table (IPv4 and IPv6; a multipath route is
// one model.KernelRoute with several next hops, each with its device; IPv6
// multipath routes, which the kernel may report one next hop at a time, are
// merged), and every ip rule that carries ovnbgp's protocol (FRA_PROTOCOL).
// A route in a VRF's table names the VRF.
//
// Apply runs the operations in the given order (plan orders adds before
// deletes), goes on after a failed operation, and returns the operations
// really applied together with the joined errors, each naming its route, VRF
// or rule. The ownership rules of ARCHITECTURE.md hold:
//
//   - A route add or replace is refused when its key (table, prefix, metric
//     0; the kernel stores IPv6 metric 0 as 1024) is held by a route that is
//     not ovnbgp's ("table 100 already has 10.0.0.0/8 from protocol kernel:
//     not ovnbgp's, left alone"). Only ovnbgp's own routes are replaced. An
//     add of a key that is already ours replaces it, so Apply is idempotent.
//   - Every delete names ovnbgp's protocol, the table and the prefix, so a
//     foreign route with the same prefix is never removed. Deleting a route
//     that is already gone is not an error and is not reported as applied.
//   - Several next hops make one multipath route (IPv4 and IPv6).
//   - A VRF device add adopts an existing VRF of the same name and table
//     (nothing is changed), creates a missing one with its table and sets it
//     up, and is refused if a device of that name is not a VRF or has another
//     table. VRF devices are never deleted, nor are tables.
//   - ip rules are added and deleted with ovnbgp's protocol; a delete only
//     matches a rule carrying it.
package vrf
