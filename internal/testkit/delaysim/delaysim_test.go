package delaysim

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// TestRunIsDelayedGradientDescent: with plain SGD and no hooks, Run is
// w_{k+1} = w_k − α·λ·w_{k−τ}, the fill reading w0.
func TestRunIsDelayedGradientDescent(t *testing.T) {
	const alpha, lambda, tau = 0.3, 2.0, 2
	hist := []float64{1, 1, 1} // w_{−2}, w_{−1} = w_0 for the fill
	var got []float64
	err := Run(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(alpha)), Diagonal(lambda), []float64{1}, tau, 12, func(k int, w []float64) bool {
		got = append(got, w[0])
		return true
	})
	require.NoError(t, err)
	for k := 0; k < 12; k++ {
		n := len(hist)
		hist = append(hist, hist[n-1]-alpha*lambda*hist[n-1-tau])
	}
	require.InDeltaSlice(t, hist[3:], got, 1e-15)
	ok, err := Decays(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.9*0.618)), Diagonal(1), []float64{1}, 2, 2000)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = Decays(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(1.1*0.618)), Diagonal(1), []float64{1}, 2, 2000)
	require.NoError(t, err)
	require.False(t, ok)
}

func TestPoly(t *testing.T) {
	p := Poly{1, -0.5}.Mul(Poly{1, 0.8}) // (z − ½)(z + 0.8)
	require.InDeltaSlice(t, []float64{1, 0.3, -0.4}, p, 1e-15)
	r, err := p.SpectralRadius()
	require.NoError(t, err)
	require.InDelta(t, 0.8, r, 1e-12)
	require.Equal(t, Poly{1, -1, 0, 0}, Poly{1, -1}.Shift(2))
	require.Equal(t, Poly{1, 1, 3}, Poly{1, 1, 1}.Add(2, Poly{1}))
	b, err := StableBound(func(c float64) Poly { return Poly{1, -1}.Add(c, Poly{1}) }, 0.1, 3) // z − 1 + c: stable for c < 2
	require.NoError(t, err)
	require.InDelta(t, 2, b, 1e-8)
}
