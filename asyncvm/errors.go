package asyncvm

import (
	"fmt"

	"github.com/pipemare/pipemare/schedule"
)

// StageError is a failure in one stage's worker: an op error or panic, a
// solver error, or a non-finite loss or gradient. It names the stage, the
// action and the microbatch; Step, Run, Flush and Evaluate return it.
type StageError struct {
	Stage  int
	Action schedule.Action
	// Minibatch is the optimizer step the action belongs to.
	Minibatch int
	Err       error
}

func (e *StageError) Error() string {
	switch e.Action.Op {
	case schedule.OpForward, schedule.OpBackward:
		name := "forward"
		if e.Action.Op == schedule.OpBackward {
			name = "backward"
		}
		return fmt.Sprintf("asyncvm: stage %d, %s of microbatch %d (minibatch %d): %v", e.Stage, name, e.Action.Micro, e.Minibatch, e.Err)
	case schedule.OpUpdate:
		return fmt.Sprintf("asyncvm: stage %d, update %d: %v", e.Stage, e.Action.Step, e.Err)
	default:
		return fmt.Sprintf("asyncvm: stage %d, flush %d: %v", e.Stage, e.Action.Step, e.Err)
	}
}

// Unwrap returns the cause.
func (e *StageError) Unwrap() error { return e.Err }
