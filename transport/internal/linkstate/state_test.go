package linkstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
)

// TestProtocol: messages go out in order; the peer's Bye is acknowledged
// first and drops what was queued for it; this side's Bye comes after
// everything queued; a link that ends while up is broken, one that ends
// while closing or after the peer left is not.
func TestProtocol(t *testing.T) {
	s := New[int]()
	require.Equal(t, Queued, s.Enqueue(1))
	require.Equal(t, Queued, s.Enqueue(2))
	for _, want := range []int{1, 2} {
		a, o := s.Next()
		require.Equal(t, SendMessage, a)
		require.Equal(t, want, o)
	}
	s.StartClosing()
	require.Equal(t, Closing, s.Enqueue(3))
	a, _ := s.Next()
	require.Equal(t, SendBye, a)
	s.ByeAckReceived()
	ok, queued := s.Delivered()
	require.True(t, ok)
	require.Zero(t, queued)
	require.False(t, s.End(&transport.LinkError{}), "a link that ends while closing did not break")

	s = New[int]()
	require.Equal(t, Queued, s.Enqueue(1))
	s.ByeReceived()
	a, _ = s.Next()
	require.Equal(t, SendByeAck, a, "the peer's Bye is acknowledged, what was queued for it dropped")
	require.Equal(t, Departed, s.Enqueue(2))
	require.False(t, s.End(&transport.LinkError{}))

	s = New[int]()
	le := &transport.LinkError{From: 1, To: 0, Kind: transport.Gradient, Err: transport.ErrClosed}
	require.True(t, s.End(le), "a link that ends while up broke")
	require.Equal(t, Over, s.Enqueue(1))
	got := s.BrokenError(transport.Reply)
	require.Equal(t, transport.Reply, got.Kind)
	require.Equal(t, le.Err, got.Err)
	a, _ = s.Next()
	require.Equal(t, Done, a)
}

// TestFlushNamesTheUnconfirmed: Flush waits at most its wait for each
// peer's acknowledgment and names each link that did not confirm.
func TestFlushNamesTheUnconfirmed(t *testing.T) {
	quiet, acking := New[int](), New[int]()
	acking.ByeAckReceived()
	require.NoError(t, Flush(transport.Driver, []*State[int]{acking}, []transport.Peer{0}, []string{"stage 0"}, time.Second))
	require.Equal(t, Queued, quiet.Enqueue(1))
	err := Flush(transport.Driver, []*State[int]{acking, quiet}, []transport.Peer{0, 1}, []string{"stage 0", "stage 1 (pid 42)"}, 20*time.Millisecond)
	require.EqualError(t, err, "close: link driver → stage 1: stage 1 (pid 42) did not confirm within 20ms that it read everything sent to it (1 messages were still queued)")
}
