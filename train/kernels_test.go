package train

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
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
