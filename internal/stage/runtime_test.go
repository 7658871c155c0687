package stage

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestMain fails the package's tests if any goroutine outlives them. They
// run with the recycled tensors poisoned (recycle.Debug), as asyncvm's do,
// so that a tensor used after it went back to the pools changes their
// results.
func TestMain(m *testing.M) {
	recycle.Debug(true)
	goleak.VerifyTestMain(m)
}

// serve starts the runtime of a one-stage plan of the test MLP on a local
// transport and returns the driver's endpoint and the data of a microbatch.
func serve(t *testing.T, cfg Config) (transport.Endpoint, []gorgonia.Value, chan error) {
	t.Helper()
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	if cfg.Solver == nil {
		cfg.Solver = gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1))
	}
	cfg.Microbatches = 1
	rt, err := New(plan, 0, cfg)
	require.NoError(t, err)
	net := transport.NewLocal(1)
	done := make(chan error, 1)
	go func() { done <- rt.Serve(context.Background(), net.Endpoint(0)) }()
	t.Cleanup(func() { net.Close(); rt.Close() })
	data := m.Batch(rand.New(rand.NewSource(1)))
	var mine []gorgonia.Value
	for _, fi := range DataInputs(plan, 0) {
		mine = append(mine, data[fi])
	}
	return net.Endpoint(transport.Driver), mine, done
}

func order(t *testing.T, d transport.Endpoint, body any, vals ...gorgonia.Value) transport.Message {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, d.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Values: vals, Body: body}))
	if _, ok := body.(Data); ok {
		return transport.Message{}
	}
	m, err := d.Recv(ctx, 0, transport.Reply)
	require.NoError(t, err)
	return m
}

// TestProtocol: data then work gives Parked with the loss and the events;
// Stop gives Stopped and Serve returns nil.
func TestProtocol(t *testing.T) {
	d, data, done := serve(t, Config{})
	order(t, d, Data{Micro: 0}, data...)
	m := order(t, d, Work{Segment: Segment{Schedule: "sequential", Delay: 1}, Actions: []schedule.Action{schedule.Forward(0), schedule.Backward(0), schedule.Update(0)}})
	p, ok := m.Body.(Parked)
	require.True(t, ok, "%T", m.Body)
	require.Len(t, p.Report.Losses, 1)
	require.Positive(t, p.Report.Losses[0].Value)
	require.Len(t, p.Report.Events, 3)
	require.Equal(t, 1, p.Report.Stats.Version)
	require.Equal(t, map[int]int{0: 1}, p.Report.Stats.Delays)

	require.NoError(t, d.Send(context.Background(), transport.Message{Kind: transport.Control, To: 0, Body: Stop{}}))
	last, err := d.Recv(context.Background(), 0, transport.Reply)
	require.NoError(t, err)
	require.IsType(t, Stopped{}, last.Body)
	require.NoError(t, <-done)
}

// TestFailedNamesTheAction: an action that fails answers Failed with the
// action and its step, and Serve returns the error; an unknown order is a
// failure outside any action.
func TestFailedNamesTheAction(t *testing.T) {
	d, _, done := serve(t, Config{})
	m := order(t, d, Work{Actions: []schedule.Action{schedule.Forward(3)}})
	f, ok := m.Body.(Failed)
	require.True(t, ok, "%T", m.Body)
	require.True(t, f.InAction)
	require.Equal(t, schedule.Forward(3), f.Action)
	require.Contains(t, f.Message, "no data for microbatch 3")
	require.Error(t, <-done)

	d, _, done = serve(t, Config{})
	m = order(t, d, "dance")
	f = m.Body.(Failed)
	require.False(t, f.InAction)
	require.Contains(t, f.Message, "unknown order string")
	require.Error(t, <-done)
}

// TestHookPanicIsAFailure: a panic in an action is caught.
func TestHookPanicIsAFailure(t *testing.T) {
	d, data, done := serve(t, Config{Hook: func(a schedule.Action) error {
		if a.Op == schedule.OpBackward {
			panic("injected")
		}
		return nil
	}})
	order(t, d, Data{Micro: 0}, data...)
	m := order(t, d, Work{Actions: []schedule.Action{schedule.Forward(0), schedule.Backward(0)}})
	f := m.Body.(Failed)
	require.Equal(t, schedule.Backward(0), f.Action)
	require.Contains(t, f.Message, "panic: injected")
	require.Len(t, f.Report.Events, 1, "the forward that ran is reported")
	require.Error(t, <-done)
}

// TestServeEndsWithAnErrorWithoutAStop: a stage whose orders stop coming
// without a Stop — its caller's context ended, as when its driver
// vanished — answers Stopped but returns an error naming the stage.
func TestServeEndsWithAnErrorWithoutAStop(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	rt, err := New(plan, 0, Config{Microbatches: 1, Solver: gorgonia.NewVanillaSolver()})
	require.NoError(t, err)
	defer rt.Close()
	net := transport.NewLocal(1)
	defer net.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, net.Endpoint(0)) }()
	cancel()
	last, err := net.Endpoint(transport.Driver).Recv(context.Background(), 0, transport.Reply)
	require.NoError(t, err)
	require.IsType(t, Stopped{}, last.Body)
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.EqualError(t, err, "stage 0: context canceled", "the caller stopped it: not a lost driver")
}

// TestFirstOrderTimeout: a stage whose driver sends no first order within
// Config.FirstOrderTimeout (a driver that connected, then stalled) stops
// with an error naming the stage and what it waited for; once the first
// order came, an idle driver is waited for.
func TestFirstOrderTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	start := time.Now() // before Serve starts its clock
	d, _, done := serve(t, Config{FirstOrderTimeout: timeout})
	select {
	case err := <-done:
		require.EqualError(t, err, "stage 0: lost the driver: the driver connected but sent no order within 200ms: is it stalled?")
		require.GreaterOrEqual(t, time.Since(start), timeout)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still waits for a first order")
	}
	last, err := d.Recv(context.Background(), 0, transport.Reply)
	require.NoError(t, err)
	require.IsType(t, Stopped{}, last.Body, "it tells the driver, in case it is only slow")

	d, data, done := serve(t, Config{FirstOrderTimeout: timeout})
	order(t, d, Data{Micro: 0}, data...)
	time.Sleep(3 * timeout) // idle after the first order
	m := order(t, d, Work{Segment: Segment{Schedule: "sequential", Delay: 1}, Actions: []schedule.Action{schedule.Forward(0), schedule.Backward(0), schedule.Update(0)}})
	require.IsType(t, Parked{}, m.Body)
	require.NoError(t, d.Send(context.Background(), transport.Message{Kind: transport.Control, To: 0, Body: Stop{}}))
	require.NoError(t, <-done)
}
