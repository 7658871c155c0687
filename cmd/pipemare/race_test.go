//go:build race

package main

// raceEnabled skips the tests that start processes under the race
// detector: each would be a race-built test binary, ten times slower,
// exercising no concurrency the in-process tests do not.
const raceEnabled = true
