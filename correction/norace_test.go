//go:build !race

package correction_test

const raceEnabled = false
