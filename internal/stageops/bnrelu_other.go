//go:build openblas || !amd64

package stageops

// bnReLUWide: no vector kernel on this architecture or in the openblas
// build (cgo: no Go assembly in the package); forward computes
// every element.
func bnReLUWide(y, x []float32, alpha, beta, scale, bias float32) int { return 0 }

// bnReLUGradWide: no vector kernel on this architecture.
func bnReLUGradWide(g, x, dy []float32, alpha, beta, scale, bias float32) int { return 0 }

// bnReLUTermsWide: no vector kernel on this architecture.
func bnReLUTermsWide(out, x, dy []float32, alpha, beta, scale, bias float32, timesXhat bool) int {
	return 0
}

// wideBN: no vector kernel here.
var wideBN = false

// gradSumsWide: no vector kernel here.
func gradSumsWide(g, x []float32, at, s int, mean *[8]float32, acc *[16]float32) int { return 0 }

// gradFinishWide: no vector kernel here.
func gradFinishWide(g, x []float32, gradMean, mean, kx, invstd float32) int { return 0 }
