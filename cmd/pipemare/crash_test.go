package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pipemare/pipemare/rundir"
)

var (
	checkpointLine = regexp.MustCompile(`(?m)^checkpoint at step (\d+): `)
	resumingLine   = regexp.MustCompile(`(?m)^resuming from (\S+): step (\d+) `)
)

// checkpointSteps are the steps of the "checkpoint at step" lines of a
// run's output.
func checkpointSteps(out string) []int {
	var steps []int
	for _, m := range checkpointLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		steps = append(steps, n)
	}
	return steps
}

// resumedStep is the step a resumed run's output says it went on from.
func resumedStep(t *testing.T, out string) int {
	t.Helper()
	m := resumingLine.FindStringSubmatch(out)
	require.NotNil(t, m, "the run says where it resumes:\n%s", out)
	n, _ := strconv.Atoi(m[2])
	return n
}

// TestKillAndResume: a run SIGKILLed at a random instant while it trains,
// and one SIGKILLed at a fixed point inside its second checkpoint —
// after a stage's shard is durable, before the manifest, or before LATEST
// moves — resumed with -resume, ends with the weights_sha256 of the run
// left alone, for PipeMare with T1, T2 and a warm-up and for PipeDream, on
// the MLP and on the CNN (BatchNorm). The resumed run goes on from the
// last complete checkpoint (the random kill: the last one the killed run
// logged, or the next if the kill fell between its commit and its log
// line), so at most the work since it is lost, and reports every epoch.
func TestKillAndResume(t *testing.T) {
	skipProcesses(t)
	cnn := []string{"-model", "cnn", "-limit", "256", "-epochs", "2", "-test-limit", "100"}
	rng := rand.New(rand.NewSource(5))
	for _, c := range []struct {
		name  string
		args  []string
		every int
		point string
	}{
		{"mlp/pipemare", mlpArgs, 3, faultpoint.ShardWritten},
		{"mlp/pipedream", append([]string{"-schedule", "pipedream"}, mlpArgs...), 3, faultpoint.BeforeManifest},
		{"cnn/pipemare", cnn, 2, faultpoint.BeforeLatest},
		{"cnn/pipedream", append([]string{"-schedule", "pipedream"}, cnn...), 2, faultpoint.ShardWritten},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"train", "-checkpoint-every", strconv.Itoa(c.every)}, c.args...)
			whole := t.TempDir()
			out := pipemareRun(t, nil, append(args, "-out", whole)...)
			want := reportOf(t, whole)
			steps := checkpointSteps(out)
			require.GreaterOrEqual(t, len(steps), 3, "checkpoints to kill between:\n%s", out)

			// At a random instant after the k-th checkpoint.
			dir := t.TempDir()
			p := start(t, nil, append(args, "-out", dir)...)
			k := 1 + rng.Intn(len(steps)/2) // in the first half: still training when the kill lands, however loaded the machine
			for range k {
				p.until(t, checkpointLine, time.Minute)
			}
			time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
			require.NoError(t, p.cmd.Process.Kill())
			code, killedOut, _ := p.wait(t, time.Minute)
			require.Equal(t, -1, code, "killed")
			logged := checkpointSteps(killedOut)
			last := logged[len(logged)-1]
			out = pipemareRun(t, nil, append(args, "-resume", dir)...)
			from := resumedStep(t, out)
			require.Contains(t, []int{last, last + c.every}, from, "killed after the checkpoint of step %d: the last complete one", last)
			requireSameRun(t, want, reportOf(t, dir))
			t.Logf("killed after %d checkpoints (last logged: step %d); resumed from step %d", k, last, from)

			// Inside the second checkpoint.
			dir = t.TempDir()
			at := steps[1]
			spec := c.point + ":" + strconv.Itoa(at)
			if c.point == faultpoint.ShardWritten {
				spec += ":1" // once stage 1's shard is durable
			}
			p = start(t, []string{killAtEnv + "=" + spec}, append(args, "-out", dir)...)
			code, _, stderr := p.wait(t, time.Minute)
			require.Equal(t, -1, code, "killed at %s of step %d:\n%s", c.point, at, stderr)
			require.Contains(t, stderr, "test hook: SIGKILL at "+c.point)
			root := filepath.Join(dir, rundir.CheckpointsDir)
			latest, err := os.ReadFile(filepath.Join(root, "LATEST"))
			require.NoError(t, err)
			require.Equal(t, stepDir(steps[0]), string(latest[:len(latest)-1]), "LATEST still names the first checkpoint")
			_, err = os.Stat(filepath.Join(root, stepDir(at), "MANIFEST.json"))
			resumeFrom := steps[0]
			if c.point == faultpoint.BeforeLatest {
				require.NoError(t, err, "the second checkpoint is complete")
				resumeFrom = at // it loses nothing
			} else {
				require.True(t, os.IsNotExist(err), "the second checkpoint has no manifest")
			}
			out = pipemareRun(t, nil, append(args, "-resume", dir)...)
			require.Equal(t, resumeFrom, resumedStep(t, out))
			requireSameRun(t, want, reportOf(t, dir))
		})
	}
}

func stepDir(step int) string { return fmt.Sprintf("step-%012d", step) }

// requireSameRun checks that a resumed run's report is the whole run's:
// its weights, every epoch's losses and accuracy, the trained model's
// accuracy.
func requireSameRun(t *testing.T, want, got runReportJSON) {
	t.Helper()
	require.NotEmpty(t, want.Result.WeightsSHA256)
	require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256, "the resumed run trained the same weights")
	require.Equal(t, want.Result.Epochs, got.Result.Epochs, "and reports every epoch of the whole run")
	require.Equal(t, want.Result.ModelAccuracy, got.Result.ModelAccuracy)
	require.NotNil(t, got.Resumed)
}

// TestKillStageProcesses: a run whose stages are processes (-procs 2) is
// SIGKILLed — the driver at a random instant (its stage processes die
// with it), or stage 1 while it writes its shard of a checkpoint (the
// driver fails naming stage 1, and the other stage exits) — and resumed,
// once with -procs 2 and once in one process: the weights are the
// uninterrupted run's.
func TestKillStageProcesses(t *testing.T) {
	skipProcesses(t)
	args := append([]string{"train", "-stages", "2", "-checkpoint-every", "3"}, mlpArgs...)
	whole := t.TempDir()
	pipemareRun(t, nil, append(args, "-out", whole)...)
	want := reportOf(t, whole)

	dir := t.TempDir()
	p := start(t, nil, append(args, "-procs", "2", "-out", dir)...)
	m := p.until(t, regexp.MustCompile(`^started 2 stage processes on .* \(pids (\d+) (\d+)\)`), time.Minute)
	p.until(t, checkpointLine, time.Minute)
	p.until(t, checkpointLine, time.Minute)
	require.NoError(t, p.cmd.Process.Kill())
	p.wait(t, time.Minute)
	for _, s := range m[1:] {
		pid, _ := strconv.Atoi(s)
		require.Eventually(t, func() bool { return gone(pid) }, 10*time.Second, 10*time.Millisecond, "stage process %d dies with its driver", pid)
	}
	out := pipemareRun(t, nil, append(args, "-procs", "2", "-resume", dir)...)
	require.GreaterOrEqual(t, resumedStep(t, out), 6)
	requireSameRun(t, want, reportOf(t, dir))
	require.Equal(t, "processes", reportOf(t, dir).Placement.Where)

	dir = t.TempDir()
	p = start(t, []string{killAtEnv + "=" + faultpoint.ShardWritten + ":6:1"}, append(args, "-procs", "2", "-out", dir)...)
	code, _, stderr := p.wait(t, time.Minute)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "test hook: SIGKILL at "+faultpoint.ShardWritten+" of step 6 (stage 1)")
	require.Regexp(t, `(?m)^pipemare train: .*stage 1`, stderr, "the driver names the stage")
	require.Contains(t, stderr, "stage 1 (pid ", "and how its process ended")
	out = pipemareRun(t, nil, append(args, "-resume", dir)...)
	require.Equal(t, 3, resumedStep(t, out))
	requireSameRun(t, want, reportOf(t, dir))
	require.Equal(t, "in-process", reportOf(t, dir).Placement.Where)
}
