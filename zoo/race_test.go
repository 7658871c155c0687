//go:build race

package zoo

// raceEnabled skips the accuracy runs under the race detector, which makes
// them ten times slower without touching any concurrency they do not share
// with the asyncvm tests.
const raceEnabled = true
