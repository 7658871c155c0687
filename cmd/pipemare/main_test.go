package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestBadValues: values outside a flag's range are usage errors that say
// which flag and why.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"train", "-epochs", "-2"}, "-epochs -2: must be positive"},
		{[]string{"train", "-lr", "NaN"}, "-lr NaN: must be positive"},
		{[]string{"train", "-momentum", "1.5"}, "-momentum 1.5: must be in [0, 1)"},
		{[]string{"train", "-momentum", "NaN"}, "-momentum NaN: must be in [0, 1)"},
		{[]string{"train", "-warmup", "-5"}, "-warmup -5, -t1 -1: a number of steps"},
		{[]string{"compare", "-lr", "-0.1"}, "-lr -0.1: must be positive"},
	} {
		code, _, stderr := runCLI(context.Background(), c.args...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Contains(t, stderr, c.msg, "%v", c.args)
		require.Contains(t, stderr, "Usage of pipemare", "%v", c.args)
	}
}

// TestFlagsDeferToTheRecipe: flags left alone keep the model's recipe,
// flags given override it, -stash=false included.
func TestFlagsDeferToTheRecipe(t *testing.T) {
	cfg := func(args ...string) zoo.Config {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var o options
		o.register(fs)
		require.NoError(t, fs.Parse(args))
		s, err := scheduleNamed(o.schedule)
		require.NoError(t, err)
		c, err := o.config(s, 4404)
		require.NoError(t, err)
		return c
	}
	r, err := zoo.RecipeFor("transformer")
	require.NoError(t, err)
	def := cfg("-model", "transformer")
	want := r.PipeMare(4404 / (r.Run.Microbatch * r.Run.Microbatches))
	def.Schedule, want.Schedule = schedule.Schedule{}, schedule.Schedule{}
	require.Equal(t, want, def)
	over := cfg("-model", "transformer", "-stash=false", "-seed", "7", "-lr", "0.1", "-momentum", "0.5", "-cosine=false", "-epochs", "2", "-warmup", "0")
	require.Equal(t, asyncvm.Recompute, over.Activations)
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
	for _, args := range [][]string{
		{"train", "-model", "gpt"},
		{"train", "-schedule", "zigzag"},
		{"train", "-stages", "zero"},
		{"train", "-epochs", "x"},
		{"schedule", "-stages", "0"},
		{"plan", "-model", "gpt"},
		{"train", "extra"},
	} {
		code, _, stderr := runCLI(context.Background(), args...)
		require.Equal(t, 2, code, "%v", args)
		require.Contains(t, stderr, "Usage of pipemare", "%v: %s", args, stderr)
	}
}

func TestSchedule(t *testing.T) {
	code, out, _ := runCLI(context.Background(), "schedule", "-schedule", "gpipe", "-stages", "2", "-microbatches", "2", "-minibatches", "1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "    1  F1       F0\n")
	require.Contains(t, out, "utilization with equal action times: 0.667")
}

func TestPlan(t *testing.T) {
	dot := filepath.Join(t.TempDir(), "cnn.dot")
	code, out, stderr := runCLI(context.Background(), "plan", "-model", "cnn", "-dot", dot)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "cnn at microbatch 16: 4 stages")
	b, err := os.ReadFile(dot)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "digraph plan {"))
}

// TestTrainWritesItsOutputs trains the MLP for one short epoch on the
// embedded subset and checks report.json, trace.json and the plots.
func TestTrainWritesItsOutputs(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), "train", "-model", "mlp", "-data", "embedded", "-epochs", "1", "-limit", "640", "-out", dir)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `epoch 1: loss [0-9.]+, test accuracy 0\.[0-9]+, [0-9]+ samples/s, utilization 0\.[0-9]+`, out)
	var report []map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &report))
	require.Len(t, report, 1)
	require.Equal(t, "pipemare", report[0]["schedule"])
	virtual := report[0]["virtual_devices"].(map[string]any)
	require.Positive(t, virtual["samples_per_sec"])
	require.Positive(t, virtual["utilization"])
	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
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
			if strings.HasPrefix(e.Name, "F") {
				forwards++
				require.Contains(t, e.Args, "microbatch")
			}
		}
	}
	require.Len(t, stages, 3, "one thread per stage")
	require.Equal(t, 3*640/16, forwards, "every stage's forward of every microbatch")
	for _, png := range []string{"loss.png", "gantt.png", "utilization.png", "memory.png"} {
		st, err := os.Stat(filepath.Join(dir, png))
		require.NoError(t, err, png)
		require.Positive(t, st.Size())
	}
}

// TestInterruptStillWritesTheReport: an interrupted run (Ctrl-C cancels
// the context) stops its workers and still writes the report of what ran.
func TestInterruptStillWritesTheReport(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onSteps = func(done int) { // interrupt once 10 steps have run
		if done >= 10 {
			cancel()
		}
	}
	defer func() { onSteps = nil }()
	code, _, stderr := runCLI(ctx, "train", "-model", "mlp", "-data", "embedded", "-epochs", "3", "-out", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "context canceled")
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err, "the report of what ran")
	var report []map[string]any
	require.NoError(t, json.Unmarshal(b, &report))
	epochs := report[0]["epochs"].([]any)
	require.NotEmpty(t, epochs[0].(map[string]any)["losses"], "the steps that ran")
}
