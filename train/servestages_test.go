package train

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/zoo"
)

// TestServeStagesTrainsLikeTrain: two ServeStages, each serving the two
// stages ZB-V places on one of its workers (0 and 3, 1 and 2), joined to
// a driver by the in-process transport, train the weights Train trains
// alone; a stage outside the plan, and endpoints that are not one per
// stage, are refused.
func TestServeStagesTrainsLikeTrain(t *testing.T) {
	train, test, err := testFashion()
	require.NoError(t, err)
	data, eval := train.Head(32), test.Head(8)
	cfg := Config{Hyper: zoo.Hyper{Microbatch: 4, Microbatches: 4, Epochs: 1, LR: 0.03, Seed: 1}, Schedule: schedule.ZBV(), Stages: 4}
	alone, err := Train(context.Background(), zoo.CNN, data, eval, cfg)
	require.NoError(t, err)

	const stages = 4
	net := transport.NewLocal(stages)
	defer net.Close()
	of := schedule.ZBV().WorkerOf(stages)
	hosted := [][]int{{}, {}}
	for i := range stages {
		hosted[of(i)] = append(hosted[of(i)], i)
	}
	require.Equal(t, [][]int{{0, 3}, {1, 2}}, hosted)
	served := make(chan error, len(hosted))
	for _, h := range hosted {
		go func() {
			served <- ServeStages(context.Background(), zoo.CNN, data, cfg, h, func(_ context.Context, plan *graphsplit.Plan) ([]transport.Endpoint, error) {
				var eps []transport.Endpoint
				for _, i := range h {
					eps = append(eps, net.Endpoint(transport.Peer(i)))
				}
				return eps, nil
			})
		}()
	}
	driven := cfg
	driven.Connect = func(context.Context, *graphsplit.Plan) (transport.Endpoint, error) {
		return net.Endpoint(transport.Driver), nil
	}
	res, err := Train(context.Background(), zoo.CNN, data, eval, driven)
	require.NoError(t, err)
	require.Equal(t, alone.WeightsSHA256, res.WeightsSHA256)
	for range hosted {
		require.NoError(t, <-served)
	}
	none := func(context.Context, *graphsplit.Plan) ([]transport.Endpoint, error) { return nil, nil }
	require.ErrorContains(t, ServeStages(context.Background(), zoo.CNN, data, cfg, []int{1, 4}, none), "train: stage 4: the plan has stages 0..3")
	require.ErrorContains(t, ServeStages(context.Background(), zoo.CNN, data, cfg, []int{0, 2}, none), "train: stages 0, 2: 0 endpoints opened; give one per stage")
}
