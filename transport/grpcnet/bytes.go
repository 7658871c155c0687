package grpcnet

import (
	"encoding/binary"
	"github.com/pipemare/pipemare/internal/recycle"
	"hash/crc32"
	"math"
	"strconv"
	"unsafe"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
)

// Tensors travel as raw little-endian bytes. On a little-endian host the
// bytes are a view of the tensor's memory (no conversion, no copy before
// the frame is marshalled); elsewhere they are converted element by
// element. Go ints travel as 64 bits.

var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// view returns the memory of s as bytes.
func view[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// leBytes returns the little-endian bytes of a tensor's data (a slice, or
// a scalar for a scalar-shaped value) and its wire dtype; le says whether
// the host is little-endian (a parameter so that tests exercise both ways).
func leBytes(data any, le bool) ([]byte, pb.Dtype, error) {
	fast := le && strconv.IntSize == 64
	switch d := data.(type) {
	case float64:
		return leBytes([]float64{d}, le)
	case float32:
		return leBytes([]float32{d}, le)
	case int:
		return leBytes([]int{d}, le)
	case int64:
		return leBytes([]int64{d}, le)
	case int32:
		return leBytes([]int32{d}, le)
	case []float64:
		if le {
			return view(d), pb.Dtype_FLOAT64, nil
		}
		b := make([]byte, 8*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
		return b, pb.Dtype_FLOAT64, nil
	case []float32:
		if le {
			return view(d), pb.Dtype_FLOAT32, nil
		}
		b := make([]byte, 4*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b, pb.Dtype_FLOAT32, nil
	case []int:
		if fast {
			return view(d), pb.Dtype_INT, nil
		}
		b := make([]byte, 8*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(x)))
		}
		return b, pb.Dtype_INT, nil
	case []int64:
		if le {
			return view(d), pb.Dtype_INT64, nil
		}
		b := make([]byte, 8*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b, pb.Dtype_INT64, nil
	case []int32:
		if le {
			return view(d), pb.Dtype_INT32, nil
		}
		b := make([]byte, 4*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
		}
		return b, pb.Dtype_INT32, nil
	}
	return nil, 0, errors.Errorf("data of type %T: a transport carries float64, float32, int, int64 and int32", data)
}

var elemSize = map[pb.Dtype]int{
	pb.Dtype_FLOAT64: 8, pb.Dtype_FLOAT32: 4, pb.Dtype_INT: 8, pb.Dtype_INT64: 8, pb.Dtype_INT32: 4,
}

// allocTensor allocates the value t describes. It returns the bytes the
// value's little-endian data goes into and a function that, once they are
// all in, checks their checksum and sets *out.
//
// A dense float tensor comes from the process's pools (recycle.Get), as
// shmnet's do: the receiver owns it (the message is marked Own) and
// returns it once it is done, as a stage does with the activations,
// gradients and data it receives.
func allocTensor(t *pb.Tensor, out *gorgonia.Value, le bool) ([]byte, func() error, error) {
	if t.Form == pb.Form_NIL {
		return nil, nil, nil
	}
	size, ok := elemSize[t.Dtype]
	if !ok {
		return nil, nil, errors.Errorf("unknown dtype %v", t.Dtype)
	}
	if t.Form == pb.Form_SCALAR && len(t.Shape) > 0 {
		return nil, nil, errors.Errorf("a scalar of shape %v", t.Shape)
	}
	if t.Form != pb.Form_SCALAR && t.Form != pb.Form_DENSE {
		return nil, nil, errors.Errorf("unknown form %v", t.Form)
	}
	n := int64(1)
	shape := make(tensor.Shape, len(t.Shape))
	for i, d := range t.Shape {
		if d <= 0 || d > maxElements || n*d > maxElements {
			return nil, nil, errors.Errorf("shape %v (gorgonia holds no empty tensor; at most %d elements)", t.Shape, int64(maxElements))
		}
		n *= d
		shape[i] = int(d)
	}
	var data any
	var raw []byte
	fast := le && (t.Dtype != pb.Dtype_INT || strconv.IntSize == 64)
	if fast && t.Form == pb.Form_DENSE && (t.Dtype == pb.Dtype_FLOAT32 || t.Dtype == pb.Dtype_FLOAT64) {
		dense := recycle.Get(map[pb.Dtype]tensor.Dtype{pb.Dtype_FLOAT32: tensor.Float32, pb.Dtype_FLOAT64: tensor.Float64}[t.Dtype], shape)
		if t.Dtype == pb.Dtype_FLOAT32 {
			raw = view(dense.Float32s())
		} else {
			raw = view(dense.Float64s())
		}
		return raw, func() error {
			if got := crc32.Checksum(raw, castagnoli); got != t.Crc32C {
				recycle.Put(dense)
				return errors.Errorf("arrived corrupted: CRC-32C %08x, sent %08x", got, t.Crc32C)
			}
			*out = dense
			return nil
		}, nil
	}
	switch t.Dtype {
	case pb.Dtype_FLOAT64:
		s := make([]float64, n)
		data, raw = s, view(s)
	case pb.Dtype_FLOAT32:
		s := make([]float32, n)
		data, raw = s, view(s)
	case pb.Dtype_INT:
		s := make([]int, n)
		data, raw = s, view(s)
	case pb.Dtype_INT64:
		s := make([]int64, n)
		data, raw = s, view(s)
	case pb.Dtype_INT32:
		s := make([]int32, n)
		data, raw = s, view(s)
	}
	if !fast {
		raw = make([]byte, int(n)*size)
	}
	fill := func() error {
		if got := crc32.Checksum(raw, castagnoli); got != t.Crc32C {
			return errors.Errorf("arrived corrupted: CRC-32C %08x, sent %08x", got, t.Crc32C)
		}
		if !fast {
			if err := fromLE(raw, data); err != nil {
				return err
			}
		}
		v, err := build(t.Form, shape, data)
		*out = v
		return err
	}
	return raw, fill, nil
}

// fromLE converts little-endian bytes into data's elements.
func fromLE(raw []byte, data any) error {
	switch d := data.(type) {
	case []float64:
		for i := range d {
			d[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	case []float32:
		for i := range d {
			d[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case []int:
		for i := range d {
			x := int64(binary.LittleEndian.Uint64(raw[8*i:]))
			if int64(int(x)) != x {
				return errors.Errorf("int %d does not fit in this host's int", x)
			}
			d[i] = int(x)
		}
	case []int64:
		for i := range d {
			d[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	case []int32:
		for i := range d {
			d[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	return nil
}

// build makes the gorgonia value of the given form from its elements.
func build(form pb.Form, shape tensor.Shape, data any) (gorgonia.Value, error) {
	if form == pb.Form_SCALAR {
		switch d := data.(type) {
		case []float64:
			return gorgonia.NewF64(d[0]), nil
		case []float32:
			return gorgonia.NewF32(d[0]), nil
		case []int:
			return gorgonia.NewI(d[0]), nil
		case []int64:
			return gorgonia.NewI64(d[0]), nil
		case []int32:
			return gorgonia.NewI32(d[0]), nil
		}
	}
	if len(shape) == 0 { // a scalar-shaped dense tensor holds a scalar
		switch d := data.(type) {
		case []float64:
			return tensor.New(tensor.FromScalar(d[0])), nil
		case []float32:
			return tensor.New(tensor.FromScalar(d[0])), nil
		case []int:
			return tensor.New(tensor.FromScalar(d[0])), nil
		case []int64:
			return tensor.New(tensor.FromScalar(d[0])), nil
		case []int32:
			return tensor.New(tensor.FromScalar(d[0])), nil
		}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), nil
}
