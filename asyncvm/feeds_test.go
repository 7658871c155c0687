package asyncvm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
)

// recorder is a driver's endpoint that keeps what is sent.
type recorder struct {
	transport.Endpoint
	sent []transport.Message
}

func (r *recorder) Send(_ context.Context, m transport.Message) error {
	r.sent = append(r.sent, m)
	return nil
}

// TestMicrobatchesComeFromThePools: the driver copies each microbatch's
// rows out of the caller's minibatch into a tensor from the pools (the
// caller may refill its tensors once Step returns), and marks a Data
// message Own when no other stage reads its tensors, so that whoever ends
// up holding them (the stage in one process, the transport over a
// network) returns them to the pools: a microbatch costs no fresh memory.
func TestMicrobatchesComeFromThePools(t *testing.T) {
	m, vm := fineMLP(t, 2)
	feeds := makeData(m, 2, 1).minibatch(t, m.Inputs, 0, 2)
	x := feeds[m.Inputs[0]].(*tensor.Dense)
	micro := x.Shape().Clone()
	micro[0] /= 2
	pooled := recycle.Get(x.Dtype(), micro)
	recycle.Put(pooled)
	s, err := vm.sliceFeeds(feeds, 0)
	require.NoError(t, err)
	require.Same(t, pooled, s[0][0], "a microbatch's rows go into a tensor from the pools")
	rows := micro.TotalSize()
	require.Equal(t, x.Data().([]float64)[:rows], s[0][0].Data(), "the first microbatch's rows")
	require.Equal(t, x.Data().([]float64)[rows:], s[1][0].Data(), "the second microbatch's rows")
	s[0][0].Data().([]float64)[0] = -7
	require.NotEqual(t, -7.0, x.Data().([]float64)[0], "the caller's tensor is not the microbatch's")

	ep := &recorder{}
	driver := vm.ep
	vm.ep = ep
	err = vm.sendData(context.Background(), 0, s[0], false)
	vm.ep = driver
	require.NoError(t, err)
	require.Len(t, ep.sent, 2, "the first stage reads the features, the last the labels")
	for _, msg := range ep.sent {
		require.True(t, msg.Own, "data no other stage reads are the message's own (to stage %v)", msg.To)
	}
}
