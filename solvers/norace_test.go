//go:build !race

package solvers_test

const raceEnabled = false
