package asyncvm

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// batchNorms are the BatchNorm ops of a stage: their running statistics live
// in the op objects, which recomputation, evaluation and compilation
// disturb.
func batchNorms(st *graphsplit.Stage) []*gorgonia.BatchNormOp {
	var out []*gorgonia.BatchNormOp
	for _, n := range st.Stateful {
		if bn, ok := n.Op().(*gorgonia.BatchNormOp); ok {
			out = append(out, bn)
		}
	}
	return out
}

// bnStats is a copy of one BatchNorm op's running statistics.
type bnStats struct {
	op         *gorgonia.BatchNormOp
	mean, vari tensor.Tensor
}

// saveStats copies the running statistics of bns, so that recomputing a
// forward inside the backward does not count a microbatch twice.
func saveStats(bns []*gorgonia.BatchNormOp) []bnStats {
	out := make([]bnStats, len(bns))
	for i, bn := range bns {
		m, v := bn.Stats()
		out[i] = bnStats{bn, m.Clone().(tensor.Tensor), v.Clone().(tensor.Tensor)}
	}
	return out
}

// restoreStats puts saved statistics back.
func restoreStats(saved []bnStats) {
	for _, s := range saved {
		_ = s.op.SetStats(s.mean, s.vari)
	}
}

// sumGradient adds g to the gradient summed so far (nil: none yet) for an
// activation that several stages read, into a fresh tensor: g and sum may be
// shared with the stages that computed them.
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
