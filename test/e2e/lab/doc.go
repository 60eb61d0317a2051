// Package lab is ovnbgp's end-to-end test harness: a pair of network
// namespaces joined by a veth ("node" and "tor"), the provider's router in
// the tor namespace (FRR; BIRD or gobgpd for the peer matrix), a real OVN
// Northbound ovsdb-server populated with an OVN-Kubernetes-like topology,
// and the ovnbgp binary running as a daemon in the node namespace.
//
// Everything a test starts is tied to it with t.Cleanup and is stopped by PID:
// processes inside the namespaces the test created, then the namespaces, then
// the test's directory. Nothing else on the host is touched.
//
// The harness needs root, FRR, OVN and iproute2 (scripts/test-deps.sh installs
// them). Without them tests skip, except when CI=true, where a missing
// prerequisite fails the test: CI must not silently skip end-to-end tests.
package lab
