package transport

import (
	"context"
	"fmt"

	"github.com/pkg/errors"
)

// Endpoint is one peer's connection to the others.
//
// Send and Recv may be called from several goroutines. Send queues the
// message for its destination (m.To) and returns without waiting for the
// receiver. Recv returns the next message of kind k from peer from (AnyPeer:
// the earliest of that kind from any peer), waiting until one arrives, ctx
// ends or the endpoint fails. After Close, and after the transport fails,
// both return an error (ErrClosed, or a *LinkError naming the link).
type Endpoint interface {
	// Self is the peer this endpoint belongs to.
	Self() Peer
	Send(ctx context.Context, m Message) error
	Recv(ctx context.Context, from Peer, k Kind) (Message, error)
	// Close releases the endpoint; pending and later calls fail with
	// ErrClosed. It is safe to call more than once.
	Close() error
}

// ErrClosed is returned by an Endpoint's methods after it was closed.
var ErrClosed = errors.New("transport: endpoint closed")

// ErrTimeout is the cause of a *LinkError from a Recv that waited the
// transport's receive timeout for nothing: the link is still up, the peer
// sent nothing (an idle driver, a stalled or slow peer). The endpoint goes
// on working; a caller that may wait longer can call Recv again.
var ErrTimeout = errors.New("receive timeout")

// LinkError is a failure of the link between two peers: a peer that is
// gone, a message that did not arrive in time, a corrupted frame.
type LinkError struct {
	From, To Peer
	Kind     Kind
	Err      error
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("transport: link %v → %v (%v): %v", e.From, e.To, e.Kind, e.Err)
}

// Unwrap returns the cause.
func (e *LinkError) Unwrap() error { return e.Err }
