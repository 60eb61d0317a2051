// Package bench measures how fast a change reaches a BGP peer's RIB through
// ovnbgp, and through FRR doing the same job, on the same receiving peer.
//
// The code is in the package's _test.go files: Go benchmarks that build the
// end-to-end lab of test/e2e/lab (network namespaces, a real OVN Northbound
// ovsdb-server, an FRR "ToR") and drive either the ovnbgp daemon (changes
// written to NB) or an FRR bgpd in the node namespace (changes given with
// vtysh, or with a rewritten frr.conf and frr-reload.py, as frr-k8s and
// MetalLB do). They run only with OVNBGP_BENCH=1 and as root; the one
// command is bench/run.sh. See bench/README.md and docs/benchmarks.md.
package bench
