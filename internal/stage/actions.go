package stage

import (
	"context"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// recv takes the next message of kind k from peer for microbatch m.
func (r *Runtime) recv(ctx context.Context, ep transport.Endpoint, peer int, k transport.Kind, m int) (transport.Message, error) {
	msg, err := ep.Recv(ctx, transport.Peer(peer), k)
	if err != nil {
		return msg, err
	}
	if msg.Micro != m {
		return msg, errors.Errorf("internal: the %v link from stage %d delivered microbatch %d, want %d", k, peer, msg.Micro, m)
	}
	return msg, nil
}

// forward runs F(m): it takes m's activations from the producers and its
// data from the driver's Data, runs the forward program on the weights the
// policy says, keeps what the backward needs and sends its outputs on. It
// returns when its inputs had arrived.
//
// The program's results are borrowed (graphsplit.Result): what the stage
// sends and keeps are copies it owns, and the inputs it does not keep go
// back to the pools.
//
// On a failure it returns what it received to the pools (a lent tensor to
// its lender): the activations until m's inputs hold them, then the inputs
// (releasing is idempotent: what inputValues or the backward's keeping
// released already stays released).
func (r *Runtime) forward(ctx context.Context, ep transport.Endpoint, m int, versions []int) (began time.Time, err error) {
	byKey := make(map[int64]gorgonia.Value)
	var in held // m's inputs, once inputValues took the activations
	defer func() {
		if err == nil {
			return
		}
		if in.vals == nil {
			for _, v := range byKey {
				recycle.Put(v)
			}
		}
		in.release()
	}()
	for _, l := range r.producers {
		msg, err := r.recv(ctx, ep, l.peer, transport.Activation, m)
		if err != nil {
			return time.Time{}, err
		}
		for j, k := range l.keys {
			byKey[k] = msg.Values[j]
		}
	}
	began = time.Now()
	in, err = r.inputValues(byKey, r.data[m], m)
	delete(r.data, m)
	if err != nil {
		return began, err
	}
	if err := r.readReplicas(ctx, ep, m, versions, true); err != nil {
		return began, err
	}
	vals, err := r.w.forward(m)
	if err != nil {
		return began, err
	}
	var res graphsplit.Result
	fused, err := r.runFused(m, in, vals)
	saves := r.early != nil && r.early.m == m && r.early.saved // the keeping forward runs (fused.go)
	if err != nil {
		return began, err
	} else if fused {
		res = r.early.res
	} else {
		prog := r.fwd
		if saves {
			prog = r.saving
		}
		if vals != nil {
			if err := r.bind(prog, vals); err != nil {
				return began, err
			}
		}
		res, err = prog.Run(in.vals, nil)
		if vals != nil {
			if err2 := r.bind(prog, nil); err == nil {
				err = err2
			}
		}
		if err != nil {
			return began, err
		}
	}
	if r.last {
		loss, err := tensorutil.Scalar(res.Outputs[0])
		if err != nil {
			return began, err
		}
		if !tensorutil.Finite(res.Outputs[0]) {
			return began, errors.Errorf("the loss is %v; lower the learning rate, or check the data", loss)
		}
		r.log.losses = append(r.log.losses, Loss{Micro: m, Value: loss})
	}
	keep := in
	if r.keeping || saves {
		if keep, err = keepValues(in, res.Kept); err != nil {
			return began, err
		}
	}
	r.kept[m] = keep
	r.log.keptBytes += valuesBytes(keep.vals)
	r.stats.PeakActivationBytes = max(r.stats.PeakActivationBytes, r.log.keptBytes)
	if err := r.sendOutputs(ctx, ep, transport.Activation, m, res.Outputs); err != nil {
		return began, err
	}
	if r.keeping || saves {
		in.release() // the inputs the backward does not read
	}
	return began, nil
}

// inputValues gathers a forward's inputs: the producers' activations (by
// key), owned, and the data inputs, moved out of data (owned when their
// message was); of the data inputs other stages read too, those the stage
// does not own are copied (sharedData). What the inputs leave of data goes
// back to the pools.
//
// On an error it returns every input it took, and the rest of data, to the
// pools: the activations are taken first.
func (r *Runtime) inputValues(byKey map[int64]gorgonia.Value, data held, m int) (held, error) {
	defer data.release()
	in := newHeld(len(r.inputs))
	for i, src := range r.inputs {
		if src.data < 0 {
			in.vals[i] = byKey[src.key]
			in.own[i] = true
		}
	}
	for i, src := range r.inputs {
		if src.data < 0 {
			continue
		}
		if src.data >= len(data.vals) {
			in.release()
			return in, errors.Errorf("internal: no data for microbatch %d", m)
		}
		in.vals[i], in.own[i] = data.take(src.data)
		if src.shared && !in.own[i] {
			c, err := recycle.Copy(in.vals[i])
			if err != nil {
				in.release()
				return in, err
			}
			in.vals[i], in.own[i] = c, true
		}
	}
	return in, nil
}

// keepValues returns what a keeping forward keeps of its borrowed Kept
// values: an input of the forward itself where the backward reads one (an
// owned input moves out of in), a copy the stage owns of anything else.
func keepValues(in held, kept []gorgonia.Value) (held, error) {
	out := newHeld(len(kept))
	for j, v := range kept {
		if i := in.index(v); i >= 0 {
			out.vals[j], out.own[j] = in.take(i)
			continue
		}
		c, err := recycle.Copy(v)
		if err != nil {
			out.release()
			return out, err
		}
		out.vals[j], out.own[j] = c, true
	}
	return out, nil
}

// sendOutputs sends each consumer its share of outputs (the program's
// borrowed results): each message gets copies of its own, which belong to
// its receiver (sendCopy).
func (r *Runtime) sendOutputs(ctx context.Context, ep transport.Endpoint, k transport.Kind, m int, outputs []gorgonia.Value) error {
	for _, l := range r.consumers {
		vals := make([]gorgonia.Value, len(l.keys))
		for j, key := range l.keys {
			vals[j] = outputs[r.outIndex[key]]
		}
		if err := sendCopy(ctx, ep, transport.Message{Kind: k, To: transport.Peer(l.peer), Micro: m, Version: r.version, Values: vals}); err != nil {
			return err
		}
	}
	return nil
}

// backward runs B(m): it takes the gradients of m's outputs from the
// consumers (summing those of an output several stages read, in stage
// order), runs the backward on the weights the policy says, accumulates the
// learnables' gradients and sends the inputs' gradients back. The received
// gradients and what the forward kept go back to the pools at the end.
//
// Split (I(m), the first half of a split backward), the learnables'
// gradients are not accumulated but kept for W(m) (deferWeights).
func (r *Runtime) backward(ctx context.Context, ep transport.Endpoint, m int, split bool) (time.Time, error) {
	in, ok := r.kept[m]
	if !ok {
		return time.Time{}, errors.Errorf("internal: nothing kept for microbatch %d", m)
	}
	if e := r.early; e != nil && e.m == m { // the forward got the backward's weights, or ran it
		r.early = nil
		began := time.Now()
		if e.ran {
			r.grads[m] = e.grads
			return began, r.afterBackward(ctx, ep, m, in, e.grads, e.res, split, false)
		}
		outGrads := r.outputGrads() // a last stage without consumers
		r.grads[m] = outGrads
		r.zeroMissing(outGrads)
		return began, r.runBackward(ctx, ep, m, in, outGrads, e.vals, split, e.saved)
	}
	outGrads := r.outputGrads()
	r.grads[m] = outGrads // until afterBackward releases them; on a failure releaseInFlight does
	for _, l := range r.consumers {
		msg, err := r.recv(ctx, ep, l.peer, transport.Gradient, m)
		if err != nil {
			return time.Time{}, err
		}
		for j, k := range l.keys {
			g := msg.Values[j]
			i := r.outIndex[k]
			if g == nil || r.bwd.OutputGrads[i] == nil {
				recycle.Put(g)
				continue
			}
			if err := sumGradient(outGrads, i, g); err != nil {
				return time.Time{}, errors.Wrapf(err, "summing gradients of output %d", i)
			}
		}
	}
	began := time.Now()
	r.zeroMissing(outGrads)
	if err := r.readReplicas(ctx, ep, m, nil, false); err != nil {
		return began, err
	}
	vals, err := r.w.backward(m)
	if err != nil {
		return began, err
	}
	return began, r.runBackward(ctx, ep, m, in, outGrads, vals, split, false)
}

// outputGrads is a backward's gradients of the stage's outputs before
// any consumer's arrive: the cost's (the last stage's), nil for the rest.
func (r *Runtime) outputGrads() held {
	outGrads := newHeld(len(r.st.Outputs))
	if r.last {
		outGrads.vals[0] = r.costGrad
	}
	return outGrads
}

// zeroMissing gives every output gradient the backward reads and no
// consumer sent a zero tensor from the pools.
func (r *Runtime) zeroMissing(outGrads held) {
	for i, gph := range r.bwd.OutputGrads {
		if gph != nil && outGrads.vals[i] == nil { // no consumer has a gradient for it
			z := recycle.Get(gph.Dtype(), gph.Shape())
			z.Zero()
			outGrads.vals[i], outGrads.own[i] = z, true
		}
	}
}

// runBackward runs B(m)'s program on the weights vals (nil: the current
// ones), what m's forward kept (in) and the outputs' gradients, then
// afterBackward.
//
// Split, with the stage's split programs and the current weights, it runs
// the input-gradient program alone (split.go); a recomputing stage runs
// its keeping forward first, on m's inputs, unless in is what that
// forward saved already (saved: F(m) ran it, fused.go).
func (r *Runtime) runBackward(ctx context.Context, ep transport.Endpoint, m int, in, outGrads held, vals []gorgonia.Value, split, saved bool) error {
	prog := r.bwd
	if split && vals == nil && r.inputGrad != nil {
		prog = r.inputGrad
		if r.saving != nil && !saved && len(r.producers) == 0 {
			if err := r.deferBackward(m, in, outGrads); err != nil {
				return err
			}
			return r.afterBackward(ctx, ep, m, in, outGrads, graphsplit.Result{}, false, true)
		}
	}
	if vals != nil {
		if err := r.bind(prog, vals); err != nil {
			return err
		}
	}
	bns := bnstate.Save(r.bns) // a recomputed forward must not count m twice
	res, err := r.runProgram(prog, m, in, outGrads, saved)
	bns.Restore()
	if vals != nil {
		if err2 := r.bind(prog, nil); err == nil {
			err = err2
		}
	}
	if err != nil {
		return err
	}
	if prog == r.inputGrad {
		if err := r.deferWeight(m, res.Kept, deferredWeight{mode: weightProgram}, in, outGrads); err != nil {
			return err
		}
		return r.afterBackward(ctx, ep, m, in, outGrads, res, false, true)
	}
	return r.afterBackward(ctx, ep, m, in, outGrads, res, split, false)
}

// afterBackward ends B(m) once its program ran (res, borrowed): it
// accumulates the learnables' gradients (split: keeps them for W(m);
// deferred: W(m)'s inputs are kept already), sends the inputs' gradients
// back and releases what m's passes held.
func (r *Runtime) afterBackward(ctx context.Context, ep transport.Endpoint, m int, in, outGrads held, res graphsplit.Result, split, deferred bool) error {
	switch {
	case deferred:
	case split:
		if err := r.deferWeight(m, res.LearnableGrads, deferredWeight{mode: gradients}); err != nil {
			return err
		}
	default:
		if err := r.accumulate(res.LearnableGrads); err != nil {
			return err
		}
	}
	for _, l := range r.producers {
		vals := make([]gorgonia.Value, len(l.keys))
		for j, k := range l.keys {
			for i, src := range r.inputs {
				if src.data < 0 && src.key == k {
					vals[j] = res.InputGrads[i]
				}
			}
		}
		if err := sendCopy(ctx, ep, transport.Message{Kind: transport.Gradient, To: transport.Peer(l.peer), Micro: m, Version: r.version, Values: vals}); err != nil {
			return err
		}
	}
	// Only now: the results may be views of the gradients or of what was kept.
	r.log.keptBytes -= valuesBytes(in.vals)
	delete(r.grads, m)
	outGrads.release()
	in.release()
	delete(r.kept, m)
	r.w.done(m)
	r.forget(m)
	return nil
}

// accumulate adds a microbatch's learnable gradients (borrowed) into the
// accumulators, after checking they are finite.
func (r *Runtime) accumulate(grads []gorgonia.Value) error {
	for i, g := range grads {
		if err := r.finite(i, g); err != nil {
			return err
		}
		if err := tensorutil.AddInto(r.acc[i], g); err != nil {
			return errors.Wrapf(err, "accumulating the gradient of %q", r.st.Learnables[i].Name())
		}
	}
	return nil
}

// finite checks the gradient g of learnable i.
func (r *Runtime) finite(i int, g gorgonia.Value) error {
	if !tensorutil.Finite(g) {
		return errors.Errorf("gradient of learnable %q is not finite; lower the learning rate, or check the data", r.st.Learnables[i].Name())
	}
	return nil
}

// update runs U(k): the solver steps the learnables with the step's mean
// gradient, the delays its forwards saw are recorded, and the version
// advances.
func (r *Runtime) update(ctx context.Context, ep transport.Endpoint, k int) error {
	if err := r.sendSums(ctx, ep, k); err != nil {
		return err
	}
	if err := r.addSums(ctx, ep, k); err != nil {
		return err
	}
	if err := r.w.beforeUpdate(); err != nil {
		return err
	}
	if err := r.cfg.Solver.Step(r.model); err != nil {
		return errors.Wrap(err, "solver")
	}
	for _, vg := range r.model {
		if !tensorutil.Finite(vg.Value()) {
			return errors.Errorf("learnable %q is not finite after the update; lower the learning rate", vg.(*valueGrad).name)
		}
	}
	for _, a := range r.acc { // gorgonia's solvers zero the gradient; make sure
		a.Zero()
	}
	n := r.cfg.Microbatches
	sum, cnt := 0, 0
	for j := 0; j < n; j++ {
		m := k*n + j
		fv, ok := r.w.fwdVersion[m]
		if !ok {
			continue
		}
		d := r.version - fv
		r.stats.Delays[d]++
		for _, rp := range r.shared.replicas {
			if v, ok := rp.readAt[m]; ok {
				r.stats.SharedDelays[r.version-v]++
				delete(rp.readAt, m)
			}
		}
		if r.cfg.DelayLog {
			r.log.delays = append(r.log.delays, Delay{Micro: m, Delay: d})
		}
		sum += d
		cnt++
		delete(r.w.fwdVersion, m)
	}
	r.version++
	r.stats.Version = r.version
	if err := r.sendVersions(ctx, ep); err != nil {
		return err
	}
	if cnt > 0 && r.seg.Stale {
		solvers.SetDelay(r.cfg.Solver, float64(sum)/float64(cnt), true)
	}
	return nil
}

// sumGradient adds gradient g (received: the stage's own) to the gradient
// of output i summed so far: g becomes the sum if it is the first; else it
// is added into the sum (into a copy where the stage does not own the sum)
// and goes back to the pools.
func sumGradient(grads held, i int, g gorgonia.Value) error {
	if grads.vals[i] == nil {
		grads.vals[i], grads.own[i] = g, true
		return nil
	}
	if !grads.own[i] {
		c, err := recycle.Copy(grads.vals[i])
		if err != nil {
			return err
		}
		grads.vals[i], grads.own[i] = c, true
	}
	sum, ok := grads.vals[i].(tensor.Tensor)
	if !ok {
		return errors.Errorf("cannot sum gradients into a %T", grads.vals[i])
	}
	if err := tensorutil.AddInto(sum, g); err != nil {
		return err
	}
	recycle.Put(g)
	return nil
}
