package transport

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
)

// network is an endpoint of a network for the tests: it counts what it
// sends and refuses a message between two stages hosted together, as a
// network whose links leave them out does.
type network struct {
	Endpoint
	sent     *atomic.Int64
	together map[Peer]bool
}

func (n network) Send(ctx context.Context, m Message) error {
	if n.together[n.Self()] && n.together[m.To] {
		return errors.Errorf("no link %v-%v on the network", n.Self(), m.To)
	}
	n.sent.Add(1)
	return n.Endpoint.Send(ctx, m)
}

// TestColocatedStagesTalkInProcess: stages 0 and 1 hosted in one process
// hand their messages to each other without the network (which refuses
// them), the very values sent; a message to or from a stage elsewhere or
// the driver goes over it; AnyPeer is refused; once a hosted stage is
// closed, a message to it is a LinkError, and Close closes the network
// endpoint.
func TestColocatedStagesTalkInProcess(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(3)
	defer l.Close()
	var sent atomic.Int64
	together := map[Peer]bool{0: true, 1: true}
	eps := Colocated([]Endpoint{network{l.Endpoint(0), &sent, together}, network{l.Endpoint(1), &sent, together}})
	s0, s1, s2, driver := eps[0], eps[1], l.Endpoint(2), l.Endpoint(Driver)
	require.Equal(t, Peer(1), s1.Self())

	body := &struct{ x int }{7}
	for m := range 3 {
		require.NoError(t, s0.Send(ctx, Message{Kind: Activation, To: 1, Micro: m, Body: body}))
	}
	require.NoError(t, s1.Send(ctx, Message{Kind: Gradient, To: 0, Micro: 9}))
	require.Zero(t, sent.Load(), "nothing went over the network")
	for m := range 3 {
		got, err := s1.Recv(ctx, 0, Activation)
		require.NoError(t, err)
		require.Equal(t, Message{Kind: Activation, From: 0, To: 1, Micro: m, Body: body}, got)
		require.Same(t, body, got.Body.(*struct{ x int }), "handed over as it is")
	}
	got, err := s0.Recv(ctx, 1, Gradient)
	require.NoError(t, err)
	require.Equal(t, 9, got.Micro)

	require.NoError(t, s1.Send(ctx, Message{Kind: Activation, To: 2, Micro: 4}))
	require.NoError(t, driver.Send(ctx, Message{Kind: Control, To: 0, Micro: 5}))
	require.EqualValues(t, 1, sent.Load())
	got, err = s2.Recv(ctx, 1, Activation)
	require.NoError(t, err)
	require.Equal(t, 4, got.Micro)
	got, err = s0.Recv(ctx, Driver, Control)
	require.NoError(t, err)
	require.Equal(t, 5, got.Micro)

	_, err = s0.Recv(ctx, AnyPeer, Control)
	require.ErrorContains(t, err, "receives from a named peer")

	require.NoError(t, s1.Close())
	var le *LinkError
	require.ErrorAs(t, s0.Send(ctx, Message{Kind: Activation, To: 1}), &le)
	require.Equal(t, Peer(1), le.To)
	_, err = s1.Recv(ctx, 0, Activation)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Endpoint(1).Recv(ctx, Driver, Control)
	require.ErrorIs(t, err, ErrClosed, "Close closed the network endpoint")
}
