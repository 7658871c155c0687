package runout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/schedule"
)

// TestWriteSchedule: the grid, the utilization and an asynchronous
// schedule's delays; sizes out of range or beyond the bounds are refused
// before anything is written.
func TestWriteSchedule(t *testing.T) {
	var b strings.Builder
	require.NoError(t, WriteSchedule(&b, schedule.PipeMare(), 3, 2, 2, true))
	out := b.String()
	require.True(t, strings.HasPrefix(out, "pipemare, P=3, N=2, 2 minibatches (F forward, B backward, U update):\n"), out)
	require.Contains(t, out, schedule.Grid(schedule.PipeMare(), 3, 2, 2))
	require.Regexp(t, `utilization with equal action times: \d\.\d{3}; delays τ_i: 3 2 1\n$`, out)

	b.Reset()
	require.NoError(t, WriteSchedule(&b, schedule.GPipe(), 2, 2, 1, false))
	require.Regexp(t, `^utilization with equal action times: \d\.\d{3}\n$`, b.String(), "no grid, and a synchronous schedule has no delays")

	b.Reset()
	require.NoError(t, WriteSchedule(&b, schedule.ZBV(), 4, 3, 1, true))
	require.True(t, strings.HasPrefix(b.String(), "zb-v, P=4, N=3, 1 minibatches (F forward, I input gradient, W weight gradient, U update; 2 workers × 2 stages, F3@1: stage 1's forward of microbatch 3):\nclock  worker0  worker1\n"), b.String())
	b.Reset()
	require.ErrorContains(t, WriteSchedule(&b, schedule.ZBV(), 3, 3, 1, true), "schedule zb-v with stages 3 and microbatches 3: its workers host 2 stages each, and 3 is not a multiple of 2")
	require.Empty(t, b.String())

	for _, c := range []struct {
		p, n, steps int
		err         string
	}{
		{0, 1, 1, "stages 0: must be positive"},
		{1, 0, 1, "microbatches 0: must be positive"},
		{1, 1, -1, "minibatches -1: must be positive"},
		{100000, 100, 2, "stages 100000 × minibatches 2 × (2·microbatches 100 + 2) = 40400000 actions: more than the 5000000 this command simulates"},
		{2000, 1, 1, "cells, more than the 1000000 a printed grid holds; grid=false gives the utilization and delays"},
	} {
		b.Reset()
		require.ErrorContains(t, WriteSchedule(&b, schedule.PipeMare(), c.p, c.n, c.steps, true), c.err)
		require.Empty(t, b.String())
	}
}
