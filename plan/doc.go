// Package plan computes what ovnbgp wants the world to look like from the
// config and the snapshots of OVN and BGP, and the difference to what is there.
// It is pure: no I/O and no gobgp, libovsdb or netlink types, so every rule
// is table-tested.
package plan
