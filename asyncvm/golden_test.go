package asyncvm_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/weights_sha256.json from this engine (only when a change is meant to change results)")

const goldenFile = "testdata/weights_sha256.json"

// goldenRun is one training whose final weights are recorded.
type goldenRun struct {
	name   string
	opts   func(p int) []asyncvm.Option
	delays func(p int) delay.Source // delay injection instead of the engine
	check  func(vm *asyncvm.VM)     // after training, before Close (nil: none)
}

func momentumSolver(int) gorgonia.Solver {
	return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.05), gorgonia.WithMomentum(0.9))
}

// t1t2 is PipeMare's solver: T1 over 8 steps around T2 (γ = 0.9) around
// Momentum.
func t1t2(int) gorgonia.Solver {
	t2, err := correction.New(momentumSolver(0), correction.WithGamma(0.9))
	if err != nil {
		panic(err)
	}
	t1, err := rescheduler.New(t2, rescheduler.WithPhase(8))
	if err != nil {
		panic(err)
	}
	return t1
}

func goldenRuns() []goldenRun {
	with := func(s schedule.Schedule, more ...asyncvm.Option) func(int) []asyncvm.Option {
		return func(int) []asyncvm.Option {
			return append([]asyncvm.Option{asyncvm.WithSchedule(s), asyncvm.WithSolver(momentumSolver)}, more...)
		}
	}
	return []goldenRun{
		{name: "sequential", opts: with(schedule.Sequential())},
		{name: "gpipe", opts: with(schedule.GPipe())},
		{name: "1f1b", opts: with(schedule.OneFOneB())},
		{name: "pipedream", opts: with(schedule.PipeDream())},
		{name: "pipemare", opts: with(schedule.PipeMare())},
		{name: "pipemare-stash", opts: with(schedule.PipeMare(), asyncvm.WithActivations(asyncvm.Keep))},
		{name: "pipedream-stash", opts: with(schedule.PipeDream(), asyncvm.WithActivations(asyncvm.Keep))},
		{name: "pipemare-t1t2-warmup", opts: func(int) []asyncvm.Option {
			return []asyncvm.Option{asyncvm.WithSchedule(schedule.PipeMare()), asyncvm.WithSolver(t1t2), asyncvm.WithWarmup(3, schedule.OneFOneB())}
		}},
		{name: "injected-pipemare", opts: func(int) []asyncvm.Option { return []asyncvm.Option{asyncvm.WithSolver(t1t2)} },
			delays: func(p int) delay.Source { return delay.PipeMare(p, goldenN) }},
		{name: "injected-exponential", opts: func(int) []asyncvm.Option { return []asyncvm.Option{asyncvm.WithSolver(t1t2)} },
			delays: func(int) delay.Source {
				return delay.Exponential{MeanDelay: 2, Limit: 6, Seed: 3, N: goldenN}
			}},
	}
}

const goldenN, goldenSteps = 2, 10

// TestWeightsAreUnchanged trains every test model (float64 and float32, at
// fine grain) with every schedule, PipeMare with T1+T2 and a warm-up,
// stashed activations and delay injection, and compares the SHA-256 of the
// final weights with the ones recorded in testdata: a change that is not
// meant to change results leaves every one of them as it was.
func TestWeightsAreUnchanged(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("80 trainings in a row; see race_test.go")
	}
	want := map[string]string{}
	if b, err := os.ReadFile(goldenFile); err == nil {
		require.NoError(t, json.Unmarshal(b, &want))
	} else if !*updateGolden {
		t.Fatalf("%v (run with -update-golden to record)", err)
	}
	got := map[string]string{}
	for _, nb := range testmodels.All() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for _, r := range goldenRuns() {
				key := fmt.Sprintf("%s/%v/%s", nb.Name, dt, r.name)
				got[key] = trainForGolden(t, nb.Build, dt, r)
				if !*updateGolden {
					require.Equal(t, want[key], got[key], "%s: the final weights changed", key)
				}
			}
		}
	}
	if *updateGolden {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenFile), 0o755))
		require.NoError(t, os.WriteFile(goldenFile, append(b, '\n'), 0o644))
		t.Logf("recorded %d runs in %s", len(keys), goldenFile)
		return
	}
	require.Len(t, got, len(want), "every recorded run still runs")
}

func trainForGolden(t *testing.T, build testmodels.Builder, dt tensor.Dtype, r goldenRun) string {
	t.Helper()
	return trainOnPlan(t, build, dt, r, graphsplit.FineGrained())
}

// trainOnPlan is trainForGolden on the model cut by cut.
func trainOnPlan(t *testing.T, build testmodels.Builder, dt tensor.Dtype, r goldenRun, cut graphsplit.Option) string {
	t.Helper()
	m, err := build(dt, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, cut)
	require.NoError(t, err)
	p := len(plan.Stages)
	opts := append([]asyncvm.Option{asyncvm.WithMicrobatches(goldenN)}, r.opts(p)...)
	var vm *asyncvm.VM
	if r.delays != nil {
		vm, err = asyncvm.NewInjected(plan, r.delays(p), opts...)
	} else {
		vm, err = asyncvm.New(plan, opts...)
	}
	require.NoError(t, err)
	defer vm.Close()
	trainGoldenSteps(t, m, vm)
	sum := testutil.PlanSHA256(t, plan)
	if r.check != nil {
		r.check(vm)
	}
	return sum
}

// trainGoldenSteps trains vm on goldenSteps minibatches of m's random data
// and flushes it.
func trainGoldenSteps(t *testing.T, m *testmodels.Model, vm *asyncvm.VM) {
	t.Helper()
	rng := rand.New(rand.NewSource(11))
	ctx := context.Background()
	for k := 0; k < goldenSteps; k++ {
		feeds := map[*gorgonia.Node]gorgonia.Value{}
		micro := make([][]gorgonia.Value, goldenN)
		for j := range micro {
			micro[j] = m.Batch(rng)
		}
		for i, in := range m.Inputs {
			feeds[in] = concatRows(t, in, micro, i)
		}
		loss, err := vm.Step(ctx, feeds)
		require.NoError(t, err)
		require.False(t, math.IsNaN(loss))
	}
	require.NoError(t, vm.Flush(ctx))
}

func concatRows(t *testing.T, in *gorgonia.Node, micro [][]gorgonia.Value, i int) gorgonia.Value {
	shape := in.Shape().Clone()
	shape[0] *= len(micro)
	full := tensorutil.Zeros(in.Dtype(), shape)
	size := in.Shape().TotalSize()
	for j, mb := range micro {
		switch f := full.Data().(type) {
		case []float64:
			copy(f[j*size:], mb[i].Data().([]float64))
		case []float32:
			copy(f[j*size:], mb[i].Data().([]float32))
		default:
			t.Fatalf("dtype %v", in.Dtype())
		}
	}
	return full
}
