package grpcnet

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/pkg/errors"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"

	"github.com/pipemare/pipemare/internal/recycle"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
)

// frameCodec is the links' gRPC codec (grpc-go's CodecV2): a frame on the
// wire is a tag byte, then either a protobuf Frame (hellos, headers, byes)
// or, for a chunk, its raw bytes. A chunk's bytes go to gRPC as they lie
// in the tensor's memory and are read on arrival straight into the tensor
// being received, with no protobuf message around them either way: one
// copy out of gRPC's buffers, where protobuf made three.
type frameCodec struct{}

const (
	tagProto = 0
	tagChunk = 1
)

// codecName is the codec's name in the content type: a peer with another
// codec is refused by gRPC before the handshake.
const codecName = "pipemare-frame"

func (frameCodec) Name() string { return codecName }

// outChunk is a chunk to send: data, a view of a tensor's memory; release,
// if not nil, is told when gRPC no longer needs it.
type outChunk struct {
	data    []byte
	release *releaser
}

// inFrame is what a link reads: a protobuf frame, or a chunk's bytes still
// in gRPC's buffers (chunk: the reader copies them into place and closes
// it).
type inFrame struct {
	frame pb.Frame
	chunk mem.Reader
}

func (frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch x := v.(type) {
	case *pb.Frame:
		b, err := proto.MarshalOptions{}.MarshalAppend([]byte{tagProto}, x)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	case *outChunk:
		return mem.BufferSlice{mem.SliceBuffer{tagChunk}, x.buffer()}, nil
	}
	return nil, errors.Errorf("the frame codec cannot send a %T", v)
}

// buffer hands c's bytes to gRPC without copying them; a tensor that goes
// back to the pools once sent (release) goes back only when gRPC frees
// the last of its chunks. Bytes too few for gRPC to track are copied.
func (c *outChunk) buffer() mem.Buffer {
	if c.release == nil {
		return mem.SliceBuffer(c.data)
	}
	if mem.IsBelowBufferPoolingThreshold(cap(c.data)) {
		b := mem.SliceBuffer(append([]byte(nil), c.data...))
		c.release.Put(nil)
		return b
	}
	return mem.NewBuffer(&c.data, c.release)
}

func (frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r := data.Reader()
	tag, err := r.ReadByte()
	if err != nil {
		r.Close()
		return errors.New("an empty frame")
	}
	var f *pb.Frame
	switch x := v.(type) {
	case *pb.Frame:
		f = x
	case *inFrame:
		if tag == tagChunk {
			x.chunk = r // read into place by the link's reader
			return nil
		}
		f = &x.frame
	default:
		r.Close()
		return errors.Errorf("the frame codec cannot read into a %T", v)
	}
	defer r.Close()
	if tag != tagProto {
		return errors.Errorf("a frame tagged %d where a protobuf frame belongs", tag)
	}
	b := make([]byte, r.Remaining())
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return proto.Unmarshal(b, f)
}

// releaser returns a sent tensor to the process's pools once gRPC has
// freed every chunk of it (it is the mem.BufferPool of the chunks'
// buffers): before, gRPC may still be writing it.
type releaser struct {
	left atomic.Int32
	v    gorgonia.Value
}

func newReleaser(v gorgonia.Value, chunks int) *releaser {
	r := &releaser{v: v}
	r.left.Store(int32(chunks))
	return r
}

// Get is never called: the chunks' buffers are the tensor's memory.
func (r *releaser) Get(length int) *[]byte {
	b := make([]byte, length)
	return &b
}

// Put counts a chunk gRPC is done with.
func (r *releaser) Put(*[]byte) {
	if r.left.Add(-1) == 0 {
		recycle.Put(r.v)
	}
}

// noClearPool is the buffer pool of the links' gRPC: grpc-go's default
// clears every buffer it hands out (3 % of a stage process's CPU), though
// gRPC fills every byte of a buffer it reads into; this one hands them out
// as they are. Buffers are pooled by size class, as grpc-go's default
// pools them.
type noClearPool struct{ tiers []*sizedPool }

type sizedPool struct {
	size int
	pool sync.Pool
}

func newNoClearPool(sizes ...int) *noClearPool {
	p := &noClearPool{}
	for _, s := range sizes {
		p.tiers = append(p.tiers, &sizedPool{size: s})
	}
	return p
}

// bufferPool is the pool every link of the process shares.
var bufferPool = newNoClearPool(256, 4<<10, 16<<10, 32<<10, 1<<20, 2<<20, 4<<20)

func (p *noClearPool) Get(length int) *[]byte {
	for _, t := range p.tiers {
		if length <= t.size {
			if b, ok := t.pool.Get().(*[]byte); ok {
				*b = (*b)[:length]
				return b
			}
			b := make([]byte, length, t.size)
			return &b
		}
	}
	b := make([]byte, length)
	return &b
}

func (p *noClearPool) Put(b *[]byte) {
	c := cap(*b)
	for i := len(p.tiers) - 1; i >= 0; i-- {
		if t := p.tiers[i]; c >= t.size {
			t.pool.Put(b)
			return
		}
	}
}
