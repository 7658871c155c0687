package asyncvm

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func newResNetVM(t *testing.T, p, n int, opts ...Option) (*VM, *testmodels.Model, data) {
	t.Helper()
	m, err := testmodels.ResNet(tensor.Float64, 2, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained(), graphsplit.Stages(p))
	require.NoError(t, err)
	vm, err := New(plan, append([]Option{WithMicrobatches(n)}, opts...)...)
	require.NoError(t, err)
	return vm, m, makeData(m, n*8, 1)
}

// TestFaultInjection fails each of 4 stages at each kind of action, by error
// and by panic, while the pipeline is full, and checks that the error names
// the stage, the action and the microbatch, that every later call fails, and
// that Close stops every worker (TestMain checks for leaks) — ZB-V's too,
// whose stages wait for their worker's turn.
func TestFaultInjection(t *testing.T) {
	const p, n = 4, 2
	for _, s := range []schedule.Schedule{schedule.PipeMare(), schedule.OneFOneB(), schedule.ZBV()} {
		ops := []schedule.Op{schedule.OpForward, schedule.OpBackward, schedule.OpUpdate}
		if s.Split {
			ops = []schedule.Op{schedule.OpForward, schedule.OpInput, schedule.OpWeight, schedule.OpUpdate}
		}
		for stage := 0; stage < p; stage++ {
			for _, op := range ops {
				for _, panics := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/stage%d/%v/panic=%v", s.Name, stage, op, panics), func(t *testing.T) {
						var target schedule.Action
						inject := func(i int, a schedule.Action) error {
							if i != stage || a.Op != op {
								return nil
							}
							// Fail in the second minibatch, mid-pipeline.
							if (op == schedule.OpUpdate && a.Step == 1) || (op != schedule.OpUpdate && a.Micro == n+1) {
								target = a
								if panics {
									panic("injected")
								}
								return errors.New("injected")
							}
							return nil
						}
						vm, m, d := newResNetVM(t, p, n, WithSchedule(s), withInject(inject))
						defer vm.Close()
						ctx := context.Background()
						var err error
						for k := 0; k < 4 && err == nil; k++ {
							_, err = vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
						}
						if err == nil {
							err = vm.Flush(ctx)
						}
						require.Error(t, err)
						var se *StageError
						require.True(t, errors.As(err, &se), "%v", err)
						require.Equal(t, stage, se.Stage)
						require.Equal(t, target, se.Action)
						require.Contains(t, err.Error(), fmt.Sprintf("stage %d", stage))
						require.Contains(t, err.Error(), "injected")
						if op != schedule.OpUpdate {
							require.Contains(t, err.Error(), fmt.Sprintf("microbatch %d", n+1))
						}
						_, again := vm.Step(ctx, d.minibatch(t, m.Inputs, 5, n))
						require.ErrorIs(t, again, err)
						require.NoError(t, vm.Close())
						require.NoError(t, vm.Close(), "Close is idempotent")
						_, closed := vm.Step(ctx, d.minibatch(t, m.Inputs, 5, n))
						require.ErrorContains(t, closed, "closed")
					})
				}
			}
		}
	}
}

type failingSolver struct{ at, steps int }

func (f *failingSolver) Step([]gorgonia.ValueGrad) error {
	f.steps++
	if f.steps == f.at {
		return errors.New("solver refused")
	}
	return nil
}

func TestSolverErrorStopsThePipeline(t *testing.T) {
	vm, m, d := newResNetVM(t, 4, 2, WithSolver(func(stage int) gorgonia.Solver {
		if stage == 2 {
			return &failingSolver{at: 2}
		}
		return gorgonia.NewVanillaSolver()
	}))
	defer vm.Close()
	var err error
	for k := 0; k < 6 && err == nil; k++ {
		_, err = vm.Step(context.Background(), d.minibatch(t, m.Inputs, k, 2))
	}
	if err == nil {
		err = vm.Flush(context.Background())
	}
	require.ErrorContains(t, err, "stage 2, update 1: solver: solver refused")
}

func TestNonFiniteLossIsAnError(t *testing.T) {
	vm, m, d := newResNetVM(t, 4, 2)
	defer vm.Close()
	feeds := d.minibatch(t, m.Inputs, 0, 2)
	x := feeds[m.Inputs[0]].Data().([]float64)
	x[0] = math.NaN()
	_, err := vm.Step(context.Background(), feeds)
	require.ErrorContains(t, err, "stage 3, forward of microbatch 0 (step 0): the loss is NaN")
}

func TestExplodingWeightsAreAnError(t *testing.T) {
	vm, m, d := newResNetVM(t, 4, 2, WithSolver(func(int) gorgonia.Solver {
		return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(1e300))
	}))
	defer vm.Close()
	var err error
	for k := 0; k < 8 && err == nil; k++ {
		_, err = vm.Step(context.Background(), d.minibatch(t, m.Inputs, k, 2))
	}
	if err == nil {
		err = vm.Flush(context.Background())
	}
	require.Error(t, err)
	require.Regexp(t, `not finite|the loss is (NaN|\+Inf)`, err.Error())
}

// TestBadFeedsAreRefusedBeforeAnyWorkerRuns checks every kind of bad feed and
// that the VM still works afterwards.
func TestBadFeedsAreRefusedBeforeAnyWorkerRuns(t *testing.T) {
	vm, m, d := newResNetVM(t, 3, 2)
	defer vm.Close()
	ctx := context.Background()
	x, y := m.Inputs[0], m.Inputs[1]
	good := d.minibatch(t, m.Inputs, 0, 2)
	other := gorgonia.NewMatrix(gorgonia.NewGraph(), tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("stranger"))
	cases := map[string]struct {
		feeds map[*gorgonia.Node]gorgonia.Value
		want  string
	}{
		"missing input": {map[*gorgonia.Node]gorgonia.Value{x: good[x]}, `no value for data input "resnet.y" (want (4, 4) float64)`},
		"wrong shape": {map[*gorgonia.Node]gorgonia.Value{x: good[x], y: tensor.New(tensor.WithShape(2, 4), tensor.Of(tensor.Float64))},
			`data input "resnet.y": shape (2, 4), want (4, 4) (2 microbatches of (2, 4))`},
		"wrong dtype": {map[*gorgonia.Node]gorgonia.Value{x: good[x], y: tensor.New(tensor.WithShape(4, 4), tensor.Of(tensor.Float32))},
			`data input "resnet.y": dtype float32, want float64`},
		"unknown node": {map[*gorgonia.Node]gorgonia.Value{x: good[x], y: good[y], other: tensor.New(tensor.WithShape(2, 2), tensor.Of(tensor.Float64))},
			`"stranger", which is not a data input`},
	}
	for name, c := range cases {
		_, err := vm.Step(ctx, c.feeds)
		require.ErrorContains(t, err, c.want, name)
	}
	rep := vm.Report()
	for _, sr := range rep.PerStage {
		require.Zero(t, sr.Forwards, "no worker ran")
	}
	_, err := vm.Step(ctx, good)
	require.NoError(t, err, "the VM is still usable")
}

func TestCancelledContextStopsCleanly(t *testing.T) {
	vm, m, d := newResNetVM(t, 4, 2)
	defer vm.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	time.Sleep(time.Millisecond)
	_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, 0, 2))
	require.ErrorContains(t, err, "context canceled")
}

func TestNewRejectsBadOptions(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 2, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	_, err = New(plan, WithMicrobatches(0))
	require.ErrorContains(t, err, "WithMicrobatches(0)")
	_, err = New(plan, WithWarmup(2, schedule.PipeMare()))
	require.ErrorContains(t, err, "synchronous schedule")
	_, err = New(plan, WithDropoutMask(m.Learnables[0], 0.5))
	require.ErrorContains(t, err, "not a data input")
	_, err = New(nil)
	require.ErrorContains(t, err, "no stages")
}

// TestNewCleansUpWhenItFailsPartway: a solver factory that fails at stage 2
// makes New return its error naming the stage, after releasing what it
// built for stages 0 and 1 (TestMain checks that no goroutine is left);
// the plan can be used again.
func TestNewCleansUpWhenItFailsPartway(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 2, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	_, err = New(plan, WithSolverFactory(func(stage int) (gorgonia.Solver, error) {
		if stage == 2 {
			return nil, errors.New("no solver for you")
		}
		return gorgonia.NewVanillaSolver(), nil
	}))
	require.ErrorContains(t, err, "asyncvm: stage 2: the solver factory: no solver for you")
	vm, err := New(plan)
	require.NoError(t, err, "the plan is intact")
	require.NoError(t, vm.Close())
	_, err = vm.Step(context.Background(), nil)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, vm.Flush(context.Background()), ErrClosed)
	_, err = vm.Evaluate(context.Background(), nil)
	require.ErrorIs(t, err, ErrClosed)
}

// TestReportAfterAFailure: what ran before a failure can still be read.
func TestReportAfterAFailure(t *testing.T) {
	vm, m, d := newResNetVM(t, 4, 2, withInject(func(i int, a schedule.Action) error {
		if i == 1 && a.Op == schedule.OpBackward && a.Micro == 3 {
			return errors.New("injected")
		}
		return nil
	}))
	defer vm.Close()
	var err error
	for k := 0; k < 4 && err == nil; k++ {
		_, err = vm.Step(context.Background(), d.minibatch(t, m.Inputs, k, 2))
	}
	if err == nil {
		err = vm.Flush(context.Background())
	}
	require.ErrorContains(t, err, "injected")
	rep := vm.Report()
	require.Positive(t, rep.PerStage[0].Forwards)
	require.NotEmpty(t, vm.Events()[1])
}
