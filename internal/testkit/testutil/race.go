//go:build race

package testutil

// RaceEnabled reports whether the tests run under the race detector:
// trainings that only check numerics skip then, as the detector makes
// them ten times slower without touching any concurrency they do not share
// with the engine's own tests.
const RaceEnabled = true
