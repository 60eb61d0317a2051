//go:build !race

package bgp

// raceEnabled: see parallel.
const raceEnabled = false
