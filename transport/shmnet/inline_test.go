//go:build linux

package shmnet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/internal/linkstate"
)

// inlineLink is a link from peer 0 to peer 1 whose reader goroutine does
// not run: what reaches the mailbox, readWhole put there. w writes the
// ring the link reads.
func inlineLink(t *testing.T) (l *peerLink, w *ring) {
	t.Helper()
	h, fds, err := makeShared(1 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { closeFDs(fds[:1]) })
	w, _ = rings(h.mem, 1<<20)
	w.data1, w.room, w.stop = newEventfd(h.evs[0]), newEventfd(h.evs[1]), new(atomic.Bool)
	r := &ring{ctl: w.ctl, data: w.data, data1: w.data1, room: w.room, stop: w.stop} // the reader's side of w
	e := &Endpoint{self: 1, box: transport.NewMailbox()}
	l = &peerLink{e: e, peer: 0, who: "stage 0", shared: h, in: r, st: linkstate.New[outgoing]()}
	t.Cleanup(func() {
		// Stopped first, as an endpoint's teardown does, so that a read
		// that waits (a failing test's) returns and release gets rmu.
		w.stop.Store(true)
		_ = w.data1.signal()
		l.release()
	})
	return l, w
}

// readsAtOnce runs l.readWhole and fails with why if it has not returned
// within 5 s: it must never wait.
func readsAtOnce(t *testing.T, l *peerLink, why string) {
	t.Helper()
	done := make(chan struct{})
	go func() { l.readWhole(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal(why)
	}
}

// queued is the message of kind k the mailbox holds, if any.
func queued(t *testing.T, l *peerLink, k transport.Kind) (transport.Message, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	m, err := l.e.box.Take(ctx, 0, k)
	return m, err == nil
}

// TestRecvReadsWholeMessagesItself: readWhole (what Recv does before it
// waits) puts every message wholly in the ring into the mailbox, in order,
// and leaves a message still being written to the reader goroutine,
// returning at once.
func TestRecvReadsWholeMessagesItself(t *testing.T) {
	l, w := inlineLink(t)
	var bodies bodyEncoder
	msg := func(micro int) outgoing {
		v := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, float32(micro)}))
		o, err := encode(transport.Message{Kind: transport.Gradient, From: 0, To: 1, Micro: micro, Values: []gorgonia.Value{v}, Body: micro}, &bodies, &slab{}, false)
		require.NoError(t, err)
		return o
	}
	for m := range 2 {
		o := msg(m)
		require.NoError(t, w.writeMessage(o.frame, o.parts...))
	}
	l.readWhole()
	for m := range 2 {
		got, ok := queued(t, l, transport.Gradient)
		require.True(t, ok, "message %d read by readWhole", m)
		require.Equal(t, m, got.Micro)
		require.Equal(t, m, got.Body)
		require.Equal(t, []float32{1, 2, 3, 4, 5, float32(m)}, got.Values[0].Data())
	}

	// A message whose frame is in but not its payload.
	o := msg(2)
	require.NoError(t, w.write(o.frame, false))
	require.NoError(t, w.write(o.parts[0], false))
	readsAtOnce(t, l, "readWhole waited for a message still being written")
	_, ok := queued(t, l, transport.Gradient)
	require.False(t, ok, "a message still being written is left in the ring")
	require.NoError(t, w.write(o.parts[1], true))
	l.readWhole()
	got, ok := queued(t, l, transport.Gradient)
	require.True(t, ok, "once whole, it is read")
	require.Equal(t, 2, got.Micro)

	// While the reader goroutine reads (it holds rmu), readWhole leaves
	// the ring to it.
	o = msg(3)
	require.NoError(t, w.writeMessage(o.frame, o.parts...))
	l.rmu.Lock()
	l.readWhole()
	l.rmu.Unlock()
	_, ok = queued(t, l, transport.Gradient)
	require.False(t, ok, "readWhole does not read beside the reader")
}

// TestRecvReadingAGarbledFrameEndsTheLink: a frame that does not decode,
// found by readWhole, ends the link through its reader goroutine, as if
// the reader had found it.
func TestRecvReadingAGarbledFrameEndsTheLink(t *testing.T) {
	l, w := inlineLink(t)
	require.NoError(t, w.writeMessage([]byte{3, 0, 0, 0, 99, 0, 0}))
	l.readWhole()
	le := l.inlineErr.Load()
	require.NotNil(t, le, "the garbled frame's error is kept")
	require.ErrorContains(t, le, "a corrupted or unexpected frame")
	ended := make(chan *transport.LinkError, 1)
	go func() { ended <- l.read() }()
	select {
	case got := <-ended:
		require.Equal(t, le, got, "the reader ends the link with it")
	case <-time.After(5 * time.Second):
		t.Fatal("the reader did not end the link")
	}
}

// TestRecvAfterTheRingsAreReleasedReadsNothing: a Recv that raced Close
// finds the rings unmapped and leaves them alone (reading them would
// fault).
func TestRecvAfterTheRingsAreReleasedReadsNothing(t *testing.T) {
	l, w := inlineLink(t)
	require.NoError(t, w.writeMessage([]byte{1, 0, 0, 0, frameBye}))
	l.release()
	l.readWhole()
	require.Nil(t, l.inlineErr.Load())
}

// FuzzRecvReadsWhole: whatever bytes a ring holds, readWhole returns
// without waiting, and it reads only whole frames: what it leaves in the
// ring is a frame still being written (or none), unless a frame it found
// does not decode, which it keeps to end the link with. CI runs the seeds.
func FuzzRecvReadsWhole(f *testing.F) {
	var bodies bodyEncoder
	v := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))
	o, err := encode(transport.Message{Kind: transport.Gradient, From: 0, To: 1, Values: []gorgonia.Value{v}, Body: 3}, &bodies, &slab{}, false)
	require.NoError(f, err)
	whole := append(append(append([]byte(nil), o.frame...), o.parts[0]...), o.parts[1]...)
	f.Add(whole)
	f.Add(whole[:len(whole)-1])
	f.Add(append(append([]byte(nil), whole...), whole[:7]...))
	f.Add([]byte{1, 0, 0, 0, frameBye})
	f.Add([]byte{3, 0, 0, 0, 99, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, w := inlineLink(t)
		require.NoError(t, w.write(b, true))
		readsAtOnce(t, l, "readWhole waited")
		if l.inlineErr.Load() == nil {
			require.False(t, l.in.whole() && l.in.avail() > 0, "a whole frame left unread")
		}
	})
}
