// Package daemon wires ovnbgp together and runs its one reconcile loop. It
// loads the config, opens the control socket, connects to the OVN
// Northbound DB, starts the BGP speaker and opens the kernel target. Every
// source of change only pokes a size-1 channel; the loop then runs a pass:
// the planner (planner.go) reads what changed, lets package plan decide,
// and the loop applies the plan through the Speaker, Northbound and Host
// interfaces (the real ones in wire.go). `ovnbgp plan` shows the pass the
// loop applies next (nextpass.go). The package also serves the control API
// (package api), Prometheus metrics, and sd_notify readiness and watchdog,
// and handles reloads and the drain.
//
// The planner holds the rules of when to read and decide again: when an
// import pass must be full (fullWhy) and when a peer counts as synced for
// fail static (syncedPeers). docs/architecture.md describes the loop
// ("Data flow", "Route import", "Lifecycle").
package daemon
