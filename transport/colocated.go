package transport

import (
	"context"

	"github.com/pkg/errors"
)

// Colocated returns the endpoints of stages that one process hosts, given
// each stage's network endpoint (nets, whose Self are the stages; the
// network's links leave out those between two of them): a message from
// one of them to another is handed over in the process, as Local does,
// without encoding or a byte on the network; every other message goes
// through the sender's network endpoint, and every message from a peer
// hosted elsewhere comes from it. The endpoints are parallel to nets and
// own them: Close closes the network endpoint too. Recv from AnyPeer is
// refused: a stage receives from the peers it names (only a driver takes
// any). A Recv from a hosted peer waits until its ctx ends, its endpoint
// is closed or the peer's endpoint was closed and nothing it sent is
// left.
func Colocated(nets []Endpoint) []Endpoint {
	here := make(map[Peer]*colocated, len(nets))
	out := make([]Endpoint, len(nets))
	for i, n := range nets {
		c := &colocated{net: n, box: NewMailbox(), here: here}
		here[n.Self()] = c
		out[i] = c
	}
	return out
}

// colocated is one hosted stage's endpoint (Colocated). here is shared by
// the process's stages and never changes once Colocated returns.
type colocated struct {
	net  Endpoint
	box  *Mailbox
	here map[Peer]*colocated
}

func (c *colocated) Self() Peer { return c.net.Self() }

func (c *colocated) Send(ctx context.Context, m Message) error {
	to, ok := c.here[m.To]
	if !ok {
		return c.net.Send(ctx, m)
	}
	if err := c.box.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.From = c.Self()
	if err := to.box.Put(m); err != nil {
		return &LinkError{From: m.From, To: m.To, Kind: m.Kind, Err: errors.New("the receiver, hosted in this process, is closed")}
	}
	return nil
}

// SendCopy leaves a message to a peer hosted elsewhere to the network
// endpoint's SendCopy, if it is a Copier (Copier); to a stage hosted
// here it sends nothing (false): the caller sends its own copies.
func (c *colocated) SendCopy(ctx context.Context, m Message) (bool, error) {
	net, ok := c.net.(Copier)
	if _, here := c.here[m.To]; here || !ok {
		return false, nil
	}
	return net.SendCopy(ctx, m)
}

func (c *colocated) Recv(ctx context.Context, from Peer, k Kind) (Message, error) {
	switch _, ok := c.here[from]; {
	case from == AnyPeer:
		return Message{}, &LinkError{From: from, To: c.Self(), Kind: k, Err: errors.New("a stage hosted beside others receives from a named peer, not from any")}
	case ok:
		return c.box.Take(ctx, from, k)
	}
	return c.net.Recv(ctx, from, k)
}

func (c *colocated) Close() error {
	c.box.Fail(ErrClosed)
	return c.net.Close()
}
