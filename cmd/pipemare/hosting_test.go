package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// cnnArgs is a short CNN run on its 4 layers' 4 stages (the same cut on
// every process and every run: none measured): two minibatches, accuracy
// on 32 test images.
var cnnArgs = []string{"-model", "cnn", "-limit", "128", "-epochs", "1", "-test-limit", "32", "-stages", "fine"}

// TestProcsHostSeveralStages: train -procs 2 on 4 stages starts two stage
// processes, hosting the stages the schedule places on them — zb-v in a
// V, interleaved round robin, pipemare and 1f1b balanced by the plan's
// costs (the CNN's first layer against the three others, not two and
// two), pipemare contiguously when asked, pipemare-v contiguously or, when
// asked, in a V — and trains the weights_sha256
// the in-process engine trains, over shared memory (-transport auto) and
// over gRPC; report.json says which stages each process hosted.
// Started by hand, two processes hosting zb-v's stages 0,3 and 1,2 at their
// loopback address and the next port (-stage-addrs one address per
// process: shared memory) train the same (handStartedHostsSeveralStages).
func TestProcsHostSeveralStages(t *testing.T) {
	skipProcesses(t)
	t.Setenv(asMainEnv, "1") // the stage processes are this test binary
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var alone runReportJSON // the last run in this process
	for _, c := range []struct {
		run, extra []string
		placed     string
		hosts      [][]int // nil: balanced, as the plan's costs split it
	}{
		{[]string{"-schedule", "zb-v"}, nil, "v", [][]int{{0, 3}, {1, 2}}},
		{[]string{"-schedule", "zb-v"}, []string{"-transport", "grpc"}, "v", [][]int{{0, 3}, {1, 2}}},
		{[]string{"-schedule", "interleaved"}, nil, "round-robin", [][]int{{0, 2}, {1, 3}}},
		{[]string{"-schedule", "pipemare", "-warmup", "0"}, nil, "balanced", nil},
		{[]string{"-schedule", "pipemare", "-warmup", "0"}, []string{"-placement", "contiguous"}, "contiguous", [][]int{{0, 1}, {2, 3}}},
		{[]string{"-schedule", "1f1b"}, nil, "balanced", nil},
		{[]string{"-schedule", "pipemare-v", "-warmup", "0"}, nil, "contiguous", [][]int{{0, 1}, {2, 3}}},
		{[]string{"-schedule", "pipemare-v", "-warmup", "0"}, []string{"-placement", "v"}, "v", [][]int{{0, 3}, {1, 2}}},
	} {
		run := append(append([]string{}, cnnArgs...), c.run...)
		if c.extra == nil {
			dir := t.TempDir()
			code, _, stderr := runCLI(context.Background(), append([]string{"train", "-out", dir}, run...)...)
			require.Equal(t, 0, code, stderr)
			alone = reportOf(t, dir)
		}
		want := alone.Result.WeightsSHA256
		hosts := c.hosts
		if hosts == nil {
			hosts = balancedHosts(t, "cnn", 2)
			require.NotEqual(t, schedule.Contiguous.Hosts(make([]float64, 4), 2), hosts, "the CNN's stages cost unlike: balanced is not by count")
		}
		dir := t.TempDir()
		args := append(append([]string{"train", "-procs", "2", "-insecure", "-out", dir}, run...), c.extra...)
		code, out, stderr := runCLI(context.Background(), args...)
		require.Equal(t, 0, code, "%v\n%s\n%s", args, out, stderr)
		require.Empty(t, stderr, "the stages said nothing")
		require.Regexp(t, `started 2 stage processes on 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+ \(pids \d+ \d+, hosting stages `, out)
		require.Contains(t, out, "hosting stages "+launch.StageList(hosts[0])+" and "+launch.StageList(hosts[1])+", placed "+c.placed+")\n")
		got := reportOf(t, dir)
		require.Equal(t, want, got.Result.WeightsSHA256, "%v: two processes of several stages train exactly like the in-process engine", args)
		require.Equal(t, hosts, got.Placement.Hosts)
		require.Equal(t, c.placed, got.Placement.PlacedBy)
		require.Len(t, got.Placement.Addresses, 2, "one per process")
		var pids []string
		for _, pid := range got.Placement.PIDs {
			pids = append(pids, strconv.Itoa(pid))
		}
		requireCleanedUp(t, pids, tmp)
		if c.run[1] == "zb-v" && c.extra == nil {
			handStartedHostsSeveralStages(t, alone)
			torchrunHostsSeveralStages(t, alone)
		}
		if c.run[1] == "1f1b" {
			handStartedBalanced(t, hosts)
		}
	}
}

// balancedHosts are the stages each of w processes hosts under the
// balanced placement of model's fine stages: the plan's own costs
// (train.PlanCosts) split by schedule.Balance.
func balancedHosts(t *testing.T, model string, w int) [][]int {
	t.Helper()
	r, err := zoo.RecipeFor(model)
	require.NoError(t, err)
	costs, err := train.PlanCosts(r, train.Config{Hyper: r.Run}, "fine")
	require.NoError(t, err)
	return schedule.Balanced.Hosts(costs, w)
}

// handStartedBalanced: a stage process started by hand with stages the
// balanced placement does not put together (two and two, as contiguous
// would) is refused before it connects, naming the lists the balanced
// placement makes (hosts).
func handStartedBalanced(t *testing.T, hosts [][]int) {
	t.Helper()
	run := append(append([]string{}, cnnArgs...), "-schedule", "1f1b")
	addrs := "127.0.0.1:1,127.0.0.1:3"
	code, _, stderr := runCLI(context.Background(), append([]string{"stage", "-stage", "0,1", "-stage-addrs", addrs, "-insecure"}, run...)...)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "-stage 0,1: placed balanced, the 4 stages on 2 processes make processes of stages "+launch.StageList(hosts[0])+" or "+launch.StageList(hosts[1])+": give one of those")
}

// handStartedHostsSeveralStages: two pipemare stage processes started
// by hand, each hosting the two stages zb-v places on it (-stage 0,3 and
// -stage 1,2) at its address and the next port, and a driver given their
// two addresses (-stage-addrs), train what the in-process engine trained
// (want: cnnArgs under zb-v); a process given stages the placement does
// not put together is refused before it connects, naming them and the
// processes it makes.
func handStartedHostsSeveralStages(t *testing.T, want runReportJSON) {
	t.Helper()
	run := append(append([]string{}, cnnArgs...), "-schedule", "zb-v")

	port := freePorts(t, 4)
	addrs := "127.0.0.1:" + strconv.Itoa(port) + ",127.0.0.1:" + strconv.Itoa(port+2)
	var ps []*proc
	for _, stages := range []string{"0,3", "1,2"} {
		ps = append(ps, start(t, nil, append([]string{"stage", "-stage", stages, "-stage-addrs", addrs, "-insecure"}, run...)...))
	}
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), append([]string{"train", "-stage-addrs", addrs, "-insecure", "-out", dir}, run...)...)
	require.Equal(t, 0, code, "%s\n%s", out, stderr)
	for i, p := range ps {
		code, out, stderr := p.wait(t, time.Minute)
		require.Equal(t, 0, code, "process %d:\n%s\n%s", i, out, stderr)
		require.Contains(t, out, []string{"stages 0,3: stopped by the driver", "stages 1,2: stopped by the driver"}[i])
	}
	got := reportOf(t, dir)
	require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256)
	require.Equal(t, [][]int{{0, 3}, {1, 2}}, got.Placement.Hosts, "the driver says which stages each process at -stage-addrs hosted")
	require.Equal(t, "v", got.Placement.PlacedBy)

	code, _, stderr = runCLI(context.Background(), append([]string{"stage", "-stage", "0,1", "-stage-addrs", addrs, "-insecure"}, run...)...)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "-stage 0,1: placed v, the 4 stages on 2 processes make processes of stages 0,3 or 1,2: give one of those")
}

// torchrunHostsSeveralStages: two pipemare train processes with the same
// flags and torchrun's environment on one node (WORLD_SIZE 2) host zb-v's
// 4 stages as its V places them — rank 0 drives and serves stages 0 and 3
// at MASTER_PORT+1 and +3, rank 1 serves 1 and 2 at +2 and +4 — and train
// what the in-process engine trained (want: cnnArgs under zb-v). Under
// that environment, a pipemare stage given other stages than its rank's
// is refused, naming its rank's.
func torchrunHostsSeveralStages(t *testing.T, want runReportJSON) {
	t.Helper()
	run := append(append([]string{}, cnnArgs...), "-schedule", "zb-v")
	master := freePorts(t, 5) // MASTER_PORT, then rank r's k-th stage at MASTER_PORT+1+r+2k
	torchrun := func(rank int) []string {
		return []string{"RANK=" + strconv.Itoa(rank), "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(master)}
	}
	dir := t.TempDir()
	ps := []*proc{nil, start(t, torchrun(1), append([]string{"train", "-insecure", "-out", dir}, run...)...)}
	ps[0] = start(t, torchrun(0), append([]string{"train", "-insecure", "-out", dir}, run...)...)
	for i, p := range ps {
		code, out, stderr := p.wait(t, time.Minute)
		require.Equal(t, 0, code, "rank %d:\n%s\n%s", i, out, stderr)
		if i == 1 {
			require.Contains(t, out, "stages 1,2: stopped by the driver")
		}
	}
	got := reportOf(t, dir)
	require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256, "torchrun's two processes of two stages train like the engine")
	require.Equal(t, "torchrun", got.Placement.Launcher)
	require.Equal(t, [][]int{{0, 3}, {1, 2}}, got.Placement.Hosts)
	require.Equal(t, []string{fmt.Sprintf("127.0.0.1:%d", master+1), fmt.Sprintf("127.0.0.1:%d", master+2)}, got.Placement.Addresses, "one per process")

	env := map[string]string{}
	for _, kv := range torchrun(1) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	defer func(f func(string) (string, bool)) { lookupEnv = f }(lookupEnv)
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code, _, stderr := runCLI(context.Background(), append([]string{"stage", "-stage", "1", "-insecure"}, run...)...)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "-stage 1: the torchrun environment makes this process rank 1 of 2, which hosts stages 1,2 of 4 placed v")
}

// TestMaxRestartsHostingSeveralStages: train -procs 2 -stages 3 hosts
// stage 0 in one process, 1 and 2 in the other (balanced: the MLP's
// first layer costs more than the two others); the second, SIGKILLed
// after a checkpoint, is started anew with both its stages, and the run
// ends with the weights of the run left alone; the restart names the
// process by its stages.
func TestMaxRestartsHostingSeveralStages(t *testing.T) {
	skipProcesses(t)
	want, p, tmp, dir := restarting(t, "3", 2, 1)
	started := regexp.MustCompile(`^started 2 stage processes on .* \(pids (\d+) (\d+), hosting stages 0 and 1,2, placed balanced\)`)
	m := p.until(t, started, time.Minute)
	pids := m[1:]
	p.until(t, checkpointLine, time.Minute)
	victim, _ := strconv.Atoi(m[2])
	require.NoError(t, syscall.Kill(victim, syscall.SIGKILL))
	pids = append(pids, p.until(t, started, time.Minute)[1:]...)
	code, out, stderr := p.wait(t, 2*time.Minute)
	require.Equal(t, 0, code, "%s\n%s", out, stderr)
	got := reportOf(t, dir)
	require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256, "restarted, the run trained the weights of the run left alone")
	require.Len(t, got.Result.Restarts, 1)
	require.Contains(t, got.Result.Restarts[0].Reason, fmt.Sprintf("stages 1,2 (pid %d): signal: killed", victim))
	require.Equal(t, [][]int{{0}, {1, 2}}, got.Placement.Hosts, "the new processes host the same stages")
	requireCleanedUp(t, pids, tmp)
}
