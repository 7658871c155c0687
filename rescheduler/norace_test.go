//go:build !race

package rescheduler

const raceEnabled = false
