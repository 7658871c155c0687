package tensorutil

import (
	"encoding/binary"
	"io"
	"math"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Zeros returns a new zero tensor of the given shape and dtype.
func Zeros(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
}

// flat returns v's elements in row-major order, materialising views.
func flat(v gorgonia.Value) (interface{}, error) {
	if v == nil {
		return nil, errors.New("nil value")
	}
	if t, ok := v.(tensor.Tensor); ok && t.RequiresIterator() {
		if m, ok := t.(interface{ Materialize() tensor.Tensor }); ok {
			return elems(m.Materialize()), nil
		}
	}
	switch x := v.Data().(type) { // a gorgonia scalar reads as one element
	case float64:
		return []float64{x}, nil
	case float32:
		return []float32{x}, nil
	}
	return elems(v), nil
}

// elems is v's backing slice. A 0-dimensional dense tensor's Data is its
// one element, not a slice; its slice is asked for by dtype.
func elems(v gorgonia.Value) interface{} {
	d, ok := v.(*tensor.Dense)
	if !ok || !d.IsScalar() {
		return v.Data()
	}
	switch d.Dtype() {
	case tensor.Float64:
		return d.Float64s()
	case tensor.Float32:
		return d.Float32s()
	case tensor.Int:
		return d.Ints()
	}
	return v.Data()
}

// AddInto adds src to dst element by element, in row-major order. They must
// have the same dtype and number of elements; shapes may differ.
func AddInto(dst tensor.Tensor, src gorgonia.Value) error {
	return elementwise("add", dst, src, add[float64], add32, nil)
}

// add32 is add for float32, 8 elements at a time where the CPU can
// (addF32): the same sums, each rounded alone.
func add32(d, x []float32) {
	if n := len(d) &^ 7; wideAdd && n > 0 {
		addF32(d[:n], x[:n])
		d, x = d[n:], x[n:]
	}
	add(d, x)
}

func add[T float32 | float64](d, x []T) {
	for i := range d {
		d[i] += x[i]
	}
}

// Sum returns a + b as a new value: two gradients of one tensor (a fresh
// tensor) or of one scalar (a scalar of a's dtype). Neither is modified.
func Sum(a, b gorgonia.Value) (gorgonia.Value, error) {
	if t, ok := a.(tensor.Tensor); ok {
		sum, err := Clone(t)
		if err != nil {
			return nil, err
		}
		return sum, AddInto(sum, b)
	}
	x, err := Scalar(a)
	if err != nil {
		return nil, err
	}
	y, err := Scalar(b)
	if err != nil {
		return nil, err
	}
	return ScalarOf(a.Dtype(), x+y)
}

// CopyInto copies src's elements into dst (same dtype and size; float64,
// float32 or int).
func CopyInto(dst tensor.Tensor, src gorgonia.Value) error {
	return elementwise("copy", dst, src,
		func(d, x []float64) { copy(d, x) }, func(d, x []float32) { copy(d, x) }, func(d, x []int) { copy(d, x) })
}

// elementwise applies the function for dst's dtype to dst's and src's
// elements, after checking they match; a nil function means the dtype is
// not supported.
func elementwise(what string, dst tensor.Tensor, src gorgonia.Value, f64 func(d, x []float64), f32 func(d, x []float32), ints func(d, x []int)) error {
	s, err := flat(src)
	if err != nil {
		return err
	}
	mismatch := func() error {
		return errors.Errorf("cannot %s %v %v into %v %v", what, src.Shape(), src.Dtype(), dst.Shape(), dst.Dtype())
	}
	switch d := elems(dst).(type) {
	case []float64:
		x, ok := s.([]float64)
		if !ok || len(x) != len(d) {
			return mismatch()
		}
		f64(d, x)
	case []float32:
		x, ok := s.([]float32)
		if !ok || len(x) != len(d) {
			return mismatch()
		}
		f32(d, x)
	case []int:
		x, ok := s.([]int)
		if !ok || len(x) != len(d) || ints == nil {
			return mismatch()
		}
		ints(d, x)
	default:
		return errors.Errorf("cannot %s into dtype %v", what, dst.Dtype())
	}
	return nil
}

// Clone returns a dense copy of v with v's shape.
func Clone(v gorgonia.Value) (*tensor.Dense, error) {
	t, ok := v.(tensor.Tensor)
	if !ok {
		return nil, errors.Errorf("%T is not a tensor", v)
	}
	out := Zeros(t.Dtype(), t.Shape().Clone())
	return out, CopyInto(out, v)
}

// Finite reports whether every element of v is finite (ints always are).
func Finite(v gorgonia.Value) bool {
	s, err := flat(v)
	if err != nil {
		return false
	}
	switch d := s.(type) {
	case []float64:
		return finite64(d)
	case []float32:
		return finite32(d)
	case float64:
		return finite64([]float64{d})
	case float32:
		return finite32([]float32{d})
	}
	return true
}

// finite32 and finite64 report whether no element has the exponent of ±Inf
// and NaN (all ones): adding the exponent's lowest bit to the exponent
// field carries into the sign bit exactly then. Integer operations, no
// branches, one pass — the engine checks every gradient and every weight;
// float32's pass runs 8 elements at a time where the CPU can
// (orExponents32).
func finite32(d []float32) bool {
	const exp, one = 0x7f800000, 0x00800000
	var acc uint32
	if n := len(d) &^ 7; wideFinite && n > 0 {
		acc, d = orExponents32(d[:n]), d[n:]
	}
	for _, x := range d {
		acc |= math.Float32bits(x)&exp + one
	}
	return acc&(1<<31) == 0
}

func finite64(d []float64) bool {
	const exp, one = 0x7ff0000000000000, 0x0010000000000000
	var acc uint64
	for _, x := range d {
		acc |= math.Float64bits(x)&exp + one
	}
	return acc&(1<<63) == 0
}

// Scalar returns v as a float64: a scalar, or a one-element tensor.
func Scalar(v gorgonia.Value) (float64, error) {
	s, err := flat(v)
	if err != nil {
		return 0, err
	}
	switch d := s.(type) {
	case float64:
		return d, nil
	case float32:
		return float64(d), nil
	case []float64:
		if len(d) == 1 {
			return d[0], nil
		}
	case []float32:
		if len(d) == 1 {
			return float64(d[0]), nil
		}
	}
	return 0, errors.Errorf("%v %v is not a scalar", v.Shape(), v.Dtype())
}

// ScalarOf returns x as a gorgonia scalar of dtype dt.
func ScalarOf(dt tensor.Dtype, x float64) (gorgonia.Value, error) {
	switch dt {
	case tensor.Float64:
		return gorgonia.NewF64(x), nil
	case tensor.Float32:
		return gorgonia.NewF32(float32(x)), nil
	}
	return nil, errors.Errorf("dtype %v is not a float", dt)
}

// Bytes is the size of v's elements in bytes.
func Bytes(v gorgonia.Value) int64 {
	if v == nil {
		return 0
	}
	return int64(v.Shape().TotalSize()) * int64(v.Dtype().Size())
}

// Rows copies rows [from, from+n) along axis 0 of t into a new tensor of
// shape (n, rest...).
func Rows(t tensor.Tensor, from, n int) (*tensor.Dense, error) {
	shape := t.Shape()
	if len(shape) == 0 || n <= 0 {
		return nil, errors.Errorf("rows %d..%d of shape %v", from, from+n, shape)
	}
	out := Zeros(t.Dtype(), append(tensor.Shape{n}, shape[1:]...))
	if err := RowsInto(out, t, from); err != nil {
		return nil, err
	}
	return out, nil
}

// RowsInto copies rows [from, from+n) along axis 0 of t into dst, a
// contiguous tensor of t's dtype with n rows of t's.
func RowsInto(dst tensor.Tensor, t tensor.Tensor, from int) error {
	shape, n := t.Shape(), 0
	if len(dst.Shape()) > 0 {
		n = dst.Shape()[0]
	}
	if len(shape) == 0 || from < 0 || from+n > shape[0] || dst.Dtype() != t.Dtype() || !dst.Shape()[1:].Eq(shape[1:]) {
		return errors.Errorf("rows %d..%d of shape %v into shape %v", from, from+n, shape, dst.Shape())
	}
	row := shape.TotalSize() / shape[0]
	s, err := flat(t)
	if err != nil {
		return err
	}
	switch d := dst.Data().(type) {
	case []float64:
		copy(d, s.([]float64)[from*row:(from+n)*row])
	case []float32:
		copy(d, s.([]float32)[from*row:(from+n)*row])
	case []int:
		copy(d, s.([]int)[from*row:(from+n)*row])
	default:
		return errors.Errorf("dtype %v is not supported", t.Dtype())
	}
	return nil
}

// Concat joins values of one dtype along axis 0 into a fresh tensor: n
// tensors of shape (r, c…) give (n·r, c…); n scalars give a vector of n.
func Concat(vals []gorgonia.Value) (*tensor.Dense, error) {
	if len(vals) == 0 {
		return nil, errors.New("tensorutil: nothing to concatenate")
	}
	dt, shape := vals[0].Dtype(), vals[0].Shape().Clone()
	if len(shape) == 0 {
		shape = tensor.Shape{1}
	}
	size := shape.TotalSize()
	shape[0] *= len(vals)
	out := Zeros(dt, shape)
	for i, v := range vals {
		if v.Dtype() != dt || v.Shape().TotalSize() != size {
			return nil, errors.Errorf("tensorutil: value %d is %v %v, value 0 has %d elements of %v", i, v.Shape(), v.Dtype(), size, dt)
		}
		src, err := flat(v)
		if err != nil {
			return nil, err
		}
		switch x := src.(type) { // a scalar's data is its value
		case float64:
			src = []float64{x}
		case float32:
			src = []float32{x}
		case int:
			src = []int{x}
		}
		switch d := out.Data().(type) {
		case []float64:
			copy(d[i*size:], src.([]float64))
		case []float32:
			copy(d[i*size:], src.([]float32))
		case []int:
			copy(d[i*size:], src.([]int))
		default:
			return nil, errors.Errorf("tensorutil: dtype %v is not supported", dt)
		}
	}
	return out, nil
}

// WriteLittleEndian writes v's elements in row-major order to w as raw
// little-endian IEEE 754 bytes: 4 per float32, 8 per float64 (other dtypes
// are refused). It is the byte image weight hashes are computed over.
func WriteLittleEndian(w io.Writer, v gorgonia.Value) error {
	s, err := flat(v)
	if err != nil {
		return err
	}
	switch s.(type) {
	case []float32, []float64:
		return binary.Write(w, binary.LittleEndian, s)
	}
	return errors.Errorf("dtype %v is not a float", v.Dtype())
}
