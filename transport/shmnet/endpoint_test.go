//go:build linux

package shmnet

import (
	"bytes"
	"context"
	"encoding/gob"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
)

type note struct{ Text string }

func init() { gob.Register(note{}) }

// f32s are n float32s, among them a NaN with a payload and a negative
// zero, which must arrive bit for bit.
func f32s(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch i % 4 {
		case 0:
			s[i] = math.Float32frombits(0x7fc0_0bad)
		case 1:
			s[i] = float32(math.Copysign(0, -1))
		default:
			s[i] = float32(i) / 7
		}
	}
	return s
}

func bits(s []float32) []uint32 {
	out := make([]uint32, len(s))
	for i, x := range s {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestMessagesArriveWhole: every kind of value (dense tensors of each
// dtype, a view, scalars, a scalar-shaped tensor, nil), a body, and a
// tensor larger than the ring, arrive as sent, bit for bit, and in order
// per sender and kind, while Sends never wait for the receiver.
func TestMessagesArriveWhole(t *testing.T) {
	n := testNetwork(2)
	p := open(t, n, quick(10*time.Second)...)
	ctx := context.Background()
	big := tensor.New(tensor.WithShape(3, 1<<18), tensor.WithBacking(f32s(3<<18))) // 3 MiB through a 2 MiB ring
	wide := tensor.New(tensor.WithShape(4, 6), tensor.WithBacking(f32s(24)))
	sliced, err := wide.Slice(nil, gorgonia.S(1, 3))
	require.NoError(t, err)
	vals := []gorgonia.Value{
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, -2, 3, math.Inf(1), 5, 6})),
		tensor.New(tensor.WithShape(5), tensor.WithBacking([]int{1, -2, 3, 1 << 40, 5})),
		tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{7, -8})),
		tensor.New(tensor.WithShape(2), tensor.WithBacking([]int32{9, -10})),
		sliced.(*tensor.Dense),
		gorgonia.NewF64(2.5), gorgonia.NewF32(-1), gorgonia.NewI(3), gorgonia.NewI64(4), gorgonia.NewI32(5),
		tensor.New(tensor.FromScalar(float32(0.25))),
		nil,
	}
	const sends = 6
	start := time.Now()
	for m := range sends {
		require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: m, Version: m + 1, Values: []gorgonia.Value{big}}))
	}
	require.Less(t, time.Since(start), 2*time.Second, "Send queues: 18 MiB sent with no one reading")
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Gradient, To: 1, Micro: 99, Values: vals, Body: note{"hello"}}))
	g, err := p.stages[1].Recv(ctx, 0, transport.Gradient)
	require.NoError(t, err)
	require.Equal(t, 99, g.Micro)
	require.True(t, g.Own, "a received message's values are the receiver's own")
	require.Equal(t, note{"hello"}, g.Body)
	require.Len(t, g.Values, len(vals))
	for i, v := range vals {
		if d, ok := v.(*tensor.Dense); ok && d.RequiresIterator() {
			v = d.Materialize().(*tensor.Dense)
		}
		if v == nil {
			require.Nil(t, g.Values[i])
			continue
		}
		require.Equal(t, v.Shape(), g.Values[i].Shape(), "value %d", i)
		require.Equal(t, v.Dtype(), g.Values[i].Dtype(), "value %d", i)
		if f, ok := v.Data().([]float32); ok { // NaNs compare by their bits
			require.Equal(t, bits(f), bits(g.Values[i].Data().([]float32)), "value %d", i)
		} else {
			require.Equal(t, v.Data(), g.Values[i].Data(), "value %d", i)
		}
		require.IsType(t, v, g.Values[i], "value %d", i)
	}
	for m := range sends {
		a, err := p.stages[1].Recv(ctx, 0, transport.Activation)
		require.NoError(t, err)
		require.Equal(t, m, a.Micro, "FIFO per sender and kind")
		require.Equal(t, m+1, a.Version)
		require.True(t, bytes.Equal(view(big.Float32s()), view(a.Values[0].(*tensor.Dense).Float32s())), "bit for bit") // memequal: cheap under -race
	}
	// Every link works both ways; the driver reaches every stage.
	require.NoError(t, p.stages[1].Send(ctx, transport.Message{Kind: transport.Gradient, To: 0, Micro: 1}))
	require.NoError(t, p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 1, Body: note{"go"}}))
	require.NoError(t, p.stages[1].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Body: note{"done"}}))
	m, err := p.stages[0].Recv(ctx, transport.AnyPeer, transport.Gradient)
	require.NoError(t, err)
	require.Equal(t, transport.Peer(1), m.From)
	m, err = p.stages[1].Recv(ctx, transport.Driver, transport.Control)
	require.NoError(t, err)
	require.Equal(t, note{"go"}, m.Body)
	m, err = p.driver.Recv(ctx, 1, transport.Reply)
	require.NoError(t, err)
	require.Equal(t, note{"done"}, m.Body)
}

// TestSendRefuses: what a transport cannot carry, and a peer with no
// link, fail Send at once.
func TestSendRefuses(t *testing.T) {
	p := open(t, testNetwork(3), quick(time.Second)...)
	ctx := context.Background()
	err := p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 2})
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.Contains(t, err.Error(), "no such link: stage 0 is linked to driver, stage 1")
	err = p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Values: []gorgonia.Value{tensor.New(tensor.WithShape(2), tensor.WithBacking([]bool{true, false}))}})
	require.ErrorContains(t, err, "value 0: dtype bool")
	err = p.stages[0].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Body: struct{ X int }{1}})
	require.ErrorContains(t, err, "is it registered with gob.Register?")
	require.NoError(t, p.stages[0].Close())
	require.ErrorIs(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver}), transport.ErrClosed)
	_, err = p.stages[0].Recv(ctx, transport.Driver, transport.Control)
	require.ErrorIs(t, err, transport.ErrClosed)
}

// TestRecvTimeout: a Recv for which nothing comes returns, after the
// receive timeout, a LinkError caused by transport.ErrTimeout; the link
// goes on working.
func TestRecvTimeout(t *testing.T) {
	p := open(t, testNetwork(1), quick(200*time.Millisecond)...)
	ctx := context.Background()
	start := time.Now()
	_, err := p.driver.Recv(ctx, 0, transport.Reply)
	require.ErrorIs(t, err, transport.ErrTimeout)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, transport.Peer(0), le.From)
	require.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Body: note{"late"}}))
	m, err := p.driver.Recv(ctx, 0, transport.Reply)
	require.NoError(t, err)
	require.Equal(t, note{"late"}, m.Body)
}

// TestCloseDelivers: what a peer sent before it closed is read after, and
// then Recv says it closed.
func TestCloseDelivers(t *testing.T) {
	p := open(t, testNetwork(1), quick(5*time.Second)...)
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Micro: i}))
	}
	closed := make(chan error)
	go func() { closed <- p.stages[0].Close() }()
	for i := range 3 {
		m, err := p.driver.Recv(ctx, 0, transport.Reply)
		require.NoError(t, err)
		require.Equal(t, i, m.Micro)
	}
	require.NoError(t, <-closed, "the driver read everything")
	_, err := p.driver.Recv(ctx, 0, transport.Reply)
	require.ErrorContains(t, err, "stage 0 (pid")
	require.ErrorContains(t, err, "closed its endpoint: nothing more will come")
	err = p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 0})
	require.ErrorContains(t, err, "closed its endpoint")
}

// TestHandshakeRefuses: a peer of another plan, or with another setting,
// is refused on both sides with a transport.MismatchError naming what
// differs; so is a peer with other links.
func TestHandshakeRefuses(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(*Network)
		setting string
		says    string
	}{
		{"plan", func(n *Network) { n.Identity.Plan = "other" }, transport.PlanSetting, "cut the model differently"},
		{"setting", func(n *Network) { n.Identity.Settings = []transport.Setting{{Name: "method", Value: "gpipe"}} }, "method", "runs with another method: "},
		{"links", func(n *Network) { n.Links = nil }, "", "the processes disagree on which stages exchange tensors"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := testNetwork(2)
			other := n
			c.change(&other)
			before, beforeRings := openFDs(t)
			errs := make(chan error, 2)
			go func() {
				_, err := Open(context.Background(), 1, other, quick(time.Second)...)
				errs <- err
			}()
			_, err := Open(context.Background(), 0, n, quick(time.Second)...)
			errs <- err
			refusals := 0
			for range 2 {
				err := <-errs
				require.Error(t, err)
				require.Contains(t, err.Error(), c.says)
				if strings.Contains(err.Error(), "refused the handshake: ") {
					refusals++ // the dialer, told why
					continue
				}
				if c.setting != "" { // the stage that refused it
					var me *transport.MismatchError
					require.ErrorAs(t, err, &me)
					require.Equal(t, c.setting, me.Setting)
				}
			}
			require.Equal(t, 1, refusals, "stage 1 refuses stage 0 and says why")
			after, afterRings := openFDs(t)
			require.Equal(t, before, after, "a refused handshake leaves no fd open")
			require.Equal(t, beforeRings, afterRings, "nor a ring mapped")
		})
	}
}

// TestNeverStarted: a stage that never starts is named, as a connect
// timeout, by the driver and by the stage below it.
func TestNeverStarted(t *testing.T) {
	n := testNetwork(2)
	before, _ := openFDs(t)
	errs := make(chan error, 2)
	opts := []Option{WithConnectTimeout(300 * time.Millisecond)}
	go func() {
		_, err := Open(context.Background(), transport.Driver, n, opts...)
		errs <- err
	}()
	_, err := Open(context.Background(), 0, n, opts...)
	errs <- err
	for range 2 {
		err := <-errs
		require.ErrorIs(t, err, transport.ErrConnectTimeout)
		require.Contains(t, err.Error(), "not connected within 300ms (the connect timeout): ")
		require.Contains(t, err.Error(), "stage 1 at @"+n.Name+"-1 did not answer (is it running")
	}
	after, _ := openFDs(t)
	require.Equal(t, before, after)
}

// TestNothingLeaks: a pipeline opened, used and closed leaves no fd open
// and no ring mapped.
func TestNothingLeaks(t *testing.T) {
	before, beforeRings := openFDs(t)
	p := open(t, testNetwork(3), quick(5*time.Second)...)
	_, rings := openFDs(t)
	require.Equal(t, beforeRings+2*5, rings, "each of the 5 links is mapped by both its ends")
	ctx := context.Background()
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Values: []gorgonia.Value{tensor.New(tensor.WithShape(4), tensor.WithBacking(f32s(4)))}}))
	_, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.NoError(t, err)
	p.close()
	after, afterRings := openFDs(t)
	require.Equal(t, before, after, "fds")
	require.Equal(t, beforeRings, afterRings, "rings")
}

// TestRingsArePopulated: an open link's rings are in memory in both
// processes (here both ends) before the first message: a ring's first
// pass would otherwise take a page fault per page on each side.
func TestRingsArePopulated(t *testing.T) {
	open(t, testNetwork(1), quick(5*time.Second)...)
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	mappings := 0
	// Each mapping's header line names the file; its Size and Rss follow.
	name, size := "", 0
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 6 && strings.Contains(line, "memfd:pipemare-ring"):
			name = line
		case len(f) >= 1 && !strings.HasSuffix(f[0], ":"):
			name = ""
		case name != "" && f[0] == "Size:":
			size, err = strconv.Atoi(f[1])
			require.NoError(t, err)
		case name != "" && f[0] == "Rss:":
			rss, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			require.Equal(t, size, rss, "the ring %s is in memory whole (kB)", name)
			mappings++
		}
	}
	require.Equal(t, 2, mappings, "the driver's link to stage 0, mapped by both")
}

// TestQueuedTensorsStayTheSenders: the tensors of a message marked Own
// that Send queues (the ring has no room for it) stay the transport's
// until the writer has copied them into the ring: none goes back to the
// pools before, where the next recycle.Get would hand it out while it is
// still to be sent. recycle.Debug poisons (NaNs) what is put back, and
// panics at a second Put: a tensor put back early arrives poisoned, or
// fails the test there.
func TestQueuedTensorsStayTheSenders(t *testing.T) {
	recycle.Debug(true)
	defer recycle.Debug(false)
	p := open(t, testNetwork(2), quick(10*time.Second)...)
	ctx := context.Background()
	const sends, n = 3, 3 << 18 // 3 MiB each through a 2 MiB ring: queued
	for m := range sends {
		v := recycle.Get(tensor.Float32, tensor.Shape{3, 1 << 18})
		copy(v.Float32s(), f32s(n))
		require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: m, Values: []gorgonia.Value{v}, Own: true}))
	}
	for m := range sends {
		a, err := p.stages[1].Recv(ctx, 0, transport.Activation)
		require.NoError(t, err)
		require.Equal(t, m, a.Micro)
		require.True(t, bytes.Equal(view(f32s(n)), view(a.Values[0].(*tensor.Dense).Float32s())), "message %d arrived as sent, not as what its tensor held once back in the pools", m)
	}
}
