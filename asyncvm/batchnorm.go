package asyncvm

import (
	"github.com/pipemare/pipemare/internal/tensorutil"
	"gorgonia.org/gorgonia"
)

// sumGradient adds g to the gradient summed so far (nil: none yet) for an
// activation that several stages read, into a fresh tensor: g and sum may be
// shared with the stages that computed them.
func sumGradient(sum, g gorgonia.Value) (gorgonia.Value, error) {
	if sum == nil {
		return g, nil
	}
	c, err := tensorutil.Clone(sum)
	if err != nil {
		return nil, err
	}
	if err := tensorutil.AddInto(c, g); err != nil {
		return nil, err
	}
	return c, nil
}
