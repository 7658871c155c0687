package method_test

import (
	"testing"

	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/method"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestTheChainAMethodBuilds: the rate layer outermost, the techniques in
// their order inside it, the optimizer innermost; no technique, two
// layers; a fresh chain for every stage.
func TestTheChainAMethodBuilds(t *testing.T) {
	m := method.PipeMare()
	m.Optimizer, m.Rate, m.T1 = method.Momentum{Beta: 0.9}, rescheduler.Constant(0.1), 100
	m.Techniques = []method.Technique{method.Spike{}, method.Predict{}, method.T2{Gamma: 0.9}}
	s, err := m.Solver(0)
	require.NoError(t, err)
	chain := solvers.Chain(s)
	require.Len(t, chain, 5)
	require.IsType(t, &rescheduler.Solver{}, chain[0])
	require.IsType(t, &correction.Solver{}, chain[1])
	require.IsType(t, &correction.Predictor{}, chain[2])
	require.IsType(t, &correction.Spike{}, chain[3])
	require.IsType(t, &solvers.Momentum{}, chain[4])
	other, err := m.Solver(1)
	require.NoError(t, err)
	require.NotSame(t, chain[4], solvers.Chain(other)[4], "each stage has its own solvers")

	m.Techniques = nil
	s, err = m.Solver(0)
	require.NoError(t, err)
	require.Len(t, solvers.Chain(s), 2)
	require.Equal(t, "pipemare", m.Name)
	require.Equal(t, schedule.PipeMare().Name, m.Schedule.Name)
}

// TestAMethodNamesThePartThatFailed: an error says which method and which
// part of its chain refused.
func TestAMethodNamesThePartThatFailed(t *testing.T) {
	m := method.OneFOneB()
	_, err := m.Solver(2)
	require.EqualError(t, err, "method 1f1b: stage 2: a method needs an Optimizer and a Rate")
	m.Optimizer, m.Rate = method.SGD{}, rescheduler.Constant(0.1)
	m.Techniques = []method.Technique{method.T2{Gamma: 1.5}}
	_, err = m.Solver(0)
	require.ErrorContains(t, err, "method 1f1b: T2: correction: γ = 1.5")
	m.Techniques = []method.Technique{method.Spike{}}
	m.Optimizer = method.NAdam{}
	_, err = m.Solver(0)
	require.ErrorContains(t, err, "method 1f1b: spike compensation: correction: NewSpike: cannot read the momentum of *solvers.NAdam")
	m.Techniques, m.T1 = nil, -1
	_, err = m.Solver(0)
	require.ErrorContains(t, err, "method 1f1b: T1: rescheduler: WithPhase(-1)")
}

// TestTheRateHasOneOwner: the optimizer starts at the base schedule's
// first rate, and the rate layer sets every step's rate from the base
// schedule (here T1 is off, so the rate is the schedule's).
func TestTheRateHasOneOwner(t *testing.T) {
	m := method.Sequential()
	m.Optimizer, m.Rate = method.Momentum{Beta: 0.5}, rescheduler.ScheduleFunc(func(k int) float64 { return 0.1 / float64(k+1) })
	s, err := m.Solver(0)
	require.NoError(t, err)
	inner := solvers.Chain(s)[1].(*solvers.Momentum)
	require.Equal(t, 0.1, inner.LearnRate())
	w := tensor.New(tensor.WithBacking([]float64{1}))
	g := tensor.New(tensor.WithBacking([]float64{1}))
	model := []gorgonia.ValueGrad{valueGrad{w, g}}
	for k := range 3 {
		require.NoError(t, s.Step(model))
		require.Equal(t, 0.1/float64(k+1), inner.LearnRate(), "step %d", k)
	}
}

type valueGrad struct{ w, g *tensor.Dense }

func (v valueGrad) Value() gorgonia.Value           { return v.w }
func (v valueGrad) Grad() (gorgonia.Value, error)   { return v.g, nil }
func (v valueGrad) SetValue(x gorgonia.Value) error { v.w = x.(*tensor.Dense); return nil }
func (v valueGrad) SetGrad(x gorgonia.Value) error  { v.g = x.(*tensor.Dense); return nil }
