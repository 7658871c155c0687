package stageops

import "gorgonia.org/gorgonia"

// UseFastBLAS makes gorgonia (and package tensor) compute every matrix
// product of the process — the user's graphs and every stage's — with this
// package's BLAS (gorgonia.Use): in the default build gonum's, bit for bit,
// run on one goroutine per kernel when SetWorkers allows it only one, and
// faster for float32 products (AVX tiles); built with -tags openblas,
// OpenBLAS. It is process-wide, as gorgonia.Use is, and calling it again
// changes nothing. Nothing calls it on import: graphsplit.UseFastBLAS is
// the public call, which package train and the command make.
func UseFastBLAS() { gorgonia.Use(fastBLAS()) }
