// Package shmnet is the transport of a pipeline whose processes share one
// host: a transport.Endpoint over shared memory, for one peer (the driver,
// or one stage) per process, as fast as the stages' goroutines in one
// process would be, short of one copy each way (none for a large tensor
// the receiver computes on in place, from the slab).
//
// # Links
//
// Every process calls Open with the same Network: the run's name on the
// host, the number of stages, the pairs of stages that exchange tensors
// and the run's transport.Identity. Of two linked peers the lower dials
// the higher (the driver dials every stage), as in grpcnet: stage i
// listens on the abstract Unix socket "@<name>-<i>" (SOCK_SEQPACKET) while
// Open runs, and the processes may start in any order.
//
// The dialer of a link creates its shared memory (memfd_create, mapped
// MAP_SHARED) — one ring and one slab each way — and four eventfds, and hands them over
// with its hello (SCM_RIGHTS). The acceptor checks, with SO_PEERCRED, that
// the dialer runs as its own user, compares the hellos (wire version,
// identity with transport.Identity.Check, stages, links), maps the memory
// and answers with its own hello, or refuses, saying why; the dialer
// checks the answer. A difference fails Open on both sides. A peer that
// gives up opening its links (another refused it, its connect timeout
// passed) answers every peer still in its handshake or in line with why,
// so the cause reaches the process that dialed it rather than a
// connection reset.
//
// # Rings
//
// A ring is a byte stream with one writer and one reader: a message is a
// small header (kind, peers, microbatch, version, and per tensor its form,
// dtype and shape), the body, then each tensor's bytes as they lie in
// memory. The bodies one side sends are one gob stream, in the ring's
// order, so a type is described (and its decoder compiled) once per link,
// not per message; a header flag says a body begins a new stream (the
// first, and the next after a message not sent once its body was
// encoded). Send copies a message in itself when nothing sent before is
// still to be written and the ring has room for the whole message (it
// never waits); else the link's writer goroutine copies them in, in
// order. The receiver's reader goroutine copies them out into tensors of
// its own (from the process's pools) and puts the message in the mailbox
// (a Recv first does so itself for every message wholly in its links'
// rings, so that a process of one P need not wake the reader),
// marked Own (transport.Message.Own): the receiver returns them to the
// pools once done.
//
// # Slabs
//
// A large tensor (64 KiB or more) of an Activation or Gradient does not
// cross the ring: SendCopy (transport.Copier) copies it from the sender's
// tensor into free pages of the slab beside the ring, and its header in
// the ring names the pages. The receiver computes on it where it lies: it
// is lent (recycle.Lend), and the receiver's recycle.Put frees its pages.
// That is one copy from the sender's result to the receiver's use, where
// the ring takes three (the stage's copy of its result, in, out). Pages
// are taken by the writer alone and freed by the reader alone, with
// atomic operations on a bitmap in the ring's control block: neither
// waits for the other, and a writer that finds no free run of pages puts
// the tensor in the ring, so a receiver that keeps tensors never holds
// the ring back. Close gives back the tensors of messages nobody took; a
// link's memory stays mapped after Close until the last tensor lent from
// it is returned (the stage runtime returns what it holds when it ends,
// failed or not).
//
// A message larger than the ring
// streams through it. A side that finds the ring empty (or full) sleeps
// on an eventfd, which the other side signals only when it sleeps: the
// writer once a whole message is in (not per part: a reader between
// messages wakes once per message), and earlier only as each 64 KiB of a
// large part is in (it moves the head every 64 KiB) and before it waits for
// room; a reader in the middle of a message first spins for up to 50 µs,
// since the writer is copying the rest in. The eventfds are read and
// written with raw system calls, which do not wake the runtime's monitor
// thread on a process's one CPU (eventfd.go).
//
// # Failure
//
// The socket beside the rings stays open for the link's life: the peers
// beat on it four times per stall timeout (WithStallTimeout). A peer
// whose socket closes without a Bye (its process died) or that beats no
// more for the stall timeout (stopped, hung) stops the link: what it
// wrote before is still read, then the calls that involve the link fail
// with a *transport.LinkError naming the peer and its pid and saying
// which. Send queues without bound and never waits for the receiver;
// Recv waits at most the receive timeout; Close flushes, says Bye, waits
// for each peer to acknowledge, then closes every socket and eventfd and
// unmaps every ring (a link's, once no tensor lent from its slab is out)
// — once every process of a link has, the kernel frees its memory. The promises are grpcnet's; only the medium differs.
//
// The package works on Linux only; elsewhere Open fails.
package shmnet
