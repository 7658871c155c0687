package solvers

import (
	"fmt"
	"strings"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// PutList stores copies of ts in st.Tensors as "name/0", "name/1", … (one
// per learnable, in the order the solver is stepped with). st.Tensors must
// not be nil.
func (st State) PutList(name string, ts []tensor.Tensor) {
	for i, t := range ts {
		st.Tensors[fmt.Sprintf("%s/%d", name, i)] = t.Clone().(tensor.Tensor)
	}
}

// List returns copies of the float tensors "name/0", "name/1", … that
// PutList stored: as many as like has, each of like's shape and dtype, or,
// for a nil like (a solver that has not been stepped yet), as many as st
// holds. It returns nil for an empty list, and an error naming the tensor
// that is missing or differs.
func (st State) List(name string, like []tensor.Tensor) ([]tensor.Tensor, error) {
	n := len(like)
	if like == nil {
		for k := range st.Tensors {
			if strings.HasPrefix(k, name+"/") {
				n++
			}
		}
	}
	var out []tensor.Tensor
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("%s/%d", name, i)
		t, ok := st.Tensors[key]
		switch {
		case !ok:
			return nil, errors.Errorf("no tensor %q in the state", key)
		case t.Dtype() != tensor.Float64 && t.Dtype() != tensor.Float32:
			return nil, errors.Errorf("state tensor %q has dtype %v, want a float", key, t.Dtype())
		case like != nil && (t.Dtype() != like[i].Dtype() || !t.Shape().Eq(like[i].Shape())):
			return nil, errors.Errorf("state tensor %q is %v %v, the solver's %v %v", key, t.Shape(), t.Dtype(), like[i].Shape(), like[i].Dtype())
		}
		out = append(out, t.Clone().(tensor.Tensor))
	}
	if like != nil {
		if _, extra := st.Tensors[fmt.Sprintf("%s/%d", name, n)]; extra {
			return nil, errors.Errorf("the state has more than %d %q tensors, the solver %d learnables", n, name, n)
		}
	}
	return out, nil
}

// Bytes is the size of ts' elements.
func Bytes(ts []tensor.Tensor) int64 {
	var n int64
	for _, t := range ts {
		n += int64(t.Shape().TotalSize()) * int64(t.Dtype().Size())
	}
	return n
}

// OnlyLists returns an error naming the first tensor of st that belongs to
// none of the named lists: a State saved by another kind of solver.
func (st State) OnlyLists(names ...string) error {
	for k := range st.Tensors {
		ok := false
		for _, n := range names {
			ok = ok || strings.HasPrefix(k, n+"/")
		}
		if !ok {
			return errors.Errorf("the state holds tensor %q, which is not this solver's (it keeps %v)", k, names)
		}
	}
	return nil
}
