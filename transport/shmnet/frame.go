package shmnet

import (
	"encoding/binary"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// A frame in a ring is a 4-byte length, a header of that length, then the
// payload the header announces: the body (the next in the sender's gob
// stream, body.go), then each tensor's bytes as they lie in memory (both
// ends are on one host). The header is little-endian:
//
//	type u8 (message, bye, bye ack)
//	message only: kind u8, flags u8 (1: the body begins a new gob stream),
//	  from i32, to i32, micro i64, version i64,
//	  body length u32, values u32, then per value:
//	  form u8 (nil, dense, scalar, dense in the slab), dtype u8, dims u8,
//	  dims × i64, and for a dense value in the slab its first page u32
const (
	frameMessage = 1
	frameBye     = 2
	frameByeAck  = 3
)

// flagFresh, in a message's flags, says that its body begins a new gob
// stream.
const flagFresh = 1

// Forms of a value.
const (
	formNil    = 0
	formDense  = 1
	formScalar = 2
	formSlab   = 3 // a dense value whose bytes lie in the slab (slab.go)
)

// Bounds that keep a corrupt header from making the reader allocate
// without limit.
const (
	maxHeader   = 1 << 20
	maxValues   = 10_000
	maxDims     = 16
	maxElements = 1 << 36
	maxBody     = 1 << 30
)

// header is a frame's header.
type header struct {
	typ            uint8
	kind           transport.Kind
	from, to       transport.Peer
	micro, version int64
	bodyLen        uint32
	fresh          bool // the body begins a new gob stream
	values         []valueDesc
}

// valueDesc describes one value of a message.
type valueDesc struct {
	form, dtype uint8
	shape       []int64
	page        uint32 // formSlab: the first page of its bytes
}

// appendHeader appends h's encoding (without the length) to b.
func appendHeader(b []byte, h header) []byte {
	b = append(b, h.typ)
	if h.typ != frameMessage {
		return b
	}
	le := binary.LittleEndian
	b = append(b, byte(h.kind))
	var flags byte
	if h.fresh {
		flags = flagFresh
	}
	b = append(b, flags)
	b = le.AppendUint32(b, uint32(int32(h.from)))
	b = le.AppendUint32(b, uint32(int32(h.to)))
	b = le.AppendUint64(b, uint64(h.micro))
	b = le.AppendUint64(b, uint64(h.version))
	b = le.AppendUint32(b, h.bodyLen)
	b = le.AppendUint32(b, uint32(len(h.values)))
	for _, v := range h.values {
		b = append(b, v.form, v.dtype, byte(len(v.shape)))
		for _, d := range v.shape {
			b = le.AppendUint64(b, uint64(d))
		}
		if v.form == formSlab {
			b = le.AppendUint32(b, v.page)
		}
	}
	return b
}

// decodeHeader reads a header, checking every bound: a ring that holds
// garbage fails here and nowhere later.
func decodeHeader(b []byte) (header, error) {
	d := decoder{b: b}
	h := header{typ: d.u8()}
	switch h.typ {
	case frameBye, frameByeAck:
		return h, d.end()
	case frameMessage:
	default:
		return h, errors.Errorf("unknown frame type %d", h.typ)
	}
	h.kind = transport.Kind(d.u8())
	flags := d.u8()
	h.fresh = flags&flagFresh != 0
	h.from = transport.Peer(int32(d.u32()))
	h.to = transport.Peer(int32(d.u32()))
	h.micro = int64(d.u64())
	h.version = int64(d.u64())
	h.bodyLen = d.u32()
	n := d.u32()
	if d.err != nil {
		return h, d.err
	}
	if n > maxValues {
		return h, errors.Errorf("%d values, at most %d", n, maxValues)
	}
	if flags&^flagFresh != 0 {
		return h, errors.Errorf("unknown flags %#x", flags)
	}
	if h.bodyLen > maxBody {
		return h, errors.Errorf("a body of %d bytes, at most %d", h.bodyLen, maxBody)
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		v := valueDesc{form: d.u8(), dtype: d.u8()}
		dims := int(d.u8())
		if dims > maxDims {
			return h, errors.Errorf("value %d has %d dimensions, at most %d", i, dims, maxDims)
		}
		for range dims {
			v.shape = append(v.shape, int64(d.u64()))
		}
		if v.form == formSlab {
			v.page = d.u32()
		}
		if d.err == nil {
			if _, err := v.bytes(); err != nil {
				return h, errors.Wrapf(err, "value %d", i)
			}
		}
		if v.form == formSlab && h.kind != transport.Activation && h.kind != transport.Gradient {
			return h, errors.Errorf("value %d lies in the slab, in a %v message: only activations and gradients go there", i, h.kind)
		}
		h.values = append(h.values, v)
	}
	if d.err != nil {
		return h, d.err
	}
	return h, d.end()
}

// decoder reads little-endian fields; the first read past the end sets
// err and every later one returns 0.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		if d.err == nil {
			d.err = errors.New("the header ends early")
		}
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }

func (d *decoder) end() error {
	if d.err == nil && len(d.b) > 0 {
		return errors.Errorf("%d bytes after the header", len(d.b))
	}
	return d.err
}
