// Package doctor is `ovnbgp doctor`: preflight checks of a node, run with or
// without the daemon. Each check is a small function of the parsed config
// and an Env (the host's files under a root, the routing tables, the OVN
// Northbound database, HTTP to the EC2 instance metadata service, the
// daemon's control socket), and returns Results: an id, pass, warn, fail or
// skip, a one-line finding and the fix (a command or a config key).
//
// Tests give the checks a fake Env (fstest.MapFS for the files); Host is
// the real one. Nothing here writes to the host: the checks only read.
//
// Run's exit code is 0 when every check passed or was skipped, 1 when at
// least one warned and none failed, 2 when at least one failed.
package doctor
