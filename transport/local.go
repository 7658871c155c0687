package transport

import (
	"context"
	"sync"

	"github.com/pkg/errors"
)

// Local connects a driver and stages that run in one process: a message is
// handed over as it is, without copying or encoding.
type Local struct {
	stages    int
	mu        sync.Mutex
	endpoints map[Peer]*localEndpoint
}

// NewLocal returns an in-process transport for a driver and the given
// number of stages.
func NewLocal(stages int) *Local {
	l := &Local{stages: stages, endpoints: make(map[Peer]*localEndpoint)}
	for p := Driver; p < Peer(stages); p++ {
		l.endpoints[p] = &localEndpoint{self: p, net: l, box: NewMailbox()}
	}
	return l
}

// Endpoint returns peer p's endpoint (the same one at every call), or nil
// for a peer the transport does not have.
func (l *Local) Endpoint(p Peer) Endpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.endpoints[p]; ok {
		return e
	}
	return nil
}

// Close closes every endpoint.
func (l *Local) Close() error {
	l.mu.Lock()
	eps := make([]*localEndpoint, 0, len(l.endpoints))
	for _, e := range l.endpoints {
		eps = append(eps, e)
	}
	l.mu.Unlock()
	for _, e := range eps {
		_ = e.Close()
	}
	return nil
}

type localEndpoint struct {
	self Peer
	net  *Local
	box  *Mailbox
}

func (e *localEndpoint) Self() Peer { return e.self }

func (e *localEndpoint) Send(ctx context.Context, m Message) error {
	if err := e.box.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.From = e.self
	e.net.mu.Lock()
	to, ok := e.net.endpoints[m.To]
	e.net.mu.Unlock()
	if !ok {
		return &LinkError{From: e.self, To: m.To, Kind: m.Kind, Err: errors.Errorf("no such peer (the transport has a driver and %d stages)", e.net.stages)}
	}
	if err := to.box.Put(m); err != nil {
		if errors.Is(err, ErrClosed) {
			return &LinkError{From: e.self, To: m.To, Kind: m.Kind, Err: errors.New("the receiver is closed")}
		}
		return err
	}
	return nil
}

func (e *localEndpoint) Recv(ctx context.Context, from Peer, k Kind) (Message, error) {
	return e.box.Take(ctx, from, k)
}

func (e *localEndpoint) Close() error {
	e.box.Fail(ErrClosed)
	return nil
}
