// Package daemon wires ovnbgp together and runs its one reconcile loop. It
// loads the config, opens the control socket, connects to the OVN
// Northbound DB, starts the BGP speaker and opens the kernel target. Every
// source of change only pokes a size-1 channel; the loop then reads
// everything again, lets package plan decide, and applies the plan through
// the Speaker, Northbound and Host interfaces (the real ones in wire.go).
// It also serves the control API (package api), Prometheus metrics, and
// sd_notify readiness and watchdog, and handles reloads and the drain.
//
// It is not free of rules yet. It decides when an import pass must be full
// (fullWhy) and when a peer counts as synced for fail static
// (syncedPeers). docs/architecture.md describes the loop ("Data flow",
// "Route import", "Lifecycle").
package daemon
