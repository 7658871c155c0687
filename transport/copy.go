package transport

import "context"

// Copier is an Endpoint that sends a message whose values the caller
// keeps (the borrowed results of a program's run, which its next run
// overwrites), copying them on their way itself: shmnet copies a large
// tensor once, into the shared memory its receiver computes on. A caller
// with such a message tries SendCopy first; where the endpoint does not
// copy, it sends copies of its own, marked Own, with Send.
type Copier interface {
	// SendCopy sends m, whose Values stay the caller's: it is done with
	// them when it returns, and the receiver gets tensors of its own,
	// marked Own (m.Own is ignored). It returns false, having sent
	// nothing, when it does not copy for m's destination.
	SendCopy(ctx context.Context, m Message) (bool, error)
}
