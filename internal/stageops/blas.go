package stageops

import (
	"sync"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var fastOnce sync.Once

// UseFastBLAS makes gorgonia (and package tensor) compute every matrix
// product of the process — the user's graphs and every stage's — with this
// package's BLAS (gorgonia.Use): in the default build gonum's, bit for bit,
// run on one goroutine per kernel when SetWorkers allows it only one, and
// faster for float32 products (AVX tiles); built with -tags openblas,
// OpenBLAS. It is process-wide, as gorgonia.Use is, and installs it once:
// later calls, from any goroutine, change nothing and return once it is
// installed. gorgonia reads its BLAS without a lock, so the first call
// must come before any graph of the process computes. Nothing calls it on
// import: graphsplit.UseFastBLAS is the public call, which package train
// and the command make.
func UseFastBLAS() { fastOnce.Do(func() { gorgonia.Use(fastBLAS()) }) }

// ExactBLAS reports whether the BLAS gorgonia computes with now gives
// gonum's products bit for bit: gonum's own, or this package's in the
// default build (not OpenBLAS's). The parity tests compare bit for bit
// when it does, to a tolerance otherwise.
func ExactBLAS() bool { return exactBLAS(tensor.WhichBLAS()) }
