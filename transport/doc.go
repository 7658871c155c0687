// Package transport carries the messages of a pipeline between its driver
// and its stages, and between stages: the seam that lets a stage run in the
// driver's process, in another process or on another host without either
// side knowing which.
//
// A pipeline has one driver and P stages, each a Peer. Each peer holds an
// Endpoint and talks to the others only through it:
//
//	driver ── Control: work, data, state requests ──▶ stage i
//	driver ◀── Reply: parked, losses, failures, state ── stage i
//	stage i ── Activation: outputs of microbatch m ──▶ stage j > i
//	stage i ◀── Gradient: gradients of those outputs ── stage j
//	stage i ── Inference: outputs of an evaluation forward ──▶ stage j
//
// Messages of one kind from one peer to another arrive in the order they
// were sent; nothing else is ordered. Send does not wait for the receiver,
// so a stage's sends overlap its compute. Local is the in-process
// implementation; grpcnet (processes anywhere) and shmnet (processes of one
// host, over shared memory) implement the same Endpoint with the same
// promises.
package transport
