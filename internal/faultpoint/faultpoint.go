// Package faultpoint is a test hook: it lets a test binary stop a process
// at a named point of the library's work where a crash must lose nothing
// but the work since the last complete checkpoint — between the shards of
// a checkpoint, before its manifest, before LATEST moves — so that a test
// can SIGKILL the process exactly there instead of hoping a random kill
// lands in a window of microseconds.
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
	// Step is the step of the checkpoint being written.
	Step int64
	// Stage is the stage whose shard was just written (ShardWritten), or −1.
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
