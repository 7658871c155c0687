//go:build !openblas && !amd64

package stageops

// tiledGemm, wideTiles: no tiled kernel on this architecture; gonum
// computes every product.
var tiledGemm, wideTiles = false, false

func sgemmTiled(aT, fresh bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	panic("stageops: sgemmTiled without a tiled kernel")
}

func dotsFit(m, n, k int) bool { return false }

func sgemmDots(m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	panic("stageops: sgemmDots without its kernel")
}

// fastKernels: the fast mode's tiles are amd64's.
func fastKernels() bool { return false }

func sgemmFast(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	panic("stageops: sgemmFast without its kernel")
}

func convOutDots(imgs, hw, cout, k int, p, f, out []float32) bool { return false }
