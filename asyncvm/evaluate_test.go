package asyncvm

import (
	"context"
	"math"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestEvaluateIsTheWholeGraphsLoss trains a few steps, then checks that
// Evaluate's loss on held-out microbatches is the plain whole graph's mean
// loss on the same weights, and that evaluating changes nothing.
func TestEvaluateIsTheWholeGraphsLoss(t *testing.T) {
	const n = 2
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	d := makeData(m, n*6, 9)
	_, vm := pipelineTraining(t, m, d, n, 4, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.PipeMare()))
	defer vm.Close()
	before := snapshot(t, m.LearnableValues())
	held := d.minibatch(t, m.Inputs, 5, n) // 2 microbatches not trained on
	got, err := vm.Evaluate(context.Background(), held)
	require.NoError(t, err)
	require.True(t, bitsEqual(before, m.LearnableValues()), "Evaluate must not change the weights")

	var c gorgonia.Value
	gorgonia.Read(m.Cost, &c)
	machine := gorgonia.NewTapeMachine(m.Graph)
	defer machine.Close()
	want := 0.0
	for j := 0; j < n; j++ {
		for i, in := range m.Inputs {
			v, err := tensorutil.Clone(d.micro[5*n+j][i])
			require.NoError(t, err)
			require.NoError(t, gorgonia.Let(in, v))
		}
		machine.Reset()
		require.NoError(t, machine.RunAll())
		l, err := tensorutil.Scalar(c)
		require.NoError(t, err)
		want += l / n
	}
	require.InDelta(t, want, got, 1e-12*math.Abs(want))

	_, err = vm.Evaluate(context.Background(), map[*gorgonia.Node]gorgonia.Value{m.Inputs[0]: held[m.Inputs[0]]})
	require.ErrorContains(t, err, `no value for data input "mlp.y"`)
}

// TestEvaluateLeavesBatchNormAlone checks that evaluation uses the running
// statistics without moving them, and leaves BatchNorm in training mode.
func TestEvaluateLeavesBatchNormAlone(t *testing.T) {
	const n = 2
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	d := makeData(m, n*6, 9)
	_, vm := pipelineTraining(t, m, d, n, 3, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.OneFOneB()))
	defer vm.Close()
	mean, vari := m.BatchNorms[0].Stats()
	m0 := mean.Clone().(tensor.Tensor)
	v0 := vari.Clone().(tensor.Tensor)
	require.NotEqual(t, make([]float32, 4), m0.Data(), "training moved the running mean")
	held := d.minibatch(t, m.Inputs, 4, n)
	l1, err := vm.Evaluate(context.Background(), held)
	require.NoError(t, err)
	l2, err := vm.Evaluate(context.Background(), held)
	require.NoError(t, err)
	require.Equal(t, l1, l2)
	mean, vari = m.BatchNorms[0].Stats()
	require.Equal(t, m0.Data(), mean.Data())
	require.Equal(t, v0.Data(), vari.Data())
	// Training continues as before.
	_, err = vm.Step(context.Background(), d.minibatch(t, m.Inputs, 5, n))
	require.NoError(t, err)
}

// dropoutMLP is x(4,6) → W1 → tanh → ⊙ mask → W2 → mean square, the way a
// model opts into the engine's dropout: a mask input.
func dropoutMLP(t *testing.T) (*gorgonia.ExprGraph, *gorgonia.Node, gorgonia.Nodes, gorgonia.Nodes) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 6), gorgonia.WithName("x"))
	mask := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 8), gorgonia.WithName("mask"))
	w1 := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(6, 8), gorgonia.WithName("w1"), gorgonia.WithValue(ramp(6, 8, 0.01)))
	w2 := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(8, 3), gorgonia.WithName("w2"), gorgonia.WithValue(ramp(8, 3, -0.02)))
	h := gorgonia.Must(gorgonia.Tanh(gorgonia.Must(gorgonia.Mul(x, w1))))
	h = gorgonia.Must(gorgonia.HadamardProd(h, mask))
	cost := gorgonia.Must(gorgonia.Mean(gorgonia.Must(gorgonia.Square(gorgonia.Must(gorgonia.Mul(h, w2))))))
	return g, cost, gorgonia.Nodes{w1, w2}, gorgonia.Nodes{x, mask}
}

func ramp(r, c int, step float64) *tensor.Dense {
	d := make([]float64, r*c)
	for i := range d {
		d[i] = step * float64(i%7-3)
	}
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
}

func TestDropoutMasksAreSeededPerMicrobatch(t *testing.T) {
	train := func(p int, keep float64, seed int64) []gorgonia.Value {
		g, cost, learn, inputs := dropoutMLP(t)
		plan, err := graphsplit.Split(g, cost, learn, graphsplit.FineGrained(), graphsplit.Stages(p))
		require.NoError(t, err)
		vm, err := New(plan, WithMicrobatches(2), WithSchedule(schedule.GPipe()), WithSeed(seed), WithDropoutMask(inputs[1], keep),
			WithSolver(func(int) gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.5)) }))
		require.NoError(t, err)
		defer vm.Close()
		x := tensorutil.Zeros(tensor.Float64, tensor.Shape{8, 6})
		for i := range x.Data().([]float64) {
			x.Data().([]float64)[i] = math.Sin(float64(i))
		}
		for k := 0; k < 3; k++ {
			_, err := vm.Step(context.Background(), map[*gorgonia.Node]gorgonia.Value{inputs[0]: x})
			require.NoError(t, err)
		}
		_, err = vm.Step(context.Background(), map[*gorgonia.Node]gorgonia.Value{inputs[0]: x, inputs[1]: x})
		require.ErrorContains(t, err, "dropout mask the engine draws")
		return snapshot(t, []gorgonia.Value{learn[0].Value(), learn[1].Value()})
	}
	a := train(1, 0.5, 1)
	require.True(t, bitsEqual(a, train(2, 0.5, 1)), "the mask depends on the seed and the microbatch, not on the split")
	require.False(t, bitsEqual(a, train(1, 0.5, 2)), "another seed draws other masks")
	require.False(t, bitsEqual(a, train(1, 1, 1)), "keep=1 is no dropout")

	vm := &feeder{cfg: &config{seed: 3}}
	g := gorgonia.NewGraph()
	node := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(100, 100), gorgonia.WithName("m"))
	m0 := vm.drawMask(node, 0.8, 0).Data().([]float64)
	m1 := vm.drawMask(node, 0.8, 1).Data().([]float64)
	kept, differ := 0, 0
	for i := range m0 {
		require.Contains(t, []float64{0, 1 / 0.8}, m0[i])
		if m0[i] != 0 {
			kept++
		}
		if m0[i] != m1[i] {
			differ++
		}
	}
	require.InDelta(t, 8000, kept, 300)
	require.Greater(t, differ, 1000, "microbatches get different masks")
}

// TestWarmupSwitchesSchedules trains 2 minibatches with 1F1B-flush, then
// PipeMare, in one engine: the report shows both segments, the warm-up sees
// no delay, and its weights are those of a pure 1F1B run.
func TestWarmupSwitchesSchedules(t *testing.T) {
	const n = 2
	m, err := testmodels.ResNet(tensor.Float64, 2, 1)
	require.NoError(t, err)
	d := makeData(m, n*10, 1)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithWarmup(2, schedule.OneFOneB()), WithSolver(momentum(0.05)))
	require.NoError(t, err)
	defer vm.Close()
	ctx := context.Background()
	for k := 0; k < 2; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	afterWarmup := snapshot(t, m.LearnableValues())
	for _, sr := range vm.Report().PerStage {
		require.Equal(t, map[int]int{0: 2 * n}, sr.Delays)
	}
	for k := 2; k < 10; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	require.NoError(t, vm.Flush(ctx))
	rep := vm.Report()
	require.Equal(t, []SegmentReport{
		{Schedule: "1f1b", First: 0, Steps: 2, Start: rep.Segments[0].Start},
		{Schedule: "pipemare", First: 2, Steps: 8, Start: rep.Segments[1].Start},
	}, rep.Segments)
	last := rep.Stages - 1
	require.Positive(t, rep.PerStage[last].Delays[schedule.Delay(rep.Stages, n, last)], "PipeMare's delays after the switch")
	for _, ev := range vm.Events() {
		for _, e := range ev {
			want := "pipemare"
			if (e.Action.Op == schedule.OpForward || e.Action.Op == schedule.OpBackward) && e.Action.Micro < 2*n || (e.Action.Op == schedule.OpUpdate || e.Action.Op == schedule.OpFlush) && e.Action.Step < 2 {
				want = "1f1b"
			}
			require.Equal(t, want, e.Schedule, "stage %d %v", e.Stage, e.Action)
		}
	}

	ref, err := testmodels.ResNet(tensor.Float64, 2, 1)
	require.NoError(t, err)
	want, vm2 := pipelineTraining(t, ref, d, n, 2, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.OneFOneB()), WithSolver(momentum(0.05)))
	require.NoError(t, vm2.Close())
	require.True(t, bitsEqual(want, afterWarmup))
}

// TestNewKeepsBatchNormStatistics: compiling the stages' tape machines would
// zero BatchNorm's running statistics; New keeps those the model had.
func TestNewKeepsBatchNormStatistics(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float64, 4, 1)
	require.NoError(t, err)
	mean, vari := m.BatchNorms[0].Stats()
	for i := range mean.Data().([]float64) {
		mean.Data().([]float64)[i] = 0.5
		vari.Data().([]float64)[i] = 2
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := New(plan)
	require.NoError(t, err)
	defer vm.Close()
	mean, vari = m.BatchNorms[0].Stats()
	require.Equal(t, []float64{0.5, 0.5, 0.5, 0.5}, mean.Data())
	require.Equal(t, []float64{2, 2, 2, 2}, vari.Data())
}

// delayLog is a solver that records the delays the engine announces.
type delayLog struct {
	gorgonia.Solver
	steps int
	calls []delayCall
}

type delayCall struct {
	tau      float64
	measured bool
	steps    int // steps taken before the call
}

func (d *delayLog) Step(m []gorgonia.ValueGrad) error { d.steps++; return d.Solver.Step(m) }
func (d *delayLog) SetDelay(tau float64, measured bool) {
	d.calls = append(d.calls, delayCall{tau, measured, d.steps})
}

// TestWarmupAnnouncesDelays: a DelayAware solver hears τ = 0 for the
// synchronous warm-up, then the stage's τ_i when PipeMare takes over, and
// measured delays only from asynchronous updates; without a warm-up it hears
// τ_i before the first step.
func TestWarmupAnnouncesDelays(t *testing.T) {
	const n, steps = 2, 6
	for _, warm := range []int{0, 2} {
		m, err := testmodels.ResNet(tensor.Float64, 2, 1)
		require.NoError(t, err)
		d := makeData(m, n*steps, 1)
		plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
		require.NoError(t, err)
		logs := make([]*delayLog, len(plan.Stages))
		solver := func(i int) gorgonia.Solver {
			logs[i] = &delayLog{Solver: momentum(0.05)(i)}
			return logs[i]
		}
		opts := []Option{WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithSolver(solver)}
		if warm > 0 {
			opts = append(opts, WithWarmup(warm, schedule.OneFOneB()))
		}
		vm, err := New(plan, opts...)
		require.NoError(t, err)
		for k := 0; k < steps; k++ {
			_, err := vm.Step(context.Background(), d.minibatch(t, m.Inputs, k, n))
			require.NoError(t, err)
		}
		require.NoError(t, vm.Flush(context.Background()))
		require.NoError(t, vm.Close())
		for i, l := range logs {
			var announced []delayCall
			measured := 0
			for _, c := range l.calls {
				if !c.measured {
					announced = append(announced, c)
					continue
				}
				measured++
				require.Greater(t, c.steps, warm, "warm-up %d, stage %d: measured delays come from asynchronous updates only", warm, i)
			}
			require.Equal(t, steps-warm, measured, "warm-up %d, stage %d: one measured delay per asynchronous update", warm, i)
			tau := float64(schedule.Delay(len(plan.Stages), n, i))
			want := []delayCall{{tau, false, 0}}
			if warm > 0 {
				want = []delayCall{{0, false, 0}, {tau, false, warm}}
			}
			require.Equal(t, want, announced, "warm-up %d, stage %d", warm, i)
		}
	}
}
