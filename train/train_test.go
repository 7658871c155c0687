package train

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
)

// shortRun trains the MLP with PipeMare and T1+T2 on the first 192 images
// for two epochs (3 steps each), calling steps after every step.
func shortRun(t *testing.T, ctx context.Context, seed int64, steps func(done int)) (*Result, error) {
	train, test, err := testFashion()
	require.NoError(t, err)
	cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Seed: seed}, Schedule: schedule.PipeMare(), T1: 6, T2: 0.9, ProgressEvery: 1}
	if steps != nil {
		cfg.Steps = func(done, _ int) { steps(done) }
	}
	return Train(ctx, zoo.MLP, train.Head(192), test.Head(64), cfg)
}

// testFashion loads the embedded Fashion-MNIST subset once for the
// package's tests (8 s under the race detector).
func testFashion() (train, test *zoo.Dataset, err error) {
	fashionOnce.Do(func() { fashion.train, fashion.test, fashion.err = zoo.LoadFashionMNIST("embedded") })
	return fashion.train, fashion.test, fashion.err
}

var (
	fashionOnce sync.Once
	fashion     struct {
		train, test *zoo.Dataset
		err         error
	}
)

func jsonOf(t *testing.T, v any) map[string]any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	return doc
}

// TestWeightsSHA256OfARun: the same run twice trains bit-identical weights
// (the same hash), which differ from the initial weights; the hash is in
// the JSON.
func TestWeightsSHA256OfARun(t *testing.T) {
	a, err := shortRun(t, context.Background(), 1, nil)
	require.NoError(t, err)
	b, err := shortRun(t, context.Background(), 1, nil)
	require.NoError(t, err)
	m, err := zoo.MLP(16, 1)
	require.NoError(t, err)
	initial, err := (&graphsplit.Plan{Learnables: m.Learnables}).WeightsSHA256()
	require.NoError(t, err)
	require.Len(t, a.WeightsSHA256, 64)
	want, err := a.Plan.WeightsSHA256()
	require.NoError(t, err)
	require.Equal(t, want, a.WeightsSHA256, "the hash of the trained learnables")
	require.Equal(t, a.WeightsSHA256, b.WeightsSHA256, "the same seed trains the same weights")
	require.NotEqual(t, initial, a.WeightsSHA256, "training changed the weights")
	doc := jsonOf(t, a)
	require.Equal(t, a.WeightsSHA256, doc["weights_sha256"])
	require.Equal(t, "pipemare", doc["schedule"])
	require.Equal(t, a.Accuracy, doc["final_accuracy"])
	require.NotContains(t, doc, "interrupted")
}

// TestInterruptedEpoch: a run cancelled inside its second epoch keeps the
// first epoch whole and marks the second interrupted, with the loss of the
// steps that ran and no test accuracy; a run cancelled inside its first
// epoch has no final accuracy. Cancelling reads no further minibatch: the
// ones already handed to the pipeline train, the pipeline drains, and the
// result has the hash of those weights (the model an interrupted run
// writes) but no model accuracy.
func TestInterruptedEpoch(t *testing.T) {
	trainSet, test, err := testFashion()
	require.NoError(t, err)
	for _, c := range []struct {
		stopAt     int // steps into the run
		epochsDone int
	}{{13, 1}, {2, 0}} {
		ctx, cancel := context.WithCancel(context.Background())
		total := 0
		cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare(), T1: 6, T2: 0.9, ProgressEvery: 1}
		cfg.Steps = func(int, int) {
			if total++; total == c.stopAt {
				cancel()
			}
		}
		res, err := Train(ctx, zoo.MLP, trainSet.Head(640), test.Head(64), cfg) // 10 steps an epoch
		cancel()
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, res.Epochs, c.epochsDone+1)
		require.True(t, res.Interrupted)
		want, err := res.Plan.WeightsSHA256()
		require.NoError(t, err)
		require.Equal(t, want, res.WeightsSHA256, "the drained weights' hash")
		require.Zero(t, res.ModelAccuracy)
		last := res.Epochs[c.epochsDone]
		require.True(t, last.Interrupted)
		require.GreaterOrEqual(t, len(last.Losses), c.stopAt-10*c.epochsDone, "the steps before the cancel")
		require.Less(t, len(last.Losses), 10, "and not the rest of the epoch")
		mean := 0.0
		for _, l := range last.Losses {
			mean += l / float64(len(last.Losses))
		}
		require.Equal(t, mean, last.Loss, "the mean of the steps that ran")
		require.Positive(t, last.SamplesPerSec)

		doc := jsonOf(t, res)
		require.Equal(t, true, doc["interrupted"])
		require.NotContains(t, doc, "model_test_accuracy")
		epochs := doc["epochs"].([]any)
		require.NotContains(t, epochs[c.epochsDone], "test_accuracy", "an interrupted epoch has no accuracy")
		require.Equal(t, true, epochs[c.epochsDone].(map[string]any)["interrupted"])
		if c.epochsDone == 0 {
			require.NotContains(t, doc, "final_accuracy")
			continue
		}
		require.Contains(t, epochs[0], "test_accuracy")
		require.NotContains(t, epochs[0], "interrupted")
		require.Equal(t, res.Epochs[0].Accuracy, res.Accuracy, "the last complete epoch's")
		require.Equal(t, res.Accuracy, doc["final_accuracy"])
	}
}

// TestTrainRefusesZeroSteps: a training set smaller than one minibatch
// would train nothing.
func TestTrainRefusesZeroSteps(t *testing.T) {
	train, test, err := testFashion()
	require.NoError(t, err)
	_, err = Train(context.Background(), zoo.MLP, train.Head(10), test.Head(200), Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 1, LR: 0.03}})
	require.ErrorContains(t, err, "10 training examples make no minibatch of 4 microbatches × 16")
}

// TestTrainRefusesARunTooLong: a run of more than MaxSteps steps is
// refused before it trains, with the most epochs it can have.
func TestTrainRefusesARunTooLong(t *testing.T) {
	train, test, err := testFashion()
	require.NoError(t, err)
	_, err = Train(context.Background(), zoo.MLP, train.Head(640), test.Head(200), Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 100_000_000, LR: 0.03}})
	require.ErrorContains(t, err, "train: epochs 100000000: 100000000 epochs of 10 steps are more than the 10000000 steps a run can train")
	require.ErrorContains(t, err, "give at most 1000000")
}

// TestTrainingIsBitIdentical pins the weights two short CNN runs train
// (BatchNorm, PipeMare with a warm-up, T1 and T2; the sequential
// schedule) to their SHA-256 as measured before the changes that were not
// meant to change results (the command line's, the report's, T1's
// required WithPhase). A change that moves one bit of one weight fails it;
// one meant to change results updates the hashes and says why. The hashes
// are amd64's (other architectures may fuse multiply-adds).
func TestTrainingIsBitIdentical(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the hashes are amd64's")
	}
	if testutil.RaceEnabled {
		t.Skip("results do not depend on the race detector; it only makes this slow")
	}
	train, test, err := testFashion()
	require.NoError(t, err)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Cosine: true, Seed: 1}, Schedule: schedule.PipeMare(), T1: 3, T2: 0.9, Warmup: 3},
			"30959429dc322b4947ae4c557f4731e8061f9bf2b98e897fb2ae555beee1a55c"},
		{Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Cosine: true, Seed: 1}, Schedule: schedule.Sequential()},
			"9fc069263ca1e4f2c08f32231f84315fb5d99f7cd3a920a1d2d358715f33418e"},
	} {
		res, err := Train(context.Background(), zoo.CNN, train.Head(192), test.Head(64), c.cfg)
		require.NoError(t, err)
		require.Equal(t, c.want, res.WeightsSHA256, c.cfg.Schedule.Name)
	}
}

// TestCutsMovingWeightlessOpsTrainTheSameWeights: the zoo CNN cut into 2
// stages before its second convolution's im2col (FineGrained's boundary),
// or one or two ops later, right before the second layer's weights — the
// im2col and its reshape stay in the earlier stage, which then sends the
// patches — trains the same weights asynchronously: every learnable, and
// with it every weight's delay, stays in its stage, and the moved ops are
// linear (their gradient reads no value of their input). A nonlinear op
// moved across a cut is another matter
// (TestMovingAMaxPoolAcrossACutChangesAsynchronousWeights).
func TestCutsMovingWeightlessOpsTrainTheSameWeights(t *testing.T) {
	boundary, train, test := cnnBoundary(t)
	var want string
	var sent []int64
	for _, cut := range []int{boundary, boundary + 1, boundary + 2} {
		cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Cosine: true, Seed: 1},
			Schedule: schedule.PipeMare(), T1: 3, T2: 0.9, Warmup: 3, Cut: []int{cut}, Stages: 2}
		res, err := Train(context.Background(), zoo.CNN, train.Head(192), test.Head(64), cfg)
		require.NoError(t, err, "cut %d", cut)
		if want == "" {
			want = res.WeightsSHA256
		}
		require.Equal(t, want, res.WeightsSHA256, "cut before op %d against %d", cut, boundary)
		sent = append(sent, res.Plan.Stages[0].Cost.OutBytes)
	}
	require.Less(t, sent[0], sent[2]/4, "FineGrained's cut sends the pooled map, not the patches")
}

// cnnBoundary returns where FineGrained cuts the zoo CNN into 2 stages
// (before its second convolution's im2col), and the training and test
// data of the tests that move that cut. It skips under the race detector:
// results do not depend on it, it only makes these runs slow.
func cnnBoundary(t *testing.T) (int, *zoo.Dataset, *zoo.Dataset) {
	t.Helper()
	if testutil.RaceEnabled {
		t.Skip("results do not depend on the race detector; it only makes this slow")
	}
	m, err := zoo.CNN(16, 1)
	require.NoError(t, err)
	fine, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained(), graphsplit.Stages(2))
	require.NoError(t, err)
	defer fine.Close()
	train, test, err := testFashion()
	require.NoError(t, err)
	return fine.Cuts()[0], train, test
}

// TestMovingAMaxPoolAcrossACutChangesAsynchronousWeights: the zoo CNN cut
// one op before FineGrained's boundary puts the first layer's max-pool in
// the later stage. Sequentially that trains the same weights; with
// PipeMare, recomputing (the recipes' default), it trains others, and
// rightly: a stage's backward recomputes its forward from the inputs it
// received, and a max-pool's gradient goes to the argmax of its input —
// computed, in the earlier stage, with the weights of the backward; in the
// later stage, from the activation the earlier stage sent, computed with
// the older weights of the forward. Only ops whose gradient reads no value
// of their input (im2col, reshapes) move across a cut without changing an
// asynchronous run's weights.
func TestMovingAMaxPoolAcrossACutChangesAsynchronousWeights(t *testing.T) {
	boundary, train, test := cnnBoundary(t)
	hyper := zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Cosine: true, Seed: 1}
	weights := func(cfg Config, cut int) string {
		cfg.Hyper, cfg.Cut, cfg.Stages = hyper, []int{cut}, 2
		res, err := Train(context.Background(), zoo.CNN, train.Head(192), test.Head(64), cfg)
		require.NoError(t, err, "cut %d", cut)
		require.Len(t, res.Plan.Stages[0].Learnables, 3, "cut %d: the first layer's learnables in stage 0", cut)
		return res.WeightsSHA256
	}
	seq := Config{Schedule: schedule.Sequential()}
	require.Equal(t, weights(seq, boundary), weights(seq, boundary-1), "sequentially the cut changes no weight")
	async := Config{Schedule: schedule.PipeMare(), T1: 3, T2: 0.9, Warmup: 3}
	require.NotEqual(t, weights(async, boundary), weights(async, boundary-1), "the max-pool's argmax on the forward's or the backward's activations")
}

// TestMovingAReLUAcrossACutChangesNoWeightKeeping: the zoo CNN cut before
// its first layer's Rectify, so that the Rectify and the max-pool run in the
// later stage, trains under PipeMare keeping activations the same weights
// as cut at FineGrained's boundary. Keeping, every gradient reads what the
// forward computed: the ReLU's mask and the max-pool's argmax are the
// forward's on either side of the cut, and so is the scale the BatchNorm's
// gradient multiplies by. (The BatchNorm remains a stage op whose stage
// keeps, with its scale and bias but without the Rectify.)
func TestMovingAReLUAcrossACutChangesNoWeightKeeping(t *testing.T) {
	boundary, train, test := cnnBoundary(t)
	hyper := zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Cosine: true, Seed: 1, KeepActivations: true}
	weights := func(cut int) string {
		cfg := Config{Schedule: schedule.PipeMare(), T1: 3, T2: 0.9, Warmup: 3, Hyper: hyper, Cut: []int{cut}, Stages: 2}
		res, err := Train(context.Background(), zoo.CNN, train.Head(192), test.Head(64), cfg)
		require.NoError(t, err, "cut %d", cut)
		require.Len(t, res.Plan.Stages[0].Learnables, 3, "cut %d: the first layer's learnables in stage 0", cut)
		require.True(t, res.Plan.CanKeep(0), "cut %d: stage 0 keeps", cut)
		return res.WeightsSHA256
	}
	// The layer ends bias +, Rectify's ≥ and ⊙, max-pool: 3 ops before the
	// boundary is the Rectify's first.
	require.Equal(t, weights(boundary), weights(boundary-3), "the Rectify and the max-pool in stage 1")
}
