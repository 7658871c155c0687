package zoo

import (
	"context"
	"testing"

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
	cfg := Config{Schedule: schedule.PipeMare, Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, T1: 3, T2: 0.9, Warmup: 3, Seed: 1}
	alone, err := Train(context.Background(), MLP, data, eval, cfg)
	require.NoError(t, err)

	const stages = 3
	net := transport.NewLocal(stages)
	defer net.Close()
	served := make(chan error, stages)
	for i := 0; i < stages; i++ {
		go func() {
			served <- ServeStage(context.Background(), MLP, data, cfg, i, func(_ context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
				require.Len(t, plan.Stages, stages)
				return net.Endpoint(transport.Peer(i)), nil
			})
		}()
	}
	driven := cfg
	driven.Connect = func(context.Context, *graphsplit.Plan) (transport.Endpoint, error) {
		return net.Endpoint(transport.Driver), nil
	}
	res, err := Train(context.Background(), MLP, data, eval, driven)
	require.NoError(t, err)
	require.Equal(t, alone.WeightsSHA256, res.WeightsSHA256)
	require.Equal(t, alone.Accuracy, res.Accuracy)
	for range stages {
		require.NoError(t, <-served)
	}
	err = ServeStage(context.Background(), MLP, data, cfg, stages, nil)
	require.ErrorContains(t, err, "zoo: stage 3: the plan has stages 0..2")
}
