package delay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExponential(t *testing.T) {
	e := Exponential{MeanDelay: 3, Limit: 10, Seed: 1, N: 2}
	hist := map[int]int{}
	sum := 0
	for k := 0; k < 20000; k++ {
		d := e.Delay(1, 2*k)
		require.Equal(t, d, e.Delay(1, 2*k+1), "a step's forwards share a draw")
		require.GreaterOrEqual(t, d, 0)
		require.LessOrEqual(t, d, 10)
		hist[d]++
		sum += d
	}
	mean := float64(sum) / 20000
	require.InDelta(t, 2.7, mean, 0.2, "round(Exp(3)) truncated at 10 has mean ≈ 2.7")
	require.Greater(t, hist[0], hist[5], "exponential: small delays are more likely")
	require.Equal(t, e.Delay(1, 7), Exponential{MeanDelay: 3, Limit: 10, Seed: 1, N: 2}.Delay(1, 7), "reproducible")
}

func TestFixedAndRecorded(t *testing.T) {
	f := PipeMare(4, 2)
	require.Equal(t, Fixed{4, 3, 2, 1}, f)
	require.Equal(t, 3, f.Delay(1, 99))
	require.Equal(t, 3.0, f.Mean(1))
	r := Recorded{{2, -1, 4}, {}}
	require.Equal(t, 2, r.Delay(0, 0))
	require.Equal(t, 0, r.Delay(0, 1), "not updated")
	require.Equal(t, 0, r.Delay(0, 7), "past the record")
	require.Equal(t, 4, r.Max(0))
	require.Equal(t, 3.0, r.Mean(0))
	require.Zero(t, r.Mean(1))
}
