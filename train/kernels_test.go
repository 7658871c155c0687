package train

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"gorgonia.org/gorgonia"
)

// fastOrSkip skips a test of the fast kernel mode where this process
// cannot run it (no AVX2 and FMA3, or the openblas build).
func fastOrSkip(t *testing.T) {
	release, err := graphsplit.HoldKernels(graphsplit.FastKernels)
	if err != nil {
		t.Skip(err)
	}
	release()
}

// fastSequential is a short synchronous run on one stage in the fast
// kernel mode.
func fastSequential() Config {
	return Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 1, LR: 0.03, Seed: 1}, Schedule: schedule.Sequential(), Stages: 1, Kernels: graphsplit.FastKernels}
}

// TestFastKernelsTrainDeterministically: in the fast kernel mode the same
// seed trains the same weights (the CNN, whose convolutions' products run
// A·Bᵀ and Aᵀ·B, and its dense layer): one stage on one CPU and on two
// (the kernels' products then split over two goroutines), and PipeMare
// on 2 stages twice; the fast mode's weights are not the exact mode's,
// whose hashes TestTrainingIsBitIdentical pins.
func TestFastKernelsTrainDeterministically(t *testing.T) {
	fastOrSkip(t)
	if testutil.RaceEnabled {
		t.Skip("results do not depend on the race detector; it only makes this slow")
	}
	train, test, err := testFashion()
	require.NoError(t, err)
	run := func(procs int, cfg Config) string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		res, err := Train(context.Background(), zoo.CNN, train.Head(128), test.Head(32), cfg)
		require.NoError(t, err)
		return res.WeightsSHA256
	}
	seq := fastSequential()
	one := run(1, seq)
	require.Equal(t, one, run(2, seq), "one CPU and two train the same weights")
	exact := seq
	exact.Kernels = ""
	require.NotEqual(t, one, run(1, exact), "the fast mode computes in its own order")
	async := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 1, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare(), Stages: 2, T1: 3, Kernels: graphsplit.FastKernels}
	require.Equal(t, run(2, async), run(2, async), "PipeMare on 2 stages, twice")
}

// TestTrainRefusesTheOtherKernelsAtOnce: while a run of the process
// computes in one kernel mode, a run in the other is refused before it
// trains, naming both modes.
func TestTrainRefusesTheOtherKernelsAtOnce(t *testing.T) {
	fastOrSkip(t)
	release, err := graphsplit.HoldKernels(graphsplit.ExactKernels)
	require.NoError(t, err)
	defer release()
	train, test, err := testFashion()
	require.NoError(t, err)
	cfg := fastSequential()
	_, err = Train(context.Background(), zoo.MLP, train.Head(64), test.Head(16), cfg)
	require.ErrorContains(t, err, "train: graphsplit: kernels fast wanted while a run of this process computes with kernels exact")
}

// TestResumeInTheOtherKernelsIsRefused: a checkpoint of a fast-mode run
// does not resume in the exact mode: the refusal names the setting and
// both values.
func TestResumeInTheOtherKernelsIsRefused(t *testing.T) {
	fastOrSkip(t)
	if testutil.RaceEnabled {
		t.Skip("training runs are skipped under the race detector")
	}
	train, test, err := testFashion()
	require.NoError(t, err)
	cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 2, Epochs: 1, LR: 0.03, Seed: 1}, Schedule: schedule.Sequential(), Stages: 1, Kernels: graphsplit.FastKernels,
		CheckpointEvery: 1, CheckpointDir: t.TempDir()}
	_, err = Train(context.Background(), zoo.MLP, train.Head(64), test.Head(16), cfg)
	require.NoError(t, err)
	exact := cfg
	exact.Kernels, exact.Resume, exact.CheckpointDir = "", cfg.CheckpointDir, t.TempDir()
	_, err = Train(context.Background(), zoo.MLP, train.Head(64), test.Head(16), exact)
	require.ErrorContains(t, err, "the checkpoint was taken by another run: kernels fast there, exact here")
	fast := exact
	fast.Kernels = graphsplit.FastKernels
	_, err = Train(context.Background(), zoo.MLP, train.Head(64), test.Head(16), fast)
	require.NoError(t, err, "the same mode resumes")
}

// TestFastKernelsComputeTheSameGradients: the CNN's gradients of one
// minibatch (plain Gorgonia's graph on a tape machine: every product
// through the BLAS) differ between the kernel modes by float32 rounding
// only — a relative L2 difference under 10⁻⁵ per learnable, where
// rounding errors that add up like a random walk over the longest sum
// (the second convolution's filter gradient, 16 images × 196 pixels =
// 3,136 terms) give √3136·2⁻²⁴ ≈ 3·10⁻⁶; measured 2–10·10⁻⁷. A product computed wrongly (a missed or doubled
// row, column or term) differs by far more. So what the modes train to
// differs as two roundings of one run do, not as two computations.
func TestFastKernelsComputeTheSameGradients(t *testing.T) {
	fastOrSkip(t)
	train, _, err := testFashion()
	require.NoError(t, err)
	var grads [2][][]float32
	for i, mode := range []graphsplit.Kernels{graphsplit.ExactKernels, graphsplit.FastKernels} {
		release, err := graphsplit.HoldKernels(mode)
		require.NoError(t, err)
		m, err := zoo.CNN(16, 1)
		require.NoError(t, err)
		_, err = gorgonia.Grad(m.Cost, m.Learnables...)
		require.NoError(t, err)
		idx := make([]int, 16)
		for j := range idx {
			idx[j] = j
		}
		x, y := train.Batch(m, idx)
		require.NoError(t, gorgonia.Let(m.X, x))
		require.NoError(t, gorgonia.Let(m.Y, y))
		vm := gorgonia.NewTapeMachine(m.Graph, gorgonia.BindDualValues(m.Learnables...))
		require.NoError(t, vm.RunAll())
		for _, l := range m.Learnables {
			g, err := l.Grad()
			require.NoError(t, err)
			grads[i] = append(grads[i], append([]float32(nil), g.Data().([]float32)...))
		}
		require.NoError(t, vm.Close())
		release()
	}
	for l := range grads[0] {
		var diff, norm float64
		for j, e := range grads[0][l] {
			d := float64(e - grads[1][l][j])
			diff += d * d
			norm += float64(e) * float64(e)
		}
		require.Less(t, math.Sqrt(diff/norm), 1e-5, "learnable %d", l)
	}
}
