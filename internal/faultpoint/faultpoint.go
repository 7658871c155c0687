// Package faultpoint is a test hook: it lets a test binary stop a process
// at a named point of the library's work where a crash must lose nothing
// but the work since the last complete checkpoint — between the shards of
// a checkpoint, before its manifest, before LATEST moves — or where a
// pipeline's processes are half connected — in the middle of a handshake,
// once the streams are up — so that a test can SIGKILL or SIGSTOP the
// process exactly there instead of hoping a random signal lands in a
// window of microseconds.
//
// Nothing in the library or the command line sets the hook, and no
// environment variable does: only a test binary can (cmd/pipemare's tests
// run the test binary as the pipemare command and install, in those
// processes, a hook that kills the process at the point a test names).
// Unset, Reach is one atomic load.
package faultpoint

import "sync/atomic"

// Point is a place in the library's work.
type Point struct {
	// Name is one of the names below.
	Name string
	// Step is the step of the checkpoint being written (0 at the
	// transport's points).
	Step int64
	// Stage is the stage whose shard was just written (ShardWritten); at
	// the handshake's points the peer on the other end of the stream (a
	// stage, or −1 for the driver), at Opened the peer that opened; else
	// −1.
	Stage int
}

// The points the checkpoint package reaches, in the order of a checkpoint.
const (
	// ShardWritten: a stage's shard is durable under its name; the other
	// stages' may not be, and there is no manifest yet.
	ShardWritten = "checkpoint.shard-written"
	// BeforeManifest: every shard is durable; the manifest is not written.
	BeforeManifest = "checkpoint.before-manifest"
	// BeforeLatest: the manifest is durable; LATEST still names the
	// previous checkpoint.
	BeforeLatest = "checkpoint.before-latest"
)

// The points the network transports (grpcnet, shmnet) reach while a peer
// opens its endpoint.
const (
	// HelloSent: a peer dialed stage Stage and sent its hello; it has not
	// read the answer.
	HelloSent = "grpcnet.hello-sent"
	// HelloReceived: a stage took a stream from peer Stage and read its
	// hello; it has not answered.
	HelloReceived = "grpcnet.hello-received"
	// Opened: every stream of the peer is up and past the handshake; Open
	// is about to return.
	Opened = "grpcnet.opened"
)

var hook atomic.Pointer[func(Point)]

// Set installs f, called at every point reached (nil removes it). Only
// tests call it.
func Set(f func(Point)) {
	if f == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&f)
}

// Reach calls the hook, if one is set, with p.
func Reach(p Point) {
	if f := hook.Load(); f != nil {
		(*f)(p)
	}
}
