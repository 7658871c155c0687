//go:build linux

package shmnet

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/recycle"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/internal/linkstate"
)

// peerLink is the link between this endpoint and one peer: a ring each
// way in shared memory, and the Unix socket beside them, on which the
// peers beat and whose end says the peer's process ended. Send fills a
// queue that a writer goroutine copies into the outgoing ring; a reader
// goroutine copies what arrives into the mailbox (or a Recv, for a
// message wholly in the ring); a monitor goroutine beats and watches the
// socket.
type peerLink struct {
	e      *Endpoint
	peer   transport.Peer
	who    string // the peer and its pid, for messages
	conn   *net.UnixConn
	shared handed
	out    *ring
	in     *ring
	// stop, once set, ends the rings' waits: the peer is gone or
	// stalled (why says which) or this endpoint tears down.
	stop atomic.Bool
	why  atomic.Pointer[error]

	st *linkstate.State[outgoing] // the queue, the Byes, how the link ended

	// encMu keeps the bodies' stream in the ring's order: it is held from
	// encoding a message (which copies tensors into the slab) to queueing
	// it. unmapping, under it, says release has begun: Send writes no more.
	encMu     sync.Mutex
	unmapping bool
	bodies    bodyEncoder
	unbodies  bodyDecoder // the reader's, under rmu

	// rmu is held by whoever reads frames out of in: the reader goroutine,
	// or a Recv that reads a whole message itself (inline.go). inlineErr
	// is how such a Recv's read failed, for the reader to end the link with.
	rmu       sync.Mutex
	inlineErr atomic.Pointer[transport.LinkError]
	released  bool // the rings are unmapped, or will be (release); under rmu
	// lends keeps the memory mapped while tensors read in place from the
	// incoming slab are out.
	lends lending
}

// outgoing is a message queued for writing: its header and the bytes
// that follow it.
type outgoing struct {
	m     transport.Message
	frame []byte           // length and header
	parts [][]byte         // body, then each value's bytes in the ring (none in the slab)
	put   []gorgonia.Value // to return to the pools once written
}

// newLink makes the link over a handshake's connection and shared memory;
// dialer says which ring is this side's to write.
func (e *Endpoint) newLink(p transport.Peer, pid int, c *net.UnixConn, h handed, dialer bool) *peerLink {
	l := &peerLink{e: e, peer: p, who: peerAt(p, pid), conn: c, shared: h, st: linkstate.New[outgoing]()}
	first, second := rings(h.mem, h.ringSize)
	first.data1, first.room = newEventfd(h.evs[0]), newEventfd(h.evs[1])
	second.data1, second.room = newEventfd(h.evs[2]), newEventfd(h.evs[3])
	first.stop, second.stop = &l.stop, &l.stop
	l.out, l.in = first, second
	if !dialer {
		l.out, l.in = second, first
	}
	return l
}

// start runs the link's goroutines, which the endpoint's wg counts.
func (l *peerLink) start() {
	l.e.wg.Add(3)
	go func() {
		defer l.e.wg.Done()
		l.write()
	}()
	go func() {
		defer l.e.wg.Done()
		l.ended(l.read())
	}()
	go func() {
		defer l.e.wg.Done()
		l.monitor()
	}()
}

// send encodes m and hands it to the link, its body next in the link's
// stream; a message it does not send ends the stream. borrowed says m's
// values stay the caller's (SendCopy): what is not copied into the slab
// now is copied into tensors of the link's own.
func (l *peerLink) send(m transport.Message, borrowed bool) error {
	l.encMu.Lock()
	defer l.encMu.Unlock()
	if l.unmapping { // a Send that raced Close: the slab is going
		return transport.ErrClosed
	}
	o, err := encode(m, &l.bodies, &l.out.slab, borrowed)
	if err == nil {
		err = l.enqueue(o)
	} else {
		err = errors.Wrapf(err, "%v", m)
	}
	if err != nil {
		l.bodies.reset()
	}
	return err
}

// encode lays out m's frame, its body the next in bodies, and copies each
// large tensor of an Activation or Gradient into the slab where it finds
// room (slab.go): everything Send can refuse of a message itself, it
// refuses here, before it takes pages (a link that is over refuses it
// after: its pages no longer matter). A borrowed message's other tensors
// are copied into tensors from the pools, which go back once written.
func encode(m transport.Message, bodies *bodyEncoder, s *slab, borrowed bool) (outgoing, error) {
	if len(m.Values) > maxValues {
		return outgoing{}, errors.Errorf("%d values in one message, at most %d", len(m.Values), maxValues)
	}
	body, fresh, err := bodies.encode(m.Body)
	if err != nil {
		return outgoing{}, err
	}
	if len(body) > maxBody {
		return outgoing{}, errors.Errorf("a body of %d bytes, at most %d", len(body), maxBody)
	}
	h := header{typ: frameMessage, kind: m.Kind, fresh: fresh, from: m.From, to: m.To, micro: int64(m.Micro), version: int64(m.Version), bodyLen: uint32(len(body))}
	o := outgoing{m: m, parts: [][]byte{body}}
	for i, v := range m.Values {
		d, raw, err := describe(v)
		if err != nil {
			return outgoing{}, errors.Wrapf(err, "value %d", i)
		}
		h.values = append(h.values, d)
		o.parts = append(o.parts, raw)
	}
	// The largest header: every dense value in the slab.
	if n := len(appendHeader(nil, h)) + 4*len(h.values); n > maxHeader {
		return outgoing{}, errors.Errorf("a header of %d bytes, at most %d", n, maxHeader)
	}
	if m.Own {
		o.put = m.Values
	}
	for i, v := range m.Values {
		raw := o.parts[i+1]
		if slabbed(m.Kind, h.values[i], raw) {
			if first, ok := s.take(pagesFor(len(raw))); ok {
				copy(s.mem[first*slabPage:], raw)
				h.values[i].form, h.values[i].page = formSlab, uint32(first)
				o.parts[i+1] = nil
				continue
			}
		}
		if borrowed && raw != nil {
			c, err := recycle.Copy(v)
			if err != nil {
				return outgoing{}, errors.Wrapf(err, "value %d", i) // unreachable: describe took it
			}
			_, o.parts[i+1], _ = describe(c)
			o.put = append(o.put, c)
		}
	}
	o.frame = frame(h)
	return o, nil
}

// slabbed says whether a value goes in the slab, if it has room: a dense
// float tensor of an Activation or Gradient, of at least slabMinBytes —
// the messages whose receiver, the stage runtime, returns their tensors
// once done (recycle.Put), as a lent tensor must be.
func slabbed(k transport.Kind, d valueDesc, raw []byte) bool {
	return (k == transport.Activation || k == transport.Gradient) && d.form == formDense &&
		(dtypes[d.dtype] == tensor.Float32 || dtypes[d.dtype] == tensor.Float64) && len(raw) >= slabMinBytes
}

// frame is h's length and encoding.
func frame(h header) []byte {
	b := appendHeader(make([]byte, 4, 64), h)
	binary.LittleEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// enqueue hands o to the link: the caller copies it into the ring itself
// when nothing is ahead of it and the ring has room for all of it (the
// caller's CPU would copy it anyway when its process has one, and a
// writer goroutine would first have to be woken), else the writer
// goroutine will.
//
// A queued message's tensors stay the writer's until it wrote them
// (writeMessage).
func (l *peerLink) enqueue(o outgoing) error {
	var werr error
	now := func(o outgoing) bool {
		if l.stop.Load() || l.out.free() < o.size() {
			return false
		}
		werr = l.writeMessage(o)
		return true
	}
	if err := linkstate.Enqueue(l.e.calls, l.st, o, now, l.peer, l.who, o.m.Kind); err != nil {
		return err
	}
	if werr != nil {
		le := &transport.LinkError{From: l.e.self, To: l.peer, Kind: o.m.Kind, Err: l.broke(werr)}
		l.ended(le)
		return le
	}
	return nil
}

// size is how many bytes o takes in the ring.
func (o outgoing) size() int {
	n := len(o.frame)
	for _, p := range o.parts {
		n += len(p)
	}
	return n
}

// writeMessage copies o into the ring and then, once it is all there,
// returns to the pools the tensors of a message marked Own, and the
// copies taken of a borrowed one's: the receiver has its own copy. Send
// (enqueue) and the writer goroutine both write with it, so a message's
// tensors go back only after it was written, by whoever wrote it.
func (l *peerLink) writeMessage(o outgoing) error {
	if err := l.writeFrame(o.frame, o.parts...); err != nil {
		return err
	}
	for _, v := range o.put {
		recycle.Put(v)
	}
	return nil
}

// write copies what is queued into the ring, in order, until the link is
// over.
func (l *peerLink) write() {
	for {
		var err error
		var kind transport.Kind
		switch a, o := l.st.Next(); a {
		case linkstate.Done:
			return
		case linkstate.SendByeAck:
			err = l.writeFrame(frame(header{typ: frameByeAck}))
		case linkstate.SendMessage:
			kind = o.m.Kind
			err = l.writeMessage(o)
		case linkstate.SendBye:
			err = l.writeFrame(frame(header{typ: frameBye}))
		}
		if err != nil {
			l.ended(&transport.LinkError{From: l.e.self, To: l.peer, Kind: kind, Err: l.broke(err)})
			return
		}
	}
}

func (l *peerLink) writeFrame(frame []byte, parts ...[]byte) error {
	if l.stop.Load() {
		return errStopped
	}
	return l.out.writeMessage(frame, parts...)
}

// read puts the messages that arrive into the mailbox until the link
// ends, and returns why it ended. It reads under rmu, which a Recv takes
// to read a whole message itself (inline.go); it waits for data without.
func (l *peerLink) read() *transport.LinkError {
	for {
		moved := func() bool { return l.in.avail() > 0 || l.inlineErr.Load() != nil }
		if err := l.in.sleep(offReaderAsleep, l.in.data1, moved); err != nil {
			return &transport.LinkError{From: l.peer, To: l.e.self, Err: l.broke(err)}
		}
		l.rmu.Lock()
		le := l.inlineErr.Load()
		for le == nil && l.in.avail() > 0 {
			le = l.readOne()
		}
		l.rmu.Unlock()
		if le != nil {
			return le
		}
	}
}

// readOne reads the next frame, which has begun, and puts its message in
// the mailbox. The caller holds rmu.
func (l *peerLink) readOne() *transport.LinkError {
	var kind transport.Kind
	bad := func(err error) *transport.LinkError {
		return &transport.LinkError{From: l.peer, To: l.e.self, Kind: kind, Err: errors.Wrap(err, "a corrupted or unexpected frame")}
	}
	var size [4]byte
	if err := l.in.read(size[:]); err != nil {
		return &transport.LinkError{From: l.peer, To: l.e.self, Err: l.broke(err)}
	}
	n := binary.LittleEndian.Uint32(size[:])
	if n == 0 || n > maxHeader {
		return bad(errors.Errorf("a header of %d bytes", n))
	}
	hb := make([]byte, n)
	if err := l.in.read(hb); err != nil {
		return &transport.LinkError{From: l.peer, To: l.e.self, Err: l.broke(err)}
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return bad(err)
	}
	kind = h.kind
	switch h.typ {
	case frameBye:
		l.st.ByeReceived()
		return nil
	case frameByeAck:
		l.st.ByeAckReceived()
		return nil
	}
	m, err := l.readMessage(h)
	if err != nil {
		if errors.Is(err, errStopped) {
			return &transport.LinkError{From: l.peer, To: l.e.self, Kind: kind, Err: l.broke(err)}
		}
		return bad(errors.Wrapf(err, "microbatch %d", h.micro))
	}
	if m.From != l.peer || m.To != l.e.self {
		putValues(m)
		return bad(errors.Errorf("a message from %v to %v on the link %v → %v", m.From, m.To, l.peer, l.e.self))
	}
	if l.e.box.Put(m) != nil { // the endpoint is closed: nobody will take it
		putValues(m)
	}
	return nil
}

// putValues returns the values of a received message nobody will take to
// the pools, and those lent from a slab to it.
func putValues(m transport.Message) {
	for _, v := range m.Values {
		recycle.Put(v)
	}
}

// readMessage reads the payload h announces: one copy out of the ring
// into tensors the message owns (Own), from the process's pools; a value
// in the slab is read in place, lent (recycle.Lend): the receiver's Put
// frees its pages.
func (l *peerLink) readMessage(h header) (transport.Message, error) {
	m := transport.Message{Kind: h.kind, From: h.from, To: h.to, Micro: int(h.micro), Version: int(h.version), Own: true}
	body := make([]byte, h.bodyLen)
	if err := l.in.read(body); err != nil {
		return m, err
	}
	if len(h.values) > 0 {
		m.Values = make([]gorgonia.Value, len(h.values))
	}
	for i, d := range h.values {
		v, err := l.readValue(d)
		if err != nil {
			m.Values = m.Values[:i]
			putValues(m) // what was read goes back: a lent tensor frees its pages
			m.Values = nil
			return m, errors.Wrapf(err, "value %d", i)
		}
		m.Values[i] = v
	}
	finish(m.Values)
	var err error
	if m.Body, err = l.unbodies.decode(body, h.fresh); err != nil {
		putValues(m)
		m.Values = nil
	}
	return m, err
}

// readValue reads the value d describes: out of the ring, or in place in
// the slab.
func (l *peerLink) readValue(d valueDesc) (gorgonia.Value, error) {
	if d.form != formSlab {
		v, raw, err := alloc(d)
		if err == nil {
			err = l.in.read(raw)
		}
		return v, err
	}
	n, _ := d.bytes() // checked by decodeHeader
	raw, err := l.in.slab.at(d.page, n)
	if err != nil {
		return nil, err
	}
	t, err := inPlace(d, raw)
	if err != nil {
		return nil, err
	}
	first, pages := int(d.page), pagesFor(n)
	l.lends.lend()
	recycle.Lend(t, func() { l.lends.giveBack(&l.in.slab, first, pages) })
	return t, nil
}

// monitor beats on the socket beside the rings and watches the peer's
// beats: a peer that closes the socket (its process ended) or beats no
// more for the stall timeout (stopped, hung) stops the link, with why.
func (l *peerLink) monitor() {
	beat := l.e.s.beat()
	heard, sent := time.Now(), time.Time{}
	buf := make([]byte, 64)
	for {
		if now := time.Now(); now.Sub(sent) >= beat {
			_ = l.conn.SetWriteDeadline(now.Add(beat))
			_, _ = l.conn.Write([]byte{0}) // a failure shows in the read
			sent = now
		}
		_ = l.conn.SetReadDeadline(sent.Add(beat))
		_, err := l.conn.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
			heard = time.Now()
		case errors.As(err, &ne) && ne.Timeout():
			if time.Since(heard) > l.e.s.stallTimeout {
				l.halt(errors.Errorf("%v beat no more for %v (the stall timeout): its process is stopped or stalled (SIGSTOP, hung); restart the pipeline, from the last checkpoint if there is one (or, if it pauses that long on purpose, give a longer stall timeout: shmnet.WithStallTimeout, which pipemare's stall timeout setting sets)",
					l.who, l.e.s.stallTimeout))
				return
			}
		default:
			l.halt(errors.Errorf("the link to %v broke: its process ended (%v); restart the pipeline, from the last checkpoint if there is one", l.who, err))
			return
		}
	}
}

// halt stops the link's rings for the reason why (nil: this endpoint
// tears down) and wakes whoever waits on them; the reader still reads
// what was written before.
func (l *peerLink) halt(why error) {
	if why != nil {
		l.why.CompareAndSwap(nil, &why)
	}
	l.stop.Store(true)
	_ = l.in.data1.signal()
	_ = l.out.room.signal()
}

// broke describes a link that failed: why the monitor stopped it, else
// err.
func (l *peerLink) broke(err error) error {
	if w := l.why.Load(); w != nil && errors.Is(err, errStopped) {
		return *w
	}
	return errors.Wrapf(err, "the link to %v broke", l.who)
}

// ended marks the link over; unless the peer had left or this endpoint
// is closing, the link is broken with le: the calls that involve it fail.
func (l *peerLink) ended(le *transport.LinkError) {
	broke := l.st.End(le)
	l.halt(nil)
	if broke {
		l.e.calls.Fail(le)
	}
}

// stopAll ends the link's goroutines at teardown; release frees its
// memory once they have returned.
func (l *peerLink) stopAll() {
	l.st.Stop()
	l.halt(nil)
	_ = l.conn.Close()
}

// release closes the link's eventfds and unmaps its memory, once: at
// once, or when the last tensor read in place from it comes back
// (lending).
func (l *peerLink) release() {
	l.encMu.Lock() // a Send copying into the slab finishes first
	l.unmapping = true
	l.encMu.Unlock()
	l.rmu.Lock() // a Recv reading the ring (readWhole) finishes first
	defer l.rmu.Unlock()
	if !l.released {
		l.released = true
		l.shared.closeEvents()
		l.lends.done(l.shared.unmap)
	}
}
