package graphsplit

import (
	"fmt"
	"github.com/pipemare/pipemare/internal/reach"
	"hash"
	"hash/fnv"
	"slices"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// copyReshape replaces gorgonia's Reshape in stage graphs. Gorgonia's
// reshape returns a view of its input and declares that it overwrites it, so
// the tape machine may later run an in-place op on the reshaped value and
// silently overwrite the input's memory — which the backward pass of the op
// that produced the input still needs (a softmax, a tanh). The whole graph
// then gets wrong gradients, and so would a stage. copyReshape computes the
// same values into fresh memory, and its gradient is a copyReshape back.
type copyReshape struct {
	from, to tensor.Shape
}

// reshapeShapes returns the shapes of a gorgonia reshape op, or false.
func reshapeShapes(op gorgonia.Op) (from, to tensor.Shape, ok bool) {
	if reach.TypeString(op) != "gorgonia.reshapeOp" {
		return nil, nil, false
	}
	f, err := reach.Ints(op, "from")
	if err != nil {
		return nil, nil, false
	}
	t, err := reach.Ints(op, "to")
	if err != nil {
		return nil, nil, false
	}
	return tensor.Shape(f), tensor.Shape(t), true
}

func tensorType(dims int) hm.Type {
	if dims == 0 {
		return hm.TypeVariable('a')
	}
	return gorgonia.TensorType{Dims: dims, Of: hm.TypeVariable('a')}
}

func (op copyReshape) Arity() int { return 1 }
func (op copyReshape) Type() hm.Type {
	if op.from.Dims() == op.to.Dims() {
		return hm.NewFnType(hm.TypeVariable('a'), hm.TypeVariable('a'))
	}
	return hm.NewFnType(tensorType(op.from.Dims()), tensorType(op.to.Dims()))
}
func (op copyReshape) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.to.Clone(), nil
}
func (op copyReshape) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do copying into prealloc where it is a dense tensor of
// the input's dtype and the result's size (internal/tape.FullWriter).
func (op copyReshape) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vals) != 1 {
		return nil, errors.Errorf("reshape takes 1 value, got %d", len(vals))
	}
	if sc, ok := vals[0].(gorgonia.Scalar); ok { // a scalar into shape (1), (1, 1)…
		if op.to.TotalSize() != 1 {
			return nil, errors.Errorf("cannot reshape a scalar to %v", op.to)
		}
		if op.to.IsScalar() {
			return gorgonia.CloneValue(sc)
		}
		if p, ok := fits(prealloc, sc.Dtype(), op.to); ok {
			return p, p.Memset(sc.Data())
		}
		return tensor.New(tensor.WithShape(op.to.Clone()...), tensor.FromScalar(sc.Data())), nil
	}
	t, ok := vals[0].(tensor.Tensor)
	if !ok {
		return nil, errors.Errorf("reshape of %T", vals[0])
	}
	if t.Shape().TotalSize() != op.to.TotalSize() {
		return nil, errors.Errorf("cannot reshape %v to %v", t.Shape(), op.to)
	}
	if t.RequiresIterator() {
		if m, ok := t.(interface{ Materialize() tensor.Tensor }); ok {
			t = m.Materialize()
		}
	}
	if p, ok := fits(prealloc, t.Dtype(), op.to); ok {
		return p, tensor.Copy(p, t) // the same elements, row-major
	}
	c, ok := t.Clone().(tensor.Tensor) // a deep copy
	if !ok {
		return nil, errors.Errorf("reshape: cannot copy %T", t)
	}
	if err := c.Reshape(op.to...); err != nil {
		return nil, err
	}
	return c, nil
}

// fits returns prealloc as a dense tensor of dtype dt and the given shape
// (reshaped), or false.
func fits(prealloc gorgonia.Value, dt tensor.Dtype, shape tensor.Shape) (*tensor.Dense, bool) {
	p, ok := prealloc.(*tensor.Dense)
	if !ok || p.IsView() || p.Dtype() != dt || p.Shape().TotalSize() != shape.TotalSize() {
		return nil, false
	}
	return p, slices.Equal(p.Shape(), shape) || p.Reshape(shape...) == nil
}

// WritesAll: UsePreallocDo copies every element (internal/tape.FullWriter).
func (op copyReshape) WritesAll()           {}
func (op copyReshape) ReturnsPtr() bool     { return false }
func (op copyReshape) CallsExtern() bool    { return false }
func (op copyReshape) OverwritesInput() int { return -1 }
func (op copyReshape) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "copyReshape%v→%v", op.from, op.to)
}
func (op copyReshape) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op copyReshape) String() string     { return fmt.Sprintf("Reshape%v", op.to) }
func (op copyReshape) DiffWRT(int) []bool { return []bool{true} }
func (op copyReshape) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	back := copyReshape{from: grad.Shape(), to: op.from}
	if grad.Shape().TotalSize() != op.from.TotalSize() {
		return nil, errors.Errorf("reshape gradient: %v does not fit %v", grad.Shape(), op.from)
	}
	n, err := gorgonia.ApplyOp(back, grad)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{n}, nil
}
