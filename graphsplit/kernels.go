package graphsplit

import (
	"github.com/pipemare/pipemare/internal/stageops"
	"github.com/pkg/errors"
)

// Kernels is a kernel mode: the order in which the float32 matrix products
// of the BLAS UseFastBLAS installs — the user's graph's and every
// stage's — sum their products.
type Kernels string

const (
	// ExactKernels computes gonum's products bit for bit (each product
	// and each sum rounded apart, in gonum's order): the bits of plain
	// Gorgonia, which every recorded weights_sha256 of an exact run pins.
	// The default.
	ExactKernels Kernels = "exact"
	// FastKernels sums each element's products in fused multiply-adds,
	// in increasing k, then adds alpha times the sum into C: its own
	// fixed order, which gives the same bits on any number of cores,
	// processes and hosts that run it (AVX2 and FMA3, the default build),
	// and not gonum's. docs/executor.md has what it gains.
	FastKernels Kernels = "fast"
)

// HoldKernels makes every float32 matrix product of this process compute
// in mode k until release is called (the exact mode when nothing holds
// one). The BLAS is process-wide, as gorgonia.Use is, so the mode is the
// process's, not a plan's: HoldKernels refuses, naming both modes, a mode
// while another holder holds the other one, so that two runs of one
// process never compute in two modes at once; runs in the same mode share
// it. It installs the BLAS (UseFastBLAS) first. It refuses the fast mode on
// a CPU without AVX2 and FMA3, and in the openblas build. train.Train and
// train.ServeStage hold their run's mode (train.Config.Kernels) while they
// run.
func HoldKernels(k Kernels) (release func(), err error) {
	release, err = stageops.HoldKernels(stageops.Kernels(k))
	return release, errors.Wrap(err, "graphsplit")
}
