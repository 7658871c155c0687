package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/rundir"
	"github.com/stretchr/testify/require"
)

// mlpArgs is a short MLP run: 5 minibatches an epoch, 3 epochs (the
// first a synchronous warm-up, then PipeMare with T1 and T2), accuracy on
// 200 test images.
var mlpArgs = []string{"-model", "mlp", "-limit", "320", "-epochs", "3", "-test-limit", "200"}

// TestProcsTrainLikeInProcess: train -procs 3 (three stage processes of
// this program, over shared memory: -transport auto's choice for them)
// trains the MLP exactly as the in-process engine does — the same
// weights_sha256 in report.json — says where its stages ran, and leaves
// no process, goroutine or certificate behind; -transport grpc likewise
// over loopback, with mutual TLS and throw-away certificates, or
// -insecure in plaintext.
func TestProcsTrainLikeInProcess(t *testing.T) {
	skipProcesses(t)
	t.Setenv(asMainEnv, "1") // the stage processes are this test binary
	alone := t.TempDir()
	code, _, stderr := runCLI(context.Background(), append([]string{"train", "-out", alone}, mlpArgs...)...)
	require.Equal(t, 0, code, stderr)
	want := reportOf(t, alone)
	require.Equal(t, "in-process", want.Placement.Where)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the throw-away certificates go
	carriers := map[string]string{"": "shared memory", "shm": "shared memory", "grpc": "grpc+mtls", "grpc -insecure": "grpc (plaintext)"}
	for _, extra := range [][]string{nil, {"-transport", "shm"}, {"-transport", "grpc"}, {"-transport", "grpc", "-insecure"}} {
		dir := t.TempDir()
		args := append(append([]string{"train", "-procs", "3", "-out", dir}, mlpArgs...), extra...)
		code, out, stderr := runCLI(context.Background(), args...)
		require.Equal(t, 0, code, "%v\n%s\n%s", args, out, stderr)
		require.Empty(t, stderr, "the stages said nothing")
		require.Regexp(t, `started 3 stage processes on 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+ \(pids \d+ \d+ \d+\)`, out)
		got := reportOf(t, dir)
		require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256, "%v: stage processes train exactly like the in-process engine", extra)
		require.Equal(t, want.Result.Epochs, got.Result.Epochs[:len(want.Result.Epochs)], "the same losses and accuracies")
		require.Equal(t, "processes", got.Placement.Where)
		require.Len(t, got.Placement.Addresses, 3)
		require.Len(t, got.Placement.PIDs, 3)
		require.Equal(t, carriers[strings.Join(extra[min(1, len(extra)):], " ")], got.Placement.Transport, "%v", extra)
		var pids []string
		for _, pid := range got.Placement.PIDs {
			pids = append(pids, strconv.Itoa(pid))
		}
		requireCleanedUp(t, pids, tmp)
	}
}

// TestProcsRefusals: -procs below 1, with a plan of another size, or
// beside -stage-addrs or -certs, a plan that does not fit its addresses or
// its model, a -connect-timeout that is not positive, plaintext to a host
// that is not loopback, -pin without -procs, a -cpus or -cut that is not
// one (or a cut beside a -stages it contradicts), are refused naming the flags, with the usage
// (exit code 2), before anything starts; so is -resume of a directory
// that does not exist or holds no checkpoint (exit code 1), which it does
// not create.
func TestProcsRefusals(t *testing.T) {
	empty := t.TempDir()
	missing := filepath.Join(t.TempDir(), "mistyped")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-procs", "-1"}, 2, "-procs -1: the number of stage processes, at least 1 (without -procs the stages run in this process)"},
		{[]string{"-procs", "0"}, 2, "-procs 0: the number of stage processes, at least 1 (without -procs the stages run in this process)"},
		{[]string{"-procs", "2", "-stage-addrs", "127.0.0.1:1,127.0.0.1:2"}, 2, "-procs 2 and -stage-addrs: "},
		{[]string{"-procs", "2", "-certs", "x"}, 2, "-procs 2 and -certs: -procs makes throw-away certificates"},
		{[]string{"-stage-addrs", "10.0.0.1:7000", "-insecure"}, 2, "-insecure: plaintext refused: 10.0.0.1:7000 is not a loopback address; give -certs DIR"},
		{[]string{"-stage-addrs", "127.0.0.1:7000", "-transport", "grpc"}, 2, "-certs DIR or -insecure: the links between processes need mutual TLS"},
		{[]string{"-stage-addrs", "127.0.0.1:7000,10.0.0.1:7000"}, 2, "-certs DIR or -insecure: the links between processes need mutual TLS"}, // an address off loopback: gRPC
		{[]string{"-stage-addrs", "127.0.0.1:7000,10.0.0.1:7000", "-stall-timeout", "1s", "-certs", "x"}, 2, "-stall-timeout 1s: must be at least 11s (gRPC's keepalive"},
		{[]string{"-stage-addrs", "127.0.0.1"}, 2, `-stage-addrs: "127.0.0.1" is not host:port`},
		{[]string{"-insecure"}, 2, "-certs and -insecure: they secure the links to stages in other processes: give -procs or -stage-addrs"},
		{[]string{"-checkpoint-every", "-3"}, 2, "-checkpoint-every -3: a number of minibatches"},
		{[]string{"-test-limit", "-3"}, 2, "-test-limit -3: must be positive"},
		{[]string{"-out", "a", "-resume", "b"}, 2, "-resume b: a resumed run writes to the directory it resumes (b), not -out a"},
		{[]string{"-procs", "4", "-test-limit", "64"}, 2, "-procs 4: 4 processes for the plan's 3 stages: give at most 3"},
		{[]string{"-procs", "2", "-stages", "3", "-placement", "round-robin"}, 2, "-procs 2: placed round-robin, every process hosts as many of the plan's 3 stages: give -stages a multiple of 2, or processes that divide 3"},
		{[]string{"-procs", "2", "-placement", "zigzag"}, 2, `-placement "zigzag": one of contiguous, round-robin, v, balanced (default: the schedule's)`},
		{[]string{"-stages", "10000"}, 2, "-stages 10000: the mlp model cuts into at most 3 stages, one per layer (-stages fine)"},
		{[]string{"-stage-addrs", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4", "-insecure"}, 2, "-stage-addrs 4: 4 processes for the plan's 3 stages: give at most 3"},
		{[]string{"-procs", "3", "-connect-timeout", "0s"}, 2, "-connect-timeout 0s: must be positive"},
		{[]string{"-pin"}, 2, "-pin: places -procs's stage processes on CPUs of their own: give -procs (pin this process with -cpus)"},
		{[]string{"-cpus", "x"}, 2, `-cpus: affinity: "x" is not a CPU list (like 1, 0-3 or 0,2)`},
		{[]string{"-cpus", "1000"}, 1, "-cpus 1000: affinity: pinning the process to CPUs 1000 (it may use "},
		{[]string{"-cut", "0"}, 2, `-cut "0": increasing op positions from 1, comma-separated, like 22,81`},
		{[]string{"-cut", "7,6"}, 2, `-cut "7,6": increasing op positions`},
		{[]string{"-cut", "6", "-stages", "3"}, 2, "-stages 3 and -cut 6: the cut makes 2 stages; give one of the two"},
		{[]string{"-cut", "5000"}, 2, "-cut 5000: graphsplit: CutAtOps([5000]): position 5000 is not between 1 and"},
		{[]string{"-resume", missing}, 1, "-resume " + missing + ": stat " + missing + ": no such file or directory (a new run is -out " + missing + ")"},
		{[]string{"-resume", empty}, 1, "-resume " + empty + ": no checkpoint in " + filepath.Join(empty, rundir.CheckpointsDir) + " to continue from (a new run is -out " + empty + "; -resume auto continues one if there is one, else starts it)"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"train", "-model", "mlp", "-limit", "64", "-epochs", "2", "-out", out}, c.args...)
		if slices.Contains(c.args, "-resume") {
			args = slices.Delete(args, 7, 9) // a resumed run writes where it resumes
		}
		code, stdout, stderr := runCLI(context.Background(), args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		first, rest, _ := strings.Cut(stderr, "\n")
		require.Contains(t, first, c.msg, "%v", c.args)
		if c.code == 2 {
			require.True(t, strings.HasPrefix(rest, "Usage of pipemare train"), "%v: then the usage:\n%s", c.args, stderr)
		}
		require.Empty(t, stdout, "%v: no training header, nothing trained", c.args)
		_, err := os.Stat(out)
		require.True(t, os.IsNotExist(err), "%v: -out is not created", c.args)
	}
	_, err := os.Stat(missing)
	require.True(t, os.IsNotExist(err), "a mistyped -resume is not created")
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "nor filled")
}

// TestStagesStartedByHand: the walkthrough of the README — one pipemare
// stage per stage, train -stage-addrs driving them — trains as the
// in-process engine does, each stage exiting 0, saying the driver stopped
// it: at loopback addresses -transport auto shares memory, without
// credentials (report.json says so); -transport grpc with pipemare
// certs's certificates forces gRPC with mutual TLS. Then the driver is
// killed mid-run: every stage exits non-zero with an error naming its
// stage.
func TestStagesStartedByHand(t *testing.T) {
	skipProcesses(t)
	args := []string{"-model", "mlp", "-stages", "2", "-limit", "320", "-epochs", "3", "-test-limit", "200"}
	alone := t.TempDir()
	pipemareRun(t, nil, append([]string{"train", "-out", alone}, args...)...)
	want := reportOf(t, alone).Result.WeightsSHA256

	certs := filepath.Join(t.TempDir(), "certs")
	code, out, stderr := runCLI(context.Background(), "certs", "-out", certs, "-hosts", "127.0.0.1,localhost")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "wrote a CA and certificates for the driver and 2 stages")
	hosts := []string{"127.0.0.1", "localhost"} // the hosts the certificates name
	stages := func(links, args []string) ([]*proc, string) {
		a := append(slices.Clone(links), args...)
		return handStages(t, hosts, [][]string{a, a}, nil)
	}
	for _, c := range []struct {
		links     []string
		transport string
	}{
		{nil, "shared memory"},
		{[]string{"-transport", "grpc", "-certs", certs}, "grpc+mtls"},
	} {
		ps, addrs := stages(c.links, args)
		dir := t.TempDir()
		pipemareRun(t, nil, append(append([]string{"train", "-stage-addrs", addrs, "-out", dir}, c.links...), args...)...)
		got := reportOf(t, dir)
		require.Equal(t, want, got.Result.WeightsSHA256, "stages started by hand train like the engine, over %s", c.transport)
		require.Equal(t, "remote", got.Placement.Where)
		require.Equal(t, c.transport, got.Placement.Transport, "%v", c.links)
		require.Equal(t, strings.Split(addrs, ","), got.Placement.Addresses)
		for i, p := range ps {
			code, out, stderr := p.wait(t, 30*time.Second)
			require.Equal(t, 0, code, "stage %d: %s", i, stderr)
			require.Contains(t, out, fmt.Sprintf("stage %d of 2: connected", i))
			require.Contains(t, out, fmt.Sprintf("stage %d: stopped by the driver", i))
		}
	}

	long := append(append([]string(nil), args...), "-epochs", "100") // still running when killed, however loaded the machine
	ps, addrs := stages(nil, long)
	driver := start(t, nil, append([]string{"train", "-stage-addrs", addrs, "-out", t.TempDir()}, long...)...)
	driver.until(t, regexp.MustCompile(`^epoch 1:`), time.Minute)
	require.NoError(t, driver.cmd.Process.Kill())
	for i, p := range ps {
		code, _, stderr := p.wait(t, 30*time.Second)
		require.NotEqual(t, 0, code, "stage %d lost its driver", i)
		require.Regexp(t, fmt.Sprintf(`(?m)^pipemare stage: .*stage %d`, i), stderr)
	}
}

// handStages starts stage processes as the README's walkthrough starts
// them by hand, one per host of hosts: stage i listens on a loopback port
// of its own, named with hosts[i] (the host its certificate names), and
// runs pipemare stage -stage i -stage-addrs … -listen fd:3 and args[i],
// with env[i] added to its environment (env may be nil). A nil args[i]
// leaves stage i unstarted: its port refuses connections. It returns the
// processes (nil for a stage not started) and the value of -stage-addrs.
func handStages(t *testing.T, hosts []string, args, env [][]string) ([]*proc, string) {
	t.Helper()
	var ls []net.Listener
	var addrs []string
	for _, host := range hosts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		addrs = append(addrs, host+":"+port)
	}
	ps := make([]*proc, len(ls))
	for i, l := range ls {
		f, err := l.(*net.TCPListener).File()
		require.NoError(t, err)
		l.Close()
		if args[i] != nil {
			var e []string
			if env != nil {
				e = env[i]
			}
			ps[i] = startWithFiles(t, []*os.File{f}, e, append([]string{"stage", "-stage", strconv.Itoa(i), "-stage-addrs", strings.Join(addrs, ","), "-listen", "fd:3"}, args[i]...)...)
		}
		f.Close()
	}
	return ps, strings.Join(addrs, ",")
}

// TestProcsStageKilled: a stage process of train -procs 3 SIGKILLed while
// the pipeline trains makes the driver fail within seconds, naming the
// stage and how its process ended; the other stage processes exit and no
// certificate is left behind.
func TestProcsStageKilled(t *testing.T) {
	skipProcesses(t)
	tmp := t.TempDir()
	p := start(t, []string{"TMPDIR=" + tmp}, append([]string{"train", "-procs", "3", "-epochs", "100", "-out", t.TempDir()}, mlpArgs[:4]...)...)
	m := p.until(t, regexp.MustCompile(`^started 3 stage processes on .* \(pids (\d+) (\d+) (\d+)\)`), time.Minute)
	p.until(t, regexp.MustCompile(`^epoch 1:`), time.Minute)
	victim, _ := strconv.Atoi(m[2])
	require.NoError(t, syscall.Kill(victim, syscall.SIGKILL))
	killed := time.Now()
	code, out, stderr := p.wait(t, time.Minute)
	require.Equal(t, 1, code, "%s\n%s", out, stderr)
	require.Less(t, time.Since(killed), 30*time.Second, "the driver notices within the receive deadline")
	require.Regexp(t, `(?m)^pipemare train: .*stage 1`, stderr, "the driver names the stage")
	require.Contains(t, stderr, fmt.Sprintf("stage 1 (pid %d): signal: killed", victim), "and how its process ended")
	requireCleanedUp(t, m[1:], tmp)
}

// TestTorchrunEnvironment: three pipemare train processes with the same
// flags and torchrun's environment (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT; package launch), started in reverse order,
// train as the in-process engine does: rank 0 drives and serves stage 0
// and writes the report, saying torchrun placed it; ranks 1 and 2 serve
// their stages until the driver stops them.
func TestTorchrunEnvironment(t *testing.T) {
	skipProcesses(t)
	alone := t.TempDir()
	pipemareRun(t, nil, append([]string{"train", "-out", alone}, mlpArgs...)...)
	want := reportOf(t, alone).Result.WeightsSHA256

	master := freePorts(t, 4) // MASTER_PORT, then stage i listens on MASTER_PORT+1+i
	dir := t.TempDir()
	ps := make([]*proc, 3)
	for i := 2; i >= 0; i-- {
		env := []string{"RANK=" + strconv.Itoa(i), "WORLD_SIZE=3", "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(master)}
		ps[i] = start(t, env, append([]string{"train", "-insecure", "-out", dir}, mlpArgs...)...)
	}
	for i, p := range ps {
		code, out, stderr := p.wait(t, 5*time.Minute)
		require.Equal(t, 0, code, "rank %d:\n%s\n%s", i, out, stderr)
		if i > 0 {
			require.Contains(t, out, fmt.Sprintf("stage %d: stopped by the driver", i))
		}
	}
	got := reportOf(t, dir)
	require.Equal(t, want, got.Result.WeightsSHA256, "torchrun's processes train like the engine")
	require.Equal(t, "torchrun", got.Placement.Launcher)
	require.Equal(t, []string{fmt.Sprintf("127.0.0.1:%d", master+1), fmt.Sprintf("127.0.0.1:%d", master+2), fmt.Sprintf("127.0.0.1:%d", master+3)}, got.Placement.Addresses)
}

// freePorts is the first of n consecutive loopback ports that are free
// now (another process could take one before the test listens on it: it
// would fail saying so, not pass).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		first := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if first+n > 65535 {
			continue
		}
		ok := true
		for p := first; p < first+n && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if ok = err == nil; ok {
				l.Close()
			}
		}
		if ok {
			return first
		}
	}
	t.Fatal("no free consecutive ports")
	return 0
}

// TestProcsInterrupted: train -procs 3 stopped by SIGTERM (or Ctrl-C)
// mid-run stops its stage processes, removes its certificates and still
// writes the report of what ran. Where the signal lands decides which of
// two the run says — inside an epoch (that epoch marked interrupted after
// the steps that ran) or between two (the last ended whole, the next never
// began; train's and runout's TestInterruptedAtEpochBoundary send it
// exactly there) — and in both the report holds the steps the message
// and the progress name.
func TestProcsInterrupted(t *testing.T) {
	skipProcesses(t)
	tmp, dir := t.TempDir(), t.TempDir()
	p := start(t, []string{"TMPDIR=" + tmp}, append([]string{"train", "-procs", "3", "-epochs", "100", "-out", dir}, mlpArgs[:4]...)...)
	m := p.until(t, regexp.MustCompile(`^started 3 stage processes on .* \(pids (\d+) (\d+) (\d+)\)`), time.Minute)
	p.until(t, regexp.MustCompile(`^epoch 1:`), time.Minute)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	code, out, stderr := p.wait(t, time.Minute)
	require.Equal(t, 1, code, "%s\n%s", out, stderr)
	said := regexp.MustCompile(`(?m)^pipemare train: interrupted (?:in epoch (\d+) after step (\d+)|after epoch (\d+), at step (\d+)); (model.safetensors \(the weights of the steps that ran\), )?report.json, trace.json and the plots written to .*; no checkpoint to resume from \(-checkpoint-every K makes a run resumable\)$`).FindStringSubmatch(stderr)
	require.NotNil(t, said, stderr)
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err, "the report of what ran")
	var rep struct {
		Result struct {
			Interrupted bool `json:"interrupted"`
			Epochs      []struct {
				Epoch       int       `json:"epoch"`
				Losses      []float64 `json:"losses"`
				Interrupted bool      `json:"interrupted"`
			} `json:"epochs"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.True(t, rep.Result.Interrupted)
	epochs := rep.Result.Epochs
	require.NotEmpty(t, epochs)
	steps := 0
	for i, e := range epochs {
		require.Equal(t, i+1, e.Epoch)
		require.Equal(t, i == len(epochs)-1 && said[1] != "", e.Interrupted, "only the epoch it stopped in is interrupted")
		steps += len(e.Losses)
	}
	last := epochs[len(epochs)-1]
	if said[1] != "" { // inside an epoch
		require.Equal(t, []string{fmt.Sprint(last.Epoch), fmt.Sprint(steps)}, said[1:3])
		require.Regexp(t, fmt.Sprintf(`(?m)^epoch %d interrupted after %d steps`, last.Epoch, len(last.Losses)), out)
	} else { // between two
		require.Equal(t, []string{fmt.Sprint(last.Epoch), fmt.Sprint(steps)}, said[3:5])
		require.Contains(t, out, fmt.Sprintf("\nrun interrupted after epoch %d, at step %d\n", last.Epoch, steps))
	}
	requireCleanedUp(t, m[1:], tmp)
}

// TestMeasuredCutAndPinning: train -stages 2 balances the MLP by measuring
// and records the cut in settings.json; -procs 2 -pin hands the stage
// processes that cut and a CPU each (report.json's placement says which),
// and trains what the in-process engine trains at that cut, given as -cut,
// bit for bit; resumed with -stages 2, a run keeps the cut it recorded.
func TestMeasuredCutAndPinning(t *testing.T) {
	skipProcesses(t)
	t.Setenv(asMainEnv, "1")
	args := append([]string{"-stages", "2", "-checkpoint-every", "5"}, mlpArgs...)
	measured := t.TempDir()
	code, out, stderr := runCLI(context.Background(), append([]string{"train", "-out", measured}, args...)...)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `2 stages cut at ops \d+, balanced on this machine: measured .* per microbatch`, out)
	rep := reportOf(t, measured)
	cut, ok := rep.Settings["cut"].([]any)
	require.True(t, ok, "settings.cut records the measured cut: %v", rep.Settings)
	require.Len(t, cut, 1)
	at := fmt.Sprint(cut[0])

	given := t.TempDir()
	code, _, stderr = runCLI(context.Background(), append([]string{"train", "-out", given, "-cut", at, "-checkpoint-every", "5"}, mlpArgs...)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, rep.Result.WeightsSHA256, reportOf(t, given).Result.WeightsSHA256, "-cut reproduces the measured cut")

	pinned := t.TempDir()
	code, _, stderr = runCLI(context.Background(), append([]string{"train", "-out", pinned, "-procs", "2", "-pin", "-insecure"}, args...)...)
	require.Equal(t, 0, code, stderr)
	got := reportOf(t, pinned)
	require.Equal(t, rep.Result.WeightsSHA256, got.Result.WeightsSHA256, "pinned stage processes train like the engine")
	allowed, err := affinity.Allowed()
	require.NoError(t, err)
	require.Equal(t, []string{affinity.Format(allowed[:1]), affinity.Format(allowed[1%len(allowed) : 1%len(allowed)+1])}, got.Placement.CPUs)

	// A checkpoint of the measured run, and a resume that must not measure
	// again (or its settings would differ from the run's).
	require.NoError(t, os.Remove(filepath.Join(measured, "report.json")))
	code, out, stderr = runCLI(context.Background(), append([]string{"train", "-resume", measured}, args...)...)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "balanced on this machine")
	require.Equal(t, rep.Result.WeightsSHA256, reportOf(t, measured).Result.WeightsSHA256)
}
