package asyncvm

import "fmt"

// Op is what an action does.
type Op uint8

const (
	// Forward runs a microbatch's forward pass through the stage.
	Forward Op = iota
	// Backward runs a microbatch's backward pass (recomputing the forward
	// from the stashed stage inputs) and accumulates its gradients.
	Backward
	// Update applies the accumulated gradients of one minibatch.
	Update
	// Flush waits until every stage has reached the same flush: no
	// microbatch of the next minibatch starts before every stage is done
	// with this one.
	Flush
)

func (o Op) String() string {
	switch o {
	case Forward:
		return "F"
	case Backward:
		return "B"
	case Update:
		return "U"
	case Flush:
		return "|"
	}
	return "?"
}

// Action is one step of a stage's work. Microbatches are numbered across
// minibatches: microbatch m belongs to minibatch m / N.
type Action struct {
	Op Op
	// Micro is the microbatch of a Forward or Backward.
	Micro int
	// Step is the minibatch of an Update or Flush (the optimizer step it
	// ends).
	Step int
}

// F, B, U and Bar build actions.
func F(m int) Action   { return Action{Op: Forward, Micro: m} }
func B(m int) Action   { return Action{Op: Backward, Micro: m} }
func U(k int) Action   { return Action{Op: Update, Step: k} }
func Bar(k int) Action { return Action{Op: Flush, Step: k} }

func (a Action) String() string {
	switch a.Op {
	case Forward, Backward:
		return fmt.Sprintf("%v%d", a.Op, a.Micro)
	case Update:
		return fmt.Sprintf("U%d", a.Step)
	default:
		return fmt.Sprintf("|%d", a.Step)
	}
}
