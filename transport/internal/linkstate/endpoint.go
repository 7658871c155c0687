package linkstate

import (
	"context"
	"sync"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// Endpoint is what a network endpoint's calls share of its links as a
// whole: whether it is closed, the first link that broke — which wakes the
// calls waiting for a message from any peer — and the errors its Send and
// Recv return. Its methods take only its own lock: an endpoint may call
// them holding its own.
type Endpoint struct {
	self   transport.Peer
	stages int
	links  []transport.Link
	// AnyBroken is cancelled, with the *transport.LinkError as its cause,
	// when the first link breaks (and at Stop).
	AnyBroken context.Context
	breakAny  context.CancelCauseFunc

	mu      sync.Mutex
	closed  bool
	failure *transport.LinkError
}

// NewEndpoint returns the state of peer self's endpoint in a pipeline of
// stages stages and the links links (transport.CheckLinks').
func NewEndpoint(self transport.Peer, stages int, links []transport.Link) *Endpoint {
	e := &Endpoint{self: self, stages: stages, links: links}
	e.AnyBroken, e.breakAny = context.WithCancelCause(context.Background())
	return e
}

// Closed is transport.ErrClosed once the endpoint closed, else nil: what
// every call returns then.
func (e *Endpoint) Closed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return transport.ErrClosed
	}
	return nil
}

// Close marks the endpoint closed.
func (e *Endpoint) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
}

// Failure is the first link that broke, or nil.
func (e *Endpoint) Failure() *transport.LinkError {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failure
}

// Fail records that a link broke: the first one, unless the endpoint
// closed, wakes the calls waiting for a message from any peer.
func (e *Endpoint) Fail(le *transport.LinkError) {
	e.mu.Lock()
	if e.closed || e.failure != nil {
		e.mu.Unlock()
		return
	}
	e.failure = le
	e.mu.Unlock()
	e.breakAny(le)
}

// Stop releases AnyBroken at teardown.
func (e *Endpoint) Stop() { e.breakAny(nil) }

// Begin is how a network endpoint's Send begins: it refuses a done ctx
// and a closed endpoint, stamps m as sent by this endpoint, and puts a
// message to this endpoint itself in box as it is. done says Send has
// nothing left to do (it returns err); otherwise m goes to a link.
func (e *Endpoint) Begin(ctx context.Context, box *transport.Mailbox, m *transport.Message) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if err := e.Closed(); err != nil {
		return true, err
	}
	m.From = e.self
	if m.To == e.self {
		return true, box.Put(*m)
	}
	return false, nil
}

// NoLink is the error of a call of kind k between from and to, one of
// them this endpoint, when it has no link to the other.
func (e *Endpoint) NoLink(from, to transport.Peer, k transport.Kind) error {
	dials, accepts := transport.PeersOf(e.self, e.stages, e.links)
	return &transport.LinkError{From: from, To: to, Kind: k, Err: errors.Errorf("no such link: %v is linked to %s", e.self, transport.PeerList(append(accepts, dials...)))}
}

// RecvError is Recv's error for what Mailbox.TakeWithin returned (err, not
// nil) waiting for a message of kind k from peer from (who names it):
// the peer left, the receive timeout passed (option names the option that
// sets it), or the endpoint closed.
func (e *Endpoint) RecvError(err error, from transport.Peer, who string, k transport.Kind, timeout time.Duration, option string) error {
	switch {
	case errors.Is(err, transport.ErrDeparted):
		return &transport.LinkError{From: from, To: e.self, Kind: k, Err: errors.Errorf("%s closed its endpoint: nothing more will come", who)}
	case err == transport.ErrTimeout:
		return &transport.LinkError{From: from, To: e.self, Kind: k, Err: errors.Wrapf(transport.ErrTimeout,
			"nothing received within %v: the peer is stalled, too slow or unreachable; if its work between two messages takes longer, raise the receive timeout (%s)", timeout, option)}
	}
	if cerr := e.Closed(); cerr != nil {
		return cerr
	}
	return err
}

// Enqueue hands o, a message of kind k, to the link st to peer (who names
// it) — written at once by write if it can (State.Put), else queued — or
// returns why not: the peer closed its endpoint, this endpoint closes or
// closed (transport.ErrClosed), or the link broke (its
// *transport.LinkError).
func Enqueue[T any](e *Endpoint, st *State[T], o T, write func(T) bool, peer transport.Peer, who string, k transport.Kind) error {
	switch st.Put(o, write) {
	case Departed:
		return &transport.LinkError{From: e.self, To: peer, Kind: k, Err: errors.Errorf("%s closed its endpoint", who)}
	case Closing:
		return transport.ErrClosed
	case Over:
		if err := e.Closed(); err != nil {
			return err
		}
		if le := st.BrokenError(k); le != nil {
			return le
		}
		return &transport.LinkError{From: e.self, To: peer, Kind: k, Err: errors.New("the link is over")}
	}
	return nil
}
