//go:build race

package asyncvm_test

// raceEnabled skips the recorded-weights check under the race detector: it
// trains 80 runs one after another and shares no concurrency with the
// determinism and fault tests, which do run under it.
const raceEnabled = true
