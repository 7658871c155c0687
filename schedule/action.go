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
	// OpInput is the first half of a split backward (Qi et al.'s B): the
	// gradient of a microbatch's inputs, which the stage before waits for.
	// The stage keeps what the weight gradient reads.
	OpInput
	// OpWeight is the second half of a split backward (Qi et al.'s W): the
	// gradient of the stage's weights for a microbatch whose OpInput ran,
	// accumulated like a backward's. Nothing waits for it but the update,
	// so schedules defer it into their bubbles. OpInput then OpWeight
	// computes what OpBackward computes.
	OpWeight
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
	case OpInput:
		return "I"
	case OpWeight:
		return "W"
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

// Input is the input gradient of microbatch m (the first half of its
// split backward).
func Input(m int) Action { return Action{Op: OpInput, Micro: m} }

// Weight is the weight gradient of microbatch m (the second half of its
// split backward).
func Weight(m int) Action { return Action{Op: OpWeight, Micro: m} }

// Update is the update that ends step k.
func Update(k int) Action { return Action{Op: OpUpdate, Step: k} }

// Flush is the flush that ends step k.
func Flush(k int) Action { return Action{Op: OpFlush, Step: k} }

// Backwards reports whether a is a backward or half of one: B, I or W.
func (a Action) Backwards() bool {
	return a.Op == OpBackward || a.Op == OpInput || a.Op == OpWeight
}

// PerMicro reports whether a works on one microbatch: F, B, I or W.
func (a Action) PerMicro() bool { return a.Op == OpForward || a.Backwards() }

// String prints F3, B3, I3, W3, U1 or |1.
func (a Action) String() string {
	switch a.Op {
	case OpForward, OpBackward, OpInput, OpWeight:
		return fmt.Sprintf("%v%d", a.Op, a.Micro)
	case OpUpdate:
		return fmt.Sprintf("U%d", a.Step)
	default:
		return fmt.Sprintf("|%d", a.Step)
	}
}
