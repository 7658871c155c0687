package asyncvm

import (
	"context"

	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Evaluate runs the forward passes only, on the current weights, and returns
// the mean loss over the microbatches in feeds, which may hold any whole
// number of microbatches along axis 0. BatchNorm uses its running
// statistics (and is put back in training mode with its statistics
// untouched afterwards), dropout masks are all ones, nothing is updated.
// It runs in the caller's goroutine while the workers wait.
func (vm *VM) Evaluate(ctx context.Context, feeds map[*gorgonia.Node]gorgonia.Value) (float64, error) {
	if err := vm.usable(); err != nil {
		return 0, err
	}
	q, err := vm.microbatchesIn(feeds)
	if err != nil {
		return 0, err
	}
	restore, err := vm.evalMode()
	if err != nil {
		return 0, err
	}
	defer restore()
	sum := 0.0
	for j := 0; j < q; j++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		acts := make(map[int64]gorgonia.Value)
		for fi, f := range vm.plan.Feeds {
			if _, isMask := vm.maskKeep(f.Node); isMask {
				acts[f.Key] = ones(f.Dtype, f.Shape)
				continue
			}
			r, err := tensorutil.Rows(feeds[f.Node].(tensor.Tensor), j*f.Shape[0], f.Shape[0])
			if err != nil {
				return 0, errors.Wrapf(err, "asyncvm: Evaluate: data input %q", f.Name)
			}
			acts[vm.plan.Feeds[fi].Key] = r
		}
		for _, st := range vm.plan.Stages {
			in := make([]gorgonia.Value, len(st.Inputs))
			for i, p := range st.Inputs {
				in[i] = acts[p.Key]
			}
			res, err := st.Forward.Run(in, nil)
			if err != nil {
				return 0, errors.Wrapf(err, "asyncvm: Evaluate: stage %d, microbatch %d", st.Index, j)
			}
			for i, p := range st.Outputs {
				acts[p.Key] = res.Outputs[i]
			}
		}
		loss, err := tensorutil.Scalar(acts[vm.plan.Cost.ID()])
		if err != nil {
			return 0, err
		}
		sum += loss
	}
	return sum / float64(q), nil
}

// microbatchesIn checks feeds for Evaluate and returns how many
// microbatches they hold.
func (vm *VM) microbatchesIn(feeds map[*gorgonia.Node]gorgonia.Value) (int, error) {
	q := -1
	for _, f := range vm.plan.Feeds {
		if _, isMask := vm.maskKeep(f.Node); isMask {
			continue
		}
		v, ok := feeds[f.Node]
		if !ok || v == nil {
			return 0, errors.Errorf("asyncvm: Evaluate: no value for data input %q", f.Name)
		}
		s := v.Shape()
		if v.Dtype() != f.Dtype || len(s) != len(f.Shape) || s[0]%f.Shape[0] != 0 || !s[1:].Eq(f.Shape[1:]) && len(s) > 1 {
			return 0, errors.Errorf("asyncvm: Evaluate: data input %q is %v %v, want a multiple of %v rows of %v %v", f.Name, s, v.Dtype(), f.Shape[0], f.Shape, f.Dtype)
		}
		if k := s[0] / f.Shape[0]; q < 0 {
			q = k
		} else if k != q {
			return 0, errors.Errorf("asyncvm: Evaluate: data input %q holds %d microbatches, others %d", f.Name, k, q)
		}
	}
	if q <= 0 {
		return 0, errors.New("asyncvm: Evaluate: no data")
	}
	return q, nil
}

// evalMode puts every BatchNorm in inference mode and returns how to undo
// it: gorgonia's SetTraining(true) resets the running statistics, so they
// are saved and put back.
func (vm *VM) evalMode() (func(), error) {
	var bns []*gorgonia.BatchNormOp
	for _, w := range vm.workers {
		bns = append(bns, w.bns...)
	}
	return bnstate.Infer(bns)
}

// ones is an all-ones tensor: a dropout mask that keeps everything.
func ones(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	t := tensorutil.Zeros(dt, shape)
	if dt == tensor.Float32 {
		for i := range t.Data().([]float32) {
			t.Data().([]float32)[i] = 1
		}
		return t
	}
	for i := range t.Data().([]float64) {
		t.Data().([]float64)[i] = 1
	}
	return t
}
