package stage

import (
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// The tests of this file drive evaluations: Data marked Eval, then
// Evaluate, answered Evaluated with the losses and the probed nodes, with
// nothing trained, kept or disturbed.

// TestEvaluateComputesPlainLosses: a stage given the data of three
// evaluation microbatches answers Evaluate with their losses — plain
// Gorgonia's forward on the current weights — and no probe, leaving its
// weights and version alone. The data of a training microbatch with the
// same number, given before, is not replaced by the evaluation's: the
// next step trains on it as plain Gorgonia does, and a later evaluation
// sees the new weights.
func TestEvaluateComputesPlainLosses(t *testing.T) {
	p := start(t, setup{})
	ref := p.reference(nil)
	eval := p.micros(31, 3)
	train := p.micros(32, 1)
	p.feed(0, train[0], false)
	for j, d := range eval {
		p.feed(j, d, true)
	}
	initial := p.pull(0)
	evaluate := func() []float64 {
		m := p.ask(0, Evaluate{Count: len(eval)})
		ev, ok := m.Body.(Evaluated)
		require.True(t, ok, "answered %T %+v", m.Body, m.Body)
		require.Empty(t, ev.Probes)
		require.Empty(t, m.Values)
		require.Len(t, ev.Losses, len(eval))
		for j, d := range eval {
			want, _, _ := ref.run(d)
			require.InDelta(t, want, ev.Losses[j], 1e-12, "evaluation microbatch %d", j)
		}
		return ev.Losses
	}
	before := evaluate()
	requireBits(t, initial, p.pull(0), "after the evaluation, weight")

	r := p.work(0, Segment{Schedule: "sequential"}, schedule.Forward(0), schedule.Backward(0), schedule.Update(0))
	want := ref.step(train)
	require.Len(t, r.Losses, 1)
	require.InDelta(t, want[0], r.Losses[0].Value, 1e-12, "the training data of microbatch 0")
	require.Equal(t, 1, r.Stats.Version)
	require.Equal(t, map[int]int{0: 1}, r.Stats.Delays, "an evaluation is no forward of the statistics")
	requireClose(t, ref.weights(), p.pull(0), 1e-12, "weight")

	for j, d := range eval {
		p.feed(j, d, true)
	}
	after := evaluate()
	require.NotEqual(t, before, after, "the evaluation reads the current weights")
}

// TestEvaluateAcrossStagesWithProbes: two stages given the evaluation data
// they read and the same Evaluate, probing a node of each stage and a
// learnable: stage 0 sends its outputs on to stage 1 (on the Inference
// queue) and answers with the values of its probe per microbatch and no
// loss; stage 1 with the losses and its probe's values; the learnable,
// computed by no stage, is nobody's. All are plain Gorgonia's values, and
// training afterwards is unaffected.
func TestEvaluateAcrossStagesWithProbes(t *testing.T) {
	const count = 2
	p := start(t, setup{stages: 2})
	k0 := p.plan.Stages[0].Outputs[0].Key
	k1 := p.plan.Stages[1].Nodes[0].ID()
	kw := p.plan.Learnables[0].ID()
	_, at := p.plan.Locate(k1)
	require.Equal(t, 1, at)
	ref := p.reference(nil, k0, k1)
	eval := p.micros(33, count)
	for j, d := range eval {
		p.feed(j, d, true)
	}
	for i := range p.plan.Stages {
		p.send(i, Evaluate{Count: count, Probes: []int64{k1, k0, kw}})
	}
	var wantLoss []float64
	var want0, want1 []gorgonia.Value
	for _, d := range eval {
		l, _, nodes := ref.run(d)
		wantLoss, want0, want1 = append(wantLoss, l), append(want0, nodes[0]), append(want1, nodes[1])
	}

	m := p.answer(0)
	ev, ok := m.Body.(Evaluated)
	require.True(t, ok, "stage 0 answered %T %+v", m.Body, m.Body)
	require.Empty(t, ev.Losses, "the first stage computes no loss")
	require.Equal(t, []int64{k0}, ev.Probes, "the probes stage 0 computes")
	requireClose(t, want0, m.Values, 1e-12, "stage 0's probe")

	m = p.answer(1)
	ev, ok = m.Body.(Evaluated)
	require.True(t, ok, "stage 1 answered %T %+v", m.Body, m.Body)
	require.Equal(t, []int64{k1}, ev.Probes)
	requireClose(t, want1, m.Values, 1e-12, "stage 1's probe")
	require.Len(t, ev.Losses, count)
	for j, l := range ev.Losses {
		require.InDelta(t, wantLoss[j], l, 1e-12, "evaluation microbatch %d", j)
	}

	train := p.micros(34, 1)
	r := p.steps(schedule.GPipe(), train, 0, 1)
	require.Equal(t, []int{0}, micros(r[1].Losses))
	require.InDelta(t, ref.step(train)[0], r[1].Losses[0].Value, 1e-12)
	requireClose(t, ref.weights(), p.weights(), 1e-12, "weight")
}

// TestEvaluateLeavesBatchNormAlone: on the test CNN, whose BatchNorm ops
// keep running statistics, an evaluation after a training step leaves the
// statistics and the weights (Pull) bit for bit as they were, gives the
// same losses twice, and normalises with the running statistics, not the
// batch's: a training forward of the same data has another loss. With
// KeepActivations (whose stage never compiled the plain forward the
// evaluation runs) the evaluation is the same.
func TestEvaluateLeavesBatchNormAlone(t *testing.T) {
	evaluated := map[bool]float64{}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			p := start(t, setup{build: testmodels.CNN, config: func(int) Config { return Config{KeepActivations: keep} }})
			require.Equal(t, keep, p.rts[0].keeping)
			require.NotEmpty(t, p.rts[0].bns)
			data := p.micros(35, 2)
			fresh := p.pull(0)
			p.feed(0, data[0], false)
			p.work(0, Segment{Schedule: "sequential"}, schedule.Forward(0), schedule.Backward(0), schedule.Update(0))
			before := p.pull(0)
			stats := len(p.plan.Stages[0].Learnables)
			require.NotEqual(t, floats(t, fresh[stats]), floats(t, before[stats]), "training moved the running mean")

			var losses []float64
			for range 2 {
				p.feed(0, data[1], true)
				m := p.ask(0, Evaluate{Count: 1})
				ev, ok := m.Body.(Evaluated)
				require.True(t, ok, "answered %T %+v", m.Body, m.Body)
				require.Len(t, ev.Losses, 1)
				losses = append(losses, ev.Losses[0])
				requireBits(t, before, p.pull(0), "after the evaluation, weight or statistic")
			}
			require.Equal(t, losses[0], losses[1], "evaluating twice gives the same loss")
			evaluated[keep] = losses[0]

			p.feed(1, data[1], false)
			r := p.work(0, Segment{Schedule: "sequential"}, schedule.Forward(1), schedule.Backward(1), schedule.Update(1))
			require.Len(t, r.Losses, 1)
			require.Greater(t, abs(r.Losses[0].Value-losses[0]), 1e-6, "training normalises with the batch's statistics")
			require.Equal(t, 2, r.Stats.Version)
		})
	}
	require.Equal(t, evaluated[false], evaluated[true])
}
