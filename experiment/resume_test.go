package experiment

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestSweepGoesOnFromACheckpoint: a sweep stopped inside a run (after its
// first checkpoint) records nothing of it and keeps its checkpoint; run
// again, it goes on from there and ends with the weights of the run
// trained in one go, bit for bit, and removes the checkpoints. The runs are
// the MLP's, 6 steps each.
func TestSweepGoesOnFromACheckpoint(t *testing.T) {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	trainSet, test, err := r.Load("embedded", 192)
	require.NoError(t, err)
	test = test.(*zoo.Dataset).Head(100)
	sweep := func(dir string, trainer Trainer) *Sweep {
		sets, err := ParseSettings("4", "")
		require.NoError(t, err)
		return &Sweep{
			Grid: Grid{Model: "mlp", Data: "embedded", Stages: "fine", Limit: 192, TestLimit: 100,
				Methods: []Variant{mustVariant(t, "pipemare(warmup=0.2)")}, Settings: sets, Epochs: []int{2}, Seeds: []int64{1}, CheckpointEvery: 2},
			Recipe: r, TrainData: trainSet, TestData: test, Cache: Cache{Dir: filepath.Join(dir, "runs")}, Work: filepath.Join(dir, "work"), Trainer: trainer,
		}
	}
	onceDir := t.TempDir()
	_, err = sweep(onceDir, nil).Run(context.Background())
	require.NoError(t, err)
	key := "pipemare_warmup=0.2-N4-e2-seed1"
	record := func(dir string) Record {
		var rec Record
		require.NoError(t, readJSON(filepath.Join(dir, "runs", key+".json"), &rec))
		return rec
	}
	once := record(onceDir)
	require.Empty(t, once.ResumedAt)
	require.NotEmpty(t, once.WeightsSHA256)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopping := func(ctx context.Context, build zoo.Builder, trainSet, test zoo.Data, cfg train.Config) (*train.Result, error) {
		cfg.Checkpointed = func(int, string) { cancel() }
		return train.Train(ctx, build, trainSet, test, cfg)
	}
	_, err = sweep(dir, stopping).Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	_, err = os.Stat(filepath.Join(dir, "runs", key+".json"))
	require.ErrorIs(t, err, os.ErrNotExist, "an interrupted run is not recorded")
	step, err := latestStep(filepath.Join(dir, "work", key))
	require.NoError(t, err)
	require.Equal(t, 2, step)

	_, err = sweep(dir, nil).Run(context.Background())
	require.NoError(t, err)
	resumed := record(dir)
	require.Equal(t, []int{2}, resumed.ResumedAt)
	require.Equal(t, once.WeightsSHA256, resumed.WeightsSHA256, "bit for bit the run trained in one go")
	require.Equal(t, once.EpochAccuracy, resumed.EpochAccuracy)
	require.Equal(t, once.Accuracy, resumed.Accuracy)
	_, err = os.Stat(filepath.Join(dir, "work", key))
	require.ErrorIs(t, err, os.ErrNotExist, "the checkpoints go once the run is recorded")
}
