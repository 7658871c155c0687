package asyncvm

import (
	"fmt"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// ErrClosed is returned by a VM's methods after Close.
var ErrClosed = errors.New("asyncvm: the VM is closed")

// StageError is a failure in one stage: an op error or panic, a solver
// error, or a non-finite loss, gradient or weight. It names the stage, the
// action and the step; Step, Run, Flush and Evaluate return it, and every
// later call returns it again.
type StageError struct {
	Stage  int
	Action schedule.Action
	// Step is the optimizer step (the minibatch) the action belongs to.
	Step int
	Err  error
}

func (e *StageError) Error() string {
	switch e.Action.Op {
	case schedule.OpForward, schedule.OpBackward, schedule.OpInput, schedule.OpWeight:
		name := map[schedule.Op]string{schedule.OpForward: "forward", schedule.OpBackward: "backward",
			schedule.OpInput: "input gradient", schedule.OpWeight: "weight gradient"}[e.Action.Op]
		return fmt.Sprintf("asyncvm: stage %d, %s of microbatch %d (step %d): %v", e.Stage, name, e.Action.Micro, e.Step, e.Err)
	case schedule.OpUpdate:
		return fmt.Sprintf("asyncvm: stage %d, update %d: %v", e.Stage, e.Action.Step, e.Err)
	case schedule.OpFlush:
		return fmt.Sprintf("asyncvm: stage %d, flush %d: %v", e.Stage, e.Action.Step, e.Err)
	}
	return fmt.Sprintf("asyncvm: stage %d: %v", e.Stage, e.Err)
}

// Unwrap returns the cause.
func (e *StageError) Unwrap() error { return e.Err }
