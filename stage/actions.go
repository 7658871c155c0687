package stage

import (
	"context"
	"time"

	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
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
func (r *Runtime) forward(ctx context.Context, ep transport.Endpoint, m int, versions []int) (time.Time, error) {
	byKey := make(map[int64]gorgonia.Value)
	for _, l := range r.producers {
		msg, err := r.recv(ctx, ep, l.peer, transport.Activation, m)
		if err != nil {
			return time.Time{}, err
		}
		for j, k := range l.keys {
			byKey[k] = msg.Values[j]
		}
	}
	began := time.Now()
	in := make([]gorgonia.Value, len(r.inputs))
	data := r.data[m]
	for i, src := range r.inputs {
		if src.data < 0 {
			in[i] = byKey[src.key]
			continue
		}
		if src.data >= len(data) {
			return began, errors.Errorf("internal: no data for microbatch %d", m)
		}
		in[i] = data[src.data]
	}
	delete(r.data, m)
	if err := r.readReplicas(ctx, ep, m, versions, true); err != nil {
		return began, err
	}
	vals, err := r.w.forward(m)
	if err != nil {
		return began, err
	}
	if vals != nil {
		if err := r.bind(r.fwd, vals); err != nil {
			return began, err
		}
	}
	res, err := r.fwd.Run(in, nil)
	if vals != nil {
		if err2 := r.bind(r.fwd, nil); err == nil {
			err = err2
		}
	}
	if err != nil {
		return began, err
	}
	keep := in
	if r.keeping {
		keep = res.Kept
	}
	r.kept[m] = keep
	r.log.keptBytes += valuesBytes(keep)
	r.stats.PeakActivationBytes = max(r.stats.PeakActivationBytes, r.log.keptBytes)
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
	return began, r.sendOutputs(ctx, ep, transport.Activation, m, res.Outputs)
}

// sendOutputs sends each consumer its share of outputs.
func (r *Runtime) sendOutputs(ctx context.Context, ep transport.Endpoint, k transport.Kind, m int, outputs []gorgonia.Value) error {
	for _, l := range r.consumers {
		vals := make([]gorgonia.Value, len(l.keys))
		for j, key := range l.keys {
			vals[j] = outputs[r.outIndex[key]]
		}
		if err := ep.Send(ctx, transport.Message{Kind: k, To: transport.Peer(l.peer), Micro: m, Version: r.version, Values: vals}); err != nil {
			return err
		}
	}
	return nil
}

// backward runs B(m): it takes the gradients of m's outputs from the
// consumers (summing those of an output several stages read, in stage
// order), runs the backward on the weights the policy says, accumulates the
// learnables' gradients and sends the inputs' gradients back.
func (r *Runtime) backward(ctx context.Context, ep transport.Endpoint, m int) (time.Time, error) {
	in, ok := r.kept[m]
	if !ok {
		return time.Time{}, errors.Errorf("internal: nothing kept for microbatch %d", m)
	}
	outGrads := make([]gorgonia.Value, len(r.st.Outputs))
	if r.last {
		outGrads[0] = r.costGrad
	}
	for _, l := range r.consumers {
		msg, err := r.recv(ctx, ep, l.peer, transport.Gradient, m)
		if err != nil {
			return time.Time{}, err
		}
		for j, k := range l.keys {
			g := msg.Values[j]
			i := r.outIndex[k]
			if g == nil || r.bwd.OutputGrads[i] == nil {
				continue
			}
			sum, err := sumGradient(outGrads[i], g)
			if err != nil {
				return time.Time{}, errors.Wrapf(err, "summing gradients of output %d", i)
			}
			outGrads[i] = sum
		}
	}
	began := time.Now()
	for i, gph := range r.bwd.OutputGrads {
		if gph != nil && outGrads[i] == nil { // no consumer has a gradient for it
			outGrads[i] = tensorutil.Zeros(gph.Dtype(), gph.Shape())
		}
	}
	if err := r.readReplicas(ctx, ep, m, nil, false); err != nil {
		return began, err
	}
	vals, err := r.w.backward(m)
	if err != nil {
		return began, err
	}
	if vals != nil {
		if err := r.bind(r.bwd, vals); err != nil {
			return began, err
		}
	}
	saved := bnstate.Save(r.bns) // a recomputed forward must not count m twice
	res, err := r.bwd.Run(in, outGrads)
	saved.Restore()
	if vals != nil {
		if err2 := r.bind(r.bwd, nil); err == nil {
			err = err2
		}
	}
	if err != nil {
		return began, err
	}
	for i, g := range res.LearnableGrads {
		if !tensorutil.Finite(g) {
			return began, errors.Errorf("gradient of learnable %q is not finite; lower the learning rate, or check the data", r.st.Learnables[i].Name())
		}
		if err := tensorutil.AddInto(r.acc[i], g); err != nil {
			return began, errors.Wrapf(err, "accumulating the gradient of %q", r.st.Learnables[i].Name())
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
		if err := ep.Send(ctx, transport.Message{Kind: transport.Gradient, To: transport.Peer(l.peer), Micro: m, Version: r.version, Values: vals}); err != nil {
			return began, err
		}
	}
	r.log.keptBytes -= valuesBytes(in)
	delete(r.kept, m)
	r.w.done(m)
	r.forget(m)
	return began, nil
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

// sumGradient adds g to the gradient summed so far (nil: none yet) into a
// fresh tensor: g and sum may be shared with the stages that computed them.
func sumGradient(sum, g gorgonia.Value) (gorgonia.Value, error) {
	if sum == nil {
		return g, nil
	}
	c, err := tensorutil.Clone(sum)
	if err != nil {
		return nil, err
	}
	if err := tensorutil.AddInto(c, g); err != nil {
		return nil, err
	}
	return c, nil
}
