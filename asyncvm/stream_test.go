package asyncvm

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// source yields minibatches [0, steps) of d and counts how many it has
// handed out; failAt ≥ 0 yields an error instead of minibatch failAt.
type source struct {
	t      testing.TB
	m      *testmodels.Model
	d      data
	n      int
	steps  int
	failAt int
	read   int
}

func (s *source) seq() iter.Seq2[map[*gorgonia.Node]gorgonia.Value, error] {
	return func(yield func(map[*gorgonia.Node]gorgonia.Value, error) bool) {
		for k := 0; k < s.steps; k++ {
			s.read++
			if k == s.failAt {
				yield(nil, errors.New("the disk is gone"))
				return
			}
			if !yield(s.d.minibatch(s.t, s.m.Inputs, k, s.n), nil) {
				return
			}
		}
	}
}

// streamed trains a fresh MLP split fine with sched (and a warm-up) by one
// Stream over steps minibatches, returning the VM (flushed), the model and
// the losses in the order each got them.
func streamed(t *testing.T, sched schedule.Schedule, warmup, n, steps int) (*VM, *testmodels.Model, []float64) {
	m, vm := fineMLP(t, n, WithSchedule(sched), WithWarmup(warmup, schedule.OneFOneB()))
	src := &source{t: t, m: m, d: makeData(m, n*steps, 4), n: n, steps: steps, failAt: -1}
	var losses []float64
	err := vm.Stream(context.Background(), src.seq(), func(step int, loss float64) {
		require.Equal(t, len(losses), step, "losses come in step order")
		losses = append(losses, loss)
	})
	require.NoError(t, err)
	require.NoError(t, vm.Flush(context.Background()))
	return vm, m, losses
}

// TestStreamTrainsLikeStep: one Stream over the minibatches gives the same
// weights and the same losses, bit for bit, as a Step per minibatch, for
// an asynchronous schedule, a synchronous one and a warm-up switching from
// one to the other: streaming changes when work is handed out, never what
// runs.
func TestStreamTrainsLikeStep(t *testing.T) {
	const n, steps = 2, 9
	for _, c := range []struct {
		sched  schedule.Schedule
		warmup int
	}{{schedule.PipeMare(), 0}, {schedule.OneFOneB(), 0}, {schedule.PipeMare(), 3}} {
		t.Run(fmt.Sprintf("%s/warmup=%d", c.sched.Name, c.warmup), func(t *testing.T) {
			_, mStream, losses := streamed(t, c.sched, c.warmup, n, steps)

			m, err := testmodels.MLP(tensor.Float64, 4, 1)
			require.NoError(t, err)
			d := makeData(m, n*steps, 4)
			byStep, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(c.sched), WithWarmup(c.warmup, schedule.OneFOneB()))
			defer vm.Close()
			require.True(t, bitsEqual(byStep, mStream.LearnableValues()), "Stream and Step trained different weights")

			m2, err := testmodels.MLP(tensor.Float64, 4, 1)
			require.NoError(t, err)
			plan, err := graphsplit.Split(m2.Graph, m2.Cost, m2.Learnables, graphsplit.FineGrained())
			require.NoError(t, err)
			vm2, err := New(plan, WithMicrobatches(n), WithSchedule(c.sched), WithWarmup(c.warmup, schedule.OneFOneB()))
			require.NoError(t, err)
			defer vm2.Close()
			for k := 0; k < steps; k++ {
				loss, err := vm2.Step(context.Background(), d.minibatch(t, m2.Inputs, k, n))
				require.NoError(t, err)
				require.Equal(t, loss, losses[k], "step %d's loss", k)
			}
		})
	}
}

// TestStreamReadsAhead: by the time the caller hears a minibatch's loss,
// the driver has read the next minibatch from the source and handed the
// first stage its forwards, so the first stage never waits for the caller;
// and it has read at most readAhead beyond it, so the data held in flight
// is bounded.
func TestStreamReadsAhead(t *testing.T) {
	const n, steps = 2, 12
	m, vm := fineMLP(t, n, WithSchedule(schedule.PipeMare()))
	src := &source{t: t, m: m, d: makeData(m, n*steps, 4), n: n, steps: steps, failAt: -1}
	ahead := vm.readAhead()
	heard := 0
	err := vm.Stream(context.Background(), src.seq(), func(k int, _ float64) {
		heard++
		require.GreaterOrEqual(t, src.read, min(k+2, steps), "when step %d's loss came the source had handed out %d minibatches", k, src.read)
		require.LessOrEqual(t, src.read, k+1+ahead, "step %d: the driver read %d minibatches, more than %d ahead", k, src.read, ahead)
		if k+1 < steps {
			seg := vm.segs[len(vm.segs)-1]
			forwards := 0
			for _, a := range seg.lists[0][:seg.done[0]] {
				if a.Op == schedule.OpForward {
					forwards++
				}
			}
			require.GreaterOrEqual(t, forwards, (k+2)*n, "step %d: the first stage has been handed %d forwards, not yet those of step %d", k, forwards, k+1)
		}
	})
	require.NoError(t, err)
	require.Equal(t, steps, heard)
}

// TestStreamStopsAtASourceError: a source that fails trains the minibatches
// read before the failure, gives each of them its loss, returns the error
// naming the step, and leaves the VM usable: training goes on from there
// exactly as if the failing minibatch had come in a later call.
func TestStreamStopsAtASourceError(t *testing.T) {
	const n, steps, failAt = 2, 8, 5
	m, vm := fineMLP(t, n, WithSchedule(schedule.PipeMare()))
	d := makeData(m, n*steps, 4)
	src := &source{t: t, m: m, d: d, n: n, steps: steps, failAt: failAt}
	var got []int
	err := vm.Stream(context.Background(), src.seq(), func(step int, _ float64) { got = append(got, step) })
	require.ErrorContains(t, err, "the disk is gone")
	require.ErrorContains(t, err, fmt.Sprintf("step %d", failAt))
	require.Equal(t, []int{0, 1, 2, 3, 4}, got, "every minibatch read before the failure gets its loss")
	rest := []map[*gorgonia.Node]gorgonia.Value{}
	for k := failAt; k < steps; k++ {
		rest = append(rest, d.minibatch(t, m.Inputs, k, n))
	}
	_, err = vm.Run(context.Background(), rest)
	require.NoError(t, err)
	require.NoError(t, vm.Flush(context.Background()))

	ref, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	want, vm2 := pipelineTraining(t, ref, makeData(ref, n*steps, 4), n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.PipeMare()))
	defer vm2.Close()
	require.True(t, bitsEqual(want, m.LearnableValues()))
}

// TestStreamStopsWhenCancelled: a caller that cancels the context from
// each (a Ctrl-C handler, say) gets the context's error, however far the
// pipeline had got, never an internal one.
func TestStreamStopsWhenCancelled(t *testing.T) {
	const n, steps = 2, 8
	for stopAt := 0; stopAt < steps; stopAt++ {
		m, vm := fineMLP(t, n, WithSchedule(schedule.PipeMare()))
		src := &source{t: t, m: m, d: makeData(m, n*steps, 4), n: n, steps: steps, failAt: -1}
		ctx, cancel := context.WithCancel(context.Background())
		err := vm.Stream(ctx, src.seq(), func(step int, _ float64) {
			if step == stopAt {
				cancel()
			}
		})
		cancel()
		require.ErrorIs(t, err, context.Canceled, "cancelled at step %d", stopAt)
	}
}
