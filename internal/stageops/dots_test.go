//go:build !openblas && amd64

package stageops

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestDotGemmIsGonums: products of A by Bᵀ computed 8 rows at a time
// (sgemmDots) give gonum's bits, for dot products of every length around
// DotUnitary's steps of 16 and 4, rows of B starting at every 4-byte
// offset from a 16-byte boundary (DotUnitary's trim depends on it), with
// and without gonum's blocking (pieces of k of 64), rows past a multiple
// of 8, on one worker and on several; with −0s, infinities and NaNs of
// three payloads in A, B and C and a fourth as alpha (which one survives
// a sum or a product of two shows its operands' order).
func TestDotGemmIsGonums(t *testing.T) {
	if !tiledGemm {
		t.Skip("no AVX on this CPU")
	}
	defer SetWorkers(0)
	rng := rand.New(rand.NewSource(3))
	fill := func(n int, specials float64) []float32 { return randomFloats(rng, n, 0, specials) }
	shapes := [][3]int{{8, 8, 9}, {200, 16, 72}, {16, 784, 128}, {13, 5, 1}, {9, 3, 64}, {70, 300, 130}, {12544 / 49, 8, 9}, {64, 64, 257}}
	for k := 1; k <= 40; k++ {
		shapes = append(shapes, [3]int{17, 4, k})
	}
	for _, sz := range shapes {
		m, n, k := sz[0], sz[1], sz[2]
		require.Equal(t, true, dotsFit(m, n, k) || k > gemmBlock, "%v: the test's shape runs in sgemmDots", sz)
		for _, off := range []int{0, 1, 2, 3} {
			for _, ab := range [][2]float32{{1, 0}, {-0.5, 1}, {3, 2}, {math.Float32frombits(0x7fc0beef), 1}} {
				for _, specials := range []float64{0, 0.1} {
					name := fmt.Sprintf("%dx%dx%d/b+%d/alpha=%g,beta=%g/specials=%g", m, n, k, off, ab[0], ab[1], specials)
					lda, ldb, ldc := k+1, k+off%2, n+3
					a, b := fill(m*lda, specials), fill(off+n*ldb, specials)[off:]
					c := fill(m*ldc, specials)
					want := append([]float32(nil), c...)
					gonum.Implementation{}.Sgemm(blas.NoTrans, blas.Trans, m, n, k, ab[0], a, lda, b, ldb, ab[1], want, ldc)
					// The reference once, the kernel on one and on two workers.
					for _, w := range []int{1, 2} {
						SetWorkers(w)
						got := append([]float32(nil), c...)
						gonumBLAS{}.Sgemm(blas.NoTrans, blas.Trans, m, n, k, ab[0], a, lda, b, ldb, ab[1], got, ldc)
						require.Equal(t, bits32(want), bits32(got), "%s/workers=%d", name, w)
					}
				}
			}
		}
	}
}

// TestConvOutDotsIsGonums: a convolution's output computed straight into
// NCHW (convOutDots) is gonum's product of the patches by the filter's
// transpose into NHWC, each image's block then copied transposed, bit for
// bit: images whose pixels are and are not a multiple of 8 (a group
// ending an image has fewer), more than 64 filters, products gonum does
// and does not block, on one worker and on two; with −0s, infinities and
// NaNs of three payloads in both operands.
func TestConvOutDotsIsGonums(t *testing.T) {
	if !tiledGemm {
		t.Skip("no AVX on this CPU")
	}
	defer SetWorkers(0)
	rng := rand.New(rand.NewSource(5))
	for _, sz := range [][4]int{{16, 784, 8, 9}, {16, 196, 16, 72}, {3, 25, 70, 27}, {8, 100, 5, 130}, {2, 13, 5, 60}, {1, 8, 3, 8}, {4, 196, 16, 144}} {
		imgs, hw, cout, k := sz[0], sz[1], sz[2], sz[3]
		for _, specials := range []float64{0, 0.1} {
			p, f := randomFloats(rng, imgs*hw*k, 0, specials), randomFloats(rng, cout*k, 0, specials)
			nhwc := make([]float32, imgs*hw*cout)
			gonum.Implementation{}.Sgemm(blas.NoTrans, blas.Trans, imgs*hw, cout, k, 1, p, k, f, k, 0, nhwc, cout)
			want := make([]float32, len(nhwc))
			for img := range imgs {
				for px := range hw {
					for c := range cout {
						want[(img*cout+c)*hw+px] = nhwc[(img*hw+px)*cout+c]
					}
				}
			}
			for _, w := range []int{1, 2} {
				SetWorkers(w)
				got := randomFloats(rng, len(want), 0, specials) // whatever the output held before
				require.True(t, convOutNCHW(gonumBLAS{}, imgs, hw, cout, k, p, f, got), "%v runs in convOutDots", sz)
				require.Equal(t, bits32(want), bits32(got), "%v/specials=%g/workers=%d", sz, specials, w)
			}
		}
	}
}
