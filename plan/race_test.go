//go:build race

package plan

// raceEnabled: the race detector's instrumentation allocates too, so
// byte bounds are not checked under it.
const raceEnabled = true
