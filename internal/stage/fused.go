package stage

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/schedule"
	"gorgonia.org/gorgonia"
)

// A last stage that recomputes (no keeping programs) and runs B(m) right
// after F(m) — every schedule's last stage does — would run m's forward
// twice: the Forward program for the loss, then the Train program, which
// recomputes the forward before its backward. It runs the Train program
// once instead, at F(m): the loss is its output, and B(m) only
// accumulates its gradients. The same ops run on the same inputs and
// weights, so the loss and the gradients are the same bits; BatchNorm's
// running statistics count m once, at the Train program's forward,
// instead of at the Forward program's.
//
// With split backwards (split.go) the stage's I(m) runs the input-gradient
// program, which reads what the keeping forward saves: F(m) runs the
// keeping forward instead of the Forward program — the same ops, with
// the tensors the backward reads among its results — and keeps those, as
// a keeping stage does, so that I(m) does not recompute.

// early is what F(m) prepared for the B(m) that follows it: the weights
// the backward reads (read at F(m), as nothing runs in between), and, when
// they are the forward's, the Train program's borrowed result, valid until
// that program runs again, and the output gradients it read.
type early struct {
	m     int
	vals  []gorgonia.Value
	ran   bool
	res   graphsplit.Result
	grads held
	// saved: the forward ran the keeping forward, whose saved tensors it
	// keeps for the input-gradient program.
	saved bool
}

// canFuse reports whether forward f, followed in the same Work by next,
// can run its backward too: the pair is schedule.Fusable (next is f's
// backward, or its input gradient, the split backward's program), and the
// stage is a last stage that recomputes, sends nothing on and shares no
// learnable.
func (r *Runtime) canFuse(f, next schedule.Action) bool {
	return schedule.Fusable(f, next) &&
		r.last && !r.keeping && len(r.consumers) == 0 &&
		len(r.shared.replicas) == 0 && len(r.shared.owned) == 0
}

// runFused, at a forward of microbatch m that reads the weights fwdVals
// (nil: the current ones) with inputs in, reads the weights the backward
// that follows will read; if they are the forward's own (both the current
// ones), it runs the Train program and reports true. It does nothing when
// the forward cannot fuse (canFuse). If the Train program fails, the
// forward and the backward run apart, as without fusing, so that the
// failure is the failing pass's. Before an I with the split programs it
// runs nothing and marks the early backward saved: the forward runs the
// keeping forward.
func (r *Runtime) runFused(m int, in held, fwdVals []gorgonia.Value) (bool, error) {
	if !r.fuse {
		return false, nil
	}
	fuseInput := r.fuseInput
	r.fuse, r.fuseInput = false, false
	bwdVals, err := r.w.backward(m)
	if err != nil {
		return false, err
	}
	r.early = &early{m: m, vals: bwdVals}
	if fwdVals != nil || bwdVals != nil {
		return false, nil
	}
	if fuseInput { // the forward saves what I(m) reads
		r.early.saved = true
		return false, nil
	}
	grads := r.outputGrads()
	r.zeroMissing(grads)
	saved := bnstate.Save(r.bns)
	res, err := r.bwd.Run(in.vals, grads.vals) // the Train program: m's forward counts once
	if err != nil {
		// Run the two passes apart, each failing on its own: the error
		// names the pass it comes from.
		saved.Restore()
		grads.release()
		return false, nil
	}
	r.early.ran, r.early.res, r.early.grads = true, res, grads
	return true, nil
}
