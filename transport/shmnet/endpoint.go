//go:build linux

package shmnet

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/internal/linkstate"
)

// Endpoint is one peer's transport.Endpoint over shared memory: a pair of
// rings to each peer it exchanges messages with, on this host. Open
// returns it with every link up; Close releases it.
type Endpoint struct {
	self  transport.Peer
	net   Network
	links []transport.Link // sorted, A < B
	s     settings
	box   *transport.Mailbox

	mu      sync.Mutex
	peers   map[transport.Peer]*peerLink
	accepts map[transport.Peer]bool
	calls   *linkstate.Endpoint // closed, the first link that broke
	// linked lists every link started, for Recv to read whole messages
	// from (inline.go) without taking mu; it is replaced, never changed.
	linked atomic.Pointer[[]*peerLink]

	wg        sync.WaitGroup // the goroutines the endpoint owns
	closeOnce sync.Once
	closeErr  error
}

var _ transport.Endpoint = (*Endpoint)(nil)

// Open connects peer self (transport.Driver, or a stage index) to the
// peers n links it to, on this host, and returns once every link is up
// and has passed the handshake: each side's identity (transport.Identity:
// the plan's fingerprint and the run's settings), number of stages and
// links must match, and the peer must run as this process's user. Of two
// linked peers the lower dials the higher (the driver dials every stage),
// so a stage listens on its socket while it dials those above; the
// processes may start in any order. Open refuses a peer whose handshake
// differs, saying what differs, at once; it gives up when ctx ends, and
// after the connect timeout with an error that is
// transport.ErrConnectTimeout (errors.Is) naming every peer that did not
// connect. On an error nothing is left open.
func Open(ctx context.Context, self transport.Peer, n Network, opts ...Option) (*Endpoint, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, errors.Wrapf(err, "%v", self)
	}
	links, err := n.validate(self)
	if err != nil {
		return nil, errors.Wrapf(err, "%v", self)
	}
	dials, accepts := transport.PeersOf(self, n.Stages, links)
	e := &Endpoint{self: self, net: n, links: links, s: s, box: transport.NewMailbox(),
		peers: make(map[transport.Peer]*peerLink), accepts: make(map[transport.Peer]bool)}
	for _, p := range accepts {
		e.accepts[p] = true
	}
	e.calls = linkstate.NewEndpoint(self, n.Stages, links)
	deadline := time.Now().Add(s.connectTimeout)
	// A refusal cancels octx with itself as the cause, so that a peer still
	// in its handshake with this one is told why this one gives up.
	cctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	octx, cancel := context.WithDeadlineCause(cctx, deadline, errConnectDeadline)
	defer cancel()
	var ln *net.UnixListener
	if len(accepts) > 0 {
		addr := n.socket(self)
		if ln, err = net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"}); err != nil {
			return nil, errors.Wrapf(err, "%v: listening on %s (does another process serve %v of this run?)", self, addr, self)
		}
	}
	results := make(chan error, len(dials)+1)
	for _, p := range dials {
		go func() { results <- e.dial(octx, p, deadline) }()
	}
	if ln != nil {
		go func() { results <- e.acceptAll(octx, ln, deadline) }()
	} else {
		results <- nil
	}
	var errs, silent []error
	for range len(dials) + 1 {
		err := <-results
		var u *unanswered
		switch {
		case errors.As(err, &u):
			silent = append(silent, err)
		case err != nil:
			errs = append(errs, err)
			giveUp(err) // a refusal ends the others' waits
		}
	}
	switch {
	case len(errs) > 0:
		err = errs[0]
	case len(silent) > 0 && ctx.Err() != nil:
		err = errors.Wrap(context.Cause(ctx), "connecting")
	case len(silent) > 0:
		// The connect deadline passed. The sockets' deadlines are the
		// same instant as octx's and may pass first: octx need not be
		// done yet (its cause nil), yet a peer is missing.
		err = e.timedOut(silent)
	}
	if err != nil {
		e.teardown()
		return nil, errors.Wrapf(err, "%v", self)
	}
	faultpoint.Reach(faultpoint.Point{Name: faultpoint.Opened, Stage: int(self)})
	return e, nil
}

// errConnectDeadline is the cause of Open's context once the connect
// timeout has passed.
var errConnectDeadline = errors.New("the connect timeout passed")

// unanswered is a peer that did not connect by the connect timeout: what
// was last heard of it.
type unanswered struct{ msg string }

func (e *unanswered) Error() string { return e.msg }

func (e *Endpoint) timedOut(silent []error) error {
	parts := make([]string, len(silent))
	for i, s := range silent {
		parts[i] = s.Error()
	}
	return &transport.ConnectTimeoutError{Msg: fmt.Sprintf("not connected within %v (the connect timeout): %s", e.s.connectTimeout, strings.Join(parts, "; "))}
}

// dial connects to stage p, retrying until it listens, and runs the
// handshake; at the connect timeout it returns an *unanswered.
func (e *Endpoint) dial(octx context.Context, p transport.Peer, deadline time.Time) error {
	addr := e.net.socket(p)
	var heard error
	for {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: addr, Net: "unixpacket"})
		if err == nil {
			return e.handshake(octx, c, p, addr, deadline)
		}
		heard = err
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			return errors.Wrapf(err, "dialing %v at %s", p, addr)
		}
		select {
		case <-octx.Done():
			if context.Cause(octx) != errConnectDeadline {
				return &unanswered{context.Cause(octx).Error()}
			}
			return &unanswered{fmt.Sprintf("%v at %s did not answer (is it running, and given the same run?): %v", p, addr, heard)}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// handshake hands stage p a new link's shared memory with this peer's
// hello, and checks its answer.
func (e *Endpoint) handshake(octx context.Context, c *net.UnixConn, p transport.Peer, addr string, deadline time.Time) error {
	defer context.AfterFunc(octx, func() { _ = c.SetDeadline(time.Now()) })()
	pid, err := credentials(c)
	if err != nil {
		c.Close()
		return errors.Wrapf(err, "%v at %s", p, addr)
	}
	who := peerAt(p, pid)
	h, fds, err := makeShared(e.s.ringSize)
	if err != nil {
		c.Close()
		return errors.Wrapf(err, "the shared memory of the link to %v", who)
	}
	err = sendHello(c, e.hello(), fds, deadline)
	closeFDs(fds[:1]) // the memfd: the mapping keeps the memory; the eventfds are h's
	if err == nil {
		faultpoint.Reach(faultpoint.Point{Name: faultpoint.HelloSent, Stage: int(p)})
	}
	// A peer that refused this one before reading its hello stopped
	// reading, failing the send, but its refusal is there to read
	// (answerNo).
	reply, got, rerr := recvHello(c, deadline)
	closeFDs(got)
	if err == nil || rerr == nil && reply.Refused != "" {
		err = rerr
	}
	switch {
	case err == nil && reply.Refused != "":
		err = errors.Errorf("%v refused the handshake: %s", who, reply.Refused)
	case err == nil:
		err = e.check(reply, who, p)
	case timedOut(err) || octx.Err() != nil && context.Cause(octx) == errConnectDeadline:
		err = &unanswered{fmt.Sprintf("%v at %s took the connection but did not answer the handshake (is it stalled, or overloaded?)", who, addr)}
	case octx.Err() != nil:
		err = &unanswered{context.Cause(octx).Error()}
	default:
		err = errors.Wrapf(err, "the handshake with %v broke off (its process may have died)", who)
	}
	if err != nil {
		c.Close()
		h.release()
		return err
	}
	e.add(e.newLink(p, pid, c, h, true))
	return nil
}

// timedOut reports whether err is a socket's deadline passing: the
// connect deadline, which the socket's deadline is.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// add registers a link whose handshake passed and starts it.
func (e *Endpoint) add(l *peerLink) {
	e.mu.Lock()
	e.peers[l.peer] = l
	var links []*peerLink
	if old := e.linked.Load(); old != nil {
		links = append(links, *old...)
	}
	links = append(links, l)
	e.linked.Store(&links)
	e.mu.Unlock()
	l.start()
}

// acceptAll takes the links of the peers that dial this stage until every
// one has come; a refusal ends it at once. When it returns it stops
// listening and answers every peer still in line with why (turnAway), so
// a peer that dialed in just then learns the cause instead of finding its
// connection reset.
func (e *Endpoint) acceptAll(octx context.Context, ln *net.UnixListener, deadline time.Time) (err error) {
	conns := make(chan *net.UnixConn)
	done := make(chan struct{})
	var why error // why a peer still in line is turned away; set before done closes
	var wg sync.WaitGroup
	defer func() {
		why = e.whyTurnedAway(octx, err)
		shutListener(ln) // no new connection from here on
		close(done)
		for _, c := range queuedConns(ln) {
			wg.Go(func() { e.turnAway(c, why) })
		}
		_ = ln.Close()
		wg.Wait()
	}()
	wg.Go(func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return // the listener is closed
			}
			select {
			case conns <- c:
			case <-done:
				e.turnAway(c, why)
			}
		}
	})
	handled := make(chan error)
	pending := 0
	var firstErr error
	for {
		missing := e.missing()
		if len(missing) == 0 && pending == 0 {
			return firstErr
		}
		select {
		case c := <-conns:
			if firstErr != nil {
				wg.Go(func() { e.turnAway(c, firstErr) })
				break
			}
			pending++
			wg.Go(func() { handled <- e.accept(octx, c, deadline) })
		case err := <-handled:
			pending--
			if err != nil && firstErr == nil {
				firstErr = err
				shutListener(ln)
			}
		case <-octx.Done():
			for ; pending > 0; pending-- {
				if err := <-handled; err != nil && firstErr == nil {
					firstErr = err
				}
			}
			if firstErr != nil {
				return firstErr
			}
			if missing = e.missing(); len(missing) == 0 {
				return nil
			}
			return &unanswered{fmt.Sprintf("%s did not connect to %v (are they running, and given the same run?)", transport.PeerList(missing), e.self)}
		}
		if firstErr != nil && pending == 0 {
			return firstErr
		}
	}
}

// missing are the peers that dial this one and have not yet.
func (e *Endpoint) missing() []transport.Peer {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []transport.Peer
	for p := transport.Driver; p < transport.Peer(e.net.Stages); p++ {
		if e.accepts[p] && e.peers[p] == nil {
			out = append(out, p)
		}
	}
	return out
}

// accept runs the handshake of a peer that dialed in: it checks its user
// and hello, maps the shared memory it handed over, and answers. A peer
// that fails the handshake is refused, saying why, and fails Open.
func (e *Endpoint) accept(octx context.Context, c *net.UnixConn, deadline time.Time) error {
	defer context.AfterFunc(octx, func() { _ = c.SetDeadline(time.Now()) })()
	pid, err := credentials(c)
	if err != nil {
		return e.refuse(c, err)
	}
	h, fds, err := recvHello(c, deadline)
	if err != nil {
		closeFDs(fds)
		if octx.Err() != nil || timedOut(err) { // it stalled, or this one gives up: the missing peer is named
			e.turnAway(c, e.whyTurnedAway(octx, nil))
			return nil
		}
		c.Close()
		return errors.Wrapf(err, "the handshake of a peer (pid %d)", pid)
	}
	claimed := transport.Peer(h.Peer)
	who := peerAt(claimed, pid)
	faultpoint.Reach(faultpoint.Point{Name: faultpoint.HelloReceived, Stage: int(claimed)})
	if err := e.check(h, who, transport.AnyPeer); err != nil {
		closeFDs(fds)
		return e.refuse(c, err)
	}
	if err := e.claim(claimed, who); err != nil {
		closeFDs(fds)
		return e.refuse(c, err)
	}
	shared, err := takeShared(fds, h.Ring)
	if err == nil {
		err = sendHello(c, e.hello(), nil, deadline)
		if err != nil {
			shared.release()
		}
	}
	if err != nil {
		e.unclaim(claimed)
		c.Close()
		return errors.Wrapf(err, "the handshake of %v", who)
	}
	l := e.newLink(claimed, pid, c, shared, false)
	e.mu.Lock()
	e.peers[claimed] = l
	e.mu.Unlock()
	l.start()
	return nil
}

// claim reserves peer p's place, unless it should not dial this one.
func (e *Endpoint) claim(p transport.Peer, who string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, taken := e.peers[p]
	switch {
	case !e.accepts[p]:
		return errors.Errorf("%s dialed %v, which does not take links from it (the lower of two linked peers dials)", who, e.self)
	case taken:
		return errors.Errorf("a second %s: %v is connected already (two processes run the same stage?)", who, p)
	}
	e.peers[p] = nil // reserved: accept fills it in
	return nil
}

func (e *Endpoint) unclaim(p transport.Peer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.peers, p)
}

// refuse answers a peer that failed the handshake with why, and closes
// its connection; the error fails Open.
func (e *Endpoint) refuse(c *net.UnixConn, why error) error {
	answerNo(c, why.Error())
	return errors.Wrap(why, "refused a peer")
}

// turnAway answers a peer that dialed in while this one gives up opening
// its links with why, and closes its connection.
func (e *Endpoint) turnAway(c *net.UnixConn, why error) {
	answerNo(c, fmt.Sprintf("%v gave up opening its links: %v", e.self, why))
}

// whyTurnedAway is why a peer that dials in once acceptAll returned err
// is turned away: err when a peer that dialed in failed; else the cause
// this endpoint gives up for when it is not the connect timeout (another
// of its links failed, or its caller cancelled: the peers acceptAll
// still missed did not fail it); else err (the peers missing at the
// connect timeout), or that timeout; else its having every peer it takes
// links from already.
func (e *Endpoint) whyTurnedAway(octx context.Context, err error) error {
	var missed *unanswered
	cause := context.Cause(octx)
	switch {
	case err != nil && !errors.As(err, &missed):
		return err
	case cause != nil && cause != errConnectDeadline:
		return cause
	case err != nil:
		return err
	case cause != nil:
		return cause
	}
	return errors.Errorf("every peer that dials %v is connected already (two processes run the same stage?)", e.self)
}

// Self is the peer this endpoint belongs to.
func (e *Endpoint) Self() transport.Peer { return e.self }

// Send gives m to its destination (m.To, a peer linked to this one) and
// returns without waiting: it copies m into the ring itself when nothing
// is queued ahead of it and the ring has room, else queues it for the
// link's writer goroutine, so FIFO holds and the caller's compute overlaps
// the transfer. The queue is not bounded. It
// fails at once for a body gob cannot encode, a value that is neither a
// *tensor.Dense nor a gorgonia scalar of a supported dtype, or a
// destination with no link; after Close (ErrClosed); and when the
// destination's link broke or the destination closed (a
// *transport.LinkError naming the link). A message to this endpoint itself
// is put in its own mailbox as it is. The dense tensors of a message
// marked Own go back to the process's pools once copied into the ring or
// the slab; a received Activation's or Gradient's come from the pools, or
// are lent from the slab (recycle.Lend).
func (e *Endpoint) Send(ctx context.Context, m transport.Message) error {
	return e.send(ctx, m, false)
}

// SendCopy is Send for a message whose values stay the caller's
// (transport.Copier): a large tensor of an Activation or Gradient is
// copied once, into the shared memory its receiver computes on in place,
// where there is room (slab.go); the other values are copied into
// tensors from the process's pools, sent as Send sends a message marked
// Own. To this endpoint itself it sends nothing (false).
func (e *Endpoint) SendCopy(ctx context.Context, m transport.Message) (bool, error) {
	if m.To == e.self {
		return false, nil
	}
	m.Own = false
	return true, e.send(ctx, m, true)
}

func (e *Endpoint) send(ctx context.Context, m transport.Message, borrowed bool) error {
	if done, err := e.calls.Begin(ctx, e.box, &m); done {
		return err
	}
	e.mu.Lock()
	l := e.peers[m.To]
	e.mu.Unlock()
	if l == nil {
		return e.calls.NoLink(e.self, m.To, m.Kind)
	}
	return l.send(m, borrowed)
}

// Recv returns the next message of kind k from peer from (AnyPeer: the
// earliest from any peer), as grpcnet's Endpoint does: it waits at most
// the receive timeout (then a *transport.LinkError caused by
// transport.ErrTimeout); a link that broke, or a peer that closed, with
// nothing left to read, makes it return a *transport.LinkError naming the
// link — for AnyPeer, the first link that broke once nothing of kind k is
// queued. Other links go on working. After Close it returns ErrClosed;
// when ctx ends, ctx's error.
func (e *Endpoint) Recv(ctx context.Context, from transport.Peer, k transport.Kind) (transport.Message, error) {
	if err := e.calls.Closed(); err != nil {
		return transport.Message{}, err
	}
	var l *peerLink
	if from != transport.AnyPeer && from != e.self {
		e.mu.Lock()
		l = e.peers[from]
		e.mu.Unlock()
		if l == nil {
			return transport.Message{}, e.calls.NoLink(from, e.self, k)
		}
	}
	w := transport.Wait{Timeout: e.s.recvTimeout, Broken: e.calls.AnyBroken}
	if l != nil {
		w.Departed, w.Broken = l.st.Departed, l.st.Broken
	}
	e.readWhole()
	m, err := e.box.TakeWithin(ctx, from, k, w)
	if err != nil {
		who := from.String()
		if l != nil {
			who = l.who
		}
		return transport.Message{}, e.calls.RecvError(err, from, who, k, e.s.recvTimeout, "shmnet.WithRecvTimeout, which pipemare's receive timeout setting sets")
	}
	return m, nil
}

// Close flushes what was sent, tells each peer it is leaving, waits (at
// most the receive timeout; the connect timeout, if shorter, once a link
// broke or a peer left) until each has read it all, and stops every goroutine, closes
// every socket and eventfd and unmaps every ring (a link's memory once the
// last tensor lent from its slab is back; the values of messages nobody
// took go back now). Pending and later calls
// fail with ErrClosed. It returns an error naming the links whose
// messages could not be delivered. It is safe to call more than once.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.calls.Close()
		links := make([]*peerLink, 0, len(e.peers))
		for _, l := range e.peers {
			if l != nil {
				links = append(links, l)
			}
		}
		e.mu.Unlock()
		for _, m := range e.box.Fail(transport.ErrClosed) {
			putValues(m) // nobody will take them: their slab pages go back
		}
		e.closeErr = e.flush(links)
		e.teardown()
	})
	return e.closeErr
}

// flush sends each peer of links whose link has not broken what is
// queued and a Bye, and waits until each has acknowledged it: at most the
// receive timeout, and the connect timeout if shorter once a link broke or
// a peer left (linkstate.Flush).
func (e *Endpoint) flush(links []*peerLink) error {
	states := make([]*linkstate.State[outgoing], len(links))
	peers := make([]transport.Peer, len(links))
	names := make([]string, len(links))
	for i, l := range links {
		states[i], peers[i], names[i] = l.st, l.peer, l.who
	}
	return linkstate.Flush(e.self, states, peers, names, e.s.recvTimeout, e.s.connectTimeout)
}

// teardown stops every link's goroutines, then frees what they used.
func (e *Endpoint) teardown() {
	e.mu.Lock()
	links := make([]*peerLink, 0, len(e.peers))
	for _, l := range e.peers {
		if l != nil {
			links = append(links, l)
		}
	}
	e.mu.Unlock()
	for _, l := range links {
		l.stopAll()
	}
	e.wg.Wait()
	for _, l := range links {
		l.release()
	}
	e.calls.Stop()
}
