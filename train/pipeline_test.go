package train

import (
	"context"
	"testing"
	"time"

	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/stretchr/testify/require"
)

// TestServeStageTrainsLikeTrain: a driver (Train with Connect) and one
// ServeStage per stage, each building the model and the plan on its own
// as separate processes do, here joined by the in-process transport,
// train the same weights as Train alone — with a warm-up, T1 and T2 —
// and every stage returns nil once the driver stopped it.
func TestServeStageTrainsLikeTrain(t *testing.T) {
	train, test, err := testFashion()
	require.NoError(t, err)
	data, eval := train.Head(192), test.Head(64)
	cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare(), T1: 3, T2: 0.9, Warmup: 3}
	alone, err := Train(context.Background(), zoo.MLP, data, eval, cfg)
	require.NoError(t, err)

	const stages = 3
	net := transport.NewLocal(stages)
	defer net.Close()
	served := make(chan error, stages)
	for i := 0; i < stages; i++ {
		go func() {
			served <- ServeStage(context.Background(), zoo.MLP, data, cfg, i, func(_ context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
				require.Len(t, plan.Stages, stages)
				return net.Endpoint(transport.Peer(i)), nil
			})
		}()
	}
	driven := cfg
	driven.Connect = func(context.Context, *graphsplit.Plan) (transport.Endpoint, error) {
		return net.Endpoint(transport.Driver), nil
	}
	res, err := Train(context.Background(), zoo.MLP, data, eval, driven)
	require.NoError(t, err)
	require.Equal(t, alone.WeightsSHA256, res.WeightsSHA256)
	require.Equal(t, alone.Accuracy, res.Accuracy)
	for range stages {
		require.NoError(t, <-served)
	}
	err = ServeStage(context.Background(), zoo.MLP, data, cfg, stages, nil)
	require.ErrorContains(t, err, "train: stage 3: the plan has stages 0..2")
}

// TestServeStageTakesTheProcessOptions: the options given to ServeStage
// reach the stage's engine: a driver that connects and sends nothing ends
// the stage after the first-order timeout given, with an error naming it.
func TestServeStageTakesTheProcessOptions(t *testing.T) {
	train, _, err := testFashion()
	require.NoError(t, err)
	cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 1, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare(), Stages: 2}
	net := transport.NewLocal(2)
	defer net.Close()
	err = ServeStage(context.Background(), zoo.MLP, train.Head(64), cfg, 0, func(context.Context, *graphsplit.Plan) (transport.Endpoint, error) {
		return net.Endpoint(0), nil
	}, asyncvm.WithFirstOrderTimeout(time.Millisecond))
	require.ErrorContains(t, err, "sent no order within 1ms")
}

// TestPredictionsAreWhatAccuracyCounts: one prediction per test example,
// in order, the padded rows of the last chunk left out, and Accuracy is
// the fraction of them that are right.
func TestPredictionsAreWhatAccuracyCounts(t *testing.T) {
	_, test, err := testFashion()
	require.NoError(t, err)
	m, err := zoo.MLP(16, 3)
	require.NoError(t, err)
	e, err := NewEvaluator(m)
	require.NoError(t, err)
	defer e.Close()
	d := test.Head(50) // 3 chunks of 16 and a padded one
	ps, err := e.Predictions(d)
	require.NoError(t, err)
	require.Len(t, ps, 50)
	right := 0
	for i, p := range ps {
		require.Equal(t, i, p.Example)
		require.Zero(t, p.Position)
		_, y := d.Batch(m, []int{i})
		require.Equal(t, float32(1), y.Data().([]float32)[p.Target], "example %d: the target is its label", i)
		if p.Predicted == p.Target {
			right++
		}
	}
	acc, err := e.Accuracy(d)
	require.NoError(t, err)
	require.Equal(t, float64(right)/50, acc)
}

// TestModelsAreBuiltOneAtATime: Trains and ServeStages of one process may
// start together (as TestServeStageTrainsLikeTrain's stages and driver do);
// the race detector finds Gorgonia's group counter shared by models built
// at once, unless split builds them one at a time.
func TestModelsAreBuiltOneAtATime(t *testing.T) {
	cfg := Config{Hyper: zoo.Hyper{Microbatch: 4, Microbatches: 2, Epochs: 1, LR: 0.1, Seed: 1}}
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			_, _, err := cfg.Split(zoo.CNN)
			errs <- err
		}()
	}
	for range cap(errs) {
		require.NoError(t, <-errs)
	}
}

// TestBalancedCutIsReproduced: Balanced measures a cut of the CNN into 2
// stages, and a run given that cut (Config.Cut) cuts the model there, into
// 2 stages, whatever it measures itself.
func TestBalancedCutIsReproduced(t *testing.T) {
	r, err := zoo.RecipeFor("cnn")
	require.NoError(t, err)
	train, _, err := r.Load("embedded", 64)
	require.NoError(t, err)
	cfg := Config{Hyper: r.Run}
	cfg.Stages = 2
	cut, bal, err := Balanced(r.Build, train, cfg)
	require.NoError(t, err)
	require.Len(t, cut, 1)
	require.Len(t, bal.Times, 2)
	cfg.Cut = cut
	_, plan, err := cfg.Split(r.Build)
	require.NoError(t, err)
	defer plan.Close()
	require.Equal(t, cut, plan.Cuts())
	require.Nil(t, plan.Balance, "a recorded cut is not measured again")

	cfg.Stages = 0
	_, _, err = Balanced(r.Build, train, cfg)
	require.ErrorContains(t, err, "give a number of stages")
}

// TestZBVCutBalancesItsWorkers: a schedule whose workers host several
// stages (zb-v: stages 0 and 3 on one worker, 1 and 2 on the other) is cut
// so that the busier worker is as light as it can be, by the estimate
// (every host cuts alike) and measured (Balanced, which says which worker
// runs each stage); a schedule of a stage per worker is cut as before.
func TestZBVCutBalancesItsWorkers(t *testing.T) {
	r, err := zoo.RecipeFor("cnn")
	require.NoError(t, err)
	busier := func(cfg Config) (float64, []int) {
		_, plan, err := cfg.Split(r.Build)
		require.NoError(t, err)
		defer plan.Close()
		c := plan.Costs()
		return max(c[0]+c[3], c[1]+c[2]), plan.Cuts()
	}
	cfg := Config{Hyper: r.Run}
	cfg.Stages, cfg.Schedule = 4, schedule.OneFOneB()
	byStage, stageCut := busier(cfg)
	cfg.Schedule = schedule.ZBV()
	byWorker, workerCut := busier(cfg)
	require.Less(t, byWorker, byStage, "the V's busier worker: cut %v against %v", workerCut, stageCut)

	train, _, err := r.Load("embedded", 64)
	require.NoError(t, err)
	cut, bal, err := Balanced(r.Build, train, cfg)
	require.NoError(t, err)
	require.Len(t, cut, 3)
	require.Equal(t, []int{0, 1, 1, 0}, bal.Workers)
	w := []float64{(bal.Times[0].Total() + bal.Times[3].Total()).Seconds(), (bal.Times[1].Total() + bal.Times[2].Total()).Seconds()}
	require.InDelta(t, max(w[0], w[1])/((w[0]+w[1])/2), bal.Spread, 1e-9, "the spread is the busier worker's")
}
