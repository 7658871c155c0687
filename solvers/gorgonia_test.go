package solvers_test

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// pair is one of our solvers and gorgonia's with the same settings.
type pair struct {
	name         string
	ours, theirs func() gorgonia.Solver
}

func must[S gorgonia.Solver](s S, err error) gorgonia.Solver {
	if err != nil {
		panic(err)
	}
	return s
}

// pairs covers each solver with its defaults, with a learning rate and
// momentum as the zoo uses them, and with every option on.
func pairs() []pair {
	all := func() ([]solvers.Option, []gorgonia.SolverOpt) {
		return []solvers.Option{solvers.WithLearnRate(0.02), solvers.WithL1Reg(1e-3), solvers.WithL2Reg(1e-2), solvers.WithClip(0.01), solvers.WithBatchSize(3)},
			[]gorgonia.SolverOpt{gorgonia.WithLearnRate(0.02), gorgonia.WithL1Reg(1e-3), gorgonia.WithL2Reg(1e-2), gorgonia.WithClip(0.01), gorgonia.WithBatchSize(3)}
	}
	return []pair{
		{"SGD", func() gorgonia.Solver { return must(solvers.NewSGD()) },
			func() gorgonia.Solver { return gorgonia.NewVanillaSolver() }},
		{"SGD(0.05)", func() gorgonia.Solver { return must(solvers.NewSGD(solvers.WithLearnRate(0.05))) },
			func() gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.05)) }},
		{"SGD(all options)", func() gorgonia.Solver { o, _ := all(); return must(solvers.NewSGD(o...)) },
			func() gorgonia.Solver { _, o := all(); return gorgonia.NewVanillaSolver(o...) }},
		{"Momentum", func() gorgonia.Solver { return must(solvers.NewMomentum()) },
			func() gorgonia.Solver { return gorgonia.NewMomentum() }},
		{"Momentum(0.03, 0.9)", func() gorgonia.Solver {
			return must(solvers.NewMomentum(solvers.WithLearnRate(0.03), solvers.WithMomentum(0.9)))
		}, func() gorgonia.Solver {
			return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.03), gorgonia.WithMomentum(0.9))
		}},
		{"Momentum(all options)", func() gorgonia.Solver {
			o, _ := all()
			return must(solvers.NewMomentum(append(o, solvers.WithMomentum(0.7))...))
		}, func() gorgonia.Solver {
			_, o := all()
			return gorgonia.NewMomentum(append(o, gorgonia.WithMomentum(0.7))...)
		}},
		{"Adam", func() gorgonia.Solver { return must(solvers.NewAdam()) },
			func() gorgonia.Solver { return gorgonia.NewAdamSolver() }},
		{"Adam(all options)", func() gorgonia.Solver {
			o, _ := all()
			return must(solvers.NewAdam(append(o, solvers.WithBeta1(0.8), solvers.WithBeta2(0.99), solvers.WithEps(1e-6))...))
		}, func() gorgonia.Solver {
			_, o := all()
			return gorgonia.NewAdamSolver(append(o, gorgonia.WithBeta1(0.8), gorgonia.WithBeta2(0.99), gorgonia.WithEps(1e-6))...)
		}},
	}
}

// sameAsGorgonia trains the model mk builds twice, k steps with gorgonia's
// solver and with ours, and requires every learnable bit-identical.
func sameAsGorgonia(t *testing.T, mk func() *trainee, p pair, k int) {
	a, b := mk(), mk()
	before := bits(t, a.learnables)
	a.step(t, p.theirs(), 0, k)
	b.step(t, p.ours(), 0, k)
	want := bits(t, a.learnables)
	requireChanged(t, before, want, p.name)
	requireSameBits(t, want, bits(t, b.learnables), b.learnables, p.name)
}

// TestBitIdenticalToGorgoniaOnTheZoo: SGD, Momentum and Adam against
// gorgonia's on every zoo model (float32, real data, BatchNorm in the CNN
// and the ResNet).
func TestBitIdenticalToGorgoniaOnTheZoo(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	for _, c := range []struct {
		model string
		batch int
	}{{"mlp", 16}, {"cnn", 8}, {"resnet", 4}, {"transformer", 2}} {
		for _, p := range pairs() {
			if testing.Short() && c.model != "mlp" && p.name != "Momentum(0.03, 0.9)" {
				continue
			}
			t.Run(c.model+"/"+p.name, func(t *testing.T) {
				sameAsGorgonia(t, func() *trainee { return zooTrainee(t, c.model, c.batch) }, p, 4)
			})
		}
	}
}

// TestBitIdenticalToGorgoniaInFloat64 runs the internal test models in
// float64.
func TestBitIdenticalToGorgoniaInFloat64(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	for _, model := range []string{"mlp", "cnn", "attention"} {
		for _, p := range pairs() {
			t.Run(model+"/"+p.name, func(t *testing.T) {
				sameAsGorgonia(t, func() *trainee { return testmodelTrainee(t, model, tensor.Float64) }, p, 10)
			})
		}
	}
}

// TestBitIdenticalToGorgoniaOnScalars: gorgonia steps a scalar learnable
// with other code than a tensor (sign(0), the regulariser, the clip, the
// order of Adam's products); a (1, 1) tensor goes the tensor way.
func TestBitIdenticalToGorgoniaOnScalars(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, p := range pairs() {
			t.Run(dt.String()+"/"+p.name, func(t *testing.T) {
				sameAsGorgonia(t, func() *trainee { return scalarTrainee(t, dt) }, p, 30)
			})
		}
	}
}

func TestOptionsAreChecked(t *testing.T) {
	_, err := solvers.NewMomentum(solvers.WithBeta1(0.5))
	require.ErrorContains(t, err, "Momentum does not take WithBeta1")
	_, err = solvers.NewSGD(solvers.WithMomentum(0.5))
	require.ErrorContains(t, err, "SGD does not take WithMomentum")
	_, err = solvers.NewAdam(solvers.WithMomentum(0.5))
	require.ErrorContains(t, err, "Adam does not take WithMomentum")
	_, err = solvers.NewAdam(solvers.WithLearnRate(nan()))
	require.ErrorContains(t, err, "WithLearnRate(NaN): the value must be finite")
	s, err := solvers.NewMomentum(solvers.WithLearnRate(0.25))
	require.NoError(t, err)
	require.Equal(t, 0.25, s.LearnRate())
	s.SetLearnRate(0.5)
	require.Equal(t, 0.5, s.LearnRate())
}
