package asyncvm

import (
	"context"

	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Evaluate runs the forward passes only, on the current weights, and returns
// the mean loss over the microbatches in feeds, which may hold any whole
// number of microbatches along axis 0. BatchNorm uses its running
// statistics (and is put back in training mode with its statistics
// untouched afterwards), dropout masks are all ones, nothing is updated,
// and an asynchronous pipeline is not drained: training goes on afterwards
// exactly as it would have.
func (vm *VM) Evaluate(ctx context.Context, feeds map[*gorgonia.Node]gorgonia.Value) (float64, error) {
	loss, _, err := vm.EvaluateNodes(ctx, feeds)
	return loss, err
}

// EvaluateNodes is Evaluate that also reads nodes of the user's graph (the
// logits, a prediction, any op node the cost needs): values[i] holds node
// i's values for every microbatch of feeds, joined along axis 0 (a scalar
// node gives a vector, one value per microbatch).
func (vm *VM) EvaluateNodes(ctx context.Context, feeds map[*gorgonia.Node]gorgonia.Value, nodes ...*gorgonia.Node) (loss float64, values []gorgonia.Value, err error) {
	if err := vm.usable(); err != nil {
		return 0, nil, err
	}
	q, err := vm.microbatchesIn(feeds)
	if err != nil {
		return 0, nil, err
	}
	keys := make([]int64, len(nodes))
	for i, n := range nodes {
		if n == nil {
			return 0, nil, errors.Errorf("asyncvm: EvaluateNodes: node %d is nil", i)
		}
		if _, s := vm.plan.Locate(n.ID()); s < 0 {
			return 0, nil, errors.Errorf("asyncvm: EvaluateNodes: node %q is not computed by any stage (a data input, a learnable, or not needed by the cost)", n.Name())
		}
		keys[i] = n.ID()
	}
	for j := 0; j < q; j++ {
		vals := make([]gorgonia.Value, len(vm.plan.Feeds))
		for fi, f := range vm.plan.Feeds {
			if _, isMask := vm.maskKeep(f.Node); isMask {
				vals[fi] = ones(f.Dtype, f.Shape)
				continue
			}
			r, err := tensorutil.Rows(feeds[f.Node].(tensor.Tensor), j*f.Shape[0], f.Shape[0])
			if err != nil {
				return 0, nil, errors.Wrapf(err, "asyncvm: Evaluate: data input %q", f.Name)
			}
			vals[fi] = r
		}
		if err := vm.sendData(ctx, j, vals, true); err != nil {
			return 0, nil, err
		}
	}
	for i := range vm.plan.Stages {
		var versions []int
		for _, o := range vm.owners[i] {
			versions = append(versions, vm.updates[o])
		}
		order := transport.Message{Kind: transport.Control, To: transport.Peer(i), Body: stage.Evaluate{Count: q, Probes: keys, Shared: versions}}
		if err := vm.ep.Send(ctx, order); err != nil {
			return 0, nil, vm.failWith(sendFailure(err, i, "ordering it to evaluate"))
		}
	}
	got := make(map[int64][]gorgonia.Value)
	sum := 0.0
	for range vm.plan.Stages {
		m, err := vm.await(ctx)
		if err != nil {
			return 0, nil, err
		}
		ev, ok := m.Body.(stage.Evaluated)
		if !ok {
			return 0, nil, vm.failWith(errors.Errorf("asyncvm: internal: stage %d answered %T to Evaluate", m.From, m.Body))
		}
		for _, l := range ev.Losses {
			sum += l
		}
		for p, k := range ev.Probes {
			got[k] = m.Values[p*q : (p+1)*q]
		}
	}
	values = make([]gorgonia.Value, len(nodes))
	for i, k := range keys {
		if values[i], err = tensorutil.Concat(got[k]); err != nil {
			return 0, nil, errors.Wrapf(err, "asyncvm: EvaluateNodes: node %q", nodes[i].Name())
		}
	}
	return sum / float64(q), values, nil
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
		if _, ok := v.(tensor.Tensor); !ok || v.Dtype() != f.Dtype || len(s) != len(f.Shape) || len(s) == 0 || s[0]%f.Shape[0] != 0 || !s[1:].Eq(f.Shape[1:]) && len(s) > 1 {
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

// ones is an all-ones tensor: a dropout mask that keeps everything.
func ones(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	t := tensorutil.Zeros(dt, shape)
	switch d := t.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = 1
		}
	case []float64:
		for i := range d {
			d[i] = 1
		}
	}
	return t
}
