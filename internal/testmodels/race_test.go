//go:build race

package testmodels

// raceEnabled skips, under the race detector, the tests that only check
// numerics in one goroutine: the detector makes them about 5 times slower
// and has nothing to check in them; go test ./... runs them without it.
const raceEnabled = true
