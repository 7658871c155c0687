package stage

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// A split backward (schedule.OpInput, then schedule.OpWeight) computes what
// one backward computes, in two actions. A stage builds its programs only
// under a schedule that has them (Config.SplitBackward).
//
// The backward is the keeping backward cut in two (graphsplit's
// NewSplitKeeping, SplitBackward): I(m) runs the input-gradient program,
// sends the inputs' gradients back at once and keeps what the
// weight-gradient program reads (intermediate gradients, saved forward
// tensors, output gradients); W(m) runs that program and adds the
// learnables' gradients into the accumulators. Each of the backward's ops
// runs in one of them on the same values, so I then W is the backward bit
// for bit, and I carries only the input gradients' arithmetic.
//
// A stage that keeps its activations (Config.KeepActivations) has what the
// input-gradient program reads from its forward. A stage that recomputes
// (the default) kept only its inputs: its I(m) first runs the keeping
// forward on them — the forward's ops again, saving what the backward
// reads, as the Train program's forward recomputes them — and BatchNorm's
// running statistics are put back after it, as after the Train program,
// so that m counts once. A recomputing last stage whose I(m) follows its
// F(m) runs the keeping forward at F(m) instead and keeps what it saves
// (fused.go): it does not recompute. A recomputing stage with no input
// gradient to send (no producer: the first stage) runs nothing at I(m):
// it keeps m's inputs and output gradients, less than the input-gradient
// program would hand over, and W(m) runs the whole backward (the Train
// program, with BatchNorm's statistics put back after it). Either way the keeping programs are
// the recomputing ones bit for bit (graphsplit's
// TestOpSubstitutionChangesNoBit), so a split run trains the weights of an
// unsplit one.
//
// W reads the weights I read: a stage whose I reads other weights than
// the current ones (a stash, a delayed version) runs the whole backward
// at I instead, and W fails rather than read weights an update changed
// since its I. A stage for which graphsplit's CanKeep is false (an op with
// state: GroupNorm, AvgPool, or no op substitution) has no keeping
// programs, and one whose learnables' gradients read nothing of the
// microbatch has no split: there I(m) runs the whole backward program —
// the same program and ops as B(m) — sends the inputs' gradients back and
// keeps the learnables' gradients; W(m) only adds them into the
// accumulators. Stats.WeightPrograms counts the W's that computed the
// learnables' gradients (the weight-gradient program, or a first stage's
// whole backward).
//
// Every stage runs its W's in microbatch order, as its B's, so the
// accumulators sum the same gradients in the same order: the bits of an
// unsplit run. What is kept between I and W is the split's memory
// (Stats.PeakDeferredBytes). What I's share of a recomputing stage's
// backward is, and what it buys the zero-bubble schedules, is in
// docs/schedules.md and docs/speed.md.

// deferredWeight is what W(m) reads, and the weights' version I(m) read.
type deferredWeight struct {
	vals    held
	mode    weightMode
	inputs  int // wholeBackward: vals are m's inputs (this many), then its output gradients
	version int
}

// weightMode is what a W does with what its I kept.
type weightMode int

const (
	// gradients: I ran the whole backward; W adds the learnables'
	// gradients it kept.
	gradients weightMode = iota
	// weightProgram: W runs the weight-gradient program on what the
	// input-gradient program handed over.
	weightProgram
	// wholeBackward: a recomputing stage with no input gradient to send
	// (no producer) ran nothing at I; W runs the whole backward (the
	// Train program) on m's inputs and output gradients.
	wholeBackward
)

// programs builds the stage's forward and backward programs and, under a
// schedule with split backwards (Config.SplitBackward), the backward's
// split halves — and, for a recomputing stage, the keeping forward its I
// runs first. A stage for which CanKeep is false recomputes and has no
// split.
func (r *Runtime) programs() error {
	keep := r.cfg.KeepActivations && r.plan.CanKeep(r.index)
	if !r.cfg.SplitBackward || !r.plan.CanKeep(r.index) {
		var err error
		r.fwd, r.bwd, r.keeping, err = r.plan.Programs(r.index, keep)
		return err
	}
	k, sb, err := r.plan.NewSplitKeeping(r.index)
	if err != nil {
		return err
	}
	if keep {
		r.fwd, r.bwd, r.keeping = k.Forward, k.Backward, true
	} else {
		r.fwd, r.bwd = r.st.Forward, r.st.Train
		if sb != nil {
			r.saving = k.Forward
		}
	}
	if sb != nil {
		r.inputGrad, r.weightGrad = sb.Input, sb.Weight
	}
	return nil
}

// deferWeight keeps src, what m's W reads (d says how W reads it), once
// m's I ran: the input-gradient program's handed-over values, the
// learnables' gradients the whole backward computed, or m's inputs and
// output gradients (borrowed, or in from). Values of from (what I read,
// released after it) that the stage owns move out of them; the rest are
// copies the stage owns.
func (r *Runtime) deferWeight(m int, src []gorgonia.Value, d deferredWeight, from ...held) error {
	if _, dup := r.deferred[m]; dup {
		return errors.Errorf("internal: microbatch %d's input gradient ran twice before its weight gradient", m)
	}
	if d.mode == gradients {
		for i, g := range src {
			if err := r.finite(i, g); err != nil {
				return err
			}
		}
	}
	kept := newHeld(len(src))
	for j, v := range src {
		if v == nil || moved(kept, j, v, from) {
			continue
		}
		c, err := recycle.Copy(v)
		if err != nil {
			kept.release()
			return errors.Wrapf(err, "keeping microbatch %d's values until its weight gradient", m)
		}
		kept.vals[j], kept.own[j] = c, true
	}
	d.vals, d.version = kept, r.version
	r.deferred[m] = d
	r.deferredBytes += valuesBytes(kept.vals)
	r.stats.PeakDeferredBytes = max(r.stats.PeakDeferredBytes, r.deferredBytes)
	return nil
}

// deferBackward, at I(m) of a recomputing stage without producers (no
// input gradient to send), runs nothing: it keeps m's inputs and output
// gradients for W(m), which runs the whole backward — less to keep than
// what the input-gradient program hands over (the forward's saved
// tensors), and all of the stage's backward deferred.
func (r *Runtime) deferBackward(m int, in, outGrads held) error {
	src := append(append([]gorgonia.Value(nil), in.vals...), outGrads.vals...)
	return r.deferWeight(m, src, deferredWeight{mode: wholeBackward, inputs: len(in.vals)}, in, outGrads)
}

// weight runs W(m): it computes the learnables' gradients from what m's
// I kept, or takes those I computed, and accumulates them.
func (r *Runtime) weight(m int) error {
	d, ok := r.deferred[m]
	if !ok {
		return errors.Errorf("internal: no input gradient ran for microbatch %d's weight gradient", m)
	}
	delete(r.deferred, m)
	r.deferredBytes -= valuesBytes(d.vals.vals)
	defer d.vals.release()
	if d.mode == gradients {
		return r.accumulate(d.vals.vals)
	}
	if d.version != r.version {
		return errors.Errorf("internal: microbatch %d's weight gradient runs on version %d of the weights, its input gradient read version %d", m, r.version, d.version)
	}
	saved := bnstate.Save(r.bns) // the whole backward recomputes the forward
	var res graphsplit.Result
	var err error
	if d.mode == weightProgram {
		res, err = r.weightGrad.Run(d.vals.vals, nil)
	} else {
		res, err = r.bwd.Run(d.vals.vals[:d.inputs], d.vals.vals[d.inputs:])
	}
	saved.Restore()
	if err != nil {
		return errors.Wrapf(err, "microbatch %d's weight gradient", m)
	}
	r.stats.WeightPrograms++
	return r.accumulate(res.LearnableGrads)
}

// runProgram runs prog, B(m)'s program, on what m's forward kept (in) and
// the outputs' gradients. The input-gradient program of a recomputing
// stage reads what the keeping forward saves: unless in is that already
// (saved), it runs the keeping forward on m's inputs first, on the
// weights prog reads (the current ones). The result is borrowed.
func (r *Runtime) runProgram(prog *graphsplit.Program, m int, in, outGrads held, saved bool) (graphsplit.Result, error) {
	if prog != r.inputGrad || r.saving == nil || saved {
		return prog.Run(in.vals, outGrads.vals)
	}
	fwd, err := r.saving.Run(in.vals, nil)
	if err != nil {
		return fwd, errors.Wrapf(err, "recomputing microbatch %d's forward for its input gradient", m)
	}
	return prog.Run(fwd.Kept, outGrads.vals)
}

// moved moves v into kept.vals[j] out of the first of from that owns it,
// and reports whether one did.
func moved(kept held, j int, v gorgonia.Value, from []held) bool {
	for _, h := range from {
		if i := h.index(v); i >= 0 && h.own[i] {
			kept.vals[j], kept.own[j] = h.take(i)
			return true
		}
	}
	return false
}
