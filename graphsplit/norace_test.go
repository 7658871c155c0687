//go:build !race

package graphsplit

const raceEnabled = false
