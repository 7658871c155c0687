//go:build !openblas

package stageops

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestTiledGemmIsGonums: the tiled products give gonum's bits where the
// values make the order and the skipping of zeros show — many exact zeros
// in A (gonum skips their products: a zero times an infinity would be
// NaN, and adding +0 turns a −0 of C into +0), −0s, infinities and NaNs in
// B and C, alpha and beta of every kind — on one worker and on several,
// for shapes with and without columns beyond the 16-wide tiles (8 of them,
// or 1 to 7) and rows beyond the tiles of 4, A transposed or
// not, leading dimensions wider than the matrices; with the 4×32 tiles of
// AVX-512 and without them, where the CPU has them.
func TestTiledGemmIsGonums(t *testing.T) {
	if !tiledGemm {
		t.Skip("no tiled kernel on this CPU")
	}
	defer SetWorkers(0)
	widths := []bool{false}
	if wideTiles {
		widths = append(widths, true)
	} else {
		t.Log("no AVX-512 on this CPU: only the 4×16 tiles are tested")
	}
	defer func(w bool) { wideTiles = w }(wideTiles)
	rng := rand.New(rand.NewSource(2))
	fill := func(n int, zeros, specials float64) []float32 { return randomFloats(rng, n, zeros, specials) }
	for _, sz := range [][3]int{{4, 16, 1}, {7, 33, 5}, {64, 256, 784}, {16, 300, 784}, {130, 70, 200}, {5, 17, 64}, {12, 48, 0}, {8, 9, 784}, {16, 72, 196}, {6, 25, 9}, {4, 8, 3}, {4, 1, 7}, {9, 3, 40}, {8, 10, 128}, {5, 7, 2}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, 2}, {-3, 0}, {1, float32(math.Copysign(0, -1))}, {math.Float32frombits(0x7fc0beef), 1}} {
				for _, mix := range [][2]float64{{0, 0}, {0.5, 0}, {0.3, 0.05}} {
					name := fmt.Sprintf("%dx%dx%d/%c/alpha=%g,beta=%g/zeros=%g,specials=%g", m, n, k, tA, ab[0], ab[1], mix[0], mix[1])
					ra, ca := m, k
					if tA == blas.Trans {
						ra, ca = k, m
					}
					lda, ldb, ldc := ca+3, n+1, n+5
					a, b := fill(max(ra*lda, 1), mix[0], mix[1]), fill(max(k*ldb, 1), mix[0]/3, mix[1])
					c := fill(m*ldc, 0.2, mix[1]*2)
					want := append([]float32(nil), c...)
					SetWorkers(1)
					tiled := tiledGemm
					tiledGemm = false // gonum's own serial path
					gonumBLAS{}.Sgemm(tA, blas.NoTrans, m, n, k, ab[0], a, lda, b, ldb, ab[1], want, ldc)
					tiledGemm = tiled
					want2 := append([]float32(nil), c...)
					gonum.Implementation{}.Sgemm(tA, blas.NoTrans, m, n, k, ab[0], a, lda, b, ldb, ab[1], want2, ldc)
					require.Equal(t, bits32(want2), bits32(want), "%s: gonum's serial and parallel paths agree", name)
					// The references once, the tiles on one and on two workers.
					for _, w := range []int{1, 2} {
						SetWorkers(w)
						for _, wide := range widths {
							wideTiles = wide
							got := append([]float32(nil), c...)
							gonumBLAS{}.Sgemm(tA, blas.NoTrans, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc)
							require.Equal(t, bits32(want), bits32(got), "%s/workers=%d/wide=%v", name, w, wide)
						}
					}
				}
			}
		}
	}
}

// specialFloats are the values that show a product's order and skipping:
// ±0, infinities, NaNs of three payloads (which one survives a sum or a
// product of two shows its operands' order), the smallest subnormal and a
// value near the largest.
var specialFloats = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00000), math.Float32frombits(0x7fc12345), 1e-45, 3.4e38}

// randomFloats returns n values: a fraction zeros of exact zeros, a
// fraction specials drawn from specialFloats, the rest normal.
func randomFloats(rng *rand.Rand, n int, zeros, specials float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch r := rng.Float64(); {
		case r < zeros:
			s[i] = 0
		case r < zeros+specials:
			s[i] = specialFloats[rng.Intn(len(specialFloats))]
		default:
			s[i] = float32(rng.NormFloat64())
		}
	}
	return s
}

// TestTiledGemmChecksItsArguments: a slice too short for the product is
// gonum's panic, before any memory is read.
func TestTiledGemmChecksItsArguments(t *testing.T) {
	if !tiledGemm {
		t.Skip("no tiled kernel on this CPU")
	}
	a, b, c := make([]float32, 8*8), make([]float32, 8*32), make([]float32, 8*32)
	require.PanicsWithValue(t, "blas: insufficient length of a", func() {
		gonumBLAS{}.Sgemm(blas.NoTrans, blas.NoTrans, 8, 32, 9, 1, a, 9, b, 32, 0, c, 32)
	})
}

// BenchmarkSgemm is the MLP's largest product on one worker (its first
// layer at batch 64, forward, weight gradient and input gradient): tiled
// with AVX-512's 4×32 tiles where the CPU has them, with AVX's 4×16, and
// gonum's; and in the fast mode (HoldKernels), with and without AVX-512.
func BenchmarkSgemm(b *testing.B) {
	defer SetWorkers(0)
	SetWorkers(1)
	rng := rand.New(rand.NewSource(1))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	x, w, y := fill(64*784), fill(784*256), fill(64*256)
	for _, kernel := range []string{"tiled-wide", "tiled", "gonum", "fast-wide", "fast"} {
		b.Run("kernel="+kernel, func(b *testing.B) {
			defer func(t, w bool) { tiledGemm, wideTiles = t, w }(tiledGemm, wideTiles)
			tiledGemm = tiledGemm && kernel != "gonum"
			wideTiles = wideTiles && strings.HasSuffix(kernel, "-wide")
			if strings.HasPrefix(kernel, "fast") {
				release, err := HoldKernels(Fast)
				if err != nil {
					b.Skip(err)
				}
				defer release()
			}
			for b.Loop() {
				gonumBLAS{}.Sgemm(blas.NoTrans, blas.NoTrans, 64, 256, 784, 1, x, 784, w, 256, 0, y, 256)
				gonumBLAS{}.Sgemm(blas.Trans, blas.NoTrans, 784, 256, 64, 1, x, 784, y, 256, 0, w, 256)
				gonumBLAS{}.Sgemm(blas.NoTrans, blas.Trans, 64, 784, 256, 1, y, 256, w, 256, 0, x, 784)
			}
		})
	}
}
