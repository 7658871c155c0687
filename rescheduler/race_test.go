//go:build race

package rescheduler

// raceEnabled skips the theory tests under the race detector: they step a
// solver tens of thousands of times in one goroutine, which the detector
// makes 5 times slower (30 s of go test -race -short) and has nothing to
// check in; go test ./... runs them without it.
const raceEnabled = true
