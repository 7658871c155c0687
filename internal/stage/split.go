package stage

import (
	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// A split backward (schedule.OpInput, then schedule.OpWeight) computes what
// one backward computes, in two actions: I(m) runs the stage's backward
// program — the same program and ops as B(m) — sends the inputs'
// gradients back at once and keeps the learnables' gradients; W(m) adds
// them into the accumulators, which B(m) does at once. Every stage runs
// its W's in microbatch order, as its B's, so the accumulators sum the
// same gradients in the same order: the bits of an unsplit run. The
// gradients kept between I and W are the split's memory
// (Stats.PeakDeferredBytes); I carries all of the backward's arithmetic,
// W only the sums.

// deferWeights keeps copies of m's learnable gradients (borrowed) for its
// W, after checking they are finite, as accumulate does.
func (r *Runtime) deferWeights(m int, grads []gorgonia.Value) error {
	if _, dup := r.deferred[m]; dup {
		return errors.Errorf("internal: microbatch %d's input gradient ran twice before its weight gradient", m)
	}
	kept := make([]gorgonia.Value, len(grads))
	for i, g := range grads {
		if err := r.finite(i, g); err != nil {
			release(kept)
			return err
		}
		c, err := recycle.Copy(g)
		if err != nil {
			release(kept)
			return errors.Wrapf(err, "keeping the gradient of %q until its weight gradient", r.st.Learnables[i].Name())
		}
		kept[i] = c
	}
	r.deferred[m] = kept
	r.deferredBytes += valuesBytes(kept)
	r.stats.PeakDeferredBytes = max(r.stats.PeakDeferredBytes, r.deferredBytes)
	return nil
}

// weight runs W(m): it accumulates the gradients m's I kept.
func (r *Runtime) weight(m int) error {
	kept, ok := r.deferred[m]
	if !ok {
		return errors.Errorf("internal: no input gradient ran for microbatch %d's weight gradient", m)
	}
	delete(r.deferred, m)
	r.deferredBytes -= valuesBytes(kept)
	defer release(kept)
	return r.accumulate(kept)
}

// release gives owned values back to the pools.
func release(vals []gorgonia.Value) {
	for _, v := range vals {
		if v != nil {
			recycle.Put(v)
		}
	}
}
