package stage

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The tests of this file cut a model in two stages — the test MLP: stage
// 0 is fc1 (x·W1 + b1, and the mask of its Rectify), stage 1 the rest and
// the cost — and check what the stages exchange (activations, gradients,
// a shared learnable's sums and versions): both stages served, the test
// their driver; or one served and the test playing the other.

// TestTwoStagesTrainLikePlainGorgonia: the test, as the driver, feeds each
// stage its data (x to stage 0, the labels to stage 1) and hands each its
// action list of three steps of a synchronous schedule in one Work; the
// stages exchange activations and gradients by themselves and each answers
// Parked: stage 0 with its events and no loss, stage 1 with every
// microbatch's loss. Losses and weights are plain Gorgonia's.
func TestTwoStagesTrainLikePlainGorgonia(t *testing.T) {
	const n, steps = 2, 3
	for _, s := range []schedule.Schedule{schedule.GPipe(), schedule.OneFOneB()} {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%v", s.Name, keep), func(t *testing.T) {
				p := start(t, setup{stages: 2, n: n, config: func(int) Config { return Config{KeepActivations: keep} }})
				require.Equal(t, []int{0}, DataInputs(p.plan, 0), "stage 0 reads x")
				require.Equal(t, []int{1}, DataInputs(p.plan, 1), "stage 1 reads the labels")
				ref := p.reference(nil)
				data := p.micros(9, n*steps)
				reports := p.steps(s, data, 0, steps)

				lists := s.Actions(2, n, steps)
				for i, r := range reports {
					require.Equal(t, lists[i], actions(r), "stage %d ran its list", i)
					require.Equal(t, steps, r.Stats.Version)
					require.Equal(t, map[int]int{0: n * steps}, r.Stats.Delays)
					require.Positive(t, r.Stats.PeakActivationBytes)
				}
				require.Empty(t, reports[0].Losses, "the first stage computes no loss")
				got := losses(reports[1])
				require.Len(t, got, n*steps)
				for k := 0; k < steps; k++ {
					for j, l := range ref.step(data[n*k : n*k+n]) {
						require.InDelta(t, l, got[n*k+j], 1e-12, "the loss of microbatch %d", n*k+j)
					}
				}
				requireClose(t, ref.weights(), p.weights(), 1e-12, "weight")
				p.stop(0)
				p.stop(1)
			})
		}
	}
}

// TestSharedLearnableTrainsLikePlainGorgonia: the test's tied model reads
// one learnable in both stages — stage 0 owns it, stage 1 holds a
// replica. Each Work tells stage 1 the owner's version its forwards read;
// at each update stage 1 sends the owner its gradient sums and the owner
// sends the new version back (Shared messages). Losses and weights are
// plain Gorgonia's, and stage 1 reports the delays its replica's reads
// saw: none, as the owner's. Its snapshot holds the owner's last version
// of the replica.
func TestSharedLearnableTrainsLikePlainGorgonia(t *testing.T) {
	const n, steps = 2, 3
	p := start(t, setup{build: testmodels.Tied, stages: 2, n: n, config: func(int) Config {
		s, err := solvers.NewSGD(solvers.WithLearnRate(lr)) // gorgonia's VanillaSolver, and can save
		require.NoError(t, err)
		return Config{Solver: s}
	}})
	require.Len(t, p.plan.Shared, 1)
	require.Equal(t, 0, p.plan.Shared[0].Owner)
	require.Equal(t, []int{0}, p.plan.Owners(1))
	ref := p.reference(testmodels.Tied)
	data := p.micros(17, n*steps)
	reports := p.steps(schedule.OneFOneB(), data, 0, steps)
	got := losses(reports[1])
	for k := 0; k < steps; k++ {
		for j, l := range ref.step(data[n*k : n*k+n]) {
			require.InDelta(t, l, got[n*k+j], 1e-12, "the loss of microbatch %d", n*k+j)
		}
	}
	requireClose(t, ref.weights(), p.weights(), 1e-12, "weight")
	require.Equal(t, map[int]int{0: n * steps}, reports[1].Stats.SharedDelays)
	require.Equal(t, reports[0].Stats.Delays, reports[1].Stats.SharedDelays)
	owner := p.weights()
	st := p.plan.Stages[1]
	m := p.ask(1, Save{})
	saved, ok := m.Body.(Saved)
	require.True(t, ok, "answered %T %+v", m.Body, m.Body)
	replicas := 0
	for j, at := range st.LearnableIndex {
		if st.Replica(j) {
			replicas++
			requireBits(t, owner[at:at+1], tensors(saved.Snapshot.Weights[j:j+1]), "the replica's snapshot is the owner's last version")
		}
	}
	require.Equal(t, 1, replicas)
	p.stop(0)
	p.stop(1)
}

// TestFirstStageSendsActivationsAndTakesGradients: stage 0 served, the test
// playing stage 1. Stage 0's forward sends stage 1 one Activation message
// with its outputs — x·W1 + b1 and the Rectify mask, what plain Gorgonia
// computes — for the microbatch, at its version; its backward waits for
// the Gradient message and applies what it says: W1 moves by −lr·xᵀG and
// b1 by −lr·ΣG for the gradient G the test sent (the mask has none).
func TestFirstStageSendsActivationsAndTakesGradients(t *testing.T) {
	p := start(t, setup{stages: 2, played: []int{1}})
	st := p.plan.Stages[0]
	require.Len(t, st.Outputs, 2)
	require.Equal(t, []string{"mlp.fc1.W", "mlp.fc1.b"}, []string{st.Learnables[0].Name(), st.Learnables[1].Name()})
	ref := p.reference(nil, st.Outputs[0].Key, st.Outputs[1].Key)
	w0 := p.pull(0)
	data := p.micros(11, 1)
	x := data[0][0]
	_, _, want := ref.run(data[0])
	requireClose(t, []gorgonia.Value{affine(t, x, w0[0], w0[1])}, want[:1], 1e-12, "x·W1 + b1")

	p.feed(0, data[0], false)
	p.send(0, Work{Segment: Segment{Schedule: "sequential"}, Actions: []schedule.Action{schedule.Forward(0), schedule.Backward(0), schedule.Update(0)}})
	act := recvFrom(t, p.peer(1), 0, transport.Activation)
	require.Equal(t, transport.Peer(1), act.To)
	require.Equal(t, 0, act.Micro)
	require.Equal(t, 0, act.Version)
	require.True(t, act.Own, "the activations are the receiver's")
	require.Len(t, act.Values, 2)
	for i, v := range act.Values {
		require.Equal(t, st.Outputs[i].Shape, v.Shape(), "output %d", i)
	}
	requireClose(t, want, act.Values, 1e-12, "activation")

	g := randomMatrix(rand.New(rand.NewSource(3)), 4, 16)
	send := clones(t, []gorgonia.Value{g})
	require.NoError(t, p.peer(1).Send(context.Background(), transport.Message{Kind: transport.Gradient, To: 0, Micro: 0, Values: []gorgonia.Value{send[0], nil}, Own: true}))
	r := p.parked(0)
	require.Equal(t, []schedule.Action{schedule.Forward(0), schedule.Backward(0), schedule.Update(0)}, actions(r))
	require.Empty(t, r.Losses)
	require.Equal(t, 1, r.Stats.Version)

	wantW, wantB := clones(t, w0[:1])[0], clones(t, w0[1:2])[0]
	step(t, wantW, xtG(t, x, g))
	step(t, wantB, colSum(t, g))
	requireClose(t, []gorgonia.Value{wantW, wantB}, p.pull(0), 1e-12, "weight")
	p.stop(0)
}

// TestLastStageTakesActivationsAndSendsGradients: stage 1 served, the test
// playing stage 0 and sending plain Gorgonia's activations of two
// microbatches. Stage 1's losses are plain Gorgonia's; for each backward it
// sends stage 0 one Gradient message, in microbatch order, whose gradient
// G of x·W1 + b1 is the cost's, seeded with 1/N: xᵀG and ΣG are plain
// Gorgonia's gradients of W1 and b1 over N. Its own weights move as plain
// Gorgonia's do.
func TestLastStageTakesActivationsAndSendsGradients(t *testing.T) {
	const n = 2
	p := start(t, setup{stages: 2, n: n, played: []int{0}})
	st := p.plan.Stages[0]
	ref := p.reference(nil, st.Outputs[0].Key, st.Outputs[1].Key)
	data := p.micros(13, n)
	for m, d := range data {
		p.feed(m, d, false)
	}
	p.send(1, Work{Segment: Segment{Schedule: "gpipe"}, Actions: []schedule.Action{schedule.Forward(0), schedule.Forward(1), schedule.Backward(0), schedule.Backward(1), schedule.Update(0)}})
	var wantLoss []float64
	var wantGrads [][]gorgonia.Value
	for m, d := range data {
		loss, grads, acts := ref.run(d)
		wantLoss, wantGrads = append(wantLoss, loss), append(wantGrads, grads)
		require.NoError(t, p.peer(0).Send(context.Background(), transport.Message{Kind: transport.Activation, To: 1, Micro: m, Values: acts, Own: true}))
	}
	for m, d := range data {
		msg := recvFrom(t, p.peer(0), 1, transport.Gradient)
		require.Equal(t, m, msg.Micro)
		require.Equal(t, 0, msg.Version)
		require.Len(t, msg.Values, 2, "a gradient per activation the link carries")
		g := msg.Values[0]
		require.NotNil(t, g)
		require.Equal(t, st.Outputs[0].Shape, g.Shape())
		requireClose(t, []gorgonia.Value{scaled(t, wantGrads[m][0], 1.0/n), scaled(t, wantGrads[m][1], 1.0/n)},
			[]gorgonia.Value{xtG(t, d[0], g), colSum(t, g)}, 1e-12, fmt.Sprintf("microbatch %d: gradient of fc1 through G", m))
	}
	r := p.parked(1)
	require.Len(t, r.Losses, n)
	for j, l := range r.Losses {
		require.InDelta(t, wantLoss[j], l.Value, 1e-12, "the loss of microbatch %d", j)
	}
	ref.step(data)
	all := ref.weights()
	var want []gorgonia.Value
	for _, at := range p.plan.Stages[1].LearnableIndex {
		want = append(want, all[at])
	}
	requireClose(t, want, p.pull(1), 1e-12, "stage 1's weight")
	p.stop(1)
}

// recvFrom is the next message of kind k from stage from on ep.
func recvFrom(t *testing.T, ep transport.Endpoint, from int, k transport.Kind) transport.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	m, err := ep.Recv(ctx, transport.Peer(from), k)
	require.NoError(t, err, "waiting for the %v of stage %d", k, from)
	require.Equal(t, k, m.Kind)
	require.Equal(t, transport.Peer(from), m.From)
	return m
}

func randomMatrix(rng *rand.Rand, rows, cols int) *tensor.Dense {
	d := make([]float64, rows*cols)
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d))
}

// affine is x·w + b for x (r, a), w (a, c) and b (1, c).
func affine(t *testing.T, x, w, b gorgonia.Value) gorgonia.Value {
	r, a, c := x.Shape()[0], x.Shape()[1], w.Shape()[1]
	xs, ws, bs := floats(t, x), floats(t, w), floats(t, b)
	out := make([]float64, r*c)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			s := 0.0
			for k := 0; k < a; k++ {
				s += xs[i*a+k] * ws[k*c+j]
			}
			out[i*c+j] = s + bs[j]
		}
	}
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(out))
}

// xtG is xᵀ·g for x (r, a) and g (r, c): W's gradient when g is that of
// x·W + b.
func xtG(t *testing.T, x, g gorgonia.Value) gorgonia.Value {
	r, a, c := x.Shape()[0], x.Shape()[1], g.Shape()[1]
	xs, gs := floats(t, x), floats(t, g)
	out := make([]float64, a*c)
	for i := 0; i < a; i++ {
		for j := 0; j < c; j++ {
			for k := 0; k < r; k++ {
				out[i*c+j] += xs[k*a+i] * gs[k*c+j]
			}
		}
	}
	return tensor.New(tensor.WithShape(a, c), tensor.WithBacking(out))
}

// colSum is g's rows summed, (1, c): b's gradient.
func colSum(t *testing.T, g gorgonia.Value) gorgonia.Value {
	r, c := g.Shape()[0], g.Shape()[1]
	gs := floats(t, g)
	out := make([]float64, c)
	for k := 0; k < r; k++ {
		for j := 0; j < c; j++ {
			out[j] += gs[k*c+j]
		}
	}
	return tensor.New(tensor.WithShape(1, c), tensor.WithBacking(out))
}

func scaled(t *testing.T, v gorgonia.Value, s float64) gorgonia.Value {
	c := clones(t, []gorgonia.Value{v})[0]
	d := floats(t, c)
	for i := range d {
		d[i] *= s
	}
	return c
}

// step is vanilla SGD: w −= lr·g.
func step(t *testing.T, w, g gorgonia.Value) {
	ws, gs := floats(t, w), floats(t, g)
	require.Len(t, gs, len(ws))
	for i := range ws {
		ws[i] -= lr * gs[i]
	}
}
