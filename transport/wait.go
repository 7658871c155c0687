package transport

import (
	"context"
	"time"

	"github.com/pkg/errors"
)

// Wait is what ends a network transport's wait for a message besides the
// caller's context: a timeout, the peer leaving, a link breaking.
type Wait struct {
	// Timeout bounds the wait (positive).
	Timeout time.Duration
	// Departed, if not nil, is done once the peer waited for said it
	// leaves: nothing more will come from it.
	Departed context.Context
	// Broken, if not nil, is done once a link the wait depends on broke,
	// with a *LinkError as its cause.
	Broken context.Context
}

// ErrDeparted is what TakeWithin returns once the peer it waited for left.
var ErrDeparted = errors.New("the peer closed its endpoint")

// TakeWithin is Take, bounded as w says. A message that arrived before the
// wait ended is still returned. Else it returns ctx's error when ctx
// ended; the *LinkError of a broken link (a copy, of kind k); ErrDeparted
// once the peer left; ErrTimeout once w.Timeout passed; the mailbox's
// error once it failed. A transport words the last three for its Recv.
func (b *Mailbox) TakeWithin(ctx context.Context, from Peer, k Kind, w Wait) (Message, error) {
	tctx, cancel := context.WithTimeoutCause(ctx, w.Timeout, ErrTimeout)
	defer cancel()
	wctx, wcancel := context.WithCancelCause(tctx)
	defer wcancel(nil)
	if w.Departed != nil {
		defer context.AfterFunc(w.Departed, func() { wcancel(ErrDeparted) })()
	}
	if w.Broken != nil {
		defer context.AfterFunc(w.Broken, func() { wcancel(context.Cause(w.Broken)) })()
	}
	m, err := b.Take(wctx, from, k)
	if err == nil {
		return m, nil
	}
	if ctx.Err() != nil {
		return Message{}, ctx.Err()
	}
	cause := context.Cause(wctx)
	var le *LinkError
	isLink := errors.As(cause, &le)
	if isLink || cause == ErrDeparted {
		now, cancel := context.WithCancel(context.Background())
		cancel()
		if m, err := b.Take(now, from, k); err == nil { // it came before the link ended
			return m, nil
		}
	}
	switch {
	case isLink:
		out := *le
		out.Kind = k
		return Message{}, &out
	case cause == ErrDeparted, cause == ErrTimeout:
		return Message{}, cause
	}
	return Message{}, err
}
