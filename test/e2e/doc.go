// Package e2e holds ovnbgp's end-to-end tests: the ovnbgp binary runs as a
// daemon in a network namespace, reads a real OVN Northbound ovsdb-server,
// and advertises to and imports from real peers in a second namespace (FRR,
// and in the peer matrix BIRD and gobgpd too); the tests check the peers'
// RIBs, NB, the kernel and the CLI. The harness is in package lab, the soak
// judge in package soak. See README.md for what the suite needs.
package e2e
