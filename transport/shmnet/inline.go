//go:build linux

package shmnet

import (
	"encoding/binary"
)

// Recv first reads every whole message waiting in its links' rings into
// the mailbox itself, instead of leaving them to the links' reader
// goroutines. In a stage process of one P a reader runs only once the
// compute blocks, and is then woken from the runtime's poller: 17 µs
// (median) between an MLP stage's forward and the backward whose gradient
// was already there, against 1 µs in one process (docs/speed.md). Every
// link, not only the one Recv waits on: the driver's orders for the next
// minibatch would otherwise wait in their ring for the compute to block.

// readWhole reads the whole messages waiting on every link (readWhole of
// each).
func (e *Endpoint) readWhole() {
	if links := e.linked.Load(); links != nil {
		for _, l := range *links {
			l.readWhole()
		}
	}
}

// readWhole reads the messages wholly in the ring into the mailbox, in
// order, unless the reader goroutine is reading (it will put them there).
// It never waits: a message still being written is left to the reader.
// A frame that does not decode ends the link as the reader would. Once
// the endpoint has released the link's rings it reads nothing.
func (l *peerLink) readWhole() {
	if !l.rmu.TryLock() {
		return
	}
	defer l.rmu.Unlock()
	if l.released { // a Recv that raced Close
		return
	}
	for l.inlineErr.Load() == nil && l.in.whole() {
		if le := l.readOne(); le != nil {
			l.inlineErr.Store(le)
			_ = l.in.data1.signal() // the reader ends the link with it
		}
	}
}

// whole reports whether a whole frame, with the payload its header
// announces, is in the ring; also when its size or header is invalid,
// which reading it then reports at once.
func (r *ring) whole() bool {
	var size [4]byte
	if !r.peek(size[:], 0) {
		return false
	}
	n := binary.LittleEndian.Uint32(size[:])
	if n == 0 || n > maxHeader {
		return true
	}
	hb := make([]byte, n)
	if !r.peek(hb, 4) {
		return false
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return true
	}
	total := uint64(4 + n)
	if h.typ == frameMessage {
		total += uint64(h.bodyLen)
		for _, v := range h.values {
			total += uint64(v.inRing())
		}
	}
	return r.avail() >= total
}
