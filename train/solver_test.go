package train

import (
	"context"
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/internal/testkit/zootest"
	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gorgoniaSolver is Config.Solver as it was before package solvers:
// gorgonia's Momentum (with β = 0 for SGD) under T2 and T1.
func gorgoniaSolver(c Config, stepsPerEpoch int) func(int) (gorgonia.Solver, error) {
	return func(int) (gorgonia.Solver, error) {
		var s gorgonia.Solver = gorgonia.NewMomentum(gorgonia.WithLearnRate(c.LR), gorgonia.WithMomentum(c.beta()))
		if c.T2 > 0 {
			s = must(correction.New(s, correction.WithGamma(c.T2)))
		}
		base := rescheduler.Constant(c.LR)
		if c.Cosine {
			base = rescheduler.Cosine(c.LR, c.LR/100, stepsPerEpoch*c.Epochs)
		}
		return rescheduler.New(s, rescheduler.WithBase(base), rescheduler.WithPhase(c.T1))
	}
}

func must[S gorgonia.Solver](s S, err error) gorgonia.Solver {
	if err != nil {
		panic(err)
	}
	return s
}

// trainedBits trains the zoo MLP with cfg's schedule and the given solvers
// on steps minibatches and returns its learnables' bits.
func trainedBits(t *testing.T, cfg Config, data zoo.Data, newSolver func(int) (gorgonia.Solver, error)) [][]uint32 {
	t.Helper()
	m, err := zoo.MLP(cfg.Microbatch, cfg.Seed)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(3))
	require.NoError(t, err)
	opts := []asyncvm.Option{asyncvm.WithSchedule(cfg.Schedule), asyncvm.WithMicrobatches(cfg.Microbatches), asyncvm.WithSolverFactory(newSolver), asyncvm.WithSeed(cfg.Seed)}
	if cfg.Warmup > 0 {
		opts = append(opts, asyncvm.WithWarmup(cfg.Warmup, schedule.OneFOneB()))
	}
	vm, err := asyncvm.New(plan, opts...)
	require.NoError(t, err)
	defer vm.Close()
	rng := rand.New(rand.NewSource(cfg.Seed))
	_, err = vm.Run(context.Background(), zoo.Minibatches(data, m, cfg.Microbatches, rng))
	require.NoError(t, err)
	require.NoError(t, vm.Flush(context.Background()))
	out := make([][]uint32, len(m.Learnables))
	for i, n := range m.Learnables {
		for _, x := range n.Value().Data().([]float32) {
			out[i] = append(out[i], math.Float32bits(x))
		}
	}
	return out
}

// TestOurSolversTrainAsGorgonias: the zoo's solvers are package solvers'
// now; the MLP trained through the pipeline before (gorgonia's) and after
// has the same weights, bit for bit: PipeMare with a warm-up, T1 and T2;
// the synchronous schedule; and SGD, which was gorgonia's Momentum(0).
func TestOurSolversTrainAsGorgonias(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("compares numerics; the pipeline's concurrency is raced in asyncvm")
	}
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	const steps = 6
	data, _ := zootest.FewSteps(t, r, steps, 0)
	pm := recipeConfig(t, r, MethodPipeMare, steps)
	pm.Warmup, pm.T1 = 2, steps-2
	sync := recipeConfig(t, r, MethodSequential, steps)
	sgd := sync
	sgd.NoMomentum = true
	for name, cfg := range map[string]Config{"pipemare+T1+T2": pm, "sequential": sync, "sgd": sgd} {
		before := trainedBits(t, cfg, data, gorgoniaSolver(cfg, steps))
		after := trainedBits(t, cfg, data, cfg.Solver(steps))
		require.Equal(t, before, after, name)
		s, err := cfg.Solver(steps)(0)
		require.NoError(t, err)
		_, err = solvers.Save(s)
		require.NoError(t, err, "%s: every layer saves its state", name)
	}
}

// TestNoInitialNegativeZero is what makes SGD and gorgonia's Momentum(0)
// the same: w + (β·v − η·g) and w + (−η·g) differ only in the sign of a
// zero, which can change w only where w is −0, and a sum is −0 only when
// both terms are. No zoo model starts with a −0 weight, so none ever has
// one, and the two give the same bits.
func TestNoInitialNegativeZero(t *testing.T) {
	for _, r := range zoo.Recipes() {
		m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
		require.NoError(t, err)
		for _, n := range m.Learnables {
			for i, x := range n.Value().Data().([]float32) {
				require.False(t, x == 0 && math.Signbit(float64(x)), "%s: %s[%d] is −0", r.Model, n.Name(), i)
			}
		}
	}
}

// valueGrad is a weight and its gradient, for stepping a solver directly.
type valueGrad struct{ w, g *tensor.Dense }

func (v valueGrad) Value() gorgonia.Value           { return v.w }
func (v valueGrad) Grad() (gorgonia.Value, error)   { return v.g, nil }
func (v valueGrad) SetValue(x gorgonia.Value) error { v.w = x.(*tensor.Dense); return nil }
func (v valueGrad) SetGrad(x gorgonia.Value) error  { v.g = x.(*tensor.Dense); return nil }

// TestStepDecay: the base schedule is the rate until half the run, a tenth
// of it until three quarters, a hundredth after; not with the cosine.
func TestStepDecay(t *testing.T) {
	c := Config{Hyper: zoo.Hyper{LR: 0.1, Epochs: 4, NoMomentum: true}, StepDecay: true}
	s, err := c.Solver(10)(0)
	require.NoError(t, err)
	model := []gorgonia.ValueGrad{valueGrad{tensor.New(tensor.WithBacking([]float32{1})), tensor.New(tensor.WithBacking([]float32{1}))}}
	var rates []float64
	for range 40 {
		require.NoError(t, s.Step(model))
		rates = append(rates, s.(*rescheduler.Solver).Rate())
	}
	for k, r := range rates {
		want := 0.1
		if k >= 30 {
			want = 0.001
		} else if k >= 20 {
			want = 0.01
		}
		require.InDelta(t, want, r, 1e-15, "step %d", k)
	}
	c.Cosine = true
	_, err = c.Solver(10)(0)
	require.ErrorContains(t, err, "step decay and the cosine are two base schedules")
}

// TestTheRateHasOneSource: a stage's innermost solver starts at the rate
// the base schedule gives its first step, the rate the rate layer then
// sets at every step: NAdam's warm-up starts at a 1/18 of LR over 300
// steps, not at LR.
func TestTheRateHasOneSource(t *testing.T) {
	c := Config{Hyper: zoo.Hyper{LR: 0.03, Epochs: 3}, NAdam: true, Schedule: schedule.PipeDream()}
	s, err := c.Solver(100)(0)
	require.NoError(t, err)
	chain := solvers.Chain(s)
	inner, ok := chain[len(chain)-1].(*solvers.NAdam)
	require.True(t, ok, "%T", chain[len(chain)-1])
	first := c.Method(100).Rate.Rate(0)
	require.InDelta(t, 0.03/18, first, 1e-18)
	require.Equal(t, first, inner.LearnRate())
}
