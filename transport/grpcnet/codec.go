package grpcnet

import (
	"hash/crc32"
	"io"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/transport"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
)

// A message travels as a Header frame and, when its parts (the gob-encoded
// body, then each tensor's raw little-endian bytes) do not all fit in one
// frame, Chunk frames after it: parts go inline in the header in order
// while they fit in a chunk; every other part is cut into chunks, sent in
// part order. One writer per stream sends a message's frames back to back.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// part is a piece of a message's payload: the body or one tensor's bytes
// (value: its index in the message's Values; −1 for the body).
type part struct {
	data    []byte
	chunked bool
	value   int
}

// inlineMax is the most bytes of one tensor that go inline in the header
// (a copy into the protobuf message); a larger tensor goes in chunks,
// which the frame codec hands to gRPC without copying.
const inlineMax = 4 << 10

// encodeHeader returns the header frame of m (whose body is already
// encoded) and the parts that follow it in chunks.
func encodeHeader(m transport.Message, body []byte, chunk int) (*pb.Frame, []part, error) {
	h := &pb.Header{
		Kind: uint32(m.Kind), From: int32(m.From), To: int32(m.To),
		Micro: int64(m.Micro), Version: int64(m.Version),
		BodyLen: uint64(len(body)), BodyCrc32C: crc32.Checksum(body, castagnoli),
	}
	budget := chunk
	var chunked []part
	place := func(data []byte, value, most int) (inline []byte, isChunked bool) {
		if len(data) <= min(budget, most) {
			budget -= len(data)
			return data, false
		}
		chunked = append(chunked, part{data: data, chunked: true, value: value})
		return nil, true
	}
	h.Body, h.BodyChunked = place(body, -1, chunk)
	for i, v := range m.Values {
		t, data, err := encodeTensor(v)
		if err != nil {
			return nil, nil, errors.Wrapf(err, "value %d", i)
		}
		t.Data, t.Chunked = place(data, i, inlineMax)
		h.Tensors = append(h.Tensors, t)
	}
	return &pb.Frame{Frame: &pb.Frame_Header{Header: h}}, chunked, nil
}

// encodeTensor describes v and returns its raw little-endian bytes (a view
// of v's memory where the host is little-endian).
func encodeTensor(v gorgonia.Value) (*pb.Tensor, []byte, error) {
	if v == nil {
		return &pb.Tensor{Form: pb.Form_NIL}, nil, nil
	}
	t := &pb.Tensor{Form: pb.Form_DENSE}
	var data any
	switch x := v.(type) {
	case *tensor.Dense:
		if x.RequiresIterator() { // a view: its elements are not contiguous
			c, err := tensorutil.Clone(x)
			if err != nil {
				return nil, nil, err
			}
			x = c
		}
		data = x.Data()
	case gorgonia.Scalar:
		t.Form = pb.Form_SCALAR
		data = x.Data()
	default:
		return nil, nil, errors.Errorf("%T: a transport carries *tensor.Dense and gorgonia scalars", v)
	}
	b, dt, err := leBytes(data, hostLittleEndian)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "%v %v", v.Shape(), v.Dtype())
	}
	t.Dtype = dt
	for _, d := range v.Shape() {
		t.Shape = append(t.Shape, int64(d))
	}
	t.Crc32C = crc32.Checksum(b, castagnoli)
	return t, b, nil
}

// checkEncodable fails for a value encodeTensor would refuse, without
// encoding it: Send calls it so that the error reaches the sender.
func checkEncodable(vs []gorgonia.Value) error {
	for i, v := range vs {
		if v == nil {
			continue
		}
		switch v.(type) {
		case *tensor.Dense, gorgonia.Scalar:
		default:
			return errors.Errorf("value %d is a %T: a transport carries *tensor.Dense and gorgonia scalars", i, v)
		}
		if _, ok := dtypes[v.Dtype()]; !ok {
			return errors.Errorf("value %d has dtype %v: a transport carries float64, float32, int, int64 and int32", i, v.Dtype())
		}
	}
	return nil
}

var dtypes = map[tensor.Dtype]pb.Dtype{
	tensor.Float64: pb.Dtype_FLOAT64, tensor.Float32: pb.Dtype_FLOAT32,
	tensor.Int: pb.Dtype_INT, tensor.Int64: pb.Dtype_INT64, tensor.Int32: pb.Dtype_INT32,
}

// incoming is a message being reassembled: its header has arrived, its
// chunked parts fill in as chunks arrive.
type incoming struct {
	h       *pb.Header
	body    []byte
	values  []gorgonia.Value
	fills   []func() error // per tensor: finishes the value once its bytes are in
	pending [][]byte       // the chunked parts still to fill, in order
	at      int            // bytes of pending[0] filled
}

// maxElements bounds the size of one tensor a header may announce, so that
// a corrupt header cannot make the receiver allocate without limit.
const maxElements = 1 << 36

// newIncoming allocates the message a header announces and copies in its
// inline parts.
func newIncoming(h *pb.Header) (*incoming, error) {
	in := &incoming{h: h, values: make([]gorgonia.Value, len(h.Tensors))}
	if h.BodyLen > maxElements {
		return nil, errors.Errorf("a body of %d bytes", h.BodyLen)
	}
	in.body = make([]byte, h.BodyLen)
	if err := in.addPart(in.body, h.Body, h.BodyChunked); err != nil {
		return nil, errors.Wrap(err, "body")
	}
	for i, t := range h.Tensors {
		raw, fill, err := allocTensor(t, &in.values[i], hostLittleEndian)
		if err != nil {
			return nil, errors.Wrapf(err, "tensor %d", i)
		}
		in.fills = append(in.fills, fill)
		if err := in.addPart(raw, t.Data, t.Chunked); err != nil {
			return nil, errors.Wrapf(err, "tensor %d", i)
		}
	}
	if len(in.pending) == 0 {
		return in, in.finish()
	}
	return in, nil
}

func (in *incoming) addPart(dst, inline []byte, chunked bool) error {
	switch {
	case chunked && len(dst) > 0:
		in.pending = append(in.pending, dst)
	case chunked:
	case len(inline) != len(dst):
		return errors.Errorf("%d inline bytes for %d", len(inline), len(dst))
	default:
		copy(dst, inline)
	}
	return nil
}

// done reports whether every part has arrived.
func (in *incoming) done() bool { return len(in.pending) == 0 }

// readChunk reads the next chunk into place, straight from gRPC's
// buffers; once the last has arrived it checks and finishes the message.
func (in *incoming) readChunk(r io.Reader) error {
	n := r.(interface{ Remaining() int }).Remaining()
	if in.done() {
		return errors.New("a chunk after the message was complete")
	}
	dst := in.pending[0][in.at:]
	if n == 0 || n > len(dst) {
		return errors.Errorf("a chunk of %d bytes where %d remain", n, len(dst))
	}
	if _, err := io.ReadFull(r, dst[:n]); err != nil {
		return err
	}
	in.at += n
	if in.at == len(in.pending[0]) {
		in.pending, in.at = in.pending[1:], 0
	}
	if in.done() {
		return in.finish()
	}
	return nil
}

// finish checks every part's checksum and builds the values.
func (in *incoming) finish() error {
	if got := crc32.Checksum(in.body, castagnoli); got != in.h.BodyCrc32C {
		return errors.Errorf("the body arrived corrupted: CRC-32C %08x, sent %08x", got, in.h.BodyCrc32C)
	}
	for i, t := range in.h.Tensors {
		if t.Form == pb.Form_NIL {
			continue
		}
		if err := in.fills[i](); err != nil {
			return errors.Wrapf(err, "tensor %d (%v %v)", i, t.Dtype, t.Shape)
		}
	}
	return nil
}

// message returns the reassembled message.
func (in *incoming) message() (transport.Message, error) {
	body, err := transport.DecodeBody(in.body)
	if err != nil {
		return transport.Message{}, err
	}
	m := transport.Message{
		Kind: transport.Kind(in.h.Kind), From: transport.Peer(in.h.From), To: transport.Peer(in.h.To),
		Micro: int(in.h.Micro), Version: int(in.h.Version), Body: body,
		Own: true, // decoded into tensors of this process alone
	}
	if len(in.values) > 0 {
		m.Values = in.values
	}
	return m, nil
}
