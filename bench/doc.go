// Package bench runs ovnbgp, FRR and BIRD on the same jobs against the same
// receiving router, an FRR "ToR": advertising (one change, bulk, at NB
// scale), importing into a kernel table, and idle cost.
//
// The code is in the package's _test.go files: Go benchmarks that build the
// end-to-end lab of test/e2e/lab (network namespaces, a real OVN Northbound
// ovsdb-server) and drive the node's speaker: the ovnbgp daemon (changes
// written to NB), FRR (vtysh, or frr.conf and frr-reload.py as frr-k8s and
// MetalLB do) or BIRD (birdc configure, as Calico does). They run only with
// OVNBGP_BENCH=1 and as root, through bench/run.sh (`make bench` runs its
// -compare jobs). TestContenderDriversSmoke, in `make test`, runs every
// contender's driver of every job once at tiny size, asserting no timing,
// so that they cannot rot. See bench/README.md and docs/benchmarks.md.
package bench
