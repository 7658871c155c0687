package graphsplit

import (
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// stagewise runs a plan the way a pipeline does for one microbatch: forwards
// 0..P−1, then backwards P−1..0 (Train programs, recomputing each stage from
// its stashed inputs), summing the gradients of activations read by several
// stages. It returns the cost and the learnables' gradients in
// plan.Learnables order.
func stagewise(plan *Plan, feeds map[*gorgonia.Node]gorgonia.Value) (gorgonia.Value, []gorgonia.Value, error) {
	acts := make(map[int64]gorgonia.Value)
	for _, f := range plan.Feeds {
		acts[f.Key] = feeds[f.Node]
	}
	stash := make([][]gorgonia.Value, len(plan.Stages))
	for _, st := range plan.Stages {
		in := make([]gorgonia.Value, len(st.Inputs))
		for i, p := range st.Inputs {
			in[i] = acts[p.Key]
		}
		stash[st.Index] = in
		res, err := st.Forward.Run(in, nil)
		if err != nil {
			return nil, nil, err
		}
		for i, p := range st.Outputs {
			acts[p.Key] = res.Outputs[i]
		}
	}
	cost := acts[plan.Cost.ID()]
	gradOf := make(map[int64]gorgonia.Value)
	grads := make([]gorgonia.Value, len(plan.Learnables))
	for s := len(plan.Stages) - 1; s >= 0; s-- {
		st := plan.Stages[s]
		og := make([]gorgonia.Value, len(st.Outputs))
		for i, p := range st.Outputs {
			switch {
			case st.Train.OutputGrads[i] == nil:
			case p.Kind == CostPort:
				og[i], _ = scalarOne(p.Dtype)
			case gradOf[p.Key] != nil:
				og[i] = gradOf[p.Key]
			default:
				og[i] = tensor.New(tensor.WithShape(p.Shape...), tensor.Of(p.Dtype))
			}
		}
		res, err := st.Train.Run(stash[s], og)
		if err != nil {
			return nil, nil, err
		}
		for i, p := range st.Inputs {
			gv := res.InputGrads[i]
			if gv == nil {
				continue
			}
			if prev := gradOf[p.Key]; prev != nil {
				sum, err := tensor.Add(prev.(tensor.Tensor), gv.(tensor.Tensor))
				if err != nil {
					return nil, nil, errors.Wrap(err, "summing gradients")
				}
				gv = sum
			}
			gradOf[p.Key] = gv
		}
		for i, gv := range res.LearnableGrads {
			grads[st.LearnableIndex[i]] = gv
		}
	}
	return cost, grads, nil
}
