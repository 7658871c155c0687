//go:build openblas

package stageops

// #cgo LDFLAGS: -lopenblas
import "C" // netlib's binding needs libopenblas at link time

import (
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/netlib/blas/netlib"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// fastBLAS is what UseFastBLAS installs when built with -tags openblas
// (cgo, and Debian's libopenblas-dev or any libopenblas): OpenBLAS through
// gonum's netlib binding, for gorgonia's matrix products — the user's whole
// graph and every stage, the stage ops' GEMMs included — instead of gonum's
// pure Go BLAS. Results then differ from the default build's by float
// rounding, as any two BLAS do.
func fastBLAS() gorgonia.BLAS { return netlib.Implementation{} }

// exactBLAS: only gonum's own BLAS gives gonum's bits in this build.
func exactBLAS(b tensor.BLAS) bool {
	_, ok := b.(gonum.Implementation)
	return ok
}

// fastKernels: OpenBLAS computes the products in its own order; the fast
// mode is the default build's.
func fastKernels() bool { return false }

// convOutNCHW: OpenBLAS computes every convolution's product.
func convOutNCHW(bl tensor.BLAS, imgs, hw, cout, k int, p, f, out []float32) bool { return false }
