package shmnet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
)

// FuzzDecodeHeader: whatever bytes a ring holds where a header should be,
// decodeHeader returns an error or a header within every bound, which
// encodes back to the same bytes; it never panics nor allocates beyond
// the bounds. CI runs the seeds.
func FuzzDecodeHeader(f *testing.F) {
	msg := header{typ: frameMessage, kind: transport.Gradient, fresh: true, from: 1, to: transport.Driver, micro: 7, version: -3, bodyLen: 12,
		values: []valueDesc{{form: formDense, dtype: 2, shape: []int64{2, 3}}, {form: formNil}, {form: formScalar, dtype: 1}}}
	slabbed := header{typ: frameMessage, kind: transport.Activation, values: []valueDesc{{form: formSlab, dtype: 2, shape: []int64{1 << 16}, page: 3}}}
	for _, h := range []header{msg, slabbed, {typ: frameBye}, {typ: frameByeAck}, {typ: frameMessage, kind: transport.Control}} {
		f.Add(appendHeader(nil, h))
	}
	f.Add([]byte{})
	f.Add([]byte{9})
	f.Add(appendHeader(nil, msg)[:20])
	f.Add(append(appendHeader(nil, msg), 0))
	huge := msg
	huge.values = []valueDesc{{form: formDense, dtype: 1, shape: []int64{1 << 40, 1 << 40}}}
	f.Add(appendHeader(nil, huge))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(h.values), maxValues)
		for _, v := range h.values {
			n, err := v.bytes()
			require.NoError(t, err)
			require.LessOrEqual(t, n, 8*maxElements)
		}
		require.Equal(t, b, appendHeader(nil, h), "a header decodes to what encodes back to it")
	})
}

// TestDecodeHeaderRefuses: the bounds decodeHeader checks, each named.
func TestDecodeHeaderRefuses(t *testing.T) {
	msg := header{typ: frameMessage, kind: transport.Activation, values: []valueDesc{{form: formDense, dtype: 2, shape: []int64{4}}}}
	for _, c := range []struct {
		change func(*header)
		says   string
	}{
		{func(h *header) { h.typ = 7 }, "unknown frame type 7"},
		{func(h *header) { h.values[0].dtype = 9 }, "value 0: unknown dtype 9"},
		{func(h *header) { h.values[0].form = 5 }, "value 0: unknown form 5"},
		{func(h *header) { h.values[0].shape = []int64{0} }, "value 0: shape [0]"},
		{func(h *header) { h.values[0].shape = []int64{1 << 20, 1 << 20} }, "at most 68719476736 elements"},
		{func(h *header) { h.values[0] = valueDesc{form: formScalar, dtype: 1, shape: []int64{1}} }, "a scalar of shape [1]"},
		{func(h *header) { h.bodyLen = maxBody + 1 }, "a body of 1073741825 bytes"},
		{func(h *header) { h.values[0].form = formSlab; h.kind = transport.Control }, "value 0 lies in the slab, in a control message"},
		{func(h *header) { h.values[0] = valueDesc{form: formSlab, dtype: 2} }, "value 0: a value in the slab without a shape"},
	} {
		h := msg
		h.values = []valueDesc{msg.values[0]}
		c.change(&h)
		_, err := decodeHeader(appendHeader(nil, h))
		require.ErrorContains(t, err, c.says)
	}
	_, err := decodeHeader(appendHeader(nil, msg)[:10])
	require.ErrorContains(t, err, "the header ends early")
	_, err = decodeHeader(append(appendHeader(nil, msg), 1, 2))
	require.ErrorContains(t, err, "2 bytes after the header")
	b := appendHeader(nil, msg)
	b[2] = 6 // the flags
	_, err = decodeHeader(b)
	require.ErrorContains(t, err, "unknown flags 0x6")
}
