package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/rundir"
)

// startedLine is train -procs 2's line naming its stage processes.
var startedLine = regexp.MustCompile(`^started 2 stage processes on .* \(pids (\d+) (\d+)\)`)

// restartTarget is what the restart itself may take on loopback, the
// steps redone not counted.
const restartTarget = 10 * time.Second

// TestMaxRestarts: train -procs 2 -max-restarts 3 whose stage processes
// are SIGKILLed three times, each time after a checkpoint, restarts its
// pipeline three times and ends with the weights and the epochs of the
// run left alone; report.json records each restart (the stage, why, the
// checkpoint resumed from, the steps redone, how long it took: under 10
// s), and no process, temporary file or half-written checkpoint is left.
func TestMaxRestarts(t *testing.T) {
	skipProcesses(t)
	want, p, tmp, dir := restarting(t, "2", 6, 3)
	var pids []string
	victims := []int{1, 0, 1}
	for _, v := range victims {
		m := p.until(t, startedLine, time.Minute)
		pids = append(pids, m[1:]...)
		p.until(t, checkpointLine, time.Minute)
		pid, _ := strconv.Atoi(m[1+v])
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	code, out, stderr := p.wait(t, 2*time.Minute)
	require.Equal(t, 0, code, "%s\n%s", out, stderr)
	got := reportOf(t, dir)
	require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256, "restarted three times, the run trained the weights of the run left alone")
	require.Equal(t, want.Result.Epochs, got.Result.Epochs, "and reports its epochs")
	require.Len(t, got.Result.Restarts, 3)
	for i, r := range got.Result.Restarts {
		require.Equal(t, victims[i], r.Stage, "restart %d names the stage killed", i)
		require.Contains(t, r.Reason, fmt.Sprintf("stage %d (pid %s): signal: killed", victims[i], pids[2*i+victims[i]]), "and how its process ended")
		require.Equal(t, filepath.Join(dir, rundir.CheckpointsDir, stepDir(r.FromStep)), r.Checkpoint)
		require.Positive(t, r.FromStep)
		require.GreaterOrEqual(t, r.StepsRedone, 0)
		took := time.Duration(r.TookNS)
		require.Positive(t, took)
		require.Less(t, took, restartTarget, "restart %d itself took %v", i, took)
		t.Logf("restart %d: stage %d, from step %d, %d steps redone, the restart took %v", i+1, r.Stage, r.FromStep, r.StepsRedone, took)
	}
	require.Regexp(t, `(?m)^restart 3 of 3: stage 1 failed; resumed from step \d+ \(.*\), \d+ steps to redo; the restart took `, out)
	requireCleanedUp(t, pids, tmp)
	requireWholeCheckpoints(t, dir)
}

// restarting trains the MLP (mlpArgs) on stages stages for epochs epochs,
// a checkpoint every 3 minibatches, in this process, then starts it with
// -procs 2 -max-restarts restarts; it returns the first run's report,
// the second's process, its TMPDIR and its output directory.
func restarting(t *testing.T, stages string, epochs, restarts int) (want runReportJSON, p *proc, tmp, dir string) {
	t.Helper()
	args := append(append([]string{"train", "-stages", stages, "-checkpoint-every", "3"}, mlpArgs...), "-epochs", strconv.Itoa(epochs))
	whole := t.TempDir()
	pipemareRun(t, nil, append(args, "-out", whole)...)
	tmp, dir = t.TempDir(), t.TempDir()
	p = start(t, []string{"TMPDIR=" + tmp}, append(args, "-procs", "2", "-max-restarts", strconv.Itoa(restarts), "-out", dir)...)
	return reportOf(t, whole), p, tmp, dir
}

// TestMaxRestartsRefused: -max-restarts without checkpoints, without
// -procs or negative is a command line train cannot honour (exit code 2,
// naming the flag).
func TestMaxRestartsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-procs", "3", "-max-restarts", "2"}, "-max-restarts 2: a restart resumes from the last checkpoint: give -checkpoint-every"},
		{[]string{"-checkpoint-every", "2", "-max-restarts", "2"}, "-max-restarts 2 restarts the stage processes -procs starts: give -procs"},
		{[]string{"-max-restarts", "-1"}, "-max-restarts -1: a number of restarts (0: none)"},
		{[]string{"-procs", "3", "-transport", "grpc", "-stall-timeout", "2s"}, "-stall-timeout 2s: must be at least 11s (gRPC's keepalive"},
		{[]string{"-procs", "3", "-stall-timeout", "50ms"}, "-stall-timeout 50ms: must be at least 100ms (over shared memory"}, // auto: shared memory for -procs
		{[]string{"-procs", "3", "-recv-timeout", "-2s"}, "-recv-timeout -2s: must be positive"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, stdout, stderr := runCLI(context.Background(), append([]string{"train", "-model", "mlp", "-limit", "64", "-out", out}, c.args...)...)
		require.Equal(t, 2, code, "%v: %s", c.args, stderr)
		first, rest, _ := strings.Cut(stderr, "\n")
		require.Contains(t, first, c.msg, "%v", c.args)
		require.True(t, strings.HasPrefix(rest, "Usage of pipemare train"), "%v: then the usage:\n%s", c.args, stderr)
		require.Empty(t, stdout)
		_, err := os.Stat(out)
		require.True(t, os.IsNotExist(err), "%v: -out is not created", c.args)
	}
}

// TestStalledStageProcess: a stage process of train -procs 2 stopped
// (SIGSTOP) while it trains is named by the driver within -stall-timeout
// and a margin — its stage, "stopped or stalled", what to do — and every
// process ends, leaving nothing behind: over shared memory, where the
// stopped process beats no more (a stall timeout below gRPC's least of
// 11 s), and over gRPC, where it answers no keepalive.
func TestStalledStageProcess(t *testing.T) {
	skipProcesses(t)
	const margin = 8 * time.Second // noticing the stall, ending the processes (2 s for the stopped one) and writing the report, on a loaded machine
	for _, c := range []struct {
		transport string
		stall     time.Duration
		says      string
	}{
		{"shm", 3 * time.Second, `stage 1 \(pid %d\) beat no more for 3s \(the stall timeout\): its process is stopped or stalled`},
		{"grpc", 11 * time.Second, `stage 1 at 127\.0\.0\.1:\d+ answered nothing, not even the keepalive, within 11s \(the stall timeout\): its process is stopped or stalled`},
	} {
		stall := c.stall
		t.Run(c.transport, func(t *testing.T) {
			tmp := t.TempDir()
			p := start(t, []string{"TMPDIR=" + tmp}, append([]string{"train", "-procs", "2", "-stages", "2", "-transport", c.transport, "-stall-timeout", stall.String(), "-epochs", "1000", "-out", t.TempDir()}, mlpArgs[:4]...)...)
			m := p.until(t, startedLine, time.Minute)
			p.until(t, regexp.MustCompile(`^epoch 1:`), time.Minute)
			victim, _ := strconv.Atoi(m[2])
			require.NoError(t, syscall.Kill(victim, syscall.SIGSTOP))
			stopped := time.Now()
			code, out, stderr := p.wait(t, 2*time.Minute)
			took := time.Since(stopped)
			require.Equal(t, 1, code, "%s\n%s", out, stderr)
			require.Less(t, took, stall+margin, "named within the stall timeout, not the keepalive's minute")
			says := c.says
			if strings.Contains(says, "%d") {
				says = fmt.Sprintf(says, victim)
			}
			require.Regexp(t, `(?m)^pipemare train: .*stage 1 is unreachable .*`+says+` .*restart the pipeline, from the last checkpoint`, stderr)
			require.Contains(t, stderr, "give a longer stall timeout")
			require.Contains(t, stderr, fmt.Sprintf("stage 1 (pid %d): signal: killed", victim), "the stopped process is killed")
			requireCleanedUp(t, m[1:], tmp)
			t.Logf("the driver ended %v after the stage stopped", took)
		})
	}
}

// TestKillAnywhere: a checkpointed train -procs 2 run of the MLP, one of
// whose processes — a random stage, or the driver — is SIGKILLed at a
// random point, ends with the weights of the run left alone: restarted
// by -max-restarts when a stage was killed, resumed with -resume when the
// driver was. Each time no process, temporary file or half-written
// checkpoint is left behind. The points are drawn from a seed, printed,
// and PIPEMARE_KILL_SEED replays it.
func TestKillAnywhere(t *testing.T) {
	skipProcesses(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("PIPEMARE_KILL_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (PIPEMARE_KILL_SEED=%d replays it)", seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d: PIPEMARE_KILL_SEED=%d go test -run TestKillAnywhere ./cmd/pipemare/ replays it", seed, seed)
		}
	})
	rng := rand.New(rand.NewSource(seed))
	args := append([]string{"train", "-stages", "2", "-checkpoint-every", "2"}, mlpArgs...)
	whole := t.TempDir()
	out := pipemareRun(t, nil, append(args, "-out", whole)...)
	want := reportOf(t, whole)
	checkpoints := len(checkpointSteps(out))
	for round, victim := range []string{"stage", "driver", "stage", "driver"} {
		k := 1 + rng.Intn(checkpoints/2) // in the first half: still training when the kill lands
		delay := time.Duration(rng.Intn(30)) * time.Millisecond
		stage := rng.Intn(2)
		tmp, dir := t.TempDir(), t.TempDir()
		env := []string{"TMPDIR=" + tmp}
		run := append(args, "-procs", "2", "-out", dir)
		if victim == "stage" {
			run = append(run, "-max-restarts", "1")
		}
		p := start(t, env, run...)
		m := p.until(t, startedLine, time.Minute)
		for range k {
			p.until(t, checkpointLine, time.Minute)
		}
		time.Sleep(delay)
		pids := m[1:]
		if victim == "stage" {
			t.Logf("round %d: stage %d killed %v after checkpoint %d", round, stage, delay, k)
			pid, _ := strconv.Atoi(pids[stage])
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			code, out, stderr := p.wait(t, 2*time.Minute)
			require.Equal(t, 0, code, "round %d:\n%s\n%s", round, out, stderr)
			got := reportOf(t, dir)
			require.Len(t, got.Result.Restarts, 1, "round %d: restarted once", round)
			require.Equal(t, stage, got.Result.Restarts[0].Stage)
			pids = append(pids, startedLine.FindStringSubmatch(lineOf(t, out, startedLine, 1))[1:]...)
		} else {
			t.Logf("round %d: the driver killed %v after checkpoint %d", round, delay, k)
			require.NoError(t, p.cmd.Process.Kill())
			code, _, _ := p.wait(t, time.Minute)
			require.Equal(t, -1, code, "killed")
			for _, s := range pids {
				pid, _ := strconv.Atoi(s)
				require.Eventually(t, func() bool { return gone(pid) }, 10*time.Second, 10*time.Millisecond, "round %d: stage process %d dies with its driver", round, pid)
			}
			out := pipemareRun(t, env, append(args, "-procs", "2", "-resume", dir)...)
			require.GreaterOrEqual(t, resumedStep(t, out), 2*k, "round %d: resumed from the last checkpoint logged, or a later one", round)
			pids = append(pids, startedLine.FindStringSubmatch(lineOf(t, out, startedLine, 0))[1:]...)
		}
		got := reportOf(t, dir)
		require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256, "round %d: the weights of the run left alone", round)
		require.Equal(t, want.Result.Epochs, got.Result.Epochs, "round %d: and its epochs", round)
		requireCleanedUp(t, pids, tmp)
		requireWholeCheckpoints(t, dir)
	}
}

// lineOf is the n-th line (from 0) of out that re matches.
func lineOf(t *testing.T, out string, re *regexp.Regexp, n int) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			if n == 0 {
				return l
			}
			n--
		}
	}
	t.Fatalf("no line %q in\n%s", re, out)
	return ""
}

// requireWholeCheckpoints checks that a run left only complete
// checkpoints in its checkpoints directory: each with its manifest, and
// no temporary file anywhere.
func requireWholeCheckpoints(t *testing.T, dir string) {
	t.Helper()
	root := filepath.Join(dir, rundir.CheckpointsDir)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		require.NotContains(t, d.Name(), ".tmp-", "no temporary file is left: %s", path)
		if d.IsDir() && strings.HasPrefix(d.Name(), "step-") {
			require.FileExists(t, filepath.Join(path, "MANIFEST.json"), "no half-written checkpoint is left: %s", path)
		}
		return nil
	}))
}
