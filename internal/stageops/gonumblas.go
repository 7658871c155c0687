//go:build !openblas

package stageops

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gonumBLAS is gonum's pure Go BLAS, whose matrix products run on one
// goroutine when SetWorkers allows a kernel only one: gonum computes a
// product of four 64×64 blocks or more of output on a goroutine per block,
// each summing its block's products along k block by block; gonumBLAS then
// computes the same block products, in the same order along k, on the
// calling goroutine, so the result is the same bit for bit.
type gonumBLAS struct{ gonum.Implementation }

// fastBLAS is what UseFastBLAS installs in this build: gonumBLAS, the same
// products as gonum's, bit for bit, whatever SetWorkers says.
func fastBLAS() gorgonia.BLAS { return gonumBLAS{} }

// exactBLAS: gonum's BLAS and gonumBLAS give the same bits.
func exactBLAS(b tensor.BLAS) bool {
	switch b.(type) {
	case gonum.Implementation, gonumBLAS:
		return true
	}
	return false
}

// gonum's blocking (blas/gonum: blockSize, minParBlock).
const (
	gemmBlock    = 64
	gemmParBlock = 4
)

// Sgemm is gonum's Sgemm, or in the fast mode (HoldKernels) sgemmFast's
// products after gonum's checks and scaling by beta. Products whose B is not transposed run in
// tiles of AVX-512 (4×32) or AVX (4×16, 4×8) (sgemmTiled) where the CPU has
// them and the product has 4 rows; products of A by Bᵀ run gonum's dot
// products 8 rows at a time (sgemmDots): the same bits, faster
// (docs/executor.md).
func (g gonumBLAS) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	// prepare runs gonum's checks of the arguments (its Sgemm with alpha
	// 0 and beta 1, which returns once they pass) and scales C by beta, as
	// gonum does before a product, unless fresh: a beta of 0 that the
	// kernel applies itself (sgemmTiled starts its sums from zero).
	prepare := func(fresh bool) {
		g.Implementation.Sgemm(tA, tB, m, n, k, 0, a, lda, b, ldb, 1, c, ldc)
		if !fresh {
			scale(m, n, beta, c, ldc)
		}
	}
	switch {
	case fastNow.Load() && m > 0 && n > 0 && k > 0 && alpha != 0:
		prepare(false)
		sgemmFast(tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, c, ldc)
	case tiledGemm && tB == blas.NoTrans && (tA == blas.NoTrans || tA == blas.Trans) && m >= 4 && n > 0 && k > 0 && alpha != 0:
		prepare(beta == 0)
		sgemmTiled(tA == blas.Trans, beta == 0, m, n, k, alpha, a, lda, b, ldb, c, ldc)
	case tA == blas.NoTrans && tB == blas.Trans && dotsRun(m, n, k, alpha):
		prepare(false)
		sgemmDots(m, n, k, alpha, a, lda, b, ldb, c, ldc)
	case workers() > 1 || !blockedGemm(m, n, k, alpha == 0):
		g.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	default:
		prepare(false)
		serialBlocks(tA, tB, m, n, k, a, lda, b, ldb, c, ldc, func(m, n, k int, a []float32, b []float32, c []float32) {
			g.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, 1, c, ldc)
		})
	}
}

// Dgemm is gonum's Dgemm.
func (g gonumBLAS) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if workers() > 1 || !blockedGemm(m, n, k, alpha == 0) {
		g.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	g.Implementation.Dgemm(tA, tB, m, n, 0, alpha, a, lda, b, ldb, 1, c, ldc)
	scale(m, n, beta, c, ldc)
	serialBlocks(tA, tB, m, n, k, a, lda, b, ldb, c, ldc, func(m, n, k int, a []float64, b []float64, c []float64) {
		g.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, 1, c, ldc)
	})
}

// blockedGemm reports whether gonum computes an m×n×k product block by
// block on goroutines: four blocks of output or more, and work to do (a
// zero alpha or k leaves gonum only the scaling by beta).
func blockedGemm(m, n, k int, zeroAlpha bool) bool {
	blocks := func(d int) int { return (d + gemmBlock - 1) / gemmBlock }
	return m > 0 && n > 0 && k > 0 && !zeroAlpha && blocks(m)*blocks(n) >= gemmParBlock
}

// scale is gonum's C ← beta·C before a product: zeroes for beta 0.
func scale[T float32 | float64](m, n int, beta T, c []T, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// serialBlocks calls block for every 64×64 block of C and every 64-long
// piece of k, in gonum's order along k, with the views of A, B and C
// gonum's workers take (blas/gonum's sliceView); each call adds its
// product into its block of C, which gonum's serial kernel does for a
// single block.
func serialBlocks[T float32 | float64](tA, tB blas.Transpose, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int, block func(m, n, k int, a, b, c []T)) {
	view := func(s []T, ld, i, j, r, cols int) []T { return s[i*ld+j : (i+r-1)*ld+j+cols] }
	aT := tA == blas.Trans || tA == blas.ConjTrans
	bT := tB == blas.Trans || tB == blas.ConjTrans
	for i := 0; i < m; i += gemmBlock {
		li := min(gemmBlock, m-i)
		for j := 0; j < n; j += gemmBlock {
			lj := min(gemmBlock, n-j)
			cSub := view(c, ldc, i, j, li, lj)
			for l := 0; l < k; l += gemmBlock {
				lk := min(gemmBlock, k-l)
				var aSub, bSub []T
				if aT {
					aSub = view(a, lda, l, i, lk, li)
				} else {
					aSub = view(a, lda, i, l, li, lk)
				}
				if bT {
					bSub = view(b, ldb, j, l, lj, lk)
				} else {
					bSub = view(b, ldb, l, j, lk, lj)
				}
				block(li, lj, lk, aSub, bSub, cSub)
			}
		}
	}
}

// convOutNCHW computes a convolution's output where bl is gonumBLAS and its
// Sgemm would run the product P·Fᵀ in sgemmDots: the same sums, stored
// straight into the NCHW output (convOutDots) instead of into NHWC and
// then copied. It reports false, computing nothing, elsewhere.
func convOutNCHW(bl tensor.BLAS, imgs, hw, cout, k int, p, f, out []float32) bool {
	if _, ok := bl.(gonumBLAS); !ok || fastNow.Load() || !dotsRun(imgs*hw, cout, k, 1) {
		return false
	}
	return convOutDots(imgs, hw, cout, k, p, f, out)
}

// dotsRun reports whether Sgemm runs an m×n×k product of A by Bᵀ, scaled
// by alpha, in sgemmDots (in the exact mode).
func dotsRun(m, n, k int, alpha float32) bool {
	return tiledGemm && k > 0 && alpha != 0 && dotsFit(m, n, k)
}
