package stageops

import (
	"fmt"
	"hash"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// float is the element type of the tensors the ops compute on.
type float interface{ float32 | float64 }

// named gives an op its String, WriteHash and Hashcode from one description,
// which must identify the op's computation (two nodes with the same op hash
// and the same children are one node in a gorgonia graph).
type named struct{ desc string }

func (n named) String() string        { return n.desc }
func (n named) WriteHash(h hash.Hash) { fmt.Fprint(h, n.desc) }
func (n named) Hashcode() uint32      { h := fnv.New32a(); n.WriteHash(h); return h.Sum32() }
func (n named) ReturnsPtr() bool      { return false }
func (n named) CallsExtern() bool     { return false }
func (n named) OverwritesInput() int  { return -1 }

// WritesAll says that the op's UsePreallocDo writes every element of its
// result (output), whatever its buffer held (internal/tape.FullWriter).
func (n named) WritesAll() {}
func (n named) errorf(f string, a ...any) error {
	return errors.Errorf("%s: %s", n.desc, fmt.Sprintf(f, a...))
}

// tensorOf is a dims-dimensional tensor type of a's elements.
func tensorOf(dims int, a hm.TypeVariable) hm.Type {
	return gorgonia.TensorType{Dims: dims, Of: a}
}

// fnType is the type (in_1, …, in_n) → out over one element type.
func fnType(out int, in ...int) hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, 0, len(in)+1)
	for _, d := range in {
		ts = append(ts, tensorOf(d, a))
	}
	return hm.NewFnType(append(ts, tensorOf(out, a))...)
}

// dense returns v as a contiguous dense tensor of want's size (nil: any)
// holding float32s or float64s; a view is copied.
func dense(what string, v gorgonia.Value, want tensor.Shape) (*tensor.Dense, error) {
	t, ok := v.(*tensor.Dense)
	if !ok {
		return nil, errors.Errorf("%s: got %T, want a dense tensor", what, v)
	}
	if t.RequiresIterator() {
		m, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return nil, errors.Errorf("%s: cannot materialise a view of %v", what, t.Shape())
		}
		t = m
	}
	if want != nil && t.Shape().TotalSize() != want.TotalSize() {
		return nil, errors.Errorf("%s: got shape %v, want %v", what, t.Shape(), want)
	}
	if dt := t.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, errors.Errorf("%s: dtype %v, want float32 or float64", what, dt)
	}
	return t, nil
}

// output is the tensor an op writes its result of shape (of t's dtype)
// into: prealloc, when it is a dense tensor of that dtype and size (given
// the shape; zeroed for an op that adds into its output), else a new zero
// tensor. Every op here writes each element of its output (or adds into
// zeros), so a prealloc gives Do's bits whatever it held.
func output(prealloc gorgonia.Value, t *tensor.Dense, shape tensor.Shape, zero bool) *tensor.Dense {
	p, ok := prealloc.(*tensor.Dense)
	if !ok || p.IsView() || p.Dtype() != t.Dtype() || p.Shape().TotalSize() != shape.TotalSize() {
		return newLike(t, shape)
	}
	if !slices.Equal(p.Shape(), shape) && p.Reshape(shape...) != nil {
		return newLike(t, shape)
	}
	if zero {
		p.Zero()
	}
	return p
}

// newLike is a new zero tensor of shape and t's dtype.
func newLike(t *tensor.Dense, shape tensor.Shape) *tensor.Dense {
	return tensor.New(tensor.Of(t.Dtype()), tensor.WithShape(shape.Clone()...))
}

// sameDtype checks that every tensor has ts[0]'s dtype.
func sameDtype(what string, ts ...*tensor.Dense) error {
	for _, t := range ts[1:] {
		if t.Dtype() != ts[0].Dtype() {
			return errors.Errorf("%s: mixed dtypes %v and %v", what, ts[0].Dtype(), t.Dtype())
		}
	}
	return nil
}

// denseInputs checks an op's input values, one per shape of want (compared by
// size): contiguous dense float tensors of one dtype (dense), in order.
func (n named) denseInputs(vals []gorgonia.Value, want ...tensor.Shape) ([]*tensor.Dense, error) {
	if len(vals) != len(want) {
		return nil, n.errorf("takes %d inputs, got %d", len(want), len(vals))
	}
	ts := make([]*tensor.Dense, len(vals))
	for i, v := range vals {
		t, err := dense(fmt.Sprintf("%s input %d", n.desc, i), v, want[i])
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	return ts, sameDtype(n.desc, ts...)
}

// safely runs an op's computation, turning a panic into an error: gorgonia's
// tape machine runs ops in a goroutine of its own, where a panic would end
// the process.
func (n named) safely(do func() (gorgonia.Value, error)) (v gorgonia.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, n.errorf("panicked: %v", r)
		}
	}()
	return do()
}

// parallel runs body over [0, n) in contiguous chunks, one per processor
// when the work (n·unit elementary steps) is worth it. Results must not
// depend on the chunking: each index is computed by one goroutine, in the
// same order as a serial loop. A panic in a chunk is raised again in the
// caller's goroutine once every chunk has returned.
func parallel(n, unit int, body func(lo, hi int)) {
	const minWork = 1 << 15
	p := min(workers(), n)
	if p <= 1 || n*unit < minWork {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure any
	for w := 0; w < p; w++ {
		lo, hi := w*n/p, (w+1)*n/p
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					failure = r
					mu.Unlock()
				}
			}()
			body(lo, hi)
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
}
