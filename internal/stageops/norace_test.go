//go:build !race

package stageops

const raceEnabled = false
