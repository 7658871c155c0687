// Package linkstate is the life of a link between two peers of a network
// transport, whatever carries its bytes (grpcnet's streams, shmnet's
// rings): the queue of messages its writer sends in order, the Bye each
// side says when it closes and the acknowledgment it waits for, and how
// the link ended — the protocol both transports keep alike; and, per
// endpoint, whether it closed, the first link that broke, and the errors
// its Send and Recv return for either.
package linkstate
