package asyncvm_test

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/pipemare/pipemare/transport/pki"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The multi-process tests run each stage in a child process of the test
// binary (TestStageProcess), over loopback gRPC, on the test ResNet cut
// into 4 stages: its skip connections cross stages, so stages that are not
// neighbours exchange tensors too.

const (
	stageEnv      = "ASYNCVM_STAGE_PROCESS" // "[model:]run/stage/addr,addr,…" in a child
	stageCertsEnv = "ASYNCVM_STAGE_CERTS"   // the certificates' directory of a child in a network namespace
)

const remoteStages = 4

// remotePlan builds the model every process builds alike (the test
// ResNet, or the model named) and cuts it the same way.
func remotePlan(t *testing.T, model ...string) (*testmodels.Model, *graphsplit.Plan) {
	build := testmodels.ResNet
	if len(model) > 0 && model[0] != "" {
		var ok bool
		build, ok = testmodels.ByName(model[0])
		require.True(t, ok, model[0])
	}
	m, err := build(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained(), graphsplit.Stages(remoteStages))
	require.NoError(t, err)
	return m, plan
}

func remoteNetwork(plan *graphsplit.Plan, addrs []string) grpcnet.Network {
	return grpcnet.Network{Addrs: addrs, Links: grpcnet.Links(plan.Topology()), Identity: transport.Identity{Plan: plan.Fingerprint()}}
}

func runOptions(t *testing.T, name string) []asyncvm.Option {
	for _, r := range goldenRuns() {
		if r.name == name {
			return append([]asyncvm.Option{asyncvm.WithMicrobatches(goldenN)}, r.opts(remoteStages)...)
		}
	}
	t.Fatalf("no run %q", name)
	return nil
}

// TestStageProcess is a stage process of the multi-process tests: it
// serves one stage on the listener it inherits (file descriptor 3) until
// the driver stops it. Without ASYNCVM_STAGE_PROCESS it has nothing to do.
func TestStageProcess(t *testing.T) {
	spec := os.Getenv(stageEnv)
	if spec == "" {
		t.Skip("a stage process of the multi-process tests")
	}
	parts := strings.SplitN(spec, "/", 3)
	require.Len(t, parts, 3)
	i, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	model, run, _ := strings.Cut(parts[0], ":")
	if run == "" {
		model, run = "", model
	}
	_, plan := remotePlan(t, model)
	// On loopback the stage inherits its listener (file descriptor 3) and
	// talks plaintext; in a network namespace of its own
	// (TestStagesInNetworkNamespacesTrainLikeTheEngine) it listens on its
	// address there and talks mutual TLS with the certificates named.
	security := []grpcnet.Option{grpcnet.WithInsecure()}
	if dir := os.Getenv(stageCertsEnv); dir != "" {
		roots, cert, err := pki.Load(dir, transport.Peer(i))
		require.NoError(t, err)
		security = []grpcnet.Option{grpcnet.WithTLS(roots, cert)}
	} else {
		l, err := net.FileListener(os.NewFile(3, "listener"))
		require.NoError(t, err)
		security = append(security, grpcnet.WithListener(l))
	}
	ctx := context.Background()
	ep, err := grpcnet.Open(ctx, transport.Peer(i), remoteNetwork(plan, strings.Split(parts[2], ",")),
		append(security, grpcnet.WithRecvTimeout(20*time.Second))...)
	require.NoError(t, err)
	if err := asyncvm.ServeStage(ctx, plan, i, ep, runOptions(t, run)...); err != nil {
		// A stage whose neighbour was killed ends here: say so and exit,
		// as a stage process does.
		fmt.Fprintf(os.Stderr, "stage process %d: %v\n", i, err)
		os.Exit(3)
	}
}

// stageProcesses starts one stage process per stage for run and returns
// the stages' addresses and the processes.
func stageProcesses(t *testing.T, run string) ([]string, []*exec.Cmd) {
	var addrs []string
	var files []*os.File
	for i := 0; i < remoteStages; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		f, err := l.(*net.TCPListener).File()
		require.NoError(t, err)
		require.NoError(t, l.Close())
		addrs = append(addrs, l.Addr().String())
		files = append(files, f)
	}
	var cmds []*exec.Cmd
	for i := range files {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStageProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s/%d/%s", stageEnv, run, i, strings.Join(addrs, ",")))
		cmd.ExtraFiles = []*os.File{files[i]}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		require.NoError(t, cmd.Start())
		require.NoError(t, files[i].Close())
		cmds = append(cmds, cmd)
	}
	killAtCleanup(t, cmds)
	return addrs, cmds
}

// killAtCleanup makes the test's end kill and reap every process of cmds
// still running: a failed test leaves none behind.
func killAtCleanup(t *testing.T, cmds []*exec.Cmd) {
	t.Cleanup(func() {
		for _, c := range cmds {
			if c.ProcessState == nil {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	})
}

// waitAll waits for every process to exit and returns their errors.
func waitAll(t *testing.T, cmds []*exec.Cmd, within time.Duration) []error {
	errs := make([]error, len(cmds))
	done := make(chan int)
	for i, c := range cmds {
		go func() { errs[i] = c.Wait(); done <- i }()
	}
	deadline := time.After(within)
	for range cmds {
		select {
		case <-done:
		case <-deadline:
			t.Fatalf("stage processes still running after %v", within)
		}
	}
	return errs
}

// TestStagesInProcessesTrainLikeTheEngine: every schedule, and PipeMare
// with T1+T2 and a warm-up, run with each stage in its own process over
// loopback gRPC, ends with weights bit-identical to the in-process
// engine's — also on models whose stages share a learnable (a tied
// embedding, a recurrence), whose owner and replicas exchange gradients
// and versions; every process exits cleanly when the driver closes.
func TestStagesInProcessesTrainLikeTheEngine(t *testing.T) {
	if testing.Short() || testutil.RaceEnabled {
		t.Skip("starts 20 processes")
	}
	for _, spec := range []string{"sequential", "gpipe", "1f1b", "pipedream", "pipemare-t1t2-warmup", "tied:pipemare", "gru:1f1b"} {
		model, run, _ := strings.Cut(spec, ":")
		if run == "" {
			model, run = "", model
		}
		t.Run(spec, func(t *testing.T) {
			m, plan := remotePlan(t, model)
			vm, err := asyncvm.New(plan, runOptions(t, run)...)
			require.NoError(t, err)
			trainGoldenSteps(t, m, vm)
			require.NoError(t, vm.Close())
			want := testutil.PlanSHA256(t, plan)

			addrs, cmds := stageProcesses(t, spec)
			m, plan = remotePlan(t, model)
			ctx := context.Background()
			ep, err := grpcnet.Open(ctx, transport.Driver, remoteNetwork(plan, addrs), grpcnet.WithInsecure(), grpcnet.WithRecvTimeout(20*time.Second))
			require.NoError(t, err)
			vm, err = asyncvm.New(plan, append(runOptions(t, run), asyncvm.WithEndpoint(ep))...)
			require.NoError(t, err)
			trainGoldenSteps(t, m, vm) // Flush pulls the stages' weights into plan
			require.NoError(t, vm.Close())
			require.Equal(t, want, testutil.PlanSHA256(t, plan), "%s: stages in processes train exactly like the in-process engine", run)
			for i, err := range waitAll(t, cmds, 30*time.Second) {
				require.NoError(t, err, "stage process %d", i)
			}
		})
	}
}

// TestAKilledStageProcessStopsThePipeline: SIGKILL one stage process
// mid-run; the next call returns an error naming that stage and the work it
// was running or being ordered, within the receive timeout, and every
// other process exits.
func TestAKilledStageProcessStopsThePipeline(t *testing.T) {
	if testing.Short() || testutil.RaceEnabled {
		t.Skip("starts processes")
	}
	const run = "pipemare"
	addrs, cmds := stageProcesses(t, run)
	m, plan := remotePlan(t)
	ctx := context.Background()
	ep, err := grpcnet.Open(ctx, transport.Driver, remoteNetwork(plan, addrs), grpcnet.WithInsecure(), grpcnet.WithRecvTimeout(20*time.Second))
	require.NoError(t, err)
	vm, err := asyncvm.New(plan, append(runOptions(t, run), asyncvm.WithEndpoint(ep))...)
	require.NoError(t, err)
	defer vm.Close()
	d := makeRemoteData(m, 12)
	for k := 0; k < 3; k++ {
		_, err := vm.Step(ctx, d[k])
		require.NoError(t, err)
	}
	require.NoError(t, cmds[2].Process.Kill())
	start := time.Now()
	for k := 3; k < 12 && err == nil; k++ {
		_, err = vm.Step(ctx, d[k])
	}
	require.Error(t, err)
	require.Less(t, time.Since(start), 20*time.Second, "within the receive timeout")
	require.Contains(t, err.Error(), "stage 2")
	require.Regexp(t, `(while running|ordering) its work from [FBU]\d+ \(step \d+\)|microbatch \d+`, err.Error())
	t.Logf("the driver said: %v", err)
	require.NoError(t, vm.Close())
	errs := waitAll(t, cmds, 30*time.Second)
	require.Error(t, errs[2], "the killed one")
}

// makeRemoteData is steps minibatches of the model's random data.
func makeRemoteData(m *testmodels.Model, steps int) []map[*gorgonia.Node]gorgonia.Value {
	rng := rand.New(rand.NewSource(5))
	var out []map[*gorgonia.Node]gorgonia.Value
	for k := 0; k < steps; k++ {
		micro := make([][]gorgonia.Value, goldenN)
		for j := range micro {
			micro[j] = m.Batch(rng)
		}
		feeds := map[*gorgonia.Node]gorgonia.Value{}
		for i, in := range m.Inputs {
			feeds[in] = concatRows(nil, in, micro, i)
		}
		out = append(out, feeds)
	}
	return out
}

// TestServeStageWithoutAFirstOrder: a stage whose driver connects and then
// sends nothing (stalled) stops after WithFirstOrderTimeout with an error
// naming the stage, and closes its endpoint.
func TestServeStageWithoutAFirstOrder(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	defer plan.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := remoteNetwork(plan, []string{l.Addr().String()})
	ctx := context.Background()
	var stageEP *grpcnet.Endpoint
	opened := make(chan error, 1)
	go func() {
		var err error
		stageEP, err = grpcnet.Open(ctx, 0, n, grpcnet.WithInsecure(), grpcnet.WithListener(l))
		opened <- err
	}()
	driver, err := grpcnet.Open(ctx, transport.Driver, n, grpcnet.WithInsecure())
	require.NoError(t, err)
	defer driver.Close()
	require.NoError(t, <-opened)
	served := make(chan error, 1)
	go func() {
		served <- asyncvm.ServeStage(ctx, plan, 0, stageEP, asyncvm.WithFirstOrderTimeout(300*time.Millisecond))
	}()
	select {
	case err := <-served:
		require.EqualError(t, err, "stage 0: lost the driver: the driver connected but sent no order within 300ms: is it stalled?")
	case <-time.After(10 * time.Second):
		require.NoError(t, driver.Close()) // ends the stage: no goroutine outlives the test
		t.Fatalf("ServeStage still waits for a first order: %v", <-served)
	}

	require.ErrorContains(t, asyncvm.ServeStage(ctx, plan, 0, driver, asyncvm.WithFirstOrderTimeout(-time.Second)), "WithFirstOrderTimeout(-1s): it must be positive")
}
