package shmnet

import (
	"unsafe"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/tensorutil"
)

// Tensors cross the ring as the bytes of their memory: the sender copies
// them in, the receiver copies them out into a tensor of its own (from
// the process's pools), one copy each way and no conversion, both ends
// being on one host. A large one of an Activation or Gradient lies in the
// slab instead, and the receiver's tensor is a view of it (inPlace).

// dtypes are the element types a value may have, by their code in a
// header.
var dtypes = []tensor.Dtype{1: tensor.Float64, 2: tensor.Float32, 3: tensor.Int, 4: tensor.Int64, 5: tensor.Int32}

func dtypeCode(dt tensor.Dtype) (uint8, bool) {
	for i, d := range dtypes {
		if i > 0 && d == dt {
			return uint8(i), true
		}
	}
	return 0, false
}

// bytes is the size of the value's data, checking its shape and dtype.
func (v valueDesc) bytes() (int, error) {
	if v.form == formNil {
		return 0, nil
	}
	if v.form != formDense && v.form != formScalar && v.form != formSlab {
		return 0, errors.Errorf("unknown form %d", v.form)
	}
	if int(v.dtype) >= len(dtypes) || v.dtype == 0 {
		return 0, errors.Errorf("unknown dtype %d", v.dtype)
	}
	if v.form == formScalar && len(v.shape) > 0 {
		return 0, errors.Errorf("a scalar of shape %v", v.shape)
	}
	if v.form == formSlab && len(v.shape) == 0 {
		return 0, errors.New("a value in the slab without a shape")
	}
	n := int64(1)
	for _, d := range v.shape {
		if d <= 0 || d > maxElements || n*d > maxElements {
			return 0, errors.Errorf("shape %v (gorgonia holds no empty tensor; at most %d elements)", v.shape, int64(maxElements))
		}
		n *= d
	}
	return int(n) * int(dtypes[v.dtype].Size()), nil
}

// inRing is how many of the value's bytes follow its header in the ring:
// none for a value in the slab.
func (v valueDesc) inRing() int {
	if v.form == formSlab {
		return 0
	}
	n, _ := v.bytes() // checked by decodeHeader
	return n
}

// describe returns what a header says of v and the bytes of its data (a
// view of its memory; a view tensor is copied first).
func describe(v gorgonia.Value) (valueDesc, []byte, error) {
	if v == nil {
		return valueDesc{form: formNil}, nil, nil
	}
	code, ok := dtypeCode(v.Dtype())
	if !ok {
		return valueDesc{}, nil, errors.Errorf("dtype %v: a transport carries float64, float32, int, int64 and int32", v.Dtype())
	}
	d := valueDesc{form: formDense, dtype: code}
	var data any
	switch x := v.(type) {
	case *tensor.Dense:
		if x.RequiresIterator() { // its elements are not contiguous
			c, err := tensorutil.Clone(x)
			if err != nil {
				return d, nil, err
			}
			x = c
		}
		data = x.Data()
	case gorgonia.Scalar:
		d.form = formScalar
		data = x.Data()
	default:
		return d, nil, errors.Errorf("%T: a transport carries *tensor.Dense and gorgonia scalars", v)
	}
	if d.form == formDense {
		for _, n := range v.Shape() {
			d.shape = append(d.shape, int64(n))
		}
	}
	return d, memory(data), nil
}

// memory is the bytes of a tensor's data: a slice, or a scalar.
func memory(data any) []byte {
	switch d := data.(type) {
	case float64:
		return view([]float64{d})
	case float32:
		return view([]float32{d})
	case int:
		return view([]int{d})
	case int64:
		return view([]int64{d})
	case int32:
		return view([]int32{d})
	case []float64:
		return view(d)
	case []float32:
		return view(d)
	case []int:
		return view(d)
	case []int64:
		return view(d)
	case []int32:
		return view(d)
	}
	return nil
}

// view returns the memory of s as bytes.
func view[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// alloc makes the value d describes and returns the bytes its data is to
// be read into. A dense float tensor comes from the process's pools
// (recycle.Get), for the receiver to return.
func alloc(d valueDesc) (gorgonia.Value, []byte, error) {
	if _, err := d.bytes(); err != nil {
		return nil, nil, err
	}
	if d.form == formNil {
		return nil, nil, nil
	}
	dt := dtypes[d.dtype]
	shape := make(tensor.Shape, len(d.shape))
	n := 1
	for i, s := range d.shape {
		shape[i] = int(s)
		n *= int(s)
	}
	if d.form == formDense && len(shape) > 0 && (dt == tensor.Float32 || dt == tensor.Float64) {
		t := recycle.Get(dt, shape)
		return t, memory(t.Data()), nil
	}
	var data any
	switch dt {
	case tensor.Float64:
		data = make([]float64, n)
	case tensor.Float32:
		data = make([]float32, n)
	case tensor.Int:
		data = make([]int, n)
	case tensor.Int64:
		data = make([]int64, n)
	case tensor.Int32:
		data = make([]int32, n)
	}
	raw := memory(data)
	if d.form == formScalar || len(shape) == 0 {
		return &scalarSlot{data: data, dense: d.form == formDense}, raw, nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), raw, nil
}

// inPlace makes the dense tensor d describes over raw, its bytes where
// they lie (in the slab): raw is page-aligned, as a float slice must be.
func inPlace(d valueDesc, raw []byte) (*tensor.Dense, error) {
	shape := make([]int, len(d.shape))
	for i, s := range d.shape {
		shape[i] = int(s)
	}
	p := unsafe.Pointer(unsafe.SliceData(raw))
	var data any
	switch dtypes[d.dtype] {
	case tensor.Float32:
		data = unsafe.Slice((*float32)(p), len(raw)/4)
	case tensor.Float64:
		data = unsafe.Slice((*float64)(p), len(raw)/8)
	default:
		return nil, errors.Errorf("a %v tensor in the slab: only float32 and float64 go there", dtypes[d.dtype])
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), nil
}

// scalarSlot stands for a scalar, or a scalar-shaped dense tensor, until
// its bytes are in: finish makes it what it stands for.
type scalarSlot struct {
	gorgonia.Value
	data  any
	dense bool
}

// finish turns the values alloc made into what they stand for, once their
// bytes are in.
func finish(vs []gorgonia.Value) {
	for i, v := range vs {
		s, ok := v.(*scalarSlot)
		if !ok {
			continue
		}
		if s.dense {
			vs[i] = tensor.New(tensor.FromScalar(first(s.data)))
			continue
		}
		switch d := s.data.(type) {
		case []float64:
			vs[i] = gorgonia.NewF64(d[0])
		case []float32:
			vs[i] = gorgonia.NewF32(d[0])
		case []int:
			vs[i] = gorgonia.NewI(d[0])
		case []int64:
			vs[i] = gorgonia.NewI64(d[0])
		case []int32:
			vs[i] = gorgonia.NewI32(d[0])
		}
	}
}

// first is the first element of a slice of data.
func first(data any) any {
	switch d := data.(type) {
	case []float64:
		return d[0]
	case []float32:
		return d[0]
	case []int:
		return d[0]
	case []int64:
		return d[0]
	case []int32:
		return d[0]
	}
	return nil
}
