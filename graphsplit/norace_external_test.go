//go:build !race

package graphsplit_test

const raceEnabled = false
