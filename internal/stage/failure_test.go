package stage

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The tests of this file make stages fail, or stop them, and check their
// last answer — Failed naming the action, its step and the peer to blame;
// Stopped with what ran — and what Serve returns. (runtime_test.go has the
// first cases: a forward without data, an unknown order, a panic, a
// context ended before any order, no first order in time.)

// failed is stage i's next answer, which must be Failed, and checks that
// Serve then returns an error saying the same.
func (p *pipeline) failed(i int) Failed {
	p.t.Helper()
	m := p.answer(i)
	f, ok := m.Body.(Failed)
	require.True(p.t, ok, "stage %d answered %T %+v, want Failed", i, m.Body, m.Body)
	err := p.exit(i)
	require.Error(p.t, err)
	require.Contains(p.t, err.Error(), f.Message)
	return f
}

// TestHookErrorFailsTheAction: an action whose Config.Hook returns an
// error — the backward of microbatch 3, in step 1 of two microbatches per
// step — fails: stage 0 answers Failed (from stage 0) naming the action,
// its step and no peer, with the error's message and a report of what ran
// before it in the Work (its version counts the update of step 0); Serve
// returns that error.
func TestHookErrorFailsTheAction(t *testing.T) {
	injected := errors.New("injected fault")
	p := start(t, setup{n: 2, config: func(int) Config {
		return Config{Hook: func(a schedule.Action) error {
			if a == schedule.Backward(3) {
				return injected
			}
			return nil
		}}
	}})
	data := p.micros(41, 4)
	for m, d := range data {
		p.feed(m, d, false)
	}
	seg := Segment{Schedule: "gpipe"}
	p.work(0, seg, schedule.Forward(0), schedule.Forward(1), schedule.Backward(0), schedule.Backward(1), schedule.Update(0))
	p.send(0, Work{Segment: seg, Actions: []schedule.Action{schedule.Forward(2), schedule.Forward(3), schedule.Backward(2), schedule.Backward(3), schedule.Update(1)}})
	f := p.failed(0)
	require.True(t, f.InAction)
	require.Equal(t, schedule.Backward(3), f.Action)
	require.Equal(t, 1, f.Step)
	require.Equal(t, "injected fault", f.Message)
	require.Equal(t, -1, f.Peer, "no other stage to blame")
	require.Equal(t, []schedule.Action{schedule.Forward(2), schedule.Forward(3), schedule.Backward(2)}, actions(f.Report))
	require.Equal(t, []int{2, 3}, micros(f.Report.Losses))
	require.Equal(t, 1, f.Report.Stats.Version)
	err := p.exit(0)
	require.ErrorIs(t, err, injected)
	require.EqualError(t, err, "B3: injected fault")
}

// TestMalformedOrdersFail: orders a stage cannot carry out fail it with
// Failed naming the action (or none: an evaluation is no action) and the
// reason, and Serve returns the error: a backward of a microbatch never
// forwarded; a forward whose only data came for an evaluation; data of
// the wrong shape; data with a NaN (a non-finite loss); an evaluation with
// no data.
func TestMalformedOrdersFail(t *testing.T) {
	for _, c := range []struct {
		name     string
		order    func(p *pipeline, data []gorgonia.Value)
		inAction bool
		action   schedule.Action
		want     string
	}{
		{"backward before forward", func(p *pipeline, _ []gorgonia.Value) {
			p.send(0, Work{Actions: []schedule.Action{schedule.Backward(0)}})
		}, true, schedule.Backward(0), "nothing kept for microbatch 0"},
		{"evaluation data", func(p *pipeline, data []gorgonia.Value) {
			p.feed(0, data, true)
			p.send(0, Work{Actions: []schedule.Action{schedule.Forward(0)}})
		}, true, schedule.Forward(0), "no data for microbatch 0"},
		{"wrong shape", func(p *pipeline, data []gorgonia.Value) {
			x := tensor.New(tensor.WithShape(2, 16), tensor.WithBacking(make([]float64, 32)))
			p.send(0, Data{Micro: 0}, x, data[1])
			p.send(0, Work{Actions: []schedule.Action{schedule.Forward(0)}})
		}, true, schedule.Forward(0), "input 0"},
		{"NaN", func(p *pipeline, data []gorgonia.Value) {
			floats(p.t, data[0])[5] = math.NaN()
			p.feed(0, data, false)
			p.send(0, Work{Actions: []schedule.Action{schedule.Forward(0)}})
		}, true, schedule.Forward(0), "the loss is NaN"},
		{"evaluation without data", func(p *pipeline, _ []gorgonia.Value) {
			p.send(0, Evaluate{Count: 1})
		}, false, schedule.Action{}, "stage 0: evaluation: internal: no data for microbatch 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, setup{})
			c.order(p, p.micros(43, 1)[0])
			f := p.failed(0)
			require.Equal(t, c.inAction, f.InAction)
			require.Equal(t, c.action, f.Action)
			require.Contains(t, f.Message, c.want)
			require.Equal(t, -1, f.Peer)
		})
	}
}

// TestWrongMicrobatchFromAPeerFails: stage 0 served, the test playing
// stage 1 and answering the forwards of microbatches 0 and 1 with the
// gradient of microbatch 1 first: stage 0's backward of microbatch 0
// fails, naming what arrived.
func TestWrongMicrobatchFromAPeerFails(t *testing.T) {
	p := start(t, setup{stages: 2, n: 2, played: []int{1}})
	data := p.micros(45, 2)
	for m, d := range data {
		p.feed(m, d, false)
	}
	p.send(0, Work{Actions: []schedule.Action{schedule.Forward(0), schedule.Forward(1), schedule.Backward(0), schedule.Backward(1)}})
	acts := []transport.Message{recvFrom(t, p.peer(1), 0, transport.Activation), recvFrom(t, p.peer(1), 0, transport.Activation)}
	require.Equal(t, 1, acts[1].Micro)
	require.NoError(t, p.peer(1).Send(context.Background(), transport.Message{Kind: transport.Gradient, To: 0, Micro: 1, Values: []gorgonia.Value{acts[1].Values[0], nil}}))
	f := p.failed(0)
	require.Equal(t, schedule.Backward(0), f.Action)
	require.Equal(t, 0, f.Step)
	require.Contains(t, f.Message, "the gradient link from stage 1 delivered microbatch 1, want 0")
	require.Equal(t, []schedule.Action{schedule.Forward(0), schedule.Forward(1)}, actions(f.Report))
}

// TestLinkFailureNamesThePeer: a stage whose forward cannot send its
// activations — the consumer's endpoint is closed — fails naming the
// consumer as the peer to blame (a consequence, not a cause), and Serve
// returns the link's error.
func TestLinkFailureNamesThePeer(t *testing.T) {
	p := start(t, setup{stages: 2, played: []int{1}})
	require.NoError(t, p.peer(1).Close())
	p.feed(0, p.micros(47, 1)[0], false)
	p.send(0, Work{Actions: []schedule.Action{schedule.Forward(0), schedule.Backward(0)}})
	f := p.failed(0)
	require.True(t, f.InAction)
	require.Equal(t, schedule.Forward(0), f.Action)
	require.Equal(t, 1, f.Peer)
	require.Contains(t, f.Message, "the receiver is closed")
	var le *transport.LinkError
	require.ErrorAs(t, p.exit(0), &le)
	require.Equal(t, transport.Peer(0), le.From)
	require.Equal(t, transport.Peer(1), le.To)
	require.Equal(t, transport.Activation, le.Kind)
}

// enteredBackward returns a Config whose Hook closes the returned channel
// when the backward of microbatch 0 starts: the stage then waits for its
// gradient.
func enteredBackward() (func(int) Config, <-chan struct{}) {
	entered := make(chan struct{})
	var once sync.Once
	return func(i int) Config {
		if i != 0 {
			return Config{}
		}
		return Config{Hook: func(a schedule.Action) error {
			if a == schedule.Backward(0) {
				once.Do(func() { close(entered) })
			}
			return nil
		}}
	}, entered
}

// TestStopWhileWaitingForAPeer: of two stages, stage 1 fails its forward
// (answering Failed) while stage 0, its forward done, waits for a gradient
// that will never come; the driver's Stop ends stage 0's wait: it answers
// Stopped, reporting the forward, and Serve returns nil.
func TestStopWhileWaitingForAPeer(t *testing.T) {
	injected := errors.New("injected fault")
	cfg0, entered := enteredBackward()
	p := start(t, setup{stages: 2, config: func(i int) Config {
		if i == 1 {
			return Config{Hook: func(schedule.Action) error { return injected }}
		}
		return cfg0(i)
	}})
	p.feed(0, p.micros(49, 1)[0], false)
	acts := []schedule.Action{schedule.Forward(0), schedule.Backward(0), schedule.Update(0)}
	for i := range p.plan.Stages {
		p.send(i, Work{Segment: Segment{Schedule: "sequential"}, Actions: acts})
	}
	f := p.failed(1)
	require.Equal(t, schedule.Forward(0), f.Action)
	require.ErrorIs(t, p.exit(1), injected)

	<-entered
	report := p.stop(0)
	require.Equal(t, []schedule.Action{schedule.Forward(0)}, actions(report))
	require.Equal(t, 0, report.Stats.Version)
}

// TestCancelWhileWaitingForAPeer: a stage waiting in a backward for its
// peer when its caller's context ends answers Stopped, reporting what ran,
// and Serve returns the context's error naming the stage.
func TestCancelWhileWaitingForAPeer(t *testing.T) {
	cfg, entered := enteredBackward()
	p := start(t, setup{stages: 2, played: []int{1}, config: cfg})
	p.feed(0, p.micros(51, 1)[0], false)
	p.send(0, Work{Actions: []schedule.Action{schedule.Forward(0), schedule.Backward(0)}})
	<-entered
	p.cancel()
	m := p.answer(0)
	s, ok := m.Body.(Stopped)
	require.True(t, ok, "answered %T %+v", m.Body, m.Body)
	require.Equal(t, []schedule.Action{schedule.Forward(0)}, actions(s.Report))
	err := p.exit(0)
	require.ErrorIs(t, err, context.Canceled)
	// The caller stopped it: not a lost driver, although its order reader
	// ended with the same context.
	require.EqualError(t, err, "stage 0: context canceled")
}

// scriptedDriver is an endpoint whose receives of the driver's orders
// follow, in turn, the entries of a script; after them, and for a nil
// entry, they receive the next real order.
type scriptedDriver struct {
	transport.Endpoint
	mu     sync.Mutex
	script []*scripted
}

// scripted is a receive that returns err, once after is closed (nil: at
// once).
type scripted struct {
	err   error
	after <-chan struct{}
}

func (e *scriptedDriver) Recv(ctx context.Context, from transport.Peer, k transport.Kind) (transport.Message, error) {
	if from == transport.Driver && k == transport.Control {
		e.mu.Lock()
		var next *scripted
		if len(e.script) > 0 {
			next, e.script = e.script[0], e.script[1:]
		}
		e.mu.Unlock()
		if next != nil {
			if next.after != nil {
				select {
				case <-next.after:
				case <-ctx.Done():
					return transport.Message{}, ctx.Err()
				}
			}
			return transport.Message{}, next.err
		}
	}
	return e.Endpoint.Recv(ctx, from, k)
}

// TestLostDriverIsAnError: a stage whose link to the driver breaks after
// an order it answered replies Stopped (in case the driver only lost its
// orders) and Serve returns an error naming the stage and the link.
func TestLostDriverIsAnError(t *testing.T) {
	broken := &transport.LinkError{From: transport.Driver, To: 0, Kind: transport.Control, Err: errors.New("connection reset")}
	answered := make(chan struct{})
	p := start(t, setup{wrap: func(_ int, ep transport.Endpoint) transport.Endpoint {
		return &scriptedDriver{Endpoint: ep, script: []*scripted{nil, {err: broken, after: answered}}}
	}})
	require.IsType(t, Pulled{}, p.ask(0, Pull{}).Body)
	close(answered)
	require.IsType(t, Stopped{}, p.answer(0).Body)
	err := p.exit(0)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.EqualError(t, err, "stage 0: lost the driver: transport: link driver → stage 0 (control): connection reset")
}

// TestIdleDriverIsNoFailure: receives of the driver's orders that time out
// (transport.ErrTimeout: the link is up, the driver idle) are no failure:
// the stage waits on and answers the orders that come.
func TestIdleDriverIsNoFailure(t *testing.T) {
	idle := &scripted{err: &transport.LinkError{From: transport.Driver, To: 0, Kind: transport.Control, Err: transport.ErrTimeout}}
	p := start(t, setup{wrap: func(_ int, ep transport.Endpoint) transport.Endpoint {
		return &scriptedDriver{Endpoint: ep, script: []*scripted{idle, idle, nil, idle}}
	}})
	require.IsType(t, Pulled{}, p.ask(0, Pull{}).Body)
	require.IsType(t, Pulled{}, p.ask(0, Pull{}).Body)
	p.stop(0)
}
