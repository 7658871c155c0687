// Package bnstate saves and restores the running statistics of Gorgonia's
// BatchNorm ops, which live in the op objects: recomputing a forward counts
// a batch twice, compiling a tape machine or switching an op to training
// mode zeroes them. Every package that disturbs them uses this one.
package bnstate

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Of returns the BatchNorm ops of nodes, in order.
func Of(nodes gorgonia.Nodes) []*gorgonia.BatchNormOp {
	var out []*gorgonia.BatchNormOp
	for _, n := range nodes {
		if bn, ok := n.Op().(*gorgonia.BatchNormOp); ok {
			out = append(out, bn)
		}
	}
	return out
}

// Saved is a copy of some BatchNorm ops' running statistics.
type Saved []entry

type entry struct {
	op         *gorgonia.BatchNormOp
	mean, vari tensor.Tensor
}

// Save copies the running statistics of ops.
func Save(ops []*gorgonia.BatchNormOp) Saved {
	out := make(Saved, len(ops))
	for i, bn := range ops {
		m, v := bn.Stats()
		out[i] = entry{bn, m.Clone().(tensor.Tensor), v.Clone().(tensor.Tensor)}
	}
	return out
}

// Restore puts the saved statistics back, last saved first (so that an op
// saved twice ends with its first copy).
func (s Saved) Restore() {
	for i := len(s) - 1; i >= 0; i-- {
		_ = s[i].op.SetStats(s[i].mean, s[i].vari)
	}
}

// Tensors returns the saved statistics, mean then variance per op.
func (s Saved) Tensors() []tensor.Tensor {
	out := make([]tensor.Tensor, 0, 2*len(s))
	for _, e := range s {
		out = append(out, e.mean, e.vari)
	}
	return out
}

// Training saves the statistics of ops and returns the function that puts
// the ops in training mode with them, whatever happened in between:
// gorgonia's SetTraining(true), and compiling a tape machine, zero them.
func Training(ops []*gorgonia.BatchNormOp) (back func()) {
	saved := Save(ops)
	return func() {
		for _, bn := range ops {
			_ = bn.SetTraining(true)
		}
		saved.Restore()
	}
}

// Infer puts ops in inference mode (they normalise with their running
// statistics) and returns the function that puts them back in training mode
// with the statistics they had (Training).
func Infer(ops []*gorgonia.BatchNormOp) (undo func(), err error) {
	undo = Training(ops)
	for _, bn := range ops {
		if err := bn.SetTraining(false); err != nil {
			undo()
			return nil, err
		}
	}
	return undo, nil
}
