package delaysim

import (
	"math"
	"math/cmplx"

	"github.com/pkg/errors"
	"gonum.org/v1/gonum/mat"
)

// Poly is a real polynomial, highest power first: {1, −1, 0.5} is z² − z + ½.
type Poly []float64

// Mul is p·q.
func (p Poly) Mul(q Poly) Poly {
	out := make(Poly, len(p)+len(q)-1)
	for i, a := range p {
		for j, b := range q {
			out[i+j] += a * b
		}
	}
	return out
}

// Shift is p·z^k.
func (p Poly) Shift(k int) Poly { return append(append(Poly(nil), p...), make(Poly, k)...) }

// Add is p + c·q.
func (p Poly) Add(c float64, q Poly) Poly {
	n := max(len(p), len(q))
	out := make(Poly, n)
	for i, a := range p {
		out[n-len(p)+i] += a
	}
	for i, b := range q {
		out[n-len(q)+i] += c * b
	}
	return out
}

// SpectralRadius is the largest modulus of p's roots (the eigenvalues of
// its companion matrix, by gonum). A linear recurrence whose
// characteristic polynomial is p converges iff it is below 1.
func (p Poly) SpectralRadius() (float64, error) {
	for len(p) > 0 && p[0] == 0 {
		p = p[1:]
	}
	n := len(p) - 1
	if n < 1 {
		return 0, errors.New("delaysim: a constant polynomial has no roots")
	}
	c := mat.NewDense(n, n, nil)
	for j := 0; j < n; j++ {
		c.Set(0, j, -p[j+1]/p[0])
	}
	for i := 1; i < n; i++ {
		c.Set(i, i-1, 1)
	}
	var eig mat.Eigen
	if !eig.Factorize(c, mat.EigenNone) {
		return 0, errors.Errorf("delaysim: the eigenvalues of %v did not converge", p)
	}
	r := 0.0
	for _, z := range eig.Values(nil) {
		r = math.Max(r, cmplx.Abs(z))
	}
	return r, nil
}

// StableBound bisects for the c in (lo, hi) where the spectral radius of
// char(c) crosses 1, to a relative precision of 1e-9: the largest stable
// αλ of the method whose characteristic polynomial is char. char(lo) must
// be stable and char(hi) not.
func StableBound(char func(c float64) Poly, lo, hi float64) (float64, error) {
	stable := func(c float64) (bool, error) {
		r, err := char(c).SpectralRadius()
		return r < 1, err
	}
	return bisect(stable, lo, hi, 1e-9)
}
