package shmnet

import (
	"encoding/gob"
	"testing"

	"github.com/stretchr/testify/require"
)

type order struct {
	Micro int
	Names []string
}

func init() { gob.Register(order{}) }

type unregistered struct{ X int }

// TestBodiesAreOneStream: a link's bodies are one gob stream, so a type is
// described once: the second body of a type is shorter than the first by
// the description.
// Every body decodes as sent, in order; a body that fails to encode, or
// one encoded and not sent, makes the next begin a new stream, which the
// receiver follows; a body that continues no stream is refused.
func TestBodiesAreOneStream(t *testing.T) {
	var enc bodyEncoder
	var dec bodyDecoder
	roundTrip := func(body any) ([]byte, bool) {
		p, fresh, err := enc.encode(body)
		require.NoError(t, err)
		got, err := dec.decode(p, fresh)
		require.NoError(t, err)
		require.Equal(t, body, got)
		return p, fresh
	}
	first, fresh := roundTrip(order{Micro: 1, Names: []string{"a"}})
	require.True(t, fresh, "the first body begins the stream")
	second, fresh := roundTrip(order{Micro: 2, Names: []string{"b"}})
	require.False(t, fresh)
	require.Less(t, len(second), len(first)-40, "the type is described once (%d bytes, then %d)", len(first), len(second))
	roundTrip(note{"between"})
	roundTrip(order{Micro: 3})

	_, _, err := enc.encode(unregistered{1})
	require.ErrorContains(t, err, "is it registered with gob.Register?")
	_, fresh = roundTrip(order{Micro: 4})
	require.True(t, fresh, "after a body that failed to encode, a new stream")

	_, fresh, err = enc.encode(order{Micro: 5})
	require.NoError(t, err)
	require.False(t, fresh)
	enc.reset() // the link did not send it
	_, fresh = roundTrip(order{Micro: 6})
	require.True(t, fresh, "after a body not sent, a new stream")

	var fresh2 bodyDecoder
	_, err = fresh2.decode(second, false)
	require.ErrorContains(t, err, "a body that continues a stream never begun")
	p, none, err := enc.encode(nil)
	require.NoError(t, err)
	require.Nil(t, p)
	require.False(t, none)
}
