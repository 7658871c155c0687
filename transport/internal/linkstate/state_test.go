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
	require.NoError(t, Flush(transport.Driver, []*State[int]{acking}, []transport.Peer{0}, []string{"stage 0"}, time.Second, time.Second))
	require.Equal(t, Queued, quiet.Enqueue(1))
	err := Flush(transport.Driver, []*State[int]{acking, quiet}, []transport.Peer{0, 1}, []string{"stage 0", "stage 1 (pid 42)"}, 20*time.Millisecond, time.Second)
	require.EqualError(t, err, "close: link driver → stage 1: stage 1 (pid 42) did not confirm within 20ms that it read everything sent to it (1 messages were still queued)")
}

// TestPutWritesInOrder: Put lets the caller write a message itself only
// when nothing is ahead of it — nothing queued, the writer idle in Next
// — and write can; else it queues, so the writer sends in order. A link
// that cannot take a message refuses it without calling write.
func TestPutWritesInOrder(t *testing.T) {
	s := New[int]()
	var wrote []int
	write := func(o int) bool { wrote = append(wrote, o); return true }
	full := func(int) bool { return false }
	require.Equal(t, Queued, s.Put(1, write))
	require.Equal(t, []int{1}, wrote, "nothing ahead: written at once")
	require.Equal(t, Queued, s.Put(2, full))
	// Each step: the writer takes the next messages, then o is put;
	// nothing more is written at once while anything is ahead of o.
	for _, c := range []struct {
		takes []int
		o     int
		why   string
	}{{nil, 3, "2 is queued"}, {[]int{2}, 4, "3 is still queued"}, {[]int{3}, 5, "4 is queued"}, {[]int{4, 5}, 6, "the writer is still sending 5"}} {
		for _, want := range c.takes {
			a, o := s.Next()
			require.Equal(t, SendMessage, a)
			require.Equal(t, want, o)
		}
		require.Equal(t, Queued, s.Put(c.o, write))
		require.Equal(t, []int{1}, wrote, "%s: %d queues behind it", c.why, c.o)
	}
	_, o := s.Next()
	require.Equal(t, 6, o)
	next := make(chan Action)
	go func() {
		a, _ := s.Next() // idle: waits for work
		next <- a
	}()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.busy
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, Queued, s.Put(7, write))
	require.Equal(t, []int{1, 7}, wrote, "the writer idle in Next: written at once")
	s.StartClosing()
	require.Equal(t, SendBye, <-next)
	require.Equal(t, Closing, s.Put(8, write))
	require.Equal(t, []int{1, 7}, wrote)
}

// TestFlushWaitsLessOncePipelineIsOver: once a link broke or a peer left
// (said Bye), before Flush or while it waits, Flush waits for the others
// at most its short wait; a broken link is not flushed.
func TestFlushWaitsLessOncePipelineIsOver(t *testing.T) {
	names := []string{"stage 0", "stage 1", "stage 2"}
	peers := []transport.Peer{0, 1, 2}
	for _, c := range []struct {
		name string
		end  func(s *State[int])
		at   time.Duration // when end runs: 0 before Flush
	}{
		{"broke before", func(s *State[int]) { s.End(&transport.LinkError{From: 1, To: 0}) }, 0},
		{"left before", func(s *State[int]) { s.ByeReceived() }, 0},
		{"broke while it waits", func(s *State[int]) { s.End(&transport.LinkError{From: 1, To: 0}) }, 50 * time.Millisecond},
		{"left while it waits", func(s *State[int]) { s.ByeReceived() }, 50 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			quiet, other, acking := New[int](), New[int](), New[int]()
			acking.ByeAckReceived()
			require.Equal(t, Queued, quiet.Enqueue(1))
			if c.at == 0 {
				c.end(other)
			} else {
				time.AfterFunc(c.at, func() { c.end(other) })
			}
			began := time.Now()
			err := Flush(transport.Driver, []*State[int]{quiet, other, acking}, peers, names, time.Minute, 100*time.Millisecond)
			require.Less(t, time.Since(began), 30*time.Second, "the short wait, not the long one")
			require.ErrorContains(t, err, "stage 0 did not confirm within")
			require.NotContains(t, err.Error(), "within 1m0s")
		})
	}
	quiet := New[int]()
	require.Equal(t, Queued, quiet.Enqueue(1))
	began := time.Now()
	require.Error(t, Flush(transport.Driver, []*State[int]{quiet}, peers[:1], names[:1], 300*time.Millisecond, 10*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond, "with every link up and no peer gone, the long wait")
}
