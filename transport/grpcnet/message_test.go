package grpcnet

import (
	"context"
	"crypto/sha256"
	"encoding/gob"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/transport"
)

// order is a Control body of the kind a protocol registers.
type order struct {
	Step    int
	Names   []string
	Weights map[string]float64
}

func init() { gob.Register(order{}) }

// specials are float values whose bits a careless encoding changes.
var specials = []float64{0, math.Copysign(0, -1), 1, -2.5, math.Inf(1), math.Inf(-1), math.NaN(),
	math.Float64frombits(0x7ff8_0000_dead_beef), math.SmallestNonzeroFloat64, math.MaxFloat64, 1e-310}

func f64s(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = specials[i%len(specials)] + float64(i/len(specials))
		if i%len(specials) >= 4 && i%len(specials) <= 7 {
			s[i] = specials[i%len(specials)] // keep the infinities and NaNs as they are
		}
	}
	return s
}

func f32s(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch i % 5 {
		case 0:
			s[i] = math.Float32frombits(0x7fc0_0bad) // a NaN with a payload
		case 1:
			s[i] = float32(math.Copysign(0, -1))
		case 2:
			s[i] = math.Float32frombits(1) // the smallest denormal
		default:
			s[i] = float32(i) * 1.1
		}
	}
	return s
}

// rawBits returns what must survive the trip: the value's Go type, shape,
// dtype and the bits of its elements.
func rawBits(t *testing.T, v gorgonia.Value) string {
	t.Helper()
	if v == nil {
		return "nil"
	}
	data := v.Data()
	if d, ok := v.(*tensor.Dense); ok && d.RequiresIterator() {
		c, err := tensorutil.Clone(d)
		require.NoError(t, err)
		data = c.Data()
	}
	b, _, err := leBytes(data, true)
	require.NoError(t, err)
	return fmt.Sprintf("%T %v %v %d bytes, SHA-256 %x", v, v.Shape(), v.Dtype(), len(b), sha256.Sum256(b))
}

// TestMessagesRoundTripBitExactly: every field and every bit of every
// value arrives as sent: float32 and float64 with NaN payloads, signed
// zeros and denormals, scalars, scalar-shaped tensors, ints, nil entries,
// a view, no values, a body or none, and a 20 MiB tensor cut into chunks.
func TestMessagesRoundTripBitExactly(t *testing.T) {
	ls, addrs := listeners(t, 2)
	p := open(t, Network{Addrs: addrs, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}, ls, quick(2*time.Minute)...)
	ctx := context.Background()

	big := tensor.New(tensor.WithShape(5*1024, 1024), tensor.WithBacking(f32s(5*1024*1024))) // 20 MiB
	wide := tensor.New(tensor.WithShape(3, 4), tensor.WithBacking(f64s(12)))
	view, err := wide.Slice(nil, tensor.S(1, 3))
	require.NoError(t, err)
	msgs := []transport.Message{
		{Kind: transport.Activation, To: 1, Micro: 3, Version: 7, Values: []gorgonia.Value{
			tensor.New(tensor.WithShape(2, 3, 5), tensor.WithBacking(f32s(30))),
			nil,
			tensor.New(tensor.WithShape(len(specials)), tensor.WithBacking(f64s(len(specials)))),
			gorgonia.NewF64(math.Float64frombits(0x7ff8_0000_dead_beef)),
			gorgonia.NewF32(float32(math.Copysign(0, -1))),
			gorgonia.NewI(-42),
			tensor.New(tensor.FromScalar(float32(2.5))),
			tensor.New(tensor.WithShape(4), tensor.WithBacking([]int{math.MinInt64, -1, 0, math.MaxInt64})),
			tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{math.MinInt64, 5})),
			tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int32{math.MinInt32, math.MaxInt32})),
			view.(*tensor.Dense),
			nil,
		}},
		{Kind: transport.Activation, To: 1, Micro: 4},                                         // no values, no body
		{Kind: transport.Activation, To: 1, Micro: 5, Values: []gorgonia.Value{nil}},          // only a nil entry
		{Kind: transport.Activation, To: 1, Micro: 6, Values: []gorgonia.Value{big, wide}},    // chunked, then inline
		{Kind: transport.Activation, To: 1, Micro: math.MaxInt64, Version: math.MinInt64 + 1}, // extreme numbers
	}
	sent := make([][]string, len(msgs)) // before Send: a sent activation's tensors go back to the pools
	for k, m := range msgs {
		for _, v := range m.Values {
			sent[k] = append(sent[k], rawBits(t, v))
		}
		require.NoError(t, p.stages[0].Send(ctx, m))
	}
	for k, want := range msgs {
		got, err := p.stages[1].Recv(ctx, 0, transport.Activation)
		require.NoError(t, err)
		require.Equal(t, transport.Peer(0), got.From)
		require.Equal(t, want.To, got.To)
		require.Equal(t, want.Micro, got.Micro)
		require.Equal(t, want.Version, got.Version)
		require.Nil(t, got.Body)
		require.Len(t, got.Values, len(want.Values))
		for i := range want.Values {
			require.Equal(t, sent[k][i], rawBits(t, got.Values[i]), "microbatch %d, value %d", want.Micro, i)
		}
	}

	// Control and Reply bodies: registered structs and basic types.
	body := order{Step: 9, Names: []string{"w1", "b1"}, Weights: map[string]float64{"lr": 0.05}}
	require.NoError(t, p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 1, Body: body,
		Values: []gorgonia.Value{tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))}}))
	got, err := p.stages[1].Recv(ctx, transport.Driver, transport.Control)
	require.NoError(t, err)
	require.Equal(t, body, got.Body)
	require.Equal(t, transport.Driver, got.From)
	require.NoError(t, p.stages[1].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Body: "parked"}))
	got, err = p.driver.Recv(ctx, 1, transport.Reply)
	require.NoError(t, err)
	require.Equal(t, "parked", got.Body)
	require.Equal(t, transport.Peer(1), got.From)
}

// TestBigBodyIsChunked: a body larger than a chunk travels in chunks too.
func TestBigBodyIsChunked(t *testing.T) {
	ls, addrs := listeners(t, 1)
	tiny := func(s *settings) { s.chunk = 4096 }
	p := open(t, Network{Addrs: addrs}, ls, append(quick(2*time.Minute), tiny)...)
	names := make([]string, 2000)
	for i := range names {
		names[i] = fmt.Sprintf("learnable %d", i)
	}
	body := order{Names: names}
	vals := []gorgonia.Value{tensor.New(tensor.WithShape(3000), tensor.WithBacking(f64s(3000)))}
	require.NoError(t, p.driver.Send(context.Background(), transport.Message{Kind: transport.Control, To: 0, Body: body, Values: vals}))
	got, err := p.stages[0].Recv(context.Background(), transport.Driver, transport.Control)
	require.NoError(t, err)
	require.Equal(t, body, got.Body)
	require.Equal(t, rawBits(t, vals[0]), rawBits(t, got.Values[0]))
}

// TestSendRefusesWhatCannotTravel: the sender learns at once, not the
// receiver later.
func TestSendRefusesWhatCannotTravel(t *testing.T) {
	ls, addrs := listeners(t, 2)
	p := open(t, Network{Addrs: addrs}, ls, quick(2*time.Minute)...) // no link between the stages
	ctx := context.Background()
	type unregistered struct{ X int }
	err := p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Body: unregistered{1}})
	require.ErrorContains(t, err, "is it registered with gob.Register?")
	err = p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Values: []gorgonia.Value{
		tensor.New(tensor.WithShape(2), tensor.WithBacking([]bool{true, false}))}})
	require.ErrorContains(t, err, "value 0 has dtype bool")
	err = p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1})
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.ErrorContains(t, err, "link stage 0 → stage 1 (activation): no such link: stage 0 is linked to driver")
	_, err = p.stages[1].Recv(ctx, 0, transport.Activation)
	require.ErrorContains(t, err, "no such link")
}

// TestFIFOPerSenderAndKindUnderConcurrentSenders: goroutines of two stages
// send activations and gradients to a third at once; each goroutine's
// messages of each kind arrive in the order it sent them, every one once.
func TestFIFOPerSenderAndKindUnderConcurrentSenders(t *testing.T) {
	ls, addrs := listeners(t, 3)
	links := []transport.Link{{A: 0, B: 2}, {A: 1, B: 2}}
	p := open(t, Network{Addrs: addrs, Links: links}, ls, quick(2*time.Minute)...)
	ctx := context.Background()
	const goroutines, msgs = 4, 60
	var wg sync.WaitGroup
	for _, s := range []transport.Peer{0, 1} {
		for g := 0; g < goroutines; g++ {
			for _, k := range []transport.Kind{transport.Activation, transport.Gradient} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for m := 0; m < msgs; m++ {
						v := tensor.New(tensor.WithShape(1+m%3, 64), tensor.WithBacking(f32s((1+m%3)*64)))
						if err := p.stages[s].Send(ctx, transport.Message{Kind: k, To: 2, Micro: m, Version: g, Values: []gorgonia.Value{v}}); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
	}
	next := map[[3]int]int{} // sender, kind, goroutine → next microbatch
	for range 2 * goroutines * msgs {
		for _, k := range []transport.Kind{transport.Activation, transport.Gradient} {
			got, err := p.stages[2].Recv(ctx, transport.AnyPeer, k)
			require.NoError(t, err)
			require.Equal(t, k, got.Kind)
			key := [3]int{int(got.From), int(got.Kind), got.Version}
			require.Equal(t, next[key], got.Micro, "from %v, %v, goroutine %d", got.From, got.Kind, got.Version)
			next[key]++
		}
	}
	wg.Wait()
	for key, n := range next {
		require.Equal(t, msgs, n, "%v", key)
	}
	require.Len(t, next, 2*2*goroutines)
}

// TestActivationsAreRecycled: the dense tensors of an activation marked
// Own go back to the sender's pools once written (recycle.Debug poisons
// what is put back), and the receiver's come from its pools, for it to
// return; so do the driver's data the receiver gets, in a message marked
// Own; a message not marked Own, and the driver's data it sent, keep theirs.
func TestActivationsAreRecycled(t *testing.T) {
	recycle.Debug(true)
	defer recycle.Debug(false)
	ls, addrs := listeners(t, 2)
	p := open(t, Network{Addrs: addrs, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}, ls, quick(time.Minute)...)
	ctx := context.Background()
	spare := tensor.New(tensor.WithShape(32), tensor.Of(tensor.Float32))
	recycle.Put(spare) // in the pools, for the receiver (the same process here)
	act := tensor.New(tensor.WithShape(4, 8), tensor.WithBacking(make([]float32, 32)))
	data := tensor.New(tensor.WithShape(2, 8), tensor.WithBacking(make([]float32, 16)))
	spareData := tensor.New(tensor.WithShape(16), tensor.Of(tensor.Float32))
	recycle.Put(spareData) // the only pooled tensor of the data's size
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 0, Values: []gorgonia.Value{act}, Own: true}))
	kept := tensor.New(tensor.WithShape(4, 8), tensor.WithBacking(make([]float32, 32)))
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 1, Values: []gorgonia.Value{kept}}))
	require.NoError(t, p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 1, Micro: 0, Values: []gorgonia.Value{data}}))
	got, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.NoError(t, err)
	require.Equal(t, make([]float32, 32), got.Values[0].Data(), "the activation arrived intact")
	second, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.NoError(t, err)
	order, err := p.stages[1].Recv(ctx, transport.Driver, transport.Control)
	require.NoError(t, err)
	require.True(t, order.Own, "a received message's values are the receiver's own")
	require.Same(t, spareData, order.Values[0], "the receiver's data came from the pools")
	require.Equal(t, tensor.Shape{2, 8}, order.Values[0].Shape())
	require.Equal(t, make([]float32, 16), order.Values[0].Data(), "the data arrived intact")
	in := got.Values[0].(*tensor.Dense)
	require.True(t, in == spare || in == act, "the receiver's tensor came from the pools")
	// Sender and receiver share a process here: the receiver may have
	// taken the very tensor the sender put back.
	require.Eventually(t, func() bool { return in == act || math.IsNaN(float64(act.Float32s()[0])) }, 10*time.Second, time.Millisecond, "the sent activation went back to the pools")
	require.Equal(t, make([]float32, 16), data.Data(), "the driver's data is its own")
	recycle.Put(order.Values[0])
	require.Equal(t, make([]float32, 32), kept.Data(), "a message not marked Own leaves its tensors to the sender")
	recycle.Put(second.Values[0])
	recycle.Put(got.Values[0]) // the receiver owns it: Debug refuses a tensor put back twice
	require.Panics(t, func() { recycle.Put(got.Values[0]) })
}
