// Package vrf is ovnbgp's kernel target: the host's routing tables, VRF
// devices and ip rules, over netlink. It is the only package that imports
// github.com/vishvananda/netlink.
//
// Manager (Open, OpenAt for another network namespace) keeps a route
// cache fed by netlink events. Snapshot returns the links, the VRFs and
// everything carrying ovnbgp's route protocol (kernel.routeProtocol, 200
// by default); Routes answers for given keys; TakeChanges says what changed
// since its previous call; Apply writes model.KernelOps in batches, goes on
// after a failed one and returns what was really applied. Every route and
// rule it writes carries the protocol, every delete names it, a key held by
// another protocol is never written, and no VRF or table is ever deleted.
// Probe gives `ovnbgp doctor` one-shot, read-only lookups.
//
// The ownership rules, the batching, the cache and its sync with the
// event stream: docs/kernel.md.
package vrf
