package asyncvm

import (
	"fmt"
	"hash/fnv"
	"math/rand"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// feeder cuts minibatches into microbatches and draws dropout masks.
type feeder struct {
	plan *graphsplit.Plan
	n    int
	cfg  *config
	// shared says, per feed, that several stages read it
	// (stage.SharedFeeds): they all get the same tensor.
	shared []bool
}

// sliceFeeds checks a minibatch's feeds and cuts them into N microbatches,
// each a list of tensors in plan.Feeds order that the VM owns: copies of
// the caller's rows, into tensors from the process's pools
// (internal/recycle), which the stage or the transport that ends up
// owning them returns (sendData). Dropout masks are drawn here, not fed.
func (vm *feeder) sliceFeeds(feeds map[*gorgonia.Node]gorgonia.Value, step int) ([][]gorgonia.Value, error) {
	out := make([][]gorgonia.Value, vm.n)
	for j := range out {
		out[j] = make([]gorgonia.Value, len(vm.plan.Feeds))
	}
	known := make(map[*gorgonia.Node]bool)
	for fi, f := range vm.plan.Feeds {
		known[f.Node] = true
		if keep, ok := vm.maskKeep(f.Node); ok {
			if _, fed := feeds[f.Node]; fed {
				return nil, errors.Errorf("data input %q is a dropout mask the engine draws; do not feed it", f.Name)
			}
			for j := range out {
				out[j][fi] = vm.drawMask(f.Node, keep, step*vm.n+j)
			}
			continue
		}
		v, ok := feeds[f.Node]
		if !ok || v == nil {
			return nil, errors.Errorf("no value for data input %q (want %v %v)", f.Name, minibatchShape(f.Shape, vm.n), f.Dtype)
		}
		t, ok := v.(tensor.Tensor)
		if !ok || len(f.Shape) == 0 {
			return nil, errors.Errorf("data input %q: got %T, want a tensor of shape %v", f.Name, v, minibatchShape(f.Shape, vm.n))
		}
		if t.Dtype() != f.Dtype {
			return nil, errors.Errorf("data input %q: dtype %v, want %v", f.Name, t.Dtype(), f.Dtype)
		}
		want := minibatchShape(f.Shape, vm.n)
		if !t.Shape().Eq(want) {
			return nil, errors.Errorf("data input %q: shape %v, want %v (%d microbatches of %v)", f.Name, t.Shape(), want, vm.n, f.Shape)
		}
		rows := f.Shape[0]
		for j := range out {
			r := recycle.Get(f.Dtype, f.Shape)
			if err := tensorutil.RowsInto(r, t, j*rows); err != nil {
				return nil, errors.Wrapf(err, "data input %q", f.Name)
			}
			out[j][fi] = r
		}
	}
	for n := range feeds {
		if !known[n] {
			return nil, errors.Errorf("feeds have a value for %q, which is not a data input of the plan", n.Name())
		}
	}
	return out, nil
}

func minibatchShape(micro []int, n int) tensor.Shape {
	s := tensor.Shape(append([]int(nil), micro...))
	if len(s) > 0 {
		s[0] *= n
	}
	return s
}

func (vm *feeder) maskKeep(n *gorgonia.Node) (float64, bool) {
	for _, m := range vm.cfg.masks {
		if m.node == n {
			return m.keep, true
		}
	}
	return 0, false
}

// drawMask draws microbatch m's inverted dropout mask for node from the
// seed: reproducible whatever the order microbatches are drawn in.
func (vm *feeder) drawMask(node *gorgonia.Node, keep float64, m int) gorgonia.Value {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", vm.cfg.seed, node.Name(), m)
	rng := rand.New(rand.NewSource(int64(h.Sum64())))
	size := node.Shape().TotalSize()
	switch node.Dtype() {
	case tensor.Float32:
		d := make([]float32, size)
		for i := range d {
			if rng.Float64() < keep {
				d[i] = float32(1 / keep)
			}
		}
		return tensor.New(tensor.WithShape(node.Shape()...), tensor.WithBacking(d))
	default:
		d := make([]float64, size)
		for i := range d {
			if rng.Float64() < keep {
				d[i] = 1 / keep
			}
		}
		return tensor.New(tensor.WithShape(node.Shape()...), tensor.WithBacking(d))
	}
}
