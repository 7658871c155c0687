package asyncvm

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pkg/errors"
)

// refuseShared refuses a plan whose stages share a learnable
// (graphsplit.Plan.Shared): each stage's solver would update the user's
// tensor with its own part of the gradient. Summing the parts across the
// readers before one update is the engine's next step.
func refuseShared(plan *graphsplit.Plan) error {
	if len(plan.Shared) == 0 {
		return nil
	}
	sh := plan.Shared[0]
	return errors.Errorf("asyncvm: learnable %q is read by stages %v, and the engine does not train a learnable shared by several stages yet; cut so that its readers are in one stage (graphsplit.CutAt), or train one stage", sh.Node.Name(), sh.Readers)
}
