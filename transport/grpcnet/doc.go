// Package grpcnet is the network transport of a pipeline: a
// transport.Endpoint over gRPC for one peer (the driver, or one stage) per
// process, so that stages run in other processes and on other hosts.
//
// # Who connects to whom
//
// Every process calls Open with the same Network: the stages' addresses,
// the pairs of stages that exchange tensors (neighbours, and the stages a
// skip connection joins) and the run's identity (transport.Identity: the
// plan's fingerprint and the run's settings that reach a stage). There is one
// bidirectional stream per pair of peers that exchange messages: the
// driver and every stage, and each listed pair of stages. Of two linked
// peers the lower dials the higher (the driver is the lowest), so a stage
// serves on its address while it dials the stages above it; the processes
// may start in any order, and Open returns once every stream is up:
//
//	stage process:  e, err := grpcnet.Open(ctx, 2, net, grpcnet.WithTLS(ca, cert), grpcnet.WithListenAddr(":7000"))
//	driver process: d, err := grpcnet.Open(ctx, transport.Driver, net, grpcnet.WithTLS(ca, cert))
//
// # Handshake
//
// Each side's first frame on a stream is a hello: which peer it is, the
// number of stages, its links, the plan fingerprint and the run's
// settings. A difference is refused, on both sides, with an error that
// says what differs: the plan and the settings are compared by
// transport.Identity.Check, the one comparison every transport makes
// ("stage 2 at 10.0.0.3:7002 runs with another lr: 0.2 there, 0.1 here",
// "… cut the model differently: its plan fingerprint is abc…, this
// peer's def…"), the rest here ("expected stage 1 at …, got stage 2").
//
// # Frames
//
// A message is a header frame (kind, sender, receiver, microbatch, weight
// version, the gob-encoded Body, and per tensor its form, shape, dtype and
// CRC-32C) and its parts: the body and each tensor's raw little-endian
// bytes. The body, and tensors of at most 4 KiB, go inline in the header
// (a protobuf message) while they fit in a chunk (1 MiB); every larger
// tensor goes in chunk frames after it. The links' codec (grpc-go's
// CodecV2, wire version 2) sends a chunk as a tag byte and the raw bytes,
// handed to gRPC as they lie in the tensor's memory — a tensor sent Own
// goes back to the process's pools only once gRPC has freed every chunk
// of it — and the receiver reads a chunk straight from gRPC's buffers into
// the tensor it fills: no protobuf copy either way. gRPC's buffers come
// from a pool that does not clear them. A frame may be a chunk plus its
// header, past grpc-go's default receive limit of 4 MiB, which both sides
// raise; the flow-control windows are fixed, larger than any activation,
// so that a sender writes a whole message without waiting for the
// receiver's window updates. gRPC reads a connection through 1 MiB (not
// its 32 KiB), and over TLS the socket too is read through 1 MiB and the
// records of one write go out in one system call: crypto/tls alone moves
// a 16 KiB record per system call. The receiver checks every checksum and
// the sender's identity; a corrupt frame fails the endpoint. The
// checksums stay though TLS authenticates every record: the codec hands
// gRPC a tensor's own memory, and the CRC-32C taken when the writer
// encodes the message is what catches that memory changing before gRPC
// has copied it (a tensor back in the pools too early), which TLS would
// authenticate as it found it.
//
// # Timing and failure
//
// Open waits at most the connect timeout (WithConnectTimeout, default 30
// s) for its peers, then fails with transport.ErrConnectTimeout naming each peer
// that did not connect, its address and what was last heard of it (not
// running, stalled in the handshake, refused). Send queues the message and returns: a writer goroutine per stream
// sends it while the caller computes. Recv waits at most the receive
// timeout (WithRecvTimeout) and then returns a *transport.LinkError naming
// the link (default 2 minutes: it must exceed the longest compute between
// two messages a peer waits for). Keepalive pings notice a peer that is
// stopped, hung or vanished without closing its connection: one that
// answers nothing, not even a ping, for the stall timeout
// (WithStallTimeout, default 30 s, at least 11 s since gRPC pings at most
// every 10 s) breaks its link with an error that says it is stopped or
// stalled; a peer that computes for long still answers the pings. A stream that
// breaks fails the calls that involve its link with the LinkError naming
// it — and a Recv from any peer once nothing is queued — while the other
// links go on, so that a stage that lost a neighbour can still tell the
// driver. Recovery is a restart of the whole pipeline, from the last
// checkpoint. Close flushes what was sent, waits
// until each peer has read it, and stops every goroutine.
//
// # Security
//
// WithTLS runs mutual TLS 1.3: client certificates are required and
// verified against the CA the user names, and a dialing peer checks the
// server's certificate against the host it dialed. In TLS 1.3 a client's
// handshake ends before the server has checked the client's certificate,
// so a dialing peer reads the server's first bytes before it counts the
// connection as made: a refused certificate is reported as the server's
// alert ("remote error: tls: unknown certificate authority") and not
// retried, whichever of the two ends sees the refusal first; the stage
// that refused it names the certificate problem when the peer it waited
// for never arrives (a client that merely hung up in the handshake, such
// as a health check, is not taken for a refusal). Without it Open
// refuses to run, except with WithInsecure, which it refuses unless every
// address is loopback. Package pki writes a CA and certificates for trying
// it.
package grpcnet
