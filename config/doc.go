// Package config turns ovnbgp's YAML file into a typed Config (netip types,
// durations), fills defaults and validates it, reporting every problem at once
// with its key path and line. It also says where NB is (OVN.Target: the
// configured endpoints, or the node's sockets to look for before each
// attempt), so that the daemon, doctor and config validate agree. It imports
// no gobgp, libovsdb or netlink code. The keys are a contract
// (docs/architecture.md, "Config keys"); docs/config.md documents each one.
package config
