//go:build !race

package testmodels

const raceEnabled = false
