package train

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/internal/testkit/zootest"
	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/weights_sha256.json (only when a change is meant to change results)")

const goldenFile = "testdata/weights_sha256.json"

// TestMLPWeightsAreUnchanged trains the zoo MLP's recipe on the first 640
// embedded examples for two epochs — synchronous, PipeMare with T1, T2 and
// the warm-up, naive PipeMare, PipeDream, delay injection, and the methods
// spike, predict and nadam (Method), and PipeMare and the synchronous run
// in the fast kernel mode (where the CPU runs it: their hashes are the
// fast mode's, the same on every such host) — and compares the SHA-256 of
// the final weights with the recorded ones.
func TestMLPWeightsAreUnchanged(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("training runs are skipped under the race detector")
	}
	want := map[string]string{}
	if b, err := os.ReadFile(goldenFile); err == nil {
		require.NoError(t, json.Unmarshal(b, &want))
	} else if !*updateGolden {
		t.Fatalf("%v (run with -update-golden to record)", err)
	}
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	train, test := zootest.FewSteps(t, r, 10, 200)
	r.Run.Epochs = 2
	steps := train.Len() / (r.Run.Microbatch * r.Run.Microbatches)
	pipedream := recipeConfig(t, r, MethodNaive, steps)
	pipedream.Schedule = schedule.PipeDream()
	injected := recipeConfig(t, r, MethodPipeMare, steps)
	injected.Warmup = 0
	injected.Delays = delay.PipeMare(3, r.Run.Microbatches)
	runs := map[string]Config{
		"sequential": recipeConfig(t, r, MethodSequential, steps), "pipemare": recipeConfig(t, r, MethodPipeMare, steps),
		"naive": recipeConfig(t, r, MethodNaive, steps), "pipedream": pipedream, "injected": injected,
		"spike": recipeConfig(t, r, MethodSpike, steps), "predict": recipeConfig(t, r, MethodPredict, steps),
		"nadam": recipeConfig(t, r, MethodNAdam, steps),
	}
	for _, name := range []string{"sequential", "pipemare"} {
		fast := runs[name]
		fast.Kernels = graphsplit.FastKernels
		runs[name+"-fast"] = fast
	}
	if release, err := graphsplit.HoldKernels(graphsplit.FastKernels); err != nil {
		t.Logf("the fast kernel mode's runs are left out: %v", err)
		delete(runs, "sequential-fast")
		delete(runs, "pipemare-fast")
		delete(want, "sequential-fast")
		delete(want, "pipemare-fast")
	} else {
		release()
	}
	got := map[string]string{}
	for name, cfg := range runs {
		res, err := Train(context.Background(), r.Build, train, test, cfg)
		require.NoError(t, err, name)
		got[name] = testutil.PlanSHA256(t, res.Plan)
		if !*updateGolden {
			require.Equal(t, want[name], got[name], "%s: the final weights changed", name)
		}
	}
	if *updateGolden {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(goldenFile, append(b, '\n'), 0o644))
		return
	}
	require.Len(t, got, len(want))
}
