package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipemare/pipemare/internal/jsonkeys"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// training the commands run stops its pipeline. Run with asMainEnv set,
// the test binary is the pipemare command instead (process_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		os.Exit(asMain())
	}
	goleak.VerifyTestMain(m)
}

func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestBadValues: values outside a flag's range, and runs that would not
// train what they name, are usage errors whose first line names the flag
// and why, before anything trains.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"train", "-epochs", "-2"}, "-epochs -2: must be positive"},
		{[]string{"train", "-lr", "NaN"}, "-lr NaN: must be positive"},
		{[]string{"train", "-momentum", "1.5"}, "-momentum 1.5: must be in [0, 1)"},
		{[]string{"train", "-momentum", "NaN"}, "-momentum NaN: must be in [0, 1)"},
		{[]string{"train", "-warmup", "-5"}, "-warmup -5: a number of steps"},
		{[]string{"train", "-t1", "-2"}, "-t1 -2: a number of steps"},
		{[]string{"train", "-t2", "1"}, "-t2 1: must be in [0, 1)"},
		{[]string{"train", "-kernels", "quick"}, `-kernels "quick": exact or fast`},
		{[]string{"compare", "-lr", "-0.1"}, "-lr -0.1: must be positive"},
		{[]string{"train", "-microbatch", "-5"}, "-microbatch -5: must be positive"},
		{[]string{"compare", "-microbatches", "-1"}, "-microbatches -1: must be positive"},
		{[]string{"train", "-model", "gpt"}, `-model "gpt": zoo: no model "gpt"`},
		{[]string{"train", "-schedule", "zigzag"}, `-schedule "zigzag": unknown schedule`},
		{[]string{"train", "-stages", "zero"}, `-stages "zero": a positive number or fine`},
		// Errors of the plan, found before the run's header.
		{[]string{"train", "-model", "mlp", "-stages", "10000"}, "-stages 10000: the mlp model cuts into at most 3 stages, one per layer (-stages fine)"},
		{[]string{"compare", "-model", "mlp", "-stages", "4"}, "-stages 4: the mlp model cuts into at most 3 stages"},
		{[]string{"stage", "-stage", "0", "-stage-addrs", "127.0.0.1:1", "-insecure", "-model", "mlp", "-stages", "4"}, "-stages 4: the mlp model cuts into at most 3 stages"},
		{[]string{"stage", "-stage", "0", "-stage-addrs", "127.0.0.1:1", "-insecure", "-model", "mlp"}, "-stage 0: placed balanced, the 3 stages on 1 processes make processes of stages 0,1,2: give one of those"},
		{[]string{"stage", "-stage", "0", "-stage-addrs", "127.0.0.1:1", "-insecure", "-connect-timeout", "-1s"}, "-connect-timeout -1s: must be positive"},
		{[]string{"train", "-trace-steps", "-1"}, "-trace-steps -1: must be positive"},
		{[]string{"train", "-model", "mlp", "-epochs", "100000000"}, "-epochs 100000000: 100000000 epochs of 125 steps are more than the 10000000 steps a run can train (the engine keeps every action's timing for its report); give at most 80000"},
		{[]string{"compare", "-model", "mlp", "-target", "2"}, "-target 2: a test accuracy, in (0, 1]"},
		{[]string{"compare", "-model", "mlp", "-target", "0"}, "-target 0: a test accuracy, in (0, 1]"},
		{[]string{"sweep", "-model", "mlp", "-target", "NaN"}, "-target NaN: a test accuracy, in (0, 1]"},
		{[]string{"sweep", "-model", "mlp", "-jobs", "0"}, "-jobs 0: trainings at a time, at least 1"},
		// Runs of zero steps.
		{[]string{"train", "-model", "mlp", "-limit", "-5"}, "-limit -5: must be positive (or 0 for all)"},
		{[]string{"train", "-model", "mlp", "-limit", "10"}, "-limit 10: 10 training examples make no minibatch of 4 microbatches × 16 rows; give -limit 64 or more"},
		{[]string{"train", "-model", "mlp", "-microbatches", "1000"}, "-microbatches 1000: a minibatch of 1000 × 16 rows is more than the 8000 training examples"},
		{[]string{"compare", "-model", "cnn", "-microbatch", "4000"}, "-microbatch 4000: a minibatch of 4 × 4000 rows is more than the 8000 training examples"},
		// A warm-up that covers the run would silently be another method.
		{[]string{"compare", "-model", "mlp", "-epochs", "1"}, "-epochs 1: the mlp recipe's warm-up of 1 epoch (125 steps) covers the whole run, which would train no asynchronous step; give -epochs 2 or more"},
		{[]string{"train", "-model", "mlp", "-warmup", "100000"}, "-warmup 100000: the synchronous warm-up covers the whole run of 500 steps (4 epochs × 125)"},
		{[]string{"train", "-model", "mlp", "-warmup", "500"}, "-warmup 500: the synchronous warm-up covers the whole run"},
		// plan and schedule.
		{[]string{"plan", "-model", "mlp", "-microbatch", "0"}, "-microbatch 0: must be positive"},
		{[]string{"plan", "-model", "mlp", "-microbatch", "-5"}, "-microbatch -5: must be positive"},
		{[]string{"plan", "-model", "gpt"}, `-model "gpt"`},
		{[]string{"plan", "-stages", "0"}, `-stages "0": a positive number or fine`},
		{[]string{"plan", "-schedule", "zz"}, `-schedule "zz": unknown schedule (one of sequential,`},
		{[]string{"schedule", "-stages", "0"}, "-stages 0: must be positive"},
		{[]string{"schedule", "-microbatches", "0"}, "-microbatches 0: must be positive"},
		{[]string{"schedule", "-minibatches", "-1"}, "-minibatches -1: must be positive"},
		{[]string{"schedule", "-stages", "100000", "-microbatches", "100", "-grid=false"}, "-stages 100000 × -minibatches 2 × (2·-microbatches 100 + 2) = 40400000 actions: more than the 5000000 this command simulates"},
		{[]string{"schedule", "-stages", "2000", "-microbatches", "1", "-minibatches", "1"}, "cells, more than the 1000000 a printed grid holds; -grid=false gives the utilization and delays"},
		{[]string{"train", "extra"}, `unexpected argument "extra"`},
	} {
		code, stdout, stderr := runCLI(context.Background(), c.args...)
		require.Equal(t, 2, code, "%v", c.args)
		first, rest, _ := strings.Cut(stderr, "\n")
		require.Contains(t, first, c.msg, "%v: the first line names the flag", c.args)
		require.True(t, strings.HasPrefix(rest, "Usage of pipemare"), "%v: then the usage:\n%s", c.args, stderr)
		require.Empty(t, stdout, "%v: nothing ran", c.args)
	}
}

// TestFlagsDeferToTheRecipe: flags left alone keep the model's recipe,
// flags given override it, -stash=false included.
func TestFlagsDeferToTheRecipe(t *testing.T) {
	cfg := func(args ...string) train.Config {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var o options
		o.register(fs)
		require.NoError(t, fs.Parse(args))
		var s schedule.Schedule
		if o.schedule != "" {
			var err error
			s, err = runspec.ScheduleNamed(o.schedule)
			require.NoError(t, err)
		}
		c, err := o.config(s, 4404)
		require.NoError(t, err)
		return c
	}
	r, err := zoo.RecipeFor("transformer")
	require.NoError(t, err)
	def := cfg("-model", "transformer")
	want, err := train.FromRecipe(r, "", 4404/(r.Run.Microbatch*r.Run.Microbatches))
	require.NoError(t, err)
	def.Schedule, want.Schedule = schedule.Schedule{}, schedule.Schedule{}
	want.Spec = runspec.Spec{Model: "transformer", Data: "embedded"} // the spec the flags give, which the config records
	require.Equal(t, want, def)
	over := cfg("-model", "transformer", "-stash=false", "-seed", "7", "-lr", "0.1", "-momentum", "0.5", "-cosine=false", "-epochs", "2", "-warmup", "0")
	require.False(t, over.KeepActivations)
	require.Equal(t, int64(7), over.Seed)
	require.Equal(t, 0.1, over.LR)
	require.Equal(t, "Momentum(0.5)", over.SolverName())
	require.False(t, over.Cosine)
	require.Equal(t, 0, over.Warmup)
	require.Equal(t, 2*(4404/32), over.T1, "T1 spans the asynchronous steps")
}

func TestUsageErrors(t *testing.T) {
	code, _, stderr := runCLI(context.Background())
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "usage: pipemare")
	code, _, stderr = runCLI(context.Background(), "fly")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "fly"`)
	code, _, stderr = runCLI(context.Background(), "train", "-epochs", "x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `invalid value "x" for flag -epochs`)
	require.Contains(t, stderr, "Usage of pipemare train")
}

// TestHelpExitsZero: -h asks for the usage, on stdout, with exit code 0,
// for pipemare and every command alike.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"train", "-h"}, {"compare", "-h"}, {"plan", "-h"}, {"schedule", "-h"}, {"train", "--help"}} {
		code, stdout, stderr := runCLI(context.Background(), args...)
		require.Equal(t, 0, code, "%v", args)
		require.Regexp(t, "usage: pipemare|Usage of pipemare", stdout, "%v", args)
		require.Empty(t, stderr, "%v", args)
	}
}

// TestOtherErrorsPrintNoUsage: data that cannot be read and outputs that
// cannot be written are not usage errors: one line, exit code 1, no usage,
// and no training.
func TestOtherErrorsPrintNoUsage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	readOnly := t.TempDir()
	if os.Geteuid() == 0 { // root writes anywhere a mode allows nothing
		readOnly = "/proc"
	} else {
		require.NoError(t, os.Chmod(readOnly, 0o555))
		defer os.Chmod(readOnly, 0o755)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"train", "-model", "mlp", "-data", "/nonexistent"}, "pipemare train: -data /nonexistent:"},
		{[]string{"train", "-model", "mlp", "-out", file}, "pipemare train: -out " + file + ": mkdir " + file + ": not a directory"},
		{[]string{"compare", "-model", "mlp", "-out", filepath.Join(file, "sub")}, "pipemare compare: -out " + filepath.Join(file, "sub") + ":"},
		{[]string{"train", "-model", "mlp", "-out", readOnly}, "pipemare train: -out " + readOnly + ": cannot write report.json"},
		{[]string{"plan", "-model", "mlp", "-dot", filepath.Join(file, "x.dot")}, "pipemare plan: -dot:"},
	} {
		code, stdout, stderr := runCLI(context.Background(), c.args...)
		require.Equal(t, 1, code, "%v: %s", c.args, stderr)
		require.True(t, strings.HasPrefix(stderr, c.msg), "%v: %s", c.args, stderr)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %s", c.args, stderr)
		require.NotContains(t, stdout, "epoch", "%v: nothing trained", c.args)
	}
	entries, err := os.ReadDir(filepath.Dir(file))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the checks leave nothing behind")
}

// TestWriteFailureExitsNonZero: an output directory that becomes
// unwritable during training is an error, not a success.
func TestWriteFailureExitsNonZero(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	onSteps = func(int) { // the directory turns into a file
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.WriteFile(dir, nil, 0o644))
		}
	}
	defer func() { onSteps = nil }()
	code, stdout, stderr := runCLI(context.Background(), "train", "-model", "mlp", "-epochs", "2", "-limit", "192", "-out", dir)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stdout, "epoch 2:")
	require.Contains(t, stderr, "report.json: not a directory")
	require.NotContains(t, stdout, "wrote")
}

// TestTrainWritesItsOutputs trains the MLP for two epochs of 5 steps on the
// embedded subset and checks report.json (one object, snake_case keys, the
// weights hash), trace.json (every action of the last minibatches, each
// with a duration) and the plots; nothing but the epoch lines reaches
// stdout, no progress bar reaches a stderr that is not a terminal.
func TestTrainWritesItsOutputs(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), "train", "-model", "mlp", "-data", "embedded", "-epochs", "2", "-limit", "320", "-trace-steps", "3", "-out", dir)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	require.NotContains(t, out, "\r", "no progress bar frames")
	require.Regexp(t, `epoch 2: loss [0-9.]+, test accuracy 0\.[0-9]+, [0-9]+ samples/s, utilization 0\.[0-9]+`, out)
	var report map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &report), "one object")
	require.Empty(t, jsonkeys.NotSnakeCase(report), "keys that are not snake_case")
	settings := report["settings"].(map[string]any)
	require.Equal(t, "pipemare", settings["schedule"])
	require.Equal(t, 5.0, settings["warmup"])
	require.Equal(t, 5.0, settings["t1"])
	result := report["result"].(map[string]any)
	require.Equal(t, "pipemare", result["schedule"])
	require.Regexp(t, "^[0-9a-f]{64}$", result["weights_sha256"])
	require.Contains(t, result, "final_accuracy")
	require.NotContains(t, result, "interrupted")
	for _, e := range result["epochs"].([]any) {
		require.Contains(t, e, "test_accuracy")
	}
	stage := result["report"].(map[string]any)["stages_detail"].([]any)[0].(map[string]any)
	require.NotContains(t, stage, "discrepancy", "not measured")
	require.NotContains(t, stage, "peak_weight_versions", "no weight stashing")
	require.Contains(t, result["virtual_devices"], "makespan_ns")

	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Dur  *float64       `json:"dur"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	b, err = os.ReadFile(filepath.Join(dir, "trace.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &trace))
	stages := map[int]bool{}
	forwards := 0
	for _, e := range trace.TraceEvents {
		if e.Ph == "X" {
			stages[e.Tid] = true
			require.NotNil(t, e.Dur, e.Name)
			require.GreaterOrEqual(t, e.Args["minibatch"], 10.0-3, "only the last 3 of 10 minibatches")
			if strings.HasPrefix(e.Name, "F") {
				forwards++
			}
		}
	}
	require.Len(t, stages, 3, "one thread per stage")
	require.Equal(t, 3*3*4, forwards, "every stage's forward of every microbatch of the last 3 minibatches")
	for _, name := range runout.PlotFiles {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err, name)
		_, err = png.DecodeConfig(f)
		f.Close()
		require.NoError(t, err, name)
	}
}

// TestInterruptStillWritesTheReport: an interrupted run (Ctrl-C cancels
// the context) stops its workers and still writes the report of what ran,
// its last epoch marked interrupted and without accuracy; the progress bar,
// on a terminal, is drawn on stderr only, and cleared before the summary,
// a line of its own.
func TestInterruptStillWritesTheReport(t *testing.T) {
	defer func(f func(io.Writer) bool, d time.Duration) { isTerminal, barThrottle = f, d }(isTerminal, barThrottle)
	isTerminal, barThrottle = func(io.Writer) bool { return true }, 0
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onSteps = func(done int) { // interrupt once 10 steps have run
		if done >= 10 {
			cancel()
		}
	}
	defer func() { onSteps = nil }()
	code, stdout, stderr := runCLI(ctx, "train", "-model", "mlp", "-data", "embedded", "-epochs", "3", "-checkpoint-every", "5", "-out", dir)
	require.Equal(t, 1, code)
	require.NotContains(t, stderr, "context canceled", "not the engine's words")
	require.Regexp(t, `(?m)pipemare train: interrupted in epoch 1 after step 1[0-8]; model.safetensors \(the weights of the steps that ran\), report.json, trace.json and the plots written to `+regexp.QuoteMeta(dir)+`; resume with -resume `+regexp.QuoteMeta(dir)+` \(from its checkpoint of step (5|10|15)\)$`, stderr)
	require.Contains(t, stderr, "epoch 1", "the bar")
	require.NotContains(t, stdout, "\r", "no bar on stdout")
	require.Regexp(t, `(?m)^epoch 1 interrupted after 1[0-8] steps: loss [0-9.]+$`, stdout, "the steps handed out before the interrupt, drained")
	require.Regexp(t, `(?m)^weights of the steps that ran \(drained\): weights_sha256 [0-9a-f]{64}$`, stdout)
	require.Regexp(t, `(?m)^3 stages, measured utilization`, stdout)
	require.True(t, strings.HasSuffix(strings.Split(stderr, "pipemare train:")[0], "\r"), "the bar is cleared before the summary: %q", stderr)
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err, "the report of what ran")
	var report struct {
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.Unmarshal(b, &report))
	require.Equal(t, true, report.Result["interrupted"])
	require.NotContains(t, report.Result, "final_accuracy", "no epoch finished")
	require.Regexp(t, "^[0-9a-f]{64}$", report.Result["weights_sha256"], "of the model written")
	require.NotContains(t, report.Result, "model_test_accuracy")
	require.FileExists(t, filepath.Join(dir, rundir.ModelFile))
	epochs := report.Result["epochs"].([]any)
	require.Len(t, epochs, 1)
	e := epochs[0].(map[string]any)
	require.NotEmpty(t, e["losses"], "the steps that ran")
	require.Equal(t, true, e["interrupted"])
	require.NotContains(t, e, "test_accuracy")
	require.Positive(t, e["loss"])
}

// TestCompare runs every schedule on a small MLP run: report.json holds
// the runs, labelled by what they ran; every run has its trace; the
// Gantt, utilization and memory figures have a panel per run.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("eight trainings and their figures (a minute under the race detector)")
	}
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), "compare", "-model", "mlp", "-epochs", "2", "-limit", "192", "-t1", "0", "-out", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "pipemare +T2+W")
	require.Contains(t, out, "leaving out pipedream-2bw: it needs N ≥ 5 microbatches on 3 stages, and -microbatches is 4")
	var report struct {
		Model string `json:"model"`
		Runs  []struct {
			Label    string         `json:"label"`
			Settings map[string]any `json:"settings"`
			Result   map[string]any `json:"result"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &report))
	require.Equal(t, "mlp", report.Model)
	var labels []string
	for _, r := range report.Runs {
		labels = append(labels, r.Label)
		require.Equal(t, r.Settings["schedule"], r.Result["schedule"])
		_, err := os.Stat(filepath.Join(dir, runout.Compared{Label: r.Label}.TraceFile()))
		require.NoError(t, err, r.Label)
	}
	require.Equal(t, []string{"sequential", "gpipe", "1f1b", "zb-h1", "zb-h2", "pipedream", "pipemare (naive)", "pipemare +T2+W"}, labels)
	last := report.Runs[len(report.Runs)-1].Settings // pipemare +T2+W
	require.Equal(t, 0.0, last["t1"])
	require.Equal(t, 3.0, last["warmup"])
	one := t.TempDir()
	code, _, stderr = runCLI(context.Background(), "train", "-model", "mlp", "-epochs", "2", "-limit", "192", "-out", one)
	require.Equal(t, 0, code, stderr)
	for _, name := range []string{"gantt.png", "utilization.png", "memory.png"} {
		require.InDelta(t, float64(len(labels)*pngHeight(t, filepath.Join(one, name))), pngHeight(t, filepath.Join(dir, name)), 6, "%s: a panel per run", name)
	}
}

func pngHeight(t *testing.T, path string) int {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	c, err := png.DecodeConfig(f)
	require.NoError(t, err)
	return c.Height
}

func TestSchedule(t *testing.T) {
	code, out, _ := runCLI(context.Background(), "schedule", "-schedule", "gpipe", "-stages", "2", "-microbatches", "2", "-minibatches", "1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "    1  F1       F0\n")
	require.Contains(t, out, "utilization with equal action times: 0.667")

	code, out, _ = runCLI(context.Background(), "schedule", "-schedule", "zb-v", "-stages", "4", "-microbatches", "3", "-minibatches", "1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "clock  worker0  worker1\n    0  F0@0\n")

	code, out, _ = runCLI(context.Background(), "schedule", "-schedule", "pipemare-v", "-placement", "v", "-stages", "4", "-minibatches", "1")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "pipemare-v2-v, P=4"), "%.80s", out)
	code, _, errOut := runCLI(context.Background(), "schedule", "-schedule", "zb-v", "-placement", "contiguous")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-placement contiguous: only pipemare-v's placement can be chosen; zb-v's is v")
	code, _, errOut = runCLI(context.Background(), "schedule", "-schedule", "pipemare-v", "-placement", "balanced")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-placement balanced: places a run's stages on its processes by their costs, which a schedule does not know")
	code, _, errOut = runCLI(context.Background(), "schedule", "-schedule", "pipemare-v", "-placement", "zigzag")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `-placement "zigzag": one of contiguous, round-robin, v`+"\n", "the names it takes, not balanced")

	code, out, _ = runCLI(context.Background(), "schedule", "-table")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "| schedule | P | N | steps | bubble | formula |"), "%.80s", out)
}

// TestScheduleAnswersInSeconds: 20,000 stages took 98 s (the replay was
// quadratic in P); the bound here is 60 times what a loaded machine takes.
func TestScheduleAnswersInSeconds(t *testing.T) {
	done := make(chan string, 1)
	go func() {
		_, out, _ := runCLI(context.Background(), "schedule", "-stages", "20000", "-grid=false")
		done <- out
	}()
	select {
	case out := <-done:
		require.True(t, strings.HasPrefix(out, "utilization with equal action times: 0.0"), "%.80s…", out)
	case <-time.After(60 * time.Second):
		t.Fatal("pipemare schedule -stages 20000 -grid=false runs for more than a minute")
	}
}

func TestPlan(t *testing.T) {
	dot := filepath.Join(t.TempDir(), "cnn.dot")
	code, out, stderr := runCLI(context.Background(), "plan", "-model", "cnn", "-dot", dot)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "cnn at microbatch 16: 4 stages")
	require.Regexp(t, `(?m)^one device per stage: 0\.\d\d busy on average, \d\.\d\d× one device$`, out, "the measured balance of the fine cut")
	b, err := os.ReadFile(dot)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "digraph plan {"))

	// A number of stages is balanced by measuring, and the cut to pass to
	// every process is printed.
	code, out, stderr = runCLI(context.Background(), "plan", "-model", "mlp", "-stages", "2")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `balanced by measuring \(measured .* per microbatch in all, the slowest stage \d\.\d\d× the mean.*\): cut before ops 6\n`, out)
	require.Contains(t, out, "\nto run these stages alike on every host, give every process -cut 6\n")
	// The fine-grained ResNet leaves most stages idle, and says how few
	// would do.
	code, out, stderr = runCLI(context.Background(), "plan", "-model", "resnet")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^\d+ of 15 stages are less than half busy: the slowest holds \d+% of the work, so \d stages at its pace would hold all of it`, out)
}

// TestEveryModelInTheUsage: every command's -model usage names every model
// of the zoo (the list comes from zoo.Models, so it cannot fall behind).
func TestEveryModelInTheUsage(t *testing.T) {
	for _, cmd := range []string{"train", "compare", "sweep", "plan", "eval", "stage"} {
		code, stdout, _ := runCLI(context.Background(), cmd, "-h")
		require.Equal(t, 0, code, cmd)
		i := strings.Index(stdout, "\n  -model string\n")
		require.GreaterOrEqual(t, i, 0, "%s has -model:\n%s", cmd, stdout)
		line, _, _ := strings.Cut(stdout[i+len("\n  -model string\n"):], "\n")
		for _, m := range zoo.Models() {
			require.Regexp(t, `[ ,]`+regexp.QuoteMeta(m)+`( |,|$)`, line, "%s -h: -model lists %s", cmd, m)
		}
	}
}

// TestCertsForStagesOnOneHost: pipemare certs with one host and -stages N
// writes the files of N stages; with as many hosts as stages as before;
// with fewer, each stage's certificate is valid for every host; more
// hosts than stages is refused naming both flags.
func TestCertsForStagesOnOneHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, stderr := runCLI(context.Background(), "certs", "-out", dir, "-hosts", "127.0.0.1", "-stages", "3")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "wrote a CA and certificates for the driver and 3 stages to "+dir)
	for i := range 3 {
		for _, f := range []string{"stage-%d.pem", "stage-%d-key.pem"} {
			_, err := os.Stat(filepath.Join(dir, fmt.Sprintf(f, i)))
			require.NoError(t, err)
		}
	}
	code, out, stderr = runCLI(context.Background(), "certs", "-out", filepath.Join(t.TempDir(), "c"), "-hosts", "127.0.0.1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "1 stage (one host: give -stages N for N stages on it)", "one host alone says what more stages need")
	// Two processes hosting three stages: which hosts which is decided
	// once the model is cut, so each stage's certificate names both.
	dir = filepath.Join(t.TempDir(), "c")
	code, out, stderr = runCLI(context.Background(), "certs", "-out", dir, "-hosts", "a,b", "-stages", "3")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "3 stages, each valid for all 2 hosts")
	for i := range 3 {
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("stage-%d.pem", i)))
		require.NoError(t, err)
		block, _ := pem.Decode(raw)
		require.NotNil(t, block)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, cert.DNSNames, "stage %d", i)
	}
	code, _, stderr = runCLI(context.Background(), "certs", "-out", filepath.Join(t.TempDir(), "c"), "-hosts", "a,b,c", "-stages", "2")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-stages 2 and -hosts with 3 hosts: give at most one host per stage: 2")
}
