package stage

import (
	"context"
	"math"

	"github.com/pipemare/pipemare/schedule"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
)

// TestOwnedDataGoBackToThePools: the data of a message marked Own (over
// shared memory, the transport's copies) are the stage's: a shared one is
// not copied, and each goes back to the pools once nothing reads it, as
// does one no input reads. The driver's data in one process (not Own) are
// only read: never pooled, a shared one copied.
func TestOwnedDataGoBackToThePools(t *testing.T) {
	r := &Runtime{inputs: []input{{data: 0}, {data: 1, shared: true}, {data: -1, key: 7}}}
	get := func(n int) *tensor.Dense { return recycle.Get(tensor.Float32, tensor.Shape{n}) }
	x, y, unread := get(3), get(4), get(5)
	acts := map[int64]gorgonia.Value{7: get(6)}
	in, err := r.inputValues(acts, received(transport.Message{Values: []gorgonia.Value{x, y, unread}, Own: true}), 0)
	require.NoError(t, err)
	require.Same(t, x, in.vals[0])
	require.Same(t, y, in.vals[1], "an owned shared data input is not copied")
	require.Same(t, unread, get(5), "owned data no input reads go back to the pools at once")
	in.release()
	require.Same(t, x, get(3), "owned data go back to the pools once read")
	require.Same(t, y, get(4))

	acts[7] = get(6)
	in, err = r.inputValues(acts, received(transport.Message{Values: []gorgonia.Value{x, y, unread}}), 0)
	require.NoError(t, err)
	require.Same(t, x, in.vals[0])
	require.NotSame(t, y, in.vals[1], "a shared data input the stage does not own is copied")
	in.release()
	require.NotSame(t, x, get(3), "data the stage does not own never go to the pools")
	require.NotSame(t, unread, get(5))
}

// TestServeReturnsWhatIsInFlight: what a stage holds when Serve returns —
// a forward's kept activations, data of microbatches it never ran — goes
// back: a tensor lent from a transport's shared memory (recycle.Lend) to
// its lender, which otherwise keeps that memory mapped.
func TestServeReturnsWhatIsInFlight(t *testing.T) {
	p := start(t, setup{stages: 2, n: 2, played: []int{0}})
	st := p.plan.Stages[0]
	ref := p.reference(nil, st.Outputs[0].Key, st.Outputs[1].Key)
	data := p.micros(13, 2)
	for m, d := range data {
		p.feed(m, d, false)
	}
	back := 0
	_, _, acts := ref.run(data[0])
	require.NoError(t, p.peer(0).Send(context.Background(), transport.Message{Kind: transport.Activation, To: 1, Micro: 0, Values: lentClones(acts, false, &back), Own: true}))
	p.work(1, Segment{Schedule: "gpipe"}, schedule.Forward(0)) // keeps microbatch 0's activations for its backward
	require.Zero(t, back, "kept for the backward")
	p.stop(1)
	require.NoError(t, p.exit(1))
	require.Equal(t, len(acts), back, "Serve returned: the kept activations went back to their lender")
}

// TestAFailedForwardReturnsItsInputs: a forward that fails (here on a NaN
// loss) returns the activations it received to their lender.
func TestAFailedForwardReturnsItsInputs(t *testing.T) {
	p := start(t, setup{stages: 2, n: 1, played: []int{0}})
	st := p.plan.Stages[0]
	ref := p.reference(nil, st.Outputs[0].Key, st.Outputs[1].Key)
	data := p.micros(13, 1)
	p.feed(0, data[0], false)
	_, _, acts := ref.run(data[0])
	back := 0
	require.NoError(t, p.peer(0).Send(context.Background(), transport.Message{Kind: transport.Activation, To: 1, Micro: 0, Values: lentClones(acts, true, &back), Own: true}))
	p.send(1, Work{Segment: Segment{Schedule: "gpipe"}, Actions: []schedule.Action{schedule.Forward(0)}})
	require.ErrorContains(t, p.exit(1), "the loss is NaN")
	require.Equal(t, len(acts), back, "the failed forward's activations went back to their lender")
}

// lentClones returns clones of vals (of NaNs, nan), each lent
// (recycle.Lend) to a lender that counts in back the tensors given back.
func lentClones(vals []gorgonia.Value, nan bool, back *int) []gorgonia.Value {
	out := make([]gorgonia.Value, len(vals))
	for i, v := range vals {
		c := v.(*tensor.Dense).Clone().(*tensor.Dense)
		if nan {
			for j := range c.Float64s() {
				c.Float64s()[j] = math.NaN()
			}
		}
		recycle.Lend(c, func() { *back++ })
		out[i] = c
	}
	return out
}
