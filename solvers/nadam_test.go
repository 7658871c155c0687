package solvers_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/delaysim"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type vg struct{ v, g *tensor.Dense }

func (x vg) Value() gorgonia.Value         { return x.v }
func (x vg) Grad() (gorgonia.Value, error) { return x.g, nil }

// oracle is NAdamW as PyTorch's documentation states the algorithm
// (torch.optim.NAdam, decoupled_weight_decay=True), in float64 throughout:
//
//	θ ← θ − γλθ;  m ← β1·m + (1−β1)·g;  n ← β2·n + (1−β2)·g²
//	m̂ = μ_{t+1}·m/(1 − Π_{i≤t+1} μ_i) + (1−μ_t)·g/(1 − Π_{i≤t} μ_i);  n̂ = n/(1−β2^t)
//	θ ← θ − γ·m̂/(√n̂ + ε)
type oracle struct {
	lr, b1, b2, eps, psi, wd, clip float64
	m, n                           [][]float64
	t                              int
	prod                           float64
}

func (o *oracle) step(w, g [][]float64) {
	if o.m == nil {
		o.prod = 1
		for _, x := range w {
			o.m, o.n = append(o.m, make([]float64, len(x))), append(o.n, make([]float64, len(x)))
		}
	}
	var sq float64
	for _, x := range g {
		for _, y := range x {
			sq += y * y
		}
	}
	scale := 1.0
	if o.clip > 0 && o.clip/(math.Sqrt(sq)+1e-6) < 1 {
		scale = o.clip / (math.Sqrt(sq) + 1e-6)
	}
	o.t++
	t := float64(o.t)
	mu := o.b1 * (1 - 0.5*math.Pow(0.96, t*o.psi))
	muNext := o.b1 * (1 - 0.5*math.Pow(0.96, (t+1)*o.psi))
	o.prod *= mu
	for j := range w {
		for i := range w[j] {
			gi := g[j][i] * scale
			w[j][i] -= o.lr * o.wd * w[j][i]
			o.m[j][i] = o.b1*o.m[j][i] + (1-o.b1)*gi
			o.n[j][i] = o.b2*o.n[j][i] + (1-o.b2)*gi*gi
			mhat := muNext*o.m[j][i]/(1-o.prod*muNext) + (1-mu)*gi/(1-o.prod)
			nhat := o.n[j][i] / (1 - math.Pow(o.b2, t))
			w[j][i] -= o.lr * mhat / (math.Sqrt(nhat) + o.eps)
		}
	}
}

// problem is two learnables with random gradients, the same for a seed.
type problem struct {
	w, g []*tensor.Dense
	rng  *rand.Rand
}

func newProblem(seed int64, dt tensor.Dtype) *problem {
	p := &problem{rng: rand.New(rand.NewSource(seed))}
	for _, shape := range [][]int{{3, 2}, {4}} {
		w := tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
		p.w = append(p.w, w)
		p.g = append(p.g, tensor.New(tensor.WithShape(shape...), tensor.Of(dt)))
	}
	for _, w := range p.w {
		p.fill(w, 1)
	}
	return p
}

func (p *problem) fill(t *tensor.Dense, scale float64) {
	switch d := t.Data().(type) {
	case []float64:
		for i := range d {
			d[i] = scale * p.rng.NormFloat64()
		}
	case []float32:
		for i := range d {
			d[i] = float32(scale * p.rng.NormFloat64())
		}
	}
}

func (p *problem) model() []gorgonia.ValueGrad {
	return []gorgonia.ValueGrad{vg{p.w[0], p.g[0]}, vg{p.w[1], p.g[1]}}
}

func float64s(ts []*tensor.Dense) [][]float64 {
	var out [][]float64
	for _, t := range ts {
		switch d := t.Data().(type) {
		case []float64:
			out = append(out, append([]float64(nil), d...))
		case []float32:
			x := make([]float64, len(d))
			for i, v := range d {
				x[i] = float64(v)
			}
			out = append(out, x)
		}
	}
	return out
}

// TestNAdamIsTorchsNAdamW steps NAdam and the documented algorithm side by
// side with random gradients — some large enough to be clipped — at the
// AsyncPP settings and at others, in float64 and float32.
func TestNAdamIsTorchsNAdamW(t *testing.T) {
	for _, c := range []struct {
		name string
		dt   tensor.Dtype
		tol  float64
		opts []solvers.NAdamOption
		o    oracle
	}{
		{"AsyncPP", tensor.Float64, 1e-9, nil, oracle{lr: 3e-4, b1: 0.99, b2: 0.999, eps: 1e-8, psi: 0.004, wd: 0.01, clip: 10}},
		{"torch defaults", tensor.Float64, 1e-9, []solvers.NAdamOption{solvers.WithNAdamLearnRate(2e-3), solvers.WithNAdamBetas(0.9, 0.999), solvers.WithWeightDecay(0), solvers.WithClipNorm(0)},
			oracle{lr: 2e-3, b1: 0.9, b2: 0.999, eps: 1e-8, psi: 0.004}},
		{"others", tensor.Float64, 1e-9, []solvers.NAdamOption{solvers.WithNAdamLearnRate(0.05), solvers.WithNAdamBetas(0.3, 0.9), solvers.WithNAdamEps(1e-3), solvers.WithMomentumDecay(2), solvers.WithWeightDecay(0.2), solvers.WithClipNorm(1)},
			oracle{lr: 0.05, b1: 0.3, b2: 0.9, eps: 1e-3, psi: 2, wd: 0.2, clip: 1}},
		{"float32", tensor.Float32, 2e-5, nil, oracle{lr: 3e-4, b1: 0.99, b2: 0.999, eps: 1e-8, psi: 0.004, wd: 0.01, clip: 10}},
	} {
		s, err := solvers.NewNAdam(c.opts...)
		require.NoError(t, err)
		p := newProblem(1, c.dt)
		o := c.o
		want := float64s(p.w)
		for k := 0; k < 60; k++ {
			scale := 1.0
			if k%7 == 3 {
				scale = 30 // ‖g‖ ≈ 100: clipped
			}
			for _, g := range p.g {
				p.fill(g, scale)
			}
			o.step(want, float64s(p.g))
			require.NoError(t, s.Step(p.model()))
			for j, got := range float64s(p.w) {
				require.InDeltaSlice(t, want[j], got, c.tol, "%s step %d learnable %d", c.name, k, j)
			}
			for _, g := range float64s(p.g) {
				require.Equal(t, make([]float64, len(g)), g, "the gradient is zeroed")
			}
		}
		require.Equal(t, int64(2*10*c.dt.Size()), s.StateBytes())
	}
}

func TestNAdamRejects(t *testing.T) {
	for _, o := range []solvers.NAdamOption{solvers.WithNAdamBetas(1, 0.9), solvers.WithNAdamEps(0), solvers.WithClipNorm(-1), solvers.WithNAdamLearnRate(math.NaN())} {
		_, err := solvers.NewNAdam(o)
		require.Error(t, err)
	}
	s, err := solvers.NewNAdam()
	require.NoError(t, err)
	p := newProblem(2, tensor.Float64)
	require.NoError(t, s.Step(p.model()))
	require.ErrorContains(t, s.Step(p.model()[:1]), "always pass the same list")
	require.Error(t, s.LoadState(solvers.State{}))
}

// TestNAdamSaveAndContinueIsBitIdentical: a new NAdam loaded with the State
// saved after k steps continues exactly as the uninterrupted one.
func TestNAdamSaveAndContinueIsBitIdentical(t *testing.T) {
	run := func(s *solvers.NAdam, p *problem, k int) {
		for ; k > 0; k-- {
			for _, g := range p.g {
				p.fill(g, 3)
			}
			require.NoError(t, s.Step(p.model()))
		}
	}
	whole, err := solvers.NewNAdam()
	require.NoError(t, err)
	p := newProblem(3, tensor.Float32)
	run(whole, p, 40)

	for _, load := range []bool{true, false} {
		first, err := solvers.NewNAdam()
		require.NoError(t, err)
		q := newProblem(3, tensor.Float32)
		run(first, q, 20)
		st, err := first.SaveState()
		require.NoError(t, err)
		second, err := solvers.NewNAdam()
		require.NoError(t, err)
		if load {
			require.NoError(t, second.LoadState(st))
		}
		run(second, q, 20)
		if load {
			require.Equal(t, float64s(p.w), float64s(q.w))
		} else {
			require.NotEqual(t, float64s(p.w), float64s(q.w))
		}
	}
}

// TestReschedulerSetsNAdamsRate: T1 drives NAdam through SetLearnRate.
func TestReschedulerSetsNAdamsRate(t *testing.T) {
	n, err := solvers.NewNAdam()
	require.NoError(t, err)
	r, err := rescheduler.New(n, rescheduler.WithDelay(4), rescheduler.WithPhase(10))
	require.NoError(t, err)
	require.NoError(t, r.Step(newProblem(4, tensor.Float64).model()))
	require.InDelta(t, 3e-4/4, n.LearnRate(), 1e-18)
	require.InDelta(t, 3e-4/4, r.Rate(), 1e-18)
}

// TestNAdamsLookAheadIsSpikeCompensationForOneStep: with its denominator
// frozen (ε ≫ √v̂ at every step, no weight decay or clipping) and μ_t = β1 from the start
// (a large momentum decay), NAdam's update on the delayed quadratic
// f(w) = λw²/2 is Nesterov momentum in moving-average form, with
// characteristic polynomial
//
//	z^τ(z−1)(z−β) + c(1−β)·((1+β)z − β),   c = ηλ/ε,
//
// spike compensation's for D = 1 with step c(1−β). The stable step the
// bisection measures through the engine's hooks is the polynomial's.
func TestNAdamsLookAheadIsSpikeCompensationForOneStep(t *testing.T) {
	const eps = 1e100 // √v̂ vanishes beside it: the denominator is exactly ε
	taus := []int{1, 2, 5, 10}
	if testing.Short() {
		taus = []int{1, 5}
	}
	for _, b := range []float64{0.9, 0.99} {
		line := fmt.Sprintf("NAdam (frozen denominator) β1 = %g, stable ηλ/ε:", b)
		for _, tau := range taus {
			char := func(c float64) delaysim.Poly {
				return delaysim.Poly{1, -1}.Mul(delaysim.Poly{1, -b}).Shift(tau).Add(c*(1-b), delaysim.Poly{1 + b, -b})
			}
			want, err := delaysim.StableBound(char, 1e-6, 400)
			require.NoError(t, err)
			got, err := delaysim.StableStep(func(a float64) (gorgonia.Solver, error) {
				return solvers.NewNAdam(solvers.WithNAdamLearnRate(a*eps), solvers.WithNAdamBetas(b, 0.999), solvers.WithNAdamEps(eps),
					solvers.WithMomentumDecay(1e4), solvers.WithWeightDecay(0), solvers.WithClipNorm(0))
			}, delaysim.Diagonal(1), []float64{1}, tau, 8000, 0.8*want, 1.2*want)
			require.NoError(t, err, "β1=%g τ=%d", b, tau)
			require.InDelta(t, 1, got/want, 2e-3, "β1=%g τ=%d: measured %.5g, polynomial %.5g", b, tau, got, want)
			line += fmt.Sprintf("  τ=%d %.4f/%.4f", tau, got, want)
		}
		t.Log(line)
	}
}
