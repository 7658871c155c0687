package graphsplit

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testmodels"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// stagewise runs a plan the way a pipeline does for one microbatch: forwards
// 0..P−1, then backwards P−1..0 (Train programs, recomputing each stage from
// its stashed inputs), summing the gradients of activations read by several
// stages, and the contributions of every stage that reads a shared learnable
// (in that order: the last reader's first). It returns the cost and the
// learnables' gradients in plan.Learnables order.
func stagewise(plan *Plan, feeds map[*gorgonia.Node]gorgonia.Value) (gorgonia.Value, []gorgonia.Value, error) {
	return stagewiseWith(plan, feeds, nil)
}

// stagewiseWith is stagewise where stages with a non-nil stash run their
// keeping programs instead of Forward and Train.
func stagewiseWith(plan *Plan, feeds map[*gorgonia.Node]gorgonia.Value, stashes []*Keeping) (gorgonia.Value, []gorgonia.Value, error) {
	stashOf := func(s int) *Keeping {
		if stashes == nil {
			return nil
		}
		return stashes[s]
	}
	saved := make([][]gorgonia.Value, len(plan.Stages))
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
		fwd := st.Forward
		if sh := stashOf(st.Index); sh != nil {
			fwd = sh.Forward
		}
		res, err := fwd.Run(in, nil)
		if err != nil {
			return nil, nil, err
		}
		for i, p := range st.Outputs {
			acts[p.Key] = res.Outputs[i]
		}
		saved[st.Index] = res.Kept
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
		bwd, in := st.Train, stash[s]
		if sh := stashOf(s); sh != nil {
			bwd, in = sh.Backward, saved[s]
		}
		res, err := bwd.Run(in, og)
		if err != nil {
			return nil, nil, err
		}
		for i, p := range st.Inputs {
			gv := res.InputGrads[i]
			if gv == nil {
				continue
			}
			if prev := gradOf[p.Key]; prev != nil {
				if gv, err = add(prev, gv); err != nil {
					return nil, nil, errors.Wrapf(err, "summing the gradients of %s", p.Name)
				}
			}
			gradOf[p.Key] = gv
		}
		for i, gv := range res.LearnableGrads {
			j := st.LearnableIndex[i]
			if prev := grads[j]; prev != nil {
				if st.Shared[i] == nil {
					return nil, nil, errors.Errorf("stage %d: learnable %s has a gradient from another stage but is not shared", s, plan.Learnables[j].Name())
				}
				if gv, err = add(prev, gv); err != nil {
					return nil, nil, errors.Wrapf(err, "summing the gradient of %s", plan.Learnables[j].Name())
				}
			}
			grads[j] = gv
		}
	}
	return cost, grads, nil
}

// add returns a + b, two gradients of one tensor or scalar, as a new value.
func add(a, b gorgonia.Value) (gorgonia.Value, error) {
	if t, ok := a.(tensor.Tensor); ok {
		sum := t.Clone().(tensor.Tensor)
		return sum, tensorutil.AddInto(sum, b)
	}
	x, err := tensorutil.Scalar(a)
	if err != nil {
		return nil, err
	}
	y, err := tensorutil.Scalar(b)
	if err != nil {
		return nil, err
	}
	return tensorutil.ScalarOf(a.Dtype(), x+y)
}

// reference computes the cost and the learnables' gradients of the whole
// graph with plain Gorgonia: Grad, a tape machine, values read through Read.
// It adds gradient nodes to g, which Split ignores afterwards, and leaves
// feeds untouched.
func reference(g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes, feeds map[*gorgonia.Node]gorgonia.Value) (gorgonia.Value, []gorgonia.Value, error) {
	grads, err := gorgonia.Grad(cost, learnables...)
	if err != nil {
		return nil, nil, err
	}
	var c gorgonia.Value
	gorgonia.Read(cost, &c)
	gv := make([]gorgonia.Value, len(grads))
	for i, gr := range grads {
		gorgonia.Read(gr, &gv[i])
	}
	for n, v := range feeds {
		// The whole graph may overwrite a fed tensor in place (a Reshape
		// of an input followed by an in-place op): feed a copy.
		v, err := gorgonia.CloneValue(v)
		if err != nil {
			return nil, nil, err
		}
		if err := gorgonia.Let(n, v); err != nil {
			return nil, nil, err
		}
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		return nil, nil, err
	}
	return c, gv, nil
}

// relErr is max|a−b| / max(max|b|, 1e-30) over two tensors or scalars.
func relErr(a, b gorgonia.Value) (float64, error) {
	fa, err := floats(a)
	if err != nil {
		return 0, err
	}
	fb, err := floats(b)
	if err != nil {
		return 0, err
	}
	if len(fa) != len(fb) {
		return 0, errors.Errorf("sizes differ: %d vs %d", len(fa), len(fb))
	}
	diff, scale := 0.0, 1e-30
	for i := range fa {
		diff = math.Max(diff, math.Abs(fa[i]-fb[i]))
		scale = math.Max(scale, math.Abs(fb[i]))
	}
	return diff / scale, nil
}

func floats(v gorgonia.Value) ([]float64, error) {
	if v == nil {
		return nil, errors.New("nil value")
	}
	switch d := v.Data().(type) {
	case []float64:
		return d, nil
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out, nil
	case float64:
		return []float64{d}, nil
	case float32:
		return []float64{float64(d)}, nil
	}
	return nil, errors.Errorf("unsupported value %T", v.Data())
}

// tolerance is the relative error allowed between a plan and the whole graph.
func tolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-6
	}
	return 1e-12
}

// checkParity compares a plan's stage-by-stage cost and gradients with the
// reference ones.
func checkParity(plan *Plan, feeds map[*gorgonia.Node]gorgonia.Value, wantCost gorgonia.Value, wantGrads []gorgonia.Value) error {
	c, grads, err := stagewise(plan, feeds)
	if err != nil {
		return err
	}
	tol := tolerance(plan.Dtype)
	if e, err := relErr(c, wantCost); err != nil || e > tol {
		return errors.Errorf("%d stages: cost %v, want %v (relative error %g, err %v)", len(plan.Stages), c, wantCost, e, err)
	}
	for i, gr := range grads {
		if e, err := relErr(gr, wantGrads[i]); err != nil || e > tol {
			return errors.Errorf("%d stages: gradient of %s: relative error %g > %g (err %v)", len(plan.Stages), plan.Learnables[i].Name(), e, tol, err)
		}
	}
	return nil
}

// forEachModel runs f, as a subtest, on every test model (those that share
// learnables across stages included) in float64 and float32 with one
// deterministic microbatch of data.
func forEachModel(t *testing.T, f func(t *testing.T, m *testmodels.Model, feeds map[*gorgonia.Node]gorgonia.Value)) {
	for _, nb := range append(testmodels.All(), testmodels.SharedWeights()...) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				m, err := nb.Build(dt, 4, 1)
				if err != nil {
					t.Fatal(err)
				}
				feeds := make(map[*gorgonia.Node]gorgonia.Value)
				for i, v := range m.Batch(rand.New(rand.NewSource(2))) {
					feeds[m.Inputs[i]] = v
				}
				f(t, m, feeds)
			})
		}
	}
}
