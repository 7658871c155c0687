package stage

import (
	"context"
	"fmt"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// evaluation is what the stage keeps for evaluations: their data until the
// Evaluate order, and the probe programs it built, by probe set.
type evaluation struct {
	data   map[int]held
	probes map[string]*graphsplit.Program
}

// evaluate runs e.Count evaluation forwards: BatchNorm in inference mode
// (and back in training mode with its statistics untouched afterwards),
// activations on the Inference queue, nothing kept or updated. It returns
// the losses (last stage) and the values of the probes this stage computes,
// probe-major.
func (r *Runtime) evaluate(ctx context.Context, ep transport.Endpoint, e Evaluate) (Evaluated, []gorgonia.Value, error) {
	out := Evaluated{}
	var mine gorgonia.Nodes
	for _, k := range e.Probes {
		if n, s := r.plan.Locate(k); s == r.index {
			mine = append(mine, n)
			out.Probes = append(out.Probes, k)
		}
	}
	prog := r.st.Forward
	if len(mine) > 0 {
		var err error
		if prog, err = r.probeProgram(out.Probes, mine); err != nil {
			return out, nil, err
		}
	}
	for j := range r.shared.replicas { // the owners' current versions
		rp := &r.shared.replicas[j]
		if rp.ownerAt >= len(e.Shared) {
			return out, nil, errors.Errorf("internal: no version of shared learnable %q to evaluate with", r.st.Learnables[rp.i].Name())
		}
		w, err := r.replicaVersion(ctx, ep, rp, e.Shared[rp.ownerAt])
		if err != nil {
			return out, nil, err
		}
		if err := tensorutil.CopyInto(r.params[rp.i].(tensor.Tensor), w); err != nil {
			return out, nil, err
		}
	}
	if err := r.bind(prog, nil); err != nil {
		return out, nil, err
	}
	undo, err := bnstate.Infer(r.bns)
	if err != nil {
		return out, nil, err
	}
	defer undo()
	vals := make([]gorgonia.Value, len(mine)*e.Count)
	for j := 0; j < e.Count; j++ {
		byKey := make(map[int64]gorgonia.Value)
		for _, l := range r.producers {
			msg, err := r.recv(ctx, ep, l.peer, transport.Inference, j)
			if err != nil {
				return out, nil, err
			}
			for q, k := range l.keys {
				byKey[k] = msg.Values[q]
			}
		}
		data := r.eval.data[j]
		delete(r.eval.data, j)
		in, err := r.inputValues(byKey, data, j)
		if err != nil {
			return out, nil, errors.Wrapf(err, "stage %d: evaluation", r.index)
		}
		res, err := prog.Run(in.vals, nil)
		if err != nil {
			return out, nil, errors.Wrapf(err, "stage %d: evaluation microbatch %d", r.index, j)
		}
		if r.last {
			loss, err := tensorutil.Scalar(res.Outputs[0])
			if err != nil {
				return out, nil, err
			}
			out.Losses = append(out.Losses, loss)
		}
		for q, v := range res.Probes { // the driver's: copies of the borrowed values
			if vals[q*e.Count+j], err = gorgonia.CloneValue(v); err != nil {
				return out, nil, errors.Wrapf(err, "stage %d: probe %d", r.index, q)
			}
		}
		if err := r.sendOutputs(ctx, ep, transport.Inference, j, res.Outputs); err != nil {
			return out, nil, err
		}
		in.release()
	}
	return out, vals, nil
}

// probeProgram returns the stage's probe program for nodes, building and
// compiling it on first use.
func (r *Runtime) probeProgram(keys []int64, nodes gorgonia.Nodes) (*graphsplit.Program, error) {
	id := fmt.Sprint(keys)
	if p, ok := r.eval.probes[id]; ok {
		return p, nil
	}
	p, err := r.plan.NewProbe(r.index, nodes)
	if err != nil {
		return nil, err
	}
	restore := bnstate.Save(r.bns).Restore // compiling zeroes BatchNorm's statistics
	err = p.Compile()
	restore()
	if err != nil {
		return nil, err
	}
	r.eval.probes[id] = p
	return p, nil
}
