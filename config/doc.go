// Package config turns ovnbgp's YAML file into a typed Config (netip types,
// durations), fills defaults and validates it, reporting every problem at once
// with its key path and line. It imports no gobgp, libovsdb or netlink code.
package config
