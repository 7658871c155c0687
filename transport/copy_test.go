package transport

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// copying is an endpoint that copies on its way (a Copier), recording
// what it sent so.
type copying struct {
	Endpoint
	sent []Message
}

func (c *copying) SendCopy(ctx context.Context, m Message) (bool, error) {
	c.sent = append(c.sent, m)
	return true, c.Send(ctx, m)
}

// TestColocatedCopiesThroughItsNetwork: a colocated endpoint leaves a
// message to a peer hosted elsewhere to its network endpoint's SendCopy,
// and sends nothing for a stage hosted beside it, nor over a network
// endpoint that does not copy: the caller copies.
func TestColocatedCopiesThroughItsNetwork(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(3)
	defer l.Close()
	net := &copying{Endpoint: l.Endpoint(1)}
	hosted := Colocated([]Endpoint{net, l.Endpoint(2)})
	c := hosted[0].(Copier)
	sent, err := c.SendCopy(ctx, Message{Kind: Gradient, To: 0, Micro: 3})
	require.NoError(t, err)
	require.True(t, sent)
	require.Len(t, net.sent, 1)
	m, err := l.Endpoint(0).Recv(ctx, 1, Gradient)
	require.NoError(t, err)
	require.Equal(t, 3, m.Micro)
	sent, err = c.SendCopy(ctx, Message{Kind: Activation, To: 2})
	require.NoError(t, err)
	require.False(t, sent, "hosted here")
	sent, err = hosted[1].(Copier).SendCopy(ctx, Message{Kind: Gradient, To: 0})
	require.NoError(t, err)
	require.False(t, sent, "its network endpoint does not copy")
	require.Len(t, net.sent, 1)
}
