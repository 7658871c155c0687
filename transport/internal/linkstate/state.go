package linkstate

import (
	"context"
	stderrors "errors"
	"sync"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// State is one link's state; T is what its queue holds. The zero value is
// not usable: use New.
type State[T any] struct {
	// Departed is done once the peer said Bye: nothing more comes.
	Departed context.Context
	depart   context.CancelFunc
	// Broken is done, with the *transport.LinkError as its cause, once
	// the link broke.
	Broken  context.Context
	breakIt context.CancelCauseFunc
	// Acked is closed when the peer acknowledged this side's Bye, or the
	// link ended.
	Acked   chan struct{}
	ackOnce sync.Once

	mu       sync.Mutex
	wake     *sync.Cond
	queue    []T
	closing  bool // this side closes: flush, then Bye
	byeSent  bool
	byeAcked bool
	ack      bool // the peer's Bye awaits its ByeAck
	dead     bool // the link is over
	busy     bool // the writer is acting on what Next returned
}

// New returns the state of a link that is up.
func New[T any]() *State[T] {
	s := &State[T]{Acked: make(chan struct{})}
	s.wake = sync.NewCond(&s.mu)
	s.Departed, s.depart = context.WithCancel(context.Background())
	s.Broken, s.breakIt = context.WithCancelCause(context.Background())
	return s
}

// Refusal is why Enqueue did not queue.
type Refusal int

const (
	Queued   Refusal = iota
	Departed         // the peer closed its endpoint
	Closing          // this side closes
	Over             // the link is over (BrokenError says how, if it broke)
)

// Enqueue queues o for the writer, unless the link cannot take it.
func (s *State[T]) Enqueue(o T) Refusal { return s.Put(o, nil) }

// Put hands o to the link, unless the link cannot take it. When nothing
// is ahead of o — nothing queued, the writer idle in Next — write (if not
// nil) is offered o first, called with the state's lock held: it writes
// o itself, in order, and returns true, or returns false at once when it
// cannot without waiting. Else o is queued for the writer.
func (s *State[T]) Put(o T, write func(T) bool) Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.Departed.Err() != nil:
		return Departed
	case s.closing:
		return Closing
	case s.dead:
		return Over
	}
	if write != nil && len(s.queue) == 0 && !s.busy && !s.ack && write(o) {
		return Queued
	}
	s.queue = append(s.queue, o)
	s.wake.Signal()
	return Queued
}

// BrokenError is the link's LinkError for a call of kind k once it broke,
// else nil.
func (s *State[T]) BrokenError(k transport.Kind) *transport.LinkError {
	var le *transport.LinkError
	if errors.As(context.Cause(s.Broken), &le) {
		out := *le
		out.Kind = k
		return &out
	}
	return nil
}

// Action is what a link's writer does next.
type Action int

const (
	Done        Action = iota // the link is over: return
	SendByeAck                // acknowledge the peer's Bye
	SendMessage               // send the message Next returned
	SendBye                   // this side closes: everything is sent
)

// Next waits for the writer's next action: the peer's Bye to acknowledge
// first, then the queued messages in order, then this side's Bye once it
// closes. The writer is taken to act on it until it calls Next again.
func (s *State[T]) Next() (a Action, o T) {
	var zero T
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = false
	defer func() { s.busy = a != Done }()
	for !s.dead && !s.ack && len(s.queue) == 0 && !(s.closing && !s.byeSent) {
		s.wake.Wait()
	}
	switch {
	case s.dead:
		return Done, zero
	case s.ack:
		s.ack = false
		return SendByeAck, zero
	case len(s.queue) > 0:
		o := s.queue[0]
		s.queue[0] = zero
		s.queue = s.queue[1:]
		return SendMessage, o
	}
	s.byeSent = true
	return SendBye, zero
}

// ByeReceived records the peer's Bye: it reads no more (what is queued
// for it is dropped) and awaits its acknowledgment.
func (s *State[T]) ByeReceived() {
	s.mu.Lock()
	s.queue = nil
	s.ack = true
	s.wake.Signal()
	s.mu.Unlock()
	s.depart()
}

// ByeAckReceived records that the peer read everything this side sent.
func (s *State[T]) ByeAckReceived() {
	s.mu.Lock()
	s.byeAcked = true
	s.mu.Unlock()
	s.ackOnce.Do(func() { close(s.Acked) })
}

// End marks the link over. Unless this side was closing or the peer had
// left, the link broke: End records le as its cause and returns true, for
// the caller to fail what depends on it.
func (s *State[T]) End(le *transport.LinkError) bool {
	s.ackOnce.Do(func() { close(s.Acked) })
	s.mu.Lock()
	s.dead = true
	s.wake.Broadcast()
	closing := s.closing
	s.mu.Unlock()
	if closing || s.Departed.Err() != nil {
		return false
	}
	s.breakIt(le)
	return true
}

// StartClosing makes the writer send what is queued, then a Bye.
func (s *State[T]) StartClosing() {
	s.mu.Lock()
	s.closing = true
	s.wake.Broadcast()
	s.mu.Unlock()
}

// Delivered reports whether the peer confirmed it read everything (or had
// left first), and how many messages are still queued.
func (s *State[T]) Delivered() (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byeAcked || s.Departed.Err() != nil, len(s.queue)
}

// Stop ends the writer at teardown.
func (s *State[T]) Stop() {
	s.mu.Lock()
	s.dead = true
	s.wake.Broadcast()
	s.mu.Unlock()
	s.depart()
}

// Flush closes an endpoint's links (names[i] names links[i]'s peer for
// messages): it starts closing each link that has not broken and waits
// until each of those peers acknowledged, at most long — and at most
// short once any link broke or any peer left (said Bye) or a link ended
// unacknowledged, whether before Flush or while it waits: the pipeline is
// over then, and a peer stopped
// in its handshake, which may have linked to this side already, never
// acks. It returns an error naming each link whose messages were not
// confirmed.
func Flush[T any](self transport.Peer, links []*State[T], peers []transport.Peer, names []string, long, short time.Duration) error {
	start := time.Now()
	expired := make(chan struct{})
	var expire sync.Once
	fire := func() { expire.Do(func() { close(expired) }) }
	var mu sync.Mutex // guards deadline and timer against the shortening callbacks
	deadline, timer := start.Add(long), time.AfterFunc(long, fire)
	shorten := func() {
		mu.Lock()
		defer mu.Unlock()
		if d := time.Now().Add(short); d.Before(deadline) && timer.Stop() {
			deadline, timer = d, time.AfterFunc(short, fire)
		}
	}
	defer func() {
		mu.Lock()
		timer.Stop()
		mu.Unlock()
	}()
	done := make(chan struct{})
	var watchers sync.WaitGroup
	defer func() { close(done); watchers.Wait() }()
	var flushed []int
	for i, l := range links {
		defer context.AfterFunc(l.Broken, shorten)()
		defer context.AfterFunc(l.Departed, shorten)()
		if l.Broken.Err() != nil {
			continue
		}
		l.StartClosing()
		flushed = append(flushed, i)
		watchers.Add(1)
		go func() { // a link that ends unacknowledged while closing: its peer is gone
			defer watchers.Done()
			select {
			case <-l.Acked:
				if ok, _ := l.Delivered(); !ok {
					shorten()
				}
			case <-done:
			}
		}()
	}
	var errs []error
	for _, i := range flushed {
		select {
		case <-links[i].Acked:
		case <-expired:
		}
		if ok, queued := links[i].Delivered(); !ok {
			mu.Lock()
			waited := deadline.Sub(start).Round(time.Millisecond)
			mu.Unlock()
			errs = append(errs, errors.Errorf("link %v → %v: %v did not confirm within %v that it read everything sent to it (%d messages were still queued)",
				self, peers[i], names[i], waited, queued))
		}
	}
	return errors.Wrap(stderrors.Join(errs...), "close")
}
