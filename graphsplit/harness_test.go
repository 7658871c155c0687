package graphsplit

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"

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
	progs := make([][2]*Program, len(plan.Stages))
	for s, st := range plan.Stages {
		progs[s] = [2]*Program{st.Forward, st.Train}
		if stashes != nil && stashes[s] != nil {
			progs[s] = [2]*Program{stashes[s].Forward, stashes[s].Backward}
		}
	}
	r, err := plan.runOnce(feeds, progs, nil)
	return r.cost, r.grads, err
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

// tolerance is the relative error allowed between a plan and the whole graph.
func tolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-6
	}
	return 1e-12
}

// checkParity compares a plan's stage-by-stage cost and gradients with the
// reference ones. It returns an error when they differ by more than the
// tolerance, and fails the test when they cannot be compared (a nil value,
// unsupported data, sizes that differ: testutil.RelErr).
func checkParity(tb testing.TB, plan *Plan, feeds map[*gorgonia.Node]gorgonia.Value, wantCost gorgonia.Value, wantGrads []gorgonia.Value) error {
	tb.Helper()
	c, grads, err := stagewise(plan, feeds)
	if err != nil {
		return err
	}
	tol := tolerance(plan.Dtype)
	if e := testutil.RelErr(tb, c, wantCost); e > tol {
		return errors.Errorf("%d stages: cost %v, want %v (relative error %g)", len(plan.Stages), c, wantCost, e)
	}
	for i, gr := range grads {
		if e := testutil.RelErr(tb, gr, wantGrads[i]); e > tol {
			return errors.Errorf("%d stages: gradient of %s: relative error %g > %g", len(plan.Stages), plan.Learnables[i].Name(), e, tol)
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
