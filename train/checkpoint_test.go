package train

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/internal/testkit/zootest"
	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
)

// TestResumedRunIsExact: a run that checkpoints every 7 steps, stopped
// after 12 and resumed from its last checkpoint (step 7), ends with the
// same weights, bit for bit, as the same run left alone — PipeMare with
// T1, T2 and a warm-up, and PipeDream, on the MLP and on the CNN
// (BatchNorm) — and its report holds every epoch. A resume with another
// configuration is refused, naming what differs.
func TestResumedRunIsExact(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("training runs are skipped under the race detector")
	}
	for _, model := range []string{"mlp", "cnn"} {
		if testing.Short() && model == "cnn" {
			continue
		}
		r, err := zoo.RecipeFor(model)
		require.NoError(t, err)
		train, test := zootest.FewSteps(t, r, 10, 64)
		r.Run.Epochs = 2
		steps := train.Len() / (r.Run.Microbatch * r.Run.Microbatches)
		pipedream := recipeConfig(t, r, MethodNaive, steps)
		pipedream.Schedule = schedule.PipeDream()
		for name, cfg := range map[string]Config{"pipemare": recipeConfig(t, r, MethodPipeMare, steps), "pipedream": pipedream} {
			t.Run(model+"/"+name, func(t *testing.T) {
				cfg.CheckpointEvery, cfg.CheckpointDir = 7, t.TempDir()
				var committed []int
				every := cfg
				every.Checkpointed = func(step int, dir string) {
					committed = append(committed, step)
					require.DirExists(t, dir)
				}
				whole, err := Train(context.Background(), r.Build, train, test, every)
				require.NoError(t, err)
				require.Equal(t, []int{7, 14}, committed, "told of every checkpoint")

				cfg.CheckpointDir = t.TempDir()
				ctx, cancel := context.WithCancel(context.Background())
				stop := cfg
				stop.ProgressEvery = 1
				epochs := 0
				stop.Progress = func(EpochResult) { epochs++ }
				stop.Steps = func(done, _ int) {
					if epochs == 1 && done == 2 { // step 12: the second epoch's second step
						cancel()
					}
				}
				stop.Spec = runspec.Spec{Model: model, Method: name, Epochs: 2}
				cut, err := Train(ctx, r.Build, train, test, stop)
				cancel()
				require.Error(t, err)
				require.True(t, cut.Interrupted)
				last, err := checkpoint.Latest(cfg.CheckpointDir)
				require.NoError(t, err)
				var saved savedRun
				require.NoError(t, json.Unmarshal(last.Manifest.Config, &saved))
				require.Equal(t, &stop.Spec, saved.Spec, "the manifest carries the run's specification")

				resumeCfg := cfg
				resumeCfg.Resume = cfg.CheckpointDir
				res, err := Train(context.Background(), r.Build, train, test, resumeCfg)
				require.NoError(t, err)
				require.Equal(t, whole.WeightsSHA256, res.WeightsSHA256, "the resumed run is the whole run")
				require.Len(t, res.Epochs, 2)
				require.Equal(t, whole.Accuracy, res.Accuracy)
				require.Equal(t, whole.ModelAccuracy, res.ModelAccuracy)
				for e := range whole.Epochs {
					require.Equal(t, whole.Epochs[e].Accuracy, res.Epochs[e].Accuracy, "epoch %d", e+1)
				}
				require.Equal(t, len(whole.Epochs[0].Losses), len(res.Epochs[0].Losses), "the report holds the steps before the checkpoint")

				other := resumeCfg
				other.LR *= 2
				_, err = Train(context.Background(), r.Build, train, test, other)
				require.ErrorContains(t, err, "the checkpoint was taken by another run: lr")
			})
		}
	}
}

// TestResumeFromAnEpochEnd: a checkpoint at the end of an epoch holds the
// epoch's test accuracy (measured on the drained pipeline, as the run left
// alone measures it), so a run resumed from it reports the whole run.
func TestResumeFromAnEpochEnd(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("training runs are skipped under the race detector")
	}
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	train, test := zootest.FewSteps(t, r, 5, 64)
	r.Run.Epochs = 2
	cfg := recipeConfig(t, r, MethodPipeMare, 5)
	cfg.CheckpointEvery, cfg.CheckpointDir = 5, t.TempDir()
	whole, err := Train(context.Background(), r.Build, train, test, cfg)
	require.NoError(t, err)

	cfg.CheckpointDir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	stop := cfg
	stop.Progress = func(EpochResult) { cancel() } // after epoch 1 and its checkpoint
	_, err = Train(ctx, r.Build, train, test, stop)
	cancel()
	require.Error(t, err)
	cfg.Resume = cfg.CheckpointDir
	res, err := Train(context.Background(), r.Build, train, test, cfg)
	require.NoError(t, err)
	require.Equal(t, whole.WeightsSHA256, res.WeightsSHA256)
	require.Len(t, res.Epochs, 2)
	require.Positive(t, res.Epochs[0].Accuracy)
	require.Equal(t, whole.Epochs[0].Accuracy, res.Epochs[0].Accuracy, "the checkpoint kept epoch 1's accuracy")
	require.Equal(t, whole.Accuracy, res.Accuracy)
}

// TestOldManifestStillLoads: a manifest written before manifests carried
// the run specification (no "spec"), and before its keys were the spec's
// (keep_activations for stash), and before they named the kernel mode
// (then always exact), still resumes, and one written now
// carries the spec it was given and none when it was given none.
func TestOldManifestStillLoads(t *testing.T) {
	rc := Config{Hyper: zoo.Hyper{Microbatch: 4, Microbatches: 2, Epochs: 2, LR: 0.1, KeepActivations: true}, Schedule: schedule.PipeMare()}.savedConfig("mlp", 64)
	epochs := []EpochResult{{Epoch: 1, Loss: 2, Accuracy: 0.5}}
	b, err := json.Marshal(struct {
		Config savedConfig   `json:"config"`
		Epochs []EpochResult `json:"epochs"`
	}{rc, epochs}) // the format before "spec", and before "stash" was "keep_activations"
	require.NoError(t, err)
	old := []byte(strings.Replace(string(b), `"stash":true`, `"keep_activations":true`, 1))
	require.Contains(t, string(old), `"keep_activations":true`)
	old = []byte(strings.Replace(string(old), `"kernels":"exact",`, "", 1)) // and before "kernels": exact
	require.NotContains(t, string(old), `"kernels"`)
	got, epoch, index, err := resumed(&checkpoint.Manifest{Config: old, Data: checkpoint.DataPosition{Epoch: 2, Index: 3}}, rc)
	require.NoError(t, err)
	require.Equal(t, epochs, got)
	require.Equal(t, [2]int{2, 3}, [2]int{epoch, index})

	spec := runspec.Spec{Model: "mlp", LR: 0.1}
	m, err := manifest(rc, &spec, epochs, 2, 3)
	require.NoError(t, err)
	var saved savedRun
	require.NoError(t, json.Unmarshal(m.Config, &saved))
	require.Equal(t, &spec, saved.Spec)
	_, _, _, err = resumed(&m, rc)
	require.NoError(t, err)
	m, err = manifest(rc, nil, epochs, 2, 3)
	require.NoError(t, err)
	require.NotContains(t, string(m.Config), `"spec"`)
}
