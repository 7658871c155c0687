package solvers_test

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// pipemare is a stage's solver as PipeMare composes it: T1(T2(Momentum)),
// told a delay of 3 as the engine tells a stage.
func pipemare(t *testing.T) gorgonia.Solver {
	t.Helper()
	mom := must(solvers.NewMomentum(solvers.WithLearnRate(0.03), solvers.WithMomentum(0.9)))
	t2, err := correction.New(mom, correction.WithGammaFromD(0.1))
	require.NoError(t, err)
	t1, err := rescheduler.New(t2, rescheduler.WithBase(rescheduler.Cosine(0.03, 0.0003, 8)), rescheduler.WithPhase(5), rescheduler.UseMeasuredDelay())
	require.NoError(t, err)
	t1.SetDelay(3, false)
	return t1
}

// TestChainStateContinuesBitIdentically saves T1(T2(Momentum)) after k
// steps and loads it into a fresh chain, which continues bit-identically:
// the weights, every layer's state (T1's counts and rate, T2's δ and γ,
// the velocity) and T2's backward weights.
func TestChainStateContinuesBitIdentically(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	const k, n = 3, 8
	whole, first, rest := zooTrainee(t, "mlp", 16), zooTrainee(t, "mlp", 16), zooTrainee(t, "mlp", 16)
	// The engine reports the delay it measured after every update.
	measured := func(s gorgonia.Solver, step int) { s.(*rescheduler.Solver).SetDelay(2+float64(step%3)/2, true) }
	run := func(tr *trainee, s gorgonia.Solver, from, steps int) {
		for i := from; i < from+steps; i++ {
			tr.step(t, s, i, 1)
			measured(s, i)
		}
	}
	ws := pipemare(t)
	run(whole, ws, 0, n)

	fs := pipemare(t)
	run(first, fs, 0, k)
	states, err := solvers.Save(fs)
	require.NoError(t, err)
	require.Len(t, states, 3)
	require.Equal(t, []string{"rescheduler.Solver", "correction.Solver", "solvers.Momentum"}, []string{states[0].Kind, states[1].Kind, states[2].Kind})
	require.Empty(t, states[0].Tensors, "T1 saves none of the tensors it wraps")
	require.Len(t, states[1].Tensors, 6, "T2 saves its δ, not the velocity")
	require.Contains(t, states[1].Tensors, "delta/0")

	copyWeights(t, rest.learnables, first.learnables)
	rs := pipemare(t)
	require.NoError(t, solvers.Bind(rs, rest.model()))
	require.NoError(t, solvers.Load(rs, states))
	run(rest, rs, k, n-k)

	requireSameBits(t, bits(t, whole.learnables), bits(t, rest.learnables), rest.learnables, "resumed chain")
	require.Equal(t, snapshot(t, ws), snapshot(t, rs), "every layer's state")
	require.Equal(t, ws.(*rescheduler.Solver).Rate(), rs.(*rescheduler.Solver).Rate())
	wb, err := solvers.BackwardWeights(ws, 2)
	require.NoError(t, err)
	rb, err := solvers.BackwardWeights(rs, 2)
	require.NoError(t, err)
	require.Equal(t, wb, rb)
}

func TestChainLoadChecksEveryLayerAndChangesNothing(t *testing.T) {
	tr := zooTrainee(t, "mlp", 16)
	s := pipemare(t)
	tr.step(t, s, 0, 2)
	good := snapshot(t, s)

	target := pipemare(t)
	zooTrainee(t, "mlp", 16).step(t, target, 0, 1)
	before := snapshot(t, target)

	require.ErrorContains(t, solvers.Load(target, good[1:]), "2 states (correction.Solver > solvers.Momentum) for a solver of 3 layers (rescheduler.Solver > correction.Solver > solvers.Momentum)")
	swapped := []solvers.State{good[1], good[0], good[2]}
	require.ErrorContains(t, solvers.Load(target, swapped), "state 0 is a correction.Solver, layer 0 of the solver a rescheduler.Solver")
	// The last layer fails after the first two loaded: they are restored.
	bad := append([]solvers.State(nil), good...)
	bad[2] = solvers.State{Kind: bad[2].Kind, Ints: bad[2].Ints, Tensors: map[string]tensor.Tensor{}}
	for k, v := range good[2].Tensors {
		bad[2].Tensors[k] = v
	}
	bad[2].Tensors["velocity/0"] = tensor.New(tensor.WithShape(2, 2), tensor.Of(tensor.Float32))
	require.ErrorContains(t, solvers.Load(target, bad), "loading layer 2: solvers: solvers.Momentum state: velocity/0 is (2, 2) float32")
	require.Equal(t, before, snapshot(t, target), "a failed Load changes no layer")

	require.NoError(t, solvers.Load(target, good))
	require.Equal(t, good, snapshot(t, target))

	// Into a fresh chain, not bound to any model: the rolled-back layers
	// are fresh again, not bound to the shapes of the refused state.
	fresh := pipemare(t)
	before = snapshot(t, fresh)
	require.Empty(t, before[1].Tensors)
	missing := append([]solvers.State(nil), good...)
	missing[2] = solvers.State{Kind: good[2].Kind, Ints: good[2].Ints, Tensors: map[string]tensor.Tensor{}}
	for k, v := range good[2].Tensors {
		if k != "velocity/3" {
			missing[2].Tensors[k] = v
		}
	}
	require.ErrorContains(t, solvers.Load(fresh, missing), `loading layer 2: solvers: solvers.Momentum state: missing tensor "velocity/3"`)
	require.Equal(t, before, snapshot(t, fresh), "a failed Load leaves a fresh chain fresh")

	t2, err := correction.New(gorgonia.NewMomentum())
	require.NoError(t, err)
	_, err = solvers.Save(t2)
	require.ErrorContains(t, err, "layer 1 of *correction.Solver > *gorgonia.Momentum cannot save its state")
}

// TestCorrectionNeedsBindAfterLoad: a fresh T2 that loaded δ has no
// weights to extrapolate from until it is bound; it says so instead of
// silently handing the backward the current weights.
func TestCorrectionNeedsBindAfterLoad(t *testing.T) {
	tr := zooTrainee(t, "mlp", 16)
	s := pipemare(t)
	tr.step(t, s, 0, 2)
	states, err := solvers.Save(s)
	require.NoError(t, err)
	fresh := pipemare(t)
	require.NoError(t, solvers.Load(fresh, states))
	_, err = solvers.BackwardWeights(fresh, 2)
	require.ErrorContains(t, err, "call solvers.Bind(solver, model) after loading")
	require.NoError(t, solvers.Bind(fresh, tr.model()))
	bw, err := solvers.BackwardWeights(fresh, 2)
	require.NoError(t, err)
	want, err := solvers.BackwardWeights(s, 2)
	require.NoError(t, err)
	require.Equal(t, want, bw)
}
