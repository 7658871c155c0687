package delaysim

import (
	"math"

	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Quadratic is f(w) = ½·wᵀHw with H symmetric positive definite.
type Quadratic [][]float64

// Diagonal returns the quadratic with Hessian diag(lambda...).
func Diagonal(lambda ...float64) Quadratic {
	h := make(Quadratic, len(lambda))
	for i, l := range lambda {
		h[i] = make([]float64, len(lambda))
		h[i][i] = l
	}
	return h
}

// Rotated2D returns the two-dimensional quadratic with eigenvalues l1, l2
// along axes rotated by theta radians, so that no per-coordinate scaling
// (Adam's) can undo its conditioning.
func Rotated2D(l1, l2, theta float64) Quadratic {
	c, s := math.Cos(theta), math.Sin(theta)
	return Quadratic{
		{l1*c*c + l2*s*s, (l1 - l2) * c * s},
		{(l1 - l2) * c * s, l1*s*s + l2*c*c},
	}
}

// ErrDiverged is what Run returns, wrapped with the step, when the weights
// stop being finite.
var ErrDiverged = errors.New("the weights are not finite")

func diverged(err error) bool { return errors.Cause(err) == ErrDiverged }

type valueGrad struct{ w, g *tensor.Dense }

func (v valueGrad) Value() gorgonia.Value         { return v.w }
func (v valueGrad) Grad() (gorgonia.Value, error) { return v.g, nil }

// Run trains s for steps steps from w0 with delay tau and calls observe
// after every step with the step number (from 1) and the weights (which it
// must not keep); observe returning false stops the run. It returns the
// first error of a hook or step, or one naming the step at which a weight
// stopped being finite.
func Run(s gorgonia.Solver, h Quadratic, w0 []float64, tau, steps int, observe func(k int, w []float64) bool) error {
	d := len(w0)
	if len(h) != d || tau < 0 {
		return errors.Errorf("delaysim: %d weights, a %d×%d Hessian, delay %d", d, len(h), len(h), tau)
	}
	wd := append([]float64(nil), w0...)
	gd := make([]float64, d)
	w := tensor.New(tensor.WithShape(d), tensor.WithBacking(wd))
	g := tensor.New(tensor.WithShape(d), tensor.WithBacking(gd))
	model := []gorgonia.ValueGrad{valueGrad{w, g}}
	solvers.SetDelay(s, float64(tau), false)
	// stash[j%(tau+1)] is what the forward of step j read; the fill
	// forwards (steps −tau … −1) read w0.
	stash := make([][]float64, tau+1)
	for i := range stash {
		stash[i] = append([]float64(nil), w0...)
	}
	for k := 0; k < steps; k++ {
		fw, err := solvers.ForwardWeights(s, tau)
		if err != nil {
			return errors.Wrapf(err, "delaysim: forward of step %d", k)
		}
		src := wd
		if fw != nil {
			src = fw[0].Data().([]float64)
		}
		copy(stash[k%(tau+1)], src)
		u := stash[(k+1)%(tau+1)] // the forward of step k−τ (the oldest kept)
		if tau == 0 {
			u = stash[0]
		}
		bw, err := solvers.BackwardWeights(s, tau)
		if err != nil {
			return errors.Wrapf(err, "delaysim: backward of step %d", k)
		}
		if bw != nil {
			u = bw[0].Data().([]float64)
		}
		for i := range gd {
			var x float64
			for j, hij := range h[i] {
				x += hij * u[j]
			}
			gd[i] = x
		}
		if err := s.Step(model); err != nil {
			return errors.Wrapf(err, "delaysim: step %d", k)
		}
		for _, x := range wd {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return errors.Wrapf(ErrDiverged, "delaysim: after step %d", k+1)
			}
		}
		if observe != nil && !observe(k+1, wd) {
			return nil
		}
	}
	return nil
}

func norm(w []float64) float64 {
	var s float64
	for _, x := range w {
		s += x * x
	}
	return math.Sqrt(s)
}

// Decays runs s for steps steps from w0 and reports whether the weights'
// amplitude (the largest ‖w‖ over the last quarter of the run) is below
// that over the quarter before: the run's dominant mode decays. Runs that
// grow past 1e100 or stop being finite do not decay.
func Decays(s gorgonia.Solver, h Quadratic, w0 []float64, tau, steps int) (bool, error) {
	var mid, last float64
	blew := false
	err := Run(s, h, w0, tau, steps, func(k int, w []float64) bool {
		n := norm(w)
		if n > 1e100 {
			blew = true
			return false
		}
		switch {
		case k > 3*steps/4:
			last = math.Max(last, n)
		case k > steps/2:
			mid = math.Max(mid, n)
		}
		return true
	})
	if blew || diverged(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return last < mid || last == 0, nil
}

// StableStep bisects for the largest α in (lo, hi) at which the solver
// newSolver(α) makes the delayed quadratic decay (Decays), to a relative
// precision of 1e-4. lo must decay and hi must not; it returns an error
// otherwise.
func StableStep(newSolver func(alpha float64) (gorgonia.Solver, error), h Quadratic, w0 []float64, tau, steps int, lo, hi float64) (float64, error) {
	decays := func(a float64) (bool, error) {
		s, err := newSolver(a)
		if err != nil {
			return false, err
		}
		return Decays(s, h, w0, tau, steps)
	}
	return bisect(decays, lo, hi, 1e-4)
}

// bisect narrows (lo, hi), where ok(lo) holds and ok(hi) does not, to a
// relative width rel and returns its middle.
func bisect(ok func(float64) (bool, error), lo, hi, rel float64) (float64, error) {
	for _, e := range []struct {
		x    float64
		want bool
	}{{lo, true}, {hi, false}} {
		got, err := ok(e.x)
		if err != nil {
			return 0, err
		}
		if got != e.want {
			return 0, errors.Errorf("delaysim: at %g the test gives %v, want %v: widen the bracket", e.x, got, e.want)
		}
	}
	for hi-lo > rel*hi {
		mid := (lo + hi) / 2
		got, err := ok(mid)
		if err != nil {
			return 0, err
		}
		if got {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}

// StepsToConverge runs s until ‖w‖ ≤ tol·‖w0‖ and stays there for 2τ+2
// further steps, and returns the number of steps to the first of those;
// max+1 when that does not happen within max steps (or the run diverges).
func StepsToConverge(s gorgonia.Solver, h Quadratic, w0 []float64, tau, max int, tol float64) (int, error) {
	limit := tol * norm(w0)
	lastAbove := 0
	done := false
	err := Run(s, h, w0, tau, max, func(k int, w []float64) bool {
		if norm(w) > limit {
			lastAbove = k
		}
		if k-lastAbove > 2*tau+2 {
			done = true
			return false
		}
		return true
	})
	if err != nil {
		if diverged(err) {
			return max + 1, nil
		}
		return 0, err
	}
	if !done {
		return max + 1, nil
	}
	return lastAbove + 1, nil
}
