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
//	func (m *Manager) TakeChanges() model.HostChanges
//	func (m *Manager) Routes(keys []model.KernelRouteKey) (ours []model.KernelRoute, foreign []model.KernelRouteKey, err error)
//	func (m *Manager) Close()
//
// `ovnbgp doctor` uses Probe (OpenProbe, OpenProbeAt: RouteTo, VRFs,
// TableProtocols): one-shot, read-only lookups without cache or
// subscription.
//
// Open keeps one long-lived netlink handle and one subscription each to
// route, link and address changes; protocol is kernel.routeProtocol (200 by
// default). OpenAt does the same inside another network namespace (tests).
// notify must not block: it is called on any route change in a table where
// ovnbgp has routes or that carries its protocol (so a route someone deleted
// is put back by the next reconcile), on every link and address change, and
// after a lost subscription was renewed (events may have been missed).
//
// Snapshot, Apply, TakeChanges and Routes may be called from several
// goroutines; none may be called after Close.
//
// The manager keeps a route cache: every route of ovnbgp's protocol in any
// table, and every route of every table but local, main and default (for
// the foreign keys). One dump fills it at Open; route events keep it (its
// own subscription socket, 8 MiB receive buffer); ovnbgp's own writes
// update it at once (their echoes then change nothing); an event that does
// not apply cleanly (several IPv4 routes at a key, an IPv6 next hop of
// another protocol joining a route, a delete of an unknown route) re-reads
// its table; a link or address event that may have flushed routes through
// a device cached routes use re-reads everything; so does a lost
// subscription (socket overflow), which is renewed. Snapshot, Routes and
// Apply first sync: an NLMSG_NOOP with NLM_F_ACK on the subscription
// socket, whose ack the kernel queues behind the events already queued, so
// they see every change made before they were called.
//
// TakeChanges returns what changed since its previous call and starts
// over: the keys (table, prefix) whose routes changed, each once, by an
// event in a watched table (where ovnbgp has or had routes, wrote, or was
// asked about by Routes) or of ovnbgp's protocol, or by ovnbgp's own write;
// Links after a link, address or VRF change; All after a lost
// subscription (events may have been missed). Routes answers from the
// cache: ovnbgp's routes at those keys (metric 0; 1024 for IPv6) and the
// keys held by routes not ovnbgp's (never in local, main and default); the
// tables asked about are watched from then on. Snapshot serves its routes
// and foreign keys from the cache too, and reads the links again only after
// a link or address event.
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
// deletes; route operations go in batches of up to 256 requests per
// sendmsg, each acked on its own and matched by sequence number; VRF and
// rule operations one at a time), goes on after a failed operation, and returns the operations
// really applied together with the joined errors, each naming its route, VRF
// or rule. The ownership rules of ARCHITECTURE.md hold:
//
//   - A route add or replace is refused when its key (table, prefix, metric
//     0; the kernel stores IPv6 metric 0 as 1024) is held by a route that is
//     not ovnbgp's ("table 100 already has 10.0.0.0/8 from protocol kernel:
//     not ovnbgp's, left alone"). Only ovnbgp's own routes are replaced. An
//     add of a key that is already ours replaces it, so Apply is idempotent.
//     An add is create-exclusive; only when the kernel says the key is
//     taken is it looked up (one dump per table of a batch's refused adds).
//     A replace consults the cache: ours is replaced, a foreign key is
//     refused, a free key is created exclusively.
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
