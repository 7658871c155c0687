package shmnet

import (
	"bytes"
	"encoding/gob"

	"github.com/pkg/errors"
)

// The bodies of the messages one side of a link sends travel as one gob
// stream, in the ring's order: gob describes a type the first time the
// stream carries it, not in every message, and the receiver compiles its
// decoder for a type once. (A gob encoder per message, as
// transport.EncodeBody makes, cost a stage 28 µs to encode and decode a
// Data body and 108 µs a Parked reply, per message; docs/speed.md.) A
// message whose header says fresh begins a new stream: the link's first
// message with a body, and the first after a message the link did not
// send once its body was encoded.

// bodyEncoder is the sending side's stream; the link's encMu guards it
// from encoding a message to queueing it, so that the stream's order is
// the ring's.
type bodyEncoder struct {
	buf bytes.Buffer
	enc *gob.Encoder
}

// encode returns body's bytes in the stream (nil for no body) and whether
// they begin a new one.
func (b *bodyEncoder) encode(body any) (p []byte, fresh bool, err error) {
	if body == nil {
		return nil, false, nil
	}
	if b.enc == nil {
		b.enc, fresh = gob.NewEncoder(&b.buf), true
	}
	b.buf.Reset()
	if err := b.enc.Encode(&body); err != nil {
		b.reset()
		return nil, false, errors.Wrapf(err, "encoding the body (%T; is it registered with gob.Register?)", body)
	}
	return bytes.Clone(b.buf.Bytes()), fresh, nil
}

// reset ends the stream: a body it encoded will not be sent, so the next
// begins a new one.
func (b *bodyEncoder) reset() { b.enc = nil }

// bodyDecoder is the receiving side's stream, the link's reader's alone.
type bodyDecoder struct {
	r   bytes.Reader
	dec *gob.Decoder
}

// decode returns the body p holds (nil for no bytes); fresh says p begins
// a new stream.
func (b *bodyDecoder) decode(p []byte, fresh bool) (any, error) {
	if len(p) == 0 {
		return nil, nil
	}
	b.r.Reset(p)
	if fresh {
		b.dec = gob.NewDecoder(&b.r) // a bytes.Reader is read byte by byte, without a buffer of gob's
	}
	if b.dec == nil {
		return nil, errors.New("a body that continues a stream never begun")
	}
	var body any
	if err := b.dec.Decode(&body); err != nil {
		b.dec = nil
		return nil, errors.Wrap(err, "decoding the body (is its type registered with gob.Register here too?)")
	}
	if b.r.Len() > 0 {
		b.dec = nil
		return nil, errors.Errorf("%d bytes after the body", b.r.Len())
	}
	return body, nil
}
