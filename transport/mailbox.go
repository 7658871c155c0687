package transport

import (
	"context"
	"sync"
)

// Mailbox is the receiving side of an endpoint: messages in arrival order,
// per kind, taken by sender. Network transports put what they decode into
// one; Local's endpoints are one each. The zero value is not usable: use
// NewMailbox.
type Mailbox struct {
	mu      sync.Mutex
	queues  map[Kind][]Message
	arrived chan struct{} // closed and replaced at every arrival
	err     error         // set once: every later Take fails with it
}

// NewMailbox returns an empty mailbox.
func NewMailbox() *Mailbox {
	return &Mailbox{queues: make(map[Kind][]Message), arrived: make(chan struct{})}
}

// Put adds m to its kind's queue. It fails once the mailbox has failed.
func (b *Mailbox) Put(m Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	b.queues[m.Kind] = append(b.queues[m.Kind], m)
	close(b.arrived)
	b.arrived = make(chan struct{})
	return nil
}

// Take removes and returns the first message of kind k from peer from
// (AnyPeer: from anyone), waiting for it until ctx ends or the mailbox
// fails.
func (b *Mailbox) Take(ctx context.Context, from Peer, k Kind) (Message, error) {
	for {
		b.mu.Lock()
		if b.err != nil {
			err := b.err
			b.mu.Unlock()
			return Message{}, err
		}
		q := b.queues[k]
		for i, m := range q {
			if from == AnyPeer || m.From == from {
				copy(q[i:], q[i+1:])
				q[len(q)-1] = Message{}
				b.queues[k] = q[:len(q)-1]
				b.mu.Unlock()
				return m, nil
			}
		}
		wait := b.arrived
		b.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// Err is the error the mailbox failed with, or nil.
func (b *Mailbox) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Fail makes every pending and later Take and Put return err (the first
// error given wins) and drops what is queued, which it returns (on its
// first call only, in no particular order): a transport whose messages'
// values are lent gives them back.
func (b *Mailbox) Fail(err error) []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil
	}
	var dropped []Message
	for _, q := range b.queues {
		dropped = append(dropped, q...)
	}
	b.err = err
	b.queues = nil
	close(b.arrived)
	return dropped
}
