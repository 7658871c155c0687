//go:build !openblas

package stageops

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
)

// TestSerialGemmIsGonums: with one worker, gonumBLAS computes every product
// gonum computes on goroutines block by block (four output blocks or more)
// on the caller's goroutine, and the result is gonum's bit for bit, for
// every transposition, edge blocks, leading dimensions wider than the
// matrices, and alpha and beta of 0, 1 and others; smaller products are
// gonum's own call.
func TestSerialGemmIsGonums(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine (the serial path), slow under the race detector and nothing for it to check; go test ./... runs it")
	}
	defer SetWorkers(0)
	rng := rand.New(rand.NewSource(1))
	fill32 := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	trans := []blas.Transpose{blas.NoTrans, blas.Trans}
	for _, sz := range [][3]int{{130, 70, 200}, {64, 256, 65}, {200, 129, 3}, {16, 300, 784}, {40, 40, 40}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range trans {
			for _, tB := range trans {
				for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, 2}, {0, 0.5}} {
					name := fmt.Sprintf("%dx%dx%d/%c%c/alpha=%g,beta=%g", m, n, k, tA, tB, ab[0], ab[1])
					ra, ca := m, k
					if tA == blas.Trans {
						ra, ca = k, m
					}
					rb, cb := k, n
					if tB == blas.Trans {
						rb, cb = n, k
					}
					lda, ldb, ldc := ca+3, cb+1, n+5
					a, b, c := fill32(ra*lda), fill32(rb*ldb), fill32(m*ldc)
					want := append([]float32(nil), c...)
					SetWorkers(0)
					gonum.Implementation{}.Sgemm(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], want, ldc)
					SetWorkers(1)
					got := append([]float32(nil), c...)
					gonumBLAS{}.Sgemm(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc)
					require.Equal(t, bits32(want), bits32(got), name)

					a64, b64, c64 := to64(a), to64(b), to64(c)
					want64 := append([]float64(nil), c64...)
					gonum.Implementation{}.Dgemm(tA, tB, m, n, k, float64(ab[0]), a64, lda, b64, ldb, float64(ab[1]), want64, ldc)
					got64 := append([]float64(nil), c64...)
					gonumBLAS{}.Dgemm(tA, tB, m, n, k, float64(ab[0]), a64, lda, b64, ldb, float64(ab[1]), got64, ldc)
					require.Equal(t, bits64(want64), bits64(got64), name+" (float64)")
				}
			}
		}
	}
}

func to64(s []float32) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

func bits32(s []float32) []uint32 {
	out := make([]uint32, len(s))
	for i, v := range s {
		out[i] = math.Float32bits(v)
	}
	return out
}

func bits64(s []float64) []uint64 {
	out := make([]uint64, len(s))
	for i, v := range s {
		out[i] = math.Float64bits(v)
	}
	return out
}

// TestFastBLASIsExact: in the default build the BLAS UseFastBLAS installs
// gives gonum's bits, so the parity tests compare bit for bit
// (ExactBLAS), not to a tolerance.
func TestFastBLASIsExact(t *testing.T) {
	UseFastBLAS()
	require.True(t, ExactBLAS())
	require.True(t, exactBLAS(gonum.Implementation{}))
}
