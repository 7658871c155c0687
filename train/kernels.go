package train

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pkg/errors"
)

// KernelMode is the run's kernel mode: Kernels, or the exact mode.
func (c Config) KernelMode() graphsplit.Kernels {
	if c.Kernels == "" {
		return graphsplit.ExactKernels
	}
	return c.Kernels
}

// holdKernels makes the process compute in the run's kernel mode until
// release (graphsplit.HoldKernels), or says why it cannot.
func (c Config) holdKernels() (release func(), err error) {
	release, err = graphsplit.HoldKernels(c.KernelMode())
	return release, errors.Wrap(err, "train")
}
