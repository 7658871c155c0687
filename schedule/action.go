package schedule

import "fmt"

// Op is what an action does.
type Op uint8

const (
	// OpForward runs a microbatch's forward pass through the stage.
	OpForward Op = iota
	// OpBackward runs a microbatch's backward pass and accumulates its
	// gradients.
	OpBackward
	// OpUpdate applies the gradients accumulated over one step's
	// microbatches.
	OpUpdate
	// OpFlush ends a step of a synchronous schedule: no stage starts the
	// next step's work before every stage has reached the same flush.
	OpFlush
)

func (o Op) String() string {
	switch o {
	case OpForward:
		return "F"
	case OpBackward:
		return "B"
	case OpUpdate:
		return "U"
	case OpFlush:
		return "|"
	}
	return "?"
}

// Action is one step of a stage's work.
type Action struct {
	Op Op
	// Micro is the microbatch of a forward or backward.
	Micro int
	// Step is the step an update or flush ends.
	Step int
}

// Forward is the forward of microbatch m.
func Forward(m int) Action { return Action{Op: OpForward, Micro: m} }

// Backward is the backward of microbatch m.
func Backward(m int) Action { return Action{Op: OpBackward, Micro: m} }

// Update is the update that ends step k.
func Update(k int) Action { return Action{Op: OpUpdate, Step: k} }

// Flush is the flush that ends step k.
func Flush(k int) Action { return Action{Op: OpFlush, Step: k} }

// String prints F3, B3, U1 or |1.
func (a Action) String() string {
	switch a.Op {
	case OpForward, OpBackward:
		return fmt.Sprintf("%v%d", a.Op, a.Micro)
	case OpUpdate:
		return fmt.Sprintf("U%d", a.Step)
	default:
		return fmt.Sprintf("|%d", a.Step)
	}
}
