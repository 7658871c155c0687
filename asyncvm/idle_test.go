package asyncvm

import (
	"testing"
	"time"

	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
)

// TestIdleSplitsTheWaiting: two stages in a chain. Stage 1's first forward
// waits 10 for stage 0's forward and 2 more for the activation to arrive;
// stage 0's backward waits for stage 1's, then for the gradient to come; a
// stage waits at a flush for the others; and the caller's pause between
// two calls counts for nothing.
func TestIdleSplitsTheWaiting(t *testing.T) {
	ev := func(op schedule.Op, m int, from, to time.Duration) Event {
		return Event{Action: schedule.Action{Op: op, Micro: m}, Start: from, End: to}
	}
	F, B, U, X := schedule.OpForward, schedule.OpBackward, schedule.OpUpdate, schedule.OpFlush
	events := [][]Event{
		{ev(F, 0, 0, 10), ev(F, 1, 10, 20), ev(B, 0, 40, 50), ev(B, 1, 55, 60), ev(U, 0, 60, 61), ev(X, 0, 61, 61), ev(F, 2, 70, 80)},
		{ev(F, 0, 12, 22), ev(B, 0, 25, 35), ev(F, 1, 35, 45), ev(B, 1, 45, 50), ev(U, 0, 50, 51), ev(X, 0, 51, 51), ev(F, 2, 90, 95)},
	}
	pause := func(from, to time.Duration) time.Duration { // the caller paused in [85, 88)
		return max(0, min(to, 88)-max(from, 85))
	}
	got := idle(events, schedule.Chain(2), pause)
	require.Equal(t, Idle{
		Dependency: 15, // B0 waits from 20 until stage 1's B0 ended at 35
		Latency:    5 + 5,
		Barrier:    9, // after the flush at 61
	}, got[0])
	require.Equal(t, Idle{
		Dependency: 10,                              // F0 waits for stage 0's F0 (0..10)
		Latency:    2 + 3,                           // then for its activation (10..12); B0 has no consumer to wait for (22..25)
		Barrier:    90 - 51 - 3 /* the pause */ - 0, // after the flush at 51
	}, got[1])
}
