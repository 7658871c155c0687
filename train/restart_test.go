package train

import (
	"context"
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/transport"
)

// TestRestarting: a pipeline that fails with a broken link is restarted
// (Disconnect, then a new attempt from the last checkpoint: here none
// yet, so from the start) at most MaxRestarts times, each restart
// recorded with its stage, reason and the steps redone; a stage's failing
// computation and a cancelled run are not restarted.
func TestRestarting(t *testing.T) {
	lost := &transport.LinkError{From: 1, To: transport.Driver, Kind: transport.Reply, Err: errors.New("the stream broke")}
	cfg := Config{MaxRestarts: 2, CheckpointEvery: 3, CheckpointDir: t.TempDir()}
	var disconnected, restarted int
	cfg.Disconnect = func(err error) error {
		disconnected++
		require.ErrorIs(t, err, lost)
		return errors.New("stage 1 (pid 7): signal: killed")
	}
	cfg.Restarted = func(Restart) { restarted++ }
	attempts := 0
	once := func(a *attempt) (*Result, error) {
		attempts++
		if attempts > 1 {
			require.NotNil(t, a.resume, "a restart resumes")
			require.Equal(t, "", *a.resume, "from the start: no checkpoint yet")
			a.markReady()
		}
		res := &Result{Epochs: []EpochResult{{Losses: make([]float64, 4)}}}
		if attempts <= 3 {
			return res, errors.Wrap(lost, "asyncvm: stage 1 is unreachable")
		}
		return res, nil
	}
	res, err := restarting(context.Background(), cfg, once)
	require.ErrorIs(t, err, lost, "two restarts, then the third failure is the run's")
	require.Equal(t, 3, attempts)
	require.Equal(t, 2, disconnected)
	require.Equal(t, 2, restarted)
	require.Len(t, res.Restarts, 2)
	for _, r := range res.Restarts {
		require.Equal(t, 1, r.Stage)
		require.Equal(t, "asyncvm: stage 1 is unreachable: transport: link stage 1 → driver (reply): the stream broke; stage 1 (pid 7): signal: killed", r.Reason)
		require.Equal(t, 4, r.StepsRedone)
		require.Zero(t, r.FromStep)
		require.Positive(t, r.Took)
	}

	attempts = 0
	cfg.MaxRestarts = 3
	res, err = restarting(context.Background(), cfg, once)
	require.NoError(t, err, "the fourth attempt ends the run")
	require.Len(t, res.Restarts, 3)

	for name, fail := range map[string]error{
		"a stage's computation": &asyncvm.StageError{Stage: 0, Err: errors.New("a NaN")},
	} {
		attempts = 0
		_, err := restarting(context.Background(), cfg, func(*attempt) (*Result, error) { attempts++; return nil, fail })
		require.Error(t, err)
		require.Equal(t, 1, attempts, "%s: no restart", name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	attempts = 0
	_, err = restarting(ctx, cfg, func(*attempt) (*Result, error) { attempts++; return nil, lost })
	require.Error(t, err)
	require.Equal(t, 1, attempts, "a cancelled run is not restarted")
}

// TestRestartsRefused: restarts without stages in other processes or
// without checkpoints are refused.
func TestRestartsRefused(t *testing.T) {
	connect := func(context.Context, *graphsplit.Plan) (transport.Endpoint, error) { return nil, nil }
	require.EqualError(t, Config{MaxRestarts: 1}.checkRestarts(), "train: 1 restarts of a pipeline whose stages run in this process (no Connect): a restart starts the stages' processes anew")
	require.EqualError(t, Config{MaxRestarts: 1, Connect: connect}.checkRestarts(), "train: 1 restarts without checkpoints: a restart resumes from the last checkpoint; give CheckpointEvery and CheckpointDir")
	require.EqualError(t, Config{MaxRestarts: -1}.checkRestarts(), "train: -1 restarts: a number of restarts, 0 for none")
	require.NoError(t, Config{MaxRestarts: 1, Connect: connect, CheckpointEvery: 2, CheckpointDir: "x"}.checkRestarts())
}
