// Package e2e holds ovnbgp's end-to-end tests: the ovnbgp binary runs as a
// daemon in a network namespace, reads a real OVN Northbound ovsdb-server and
// advertises to FRR in a second namespace; the tests check FRR's RIB and the
// CLI. The harness is in package lab. See README.md for what the suite needs.
package e2e
