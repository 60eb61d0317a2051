// Package daemon wires ovnbgp together: it loads the config, connects to the
// OVN Northbound DB and starts the BGP speaker, and runs one level-triggered
// reconcile loop. Every source of change (an NB cache event, a BGP peer or
// path event, SIGHUP, a periodic resync, a retry after a failed apply) only
// pokes a size-1 signal channel; the loop then re-reads everything, computes
// the desired state with package plan, and hands it to the speaker. It also
// serves the control API (package api) on a unix socket, Prometheus metrics,
// and sd_notify readiness and watchdog. It holds no business rules.
package daemon
