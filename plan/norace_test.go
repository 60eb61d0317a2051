//go:build !race

package plan

// raceEnabled: see race_test.go.
const raceEnabled = false
