//go:build !race

package asyncvm_test

const raceEnabled = false
