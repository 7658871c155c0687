//go:build openblas

package stageops

// #cgo LDFLAGS: -lopenblas
import "C" // netlib's binding needs libopenblas at link time

import (
	"gonum.org/v1/netlib/blas/netlib"
	"gorgonia.org/gorgonia"
)

// Built with -tags openblas (cgo, and Debian's libopenblas-dev or any
// libopenblas), every program that imports graphsplit (which imports this
// package) computes gorgonia's matrix products — the user's whole graph and
// every stage, the stage ops' GEMMs included — with OpenBLAS through gonum's
// netlib binding instead of gonum's pure Go BLAS. Results then differ from
// the default build's by float rounding, as any two BLAS do.
func init() { gorgonia.Use(netlib.Implementation{}) }
