package recycle

import (
	"sync"

	"gorgonia.org/tensor"
)

// lent maps each lent tensor to how it goes back to its lender.
var lent sync.Map // *tensor.Dense → func()

// Lend marks t, whose memory is not the pools' but a lender's (the ring
// of a shared-memory transport that a received tensor was read in place
// from), so that Put gives it back: the first Put of t calls back, once,
// instead of pooling t; t's memory is then the lender's again, and t is
// never read or written after. The lender calls Lend before it hands t
// out; whoever owns t then returns it with Put as it would a tensor from
// Get. A lent tensor that is never Put keeps its lender's memory.
func Lend(t *tensor.Dense, back func()) { lent.Store(t, back) }

// giveBack calls t's lender back if t is lent, and reports whether it was.
func giveBack(t *tensor.Dense) bool {
	back, ok := lent.LoadAndDelete(t)
	if ok {
		back.(func())()
	}
	return ok
}
