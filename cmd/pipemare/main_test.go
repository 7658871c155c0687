package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
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
		{"train", "-epochs", "-2"},
		{"train", "-momentum", "1.5"},
		{"compare", "-lr", "-0.1"},
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
	require.Positive(t, virtual["SamplesPerSec"])
	require.Positive(t, virtual["Utilization"])
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
