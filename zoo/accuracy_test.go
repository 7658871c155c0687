package zoo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// accuracyCheck is one model's accuracy check: the synchronous baseline,
// PipeMare at fine grain with T1, T2 and a synchronous warm-up, and naive
// PipeMare, each run from the model's Recipe (same data order, seed, epochs
// and base rate).
type accuracyCheck struct {
	model string
	// baseline is the accuracy the synchronous run must reach; each value
	// is justified where it is set.
	baseline float64
	// gap is how far below the baseline PipeMare with T1+T2 may land: 1.5
	// points for every model.
	gap float64
	// naiveWorse asks naive PipeMare to land at least this far below
	// PipeMare with T1+T2, or diverge.
	naiveWorse float64
	short      bool
	// seconds are the three runs' wall times measured alone on 2 cores
	// (README's table): the queue runs the longest first.
	seconds [3]float64
}

// runKinds are the three runs of a check, in order.
var runKinds = []string{"sequential", "pipemare", "naive"}

// runConfig is the Config of one run of the model's recipe.
func runConfig(r Recipe, kind string, stepsPerEpoch int) (Config, error) {
	switch kind {
	case "sequential":
		return r.Config(MethodSequential, stepsPerEpoch)
	case "pipemare":
		return r.Config(r.Method, stepsPerEpoch)
	case "naive":
		return r.Config(MethodNaive, stepsPerEpoch)
	}
	return Config{}, fmt.Errorf("no run %q (one of %v)", kind, runKinds)
}

// childRun is what a child process reports.
type childRun struct {
	Stages   int       `json:"stages"`
	Accuracy float64   `json:"accuracy"`
	Epochs   []float64 `json:"epochs"`
	Wall     float64   `json:"wall_s"`
	Weights  string    `json:"weights_sha256,omitempty"`
	Err      string    `json:"error,omitempty"`
}

const childEnv = "ZOO_ACCURACY_RUN" // "model/kind" in a child process

// TestAccuracyRun is the child process of an accuracy check: it trains one
// run and prints its result. Without ZOO_ACCURACY_RUN it has nothing to do.
func TestAccuracyRun(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("the child process of an accuracy check")
	}
	model, kind, _ := strings.Cut(spec, "/")
	r, err := RecipeFor(model)
	require.NoError(t, err)
	train, test, err := r.Load("embedded", 0)
	require.NoError(t, err)
	cfg, err := runConfig(r, kind, train.Len()/(r.Run.Microbatch*r.Run.Microbatches))
	require.NoError(t, err)
	res, err := Train(t.Context(), r.Build, train, test, cfg)
	out := childRun{}
	if err != nil {
		out.Err = err.Error()
	} else {
		out = childRun{Stages: res.Stages, Accuracy: res.Accuracy, Epochs: accuracies(res), Wall: res.Wall.Seconds(), Weights: res.WeightsSHA256}
	}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	fmt.Printf("\n%s %s\n", childEnv, b)
}

// runChild trains one run of the model's recipe in a child process, which
// is killed when the check ends and times out with the parent. It returns
// what the child reported and the child's CPU time.
func runChild(t *testing.T, model, kind string) (childRun, time.Duration, error) {
	args := []string{"-test.run=^TestAccuracyRun$", "-test.count=1"}
	if deadline, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(deadline).String())
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), childEnv+"="+model+"/"+kind)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return childRun{}, cpu, fmt.Errorf("%s %s: child process: %v\n%s%s", model, kind, err, out, stderr.Bytes())
	}
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, childEnv+" "); ok {
			var r childRun
			err := json.Unmarshal([]byte(js), &r)
			return r, cpu, err
		}
	}
	return childRun{}, cpu, fmt.Errorf("%s %s: the child process printed no result:\n%s", model, kind, out)
}

func runAccuracyCheck(t *testing.T, c accuracyCheck) {
	if raceEnabled {
		t.Skip("accuracy runs are skipped under the race detector")
	}
	if testing.Short() && !c.short {
		t.Skip("long accuracy run")
	}
	r, err := RecipeFor(c.model)
	require.NoError(t, err)
	queued := make([]*queuedRun, len(runKinds))
	for i, kind := range runKinds {
		queued[i] = enqueue(t, c.model, kind, c.seconds[i])
	}
	t.Parallel() // every check has queued its runs when the first resumes
	serveQueue()
	runs := make([]childRun, len(runKinds))
	errs := make([]error, len(runKinds))
	for i, q := range queued {
		<-q.done
		runs[i], errs[i] = q.result, q.err
	}
	for i, kind := range runKinds { // all three in the log before any verdict
		cfg, err := runConfig(r, kind, 1)
		require.NoError(t, err)
		q := queued[i]
		if errs[i] == nil {
			t.Logf("%s %s (P=%d, %s, warm-up %d epochs): test accuracy per epoch %v, training %.0f s; child %.0f s, %.0f s CPU, started after %.0f s; weights %.12s %s",
				c.model, kind, runs[i].Stages, cfg.SolverName(), cfg.Warmup, runs[i].Epochs, runs[i].Wall,
				q.wall.Seconds(), q.cpu.Seconds(), q.started.Seconds(), runs[i].Weights, runs[i].Err)
		}
	}
	for i, kind := range runKinds {
		require.NoError(t, errs[i], "%s %s", c.model, kind)
	}
	require.Empty(t, runs[0].Err, "%s: the synchronous baseline", c.model)
	require.Empty(t, runs[1].Err, "%s: PipeMare with T1+T2", c.model)
	baseline, pipemare, naive := runs[0].Accuracy, runs[1].Accuracy, runs[2]
	require.GreaterOrEqual(t, baseline, c.baseline, "%s: the synchronous baseline", c.model)
	require.GreaterOrEqual(t, pipemare, baseline-c.gap, "%s: PipeMare with T1+T2 lands within %.1f points of the baseline", c.model, 100*c.gap)
	if naive.Err != "" { // divergence is what naive asynchrony may do
		require.Regexp(t, "not finite|the loss is", naive.Err, "%s: naive PipeMare failed otherwise than by diverging", c.model)
		t.Logf("%s naive PipeMare diverged: %s", c.model, naive.Err)
		return
	}
	require.LessOrEqual(t, naive.Accuracy, pipemare-c.naiveWorse, "%s: naive PipeMare is clearly worse than with T1+T2", c.model)
}

func accuracies(r *Result) []float64 {
	var out []float64
	for _, e := range r.Epochs {
		out = append(out, float64(int(e.Accuracy*10000))/10000)
	}
	return out
}

// The checks run in parallel, and their trainings share one child process
// per core, longest first (childqueue_test.go).

// TestTransformerAccuracy: the decoder-only Transformer on the CMUdict
// subset, 20 stages at fine grain (recipe: 16 microbatches of 2 words, so
// τ_i ≤ 3; plain SGD from 0.25, cosine, 16 epochs, a four-epoch warm-up,
// stashed activations). Plain SGD, because with momentum β the synchronous
// run settles where delayed updates are unstable: on a quadratic, heavy ball
// is stable up to αλ < 2(1+β) without delay but only up to αλ < 1−β with a
// delay of one step (38 times less at β = 0.9; rescheduler's
// TestDelayedMomentumStabilityBound), and T1 leaves τ = 1 stages alone:
// Momentum(0.9) runs collapsed to the majority token at the switch to
// PipeMare. Without momentum the same delay costs a factor 2. Measured
// teacher-forced phoneme accuracy: baseline 0.8371 (threshold 0.83),
// PipeMare+T1+T2 0.8283, naive 0.8186; with seed 2 and recomputed
// activations 0.8424 and 0.8341. The rate is
// half the best 8-epoch synchronous rate (0.5), so naive asynchrony costs
// only a point.
func TestTransformerAccuracy(t *testing.T) {
	runAccuracyCheck(t, accuracyCheck{
		model:    "transformer",
		baseline: 0.83, gap: 0.015, naiveWorse: 0.005,
		seconds: [3]float64{126, 84, 84},
	})
}

// TestResNetAccuracy: the 15-stage ResNet (conv–BN front, six residual
// blocks with BatchNorm; recipe: Momentum(0.9) from 0.05, the best
// synchronous rate found, cosine, 3 epochs, a one-epoch warm-up). 16
// microbatches of 4 keep the delays at τ_i ≤ 2: with 4 of 16, τ_0 = 8 and
// PipeMare+T1+T2 reached only 0.5375 in 3 epochs. Measured: baseline 0.854,
// PipeMare+T1+T2 0.8455, naive 0.784 — at the synchronous optimum naive
// asynchrony costs six points. With seed 2: 0.8445, 0.8295 (1.5 points
// under), so the threshold 0.84 is under both seeds' baselines.
func TestResNetAccuracy(t *testing.T) {
	runAccuracyCheck(t, accuracyCheck{
		model:    "resnet",
		baseline: 0.84, gap: 0.015, naiveWorse: 0.03,
		seconds: [3]float64{112, 82, 78},
	})
}

// TestCNNAccuracy: the zoo CNN (conv–BatchNorm–pool ×2, two linear layers),
// 4 stages at fine grain (recipe: 4 microbatches of 16, Momentum(0.9) from
// 0.03, cosine, 3 epochs, a one-epoch warm-up). Measured: baseline 0.886,
// PipeMare+T1+T2 0.883, naive 0.8575. Threshold 0.875 (published small
// CNNs reach 0.88–0.93 on the full set).
func TestCNNAccuracy(t *testing.T) {
	runAccuracyCheck(t, accuracyCheck{
		model:    "cnn",
		baseline: 0.875, gap: 0.015, naiveWorse: 0.01,
		seconds: [3]float64{26, 19, 19},
	})
}

// TestMLPAccuracy: the zoo MLP, 3 stages at fine grain (recipe: 4
// microbatches of 16, Momentum(0.9) from 0.03, cosine, 4 epochs, a one-epoch
// warm-up). Measured: baseline 0.8555, PipeMare+T1+T2 0.8525, naive 0.8305.
// The baseline threshold 0.845 is a point under the measurement
// (published full-set MLPs reach 0.883).
func TestMLPAccuracy(t *testing.T) {
	runAccuracyCheck(t, accuracyCheck{
		model:    "mlp",
		baseline: 0.845, gap: 0.015, naiveWorse: 0.01, short: true,
		seconds: [3]float64{5, 4, 4},
	})
}
