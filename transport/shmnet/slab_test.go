//go:build linux

package shmnet

import (
	"bytes"
	"context"
	"errors"
	mbits "math/bits"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
)

// taken counts the pages marked taken.
func (s *slab) taken() int {
	n := 0
	for i := range s.bits {
		n += mbits.OnesCount64(atomic.LoadUint64(s.word(i)))
	}
	return n
}

// testSlab is a slab of n pages over the heap.
func testSlab(n int) *slab {
	return &slab{mem: make([]byte, n*slabPage), bits: make([]uint64, slabWords)}
}

// TestSlabTakesTheLowestRun: the writer takes the lowest run of free
// pages long enough, and finds none when no run is; pages given back are
// taken again. Runs cross the bitmap's words.
func TestSlabTakesTheLowestRun(t *testing.T) {
	s := testSlab(8)
	for _, want := range []int{0, 3} {
		first, ok := s.take(3)
		require.True(t, ok)
		require.Equal(t, want, first)
	}
	_, ok := s.take(3)
	require.False(t, ok, "pages 6 and 7 are free, but not three in a row")
	s.mark(0, 3, false)
	first, ok := s.take(2)
	require.True(t, ok)
	require.Equal(t, 0, first, "the lowest free run")
	first, ok = s.take(2)
	require.True(t, ok)
	require.Equal(t, 6, first, "page 2 alone is too short")
	first, ok = s.take(1)
	require.True(t, ok)
	require.Equal(t, 2, first)
	require.Equal(t, 8, s.taken())
	_, ok = s.take(1)
	require.False(t, ok)
	_, ok = s.take(9)
	require.False(t, ok, "more pages than the slab has")

	big := testSlab(300)
	first, ok = big.take(130) // words 0, 1 and 2
	require.True(t, ok)
	require.Equal(t, 0, first)
	first, ok = big.take(70) // words 2 and 3
	require.True(t, ok)
	require.Equal(t, 130, first)
	require.Equal(t, 200, big.taken())
	big.mark(60, 100, false)
	require.Equal(t, 100, big.taken())
	for p := range 300 {
		require.Equal(t, p < 60 || p >= 160 && p < 200, !big.free(p), "page %d", p)
	}
}

// TestSlabRefusesPagesOutsideIt: a header that names bytes outside the
// slab is corrupt.
func TestSlabRefusesPagesOutsideIt(t *testing.T) {
	s := testSlab(4)
	b, err := s.at(2, 2*slabPage)
	require.NoError(t, err)
	require.Len(t, b, 2*slabPage)
	_, err = s.at(3, slabPage+1)
	require.ErrorContains(t, err, "65537 bytes from page 3 of a slab of 4 pages")
	_, err = s.at(4, 1)
	require.ErrorContains(t, err, "from page 4")
}

// sendCopy sends m with e.SendCopy, which must send it.
func sendCopy(t *testing.T, e *Endpoint, m transport.Message) {
	t.Helper()
	sent, err := e.SendCopy(context.Background(), m)
	require.NoError(t, err)
	require.True(t, sent)
}

// inSlab reports whether v's data lies in s.
func inSlab(s *slab, v gorgonia.Value) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(view(v.(*tensor.Dense).Float32s()))))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s.mem)))
	return p >= lo && p < lo+uintptr(len(s.mem))
}

// TestActivationsAreReadInPlace: a large tensor of an Activation or a
// Gradient is copied into the slab once, as SendCopy sends it (the sender
// may then overwrite its own), and received in place, bit for bit; its
// pages are the receiver's until it returns the tensor (recycle.Put),
// then the writer takes them again. Once the slab has no room, tensors go
// through the ring; a small tensor always does.
func TestActivationsAreReadInPlace(t *testing.T) {
	p := open(t, testNetwork(2), quick(10*time.Second)...)
	ctx := context.Background()
	out := p.stages[0].peers[1].out.slab // the sender's view of the slab
	in := p.stages[1].peers[0].in.slab   // the receiver's
	require.Equal(t, 32, out.pages(), "a 2 MiB ring has a 2 MiB slab")

	const n = 1 << 16 // 256 KiB: 4 pages
	mine := tensor.New(tensor.WithShape(4, n/4), tensor.WithBacking(f32s(n)))
	var got []transport.Message
	for m := range 9 { // the slab holds 8
		sendCopy(t, p.stages[0], transport.Message{Kind: transport.Activation, To: 1, Micro: m, Values: []gorgonia.Value{mine}})
		copy(mine.Float32s(), make([]float32, n)) // the sender's to change
		a, err := p.stages[1].Recv(ctx, 0, transport.Activation)
		require.NoError(t, err)
		require.Equal(t, m, a.Micro)
		require.True(t, a.Own)
		require.Equal(t, tensor.Shape{4, n / 4}, a.Values[0].Shape())
		require.True(t, bytes.Equal(view(f32s(n)), view(a.Values[0].(*tensor.Dense).Float32s())), "message %d bit for bit", m)
		require.Equal(t, m < 8, inSlab(&in, a.Values[0]), "message %d in place while the slab has room", m)
		got = append(got, a)
		copy(mine.Float32s(), f32s(n))
	}
	require.Equal(t, 32, out.taken(), "the receiver holds every page")
	small := tensor.New(tensor.WithShape(16), tensor.WithBacking(f32s(16)))
	recycle.Put(got[3].Values[0])
	require.Equal(t, 28, out.taken(), "its pages are free again once the tensor is returned")
	sendCopy(t, p.stages[1], transport.Message{Kind: transport.Gradient, To: 0, Values: []gorgonia.Value{small}})
	g, err := p.stages[0].Recv(ctx, 1, transport.Gradient)
	require.NoError(t, err)
	require.Equal(t, bits(f32s(16)), bits(g.Values[0].(*tensor.Dense).Float32s()), "a small tensor through the ring")
	sendCopy(t, p.stages[0], transport.Message{Kind: transport.Activation, To: 1, Values: []gorgonia.Value{mine}})
	a, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.NoError(t, err)
	require.True(t, inSlab(&in, a.Values[0]), "the pages given back are taken again")
	require.True(t, bytes.Equal(view(f32s(n)), view(a.Values[0].(*tensor.Dense).Float32s())))
	for _, m := range append(got, a) {
		recycle.Put(m.Values[0])
	}
	require.Equal(t, 0, out.taken())
	sent, err := p.stages[0].SendCopy(ctx, transport.Message{Kind: transport.Activation, To: 0, Values: []gorgonia.Value{mine}})
	require.NoError(t, err)
	require.False(t, sent, "to itself it leaves the copies to the caller")
}

// TestLentMemoryOutlivesClose: a tensor received in place keeps its
// link's memory mapped after Close, readable as it arrived, until it is
// returned; the fds close at Close. A message nobody took gives its pages
// back at Close.
func TestLentMemoryOutlivesClose(t *testing.T) {
	before, beforeRings := openFDs(t)
	p := open(t, testNetwork(1), quick(5*time.Second)...)
	ctx := context.Background()
	const n = 1 << 16
	sendCopy(t, p.driver, transport.Message{Kind: transport.Activation, To: 0, Values: []gorgonia.Value{tensor.New(tensor.WithShape(n), tensor.WithBacking(f32s(n)))}})
	a, err := p.stages[0].Recv(ctx, transport.Driver, transport.Activation)
	require.NoError(t, err)
	require.True(t, inSlab(&p.stages[0].peers[transport.Driver].in.slab, a.Values[0]))
	sendCopy(t, p.driver, transport.Message{Kind: transport.Activation, To: 0, Micro: 1, Values: []gorgonia.Value{tensor.New(tensor.WithShape(n), tensor.WithBacking(f32s(n)))}})
	link := p.stages[0].peers[transport.Driver]
	require.Eventually(t, func() bool {
		link.lends.mu.Lock()
		defer link.lends.mu.Unlock()
		return link.lends.out == 2
	}, 5*time.Second, time.Millisecond, "the second message waits in the mailbox, lent")
	p.close()
	after, rings := openFDs(t)
	require.Equal(t, before, after, "fds")
	require.Equal(t, beforeRings+1, rings, "the receiver's mapping stays while its tensor is out")
	require.True(t, bytes.Equal(view(f32s(n)), view(a.Values[0].(*tensor.Dense).Float32s())))
	recycle.Put(a.Values[0])
	_, rings = openFDs(t)
	require.Equal(t, beforeRings, rings, "the last tensor back unmaps it")
}

// TestSendRacingClose: Sends that copy into the slab while the endpoint
// closes either send or fail (ErrClosed, or the link's end once the peer
// saw the Bye); none writes into memory the endpoint unmapped, which
// would crash the process.
func TestSendRacingClose(t *testing.T) {
	for range 20 {
		p := open(t, testNetwork(1), WithRecvTimeout(5*time.Second), WithConnectTimeout(5*time.Second), WithRingSize(8<<20))
		const n = 1 << 20 // 4 MiB: a copy into the slab takes a while
		v := tensor.New(tensor.WithShape(n), tensor.WithBacking(f32s(n)))
		go func() { // the receiver returns what it gets, so that the slab has room
			for {
				m, err := p.stages[0].Recv(context.Background(), transport.Driver, transport.Activation)
				if err != nil {
					return
				}
				putValues(m)
			}
		}()
		done := make(chan error)
		go func() {
			for {
				if _, err := p.driver.SendCopy(context.Background(), transport.Message{Kind: transport.Activation, To: 0, Values: []gorgonia.Value{v}}); err != nil {
					done <- err
					return
				}
			}
		}()
		time.Sleep(2 * time.Millisecond)
		require.NoError(t, p.driver.Close())
		err := <-done
		var le *transport.LinkError
		require.True(t, errors.Is(err, transport.ErrClosed) || errors.As(err, &le), "%v", err)
		p.close()
	}
}
