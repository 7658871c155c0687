package grpcnet

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkg/errors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pipemare/pipemare/transport"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
	"github.com/pipemare/pipemare/transport/internal/linkstate"
)

// Endpoint is one peer's transport.Endpoint over gRPC: one bidirectional
// stream to each peer it exchanges messages with. Open returns it with
// every stream up; Close releases it.
type Endpoint struct {
	self  transport.Peer
	net   Network
	links []transport.Link // sorted, A < B
	s     settings
	box   *transport.Mailbox

	deadline time.Time       // Open's connect deadline
	base     context.Context // the dialed streams' context: cancelled at teardown
	cancel   context.CancelFunc
	srv      *grpc.Server
	refusals *refusals

	mu      sync.Mutex
	conns   []*grpc.ClientConn
	peers   map[transport.Peer]*peerLink
	accepts map[transport.Peer]bool // the peers that dial this one
	opened  bool
	arrived chan struct{}       // closed and replaced when a peer dials in or is refused
	refused error               // the first peer refused while opening
	calls   *linkstate.Endpoint // closed, the first link that broke

	wg        sync.WaitGroup // the goroutines the endpoint owns
	closeOnce sync.Once
	closeErr  error
}

var _ transport.Endpoint = (*Endpoint)(nil)

// maxValues bounds the tensors of one message so that its header fits in a
// frame.
const maxValues = 10_000

// Open connects peer self (transport.Driver, or a stage index) to the
// peers n links it to, and returns once every stream is up and has passed
// the handshake: each side's identity, number of stages, links and plan
// fingerprint must match. Of two linked peers the lower dials the higher
// (the driver dials every stage), so a stage listens on its address (or
// WithListener, WithListenAddr) and waits for the peers below it while it
// dials those above; the processes may start in any order. Open refuses
// any peer whose handshake differs, saying what differs, and a stage whose
// certificate does not verify, at once. It gives up when ctx ends, and
// after the connect timeout (WithConnectTimeout), counted from the call,
// with an error that is transport.ErrConnectTimeout (errors.Is) and names every peer
// that did not connect, its address, and what was last heard of it. Every
// process of a pipeline calls Open with the same Network.
func Open(ctx context.Context, self transport.Peer, n Network, opts ...Option) (*Endpoint, error) {
	s, err := newSettings(opts)
	if err != nil {
		return nil, errors.Wrapf(err, "%v", self)
	}
	links, err := n.validate(self)
	if err != nil {
		return nil, errors.Wrapf(err, "%v", self)
	}
	dials, accepts := transport.PeersOf(self, n.stages(), links)
	e := &Endpoint{
		self: self, net: n, links: links, s: s, box: transport.NewMailbox(),
		peers: make(map[transport.Peer]*peerLink), accepts: make(map[transport.Peer]bool),
		arrived: make(chan struct{}),
	}
	for _, p := range accepts {
		e.accepts[p] = true
	}
	e.base, e.cancel = context.WithCancel(context.Background())
	e.calls = linkstate.NewEndpoint(self, n.stages(), links)
	e.deadline = time.Now().Add(s.connectTimeout)
	octx, ocancel := context.WithDeadlineCause(ctx, e.deadline, errConnectDeadline)
	defer ocancel()
	if self != transport.Driver {
		if err := e.serve(); err != nil {
			e.teardown(0)
			return nil, errors.Wrapf(err, "%v", self)
		}
	} else if s.insecure {
		if err := checkInsecure(n.Addrs); err != nil {
			return nil, errors.Wrapf(err, "%v", self)
		}
	}
	if err := e.connect(octx, ocancel, dials); err != nil {
		e.teardown(refusalGrace)
		return nil, errors.Wrapf(err, "%v", self)
	}
	e.mu.Lock()
	e.opened = true
	e.mu.Unlock()
	faultpoint.Reach(faultpoint.Point{Name: faultpoint.Opened, Stage: int(self)})
	return e, nil
}

// errConnectDeadline is the cause of Open's context once the connect
// timeout has passed.
var errConnectDeadline = errors.New("the connect timeout passed")

// unanswered is a dial that gave up at the connect timeout: what it last
// heard of the peer.
type unanswered struct{ msg string }

func (e *unanswered) Error() string { return e.msg }

// serve starts a stage's server.
func (e *Endpoint) serve() error {
	lis := e.s.listener
	addr := e.net.Addrs[e.self]
	if e.s.listenAddr != "" {
		addr = e.s.listenAddr
	}
	if e.s.insecure {
		listen := addr
		if lis != nil {
			listen = lis.Addr().String()
		}
		if err := checkInsecure(append([]string{listen}, e.net.Addrs...)); err != nil {
			if lis != nil {
				_ = lis.Close()
			}
			return err
		}
	}
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", addr); err != nil {
			return errors.Wrap(err, "listening")
		}
	}
	e.refusals = newRefusals(e.s.serverCreds())
	ka := e.keepalive()
	e.srv = grpc.NewServer(
		grpc.Creds(e.refusals),
		grpc.MaxRecvMsgSize(e.s.maxFrame()), grpc.MaxSendMsgSize(e.s.maxFrame()),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: ka.Time, Timeout: ka.Timeout}),
		// Allow the clients' pings: by default a server refuses pings
		// more often than every 5 minutes and closes the connection.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minPing / 2, PermitWithoutStream: true}),
		grpc.WaitForHandlers(true),
		grpc.ForceServerCodecV2(frameCodec{}), experimental.BufferPool(bufferPool),
		grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(connWindow),
		grpc.ReadBufferSize(readBuffer),
	)
	pb.RegisterLinkServer(e.srv, server{e: e})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.srv.Serve(lis) // returns at Stop
	}()
	return nil
}

// streamWindow and connWindow are HTTP/2's flow-control windows, per
// stream and per connection. grpc-go starts at 64 KiB and grows the window
// as it measures the link, each step a round trip that needs the
// receiver's reader to run; a stage process with one core runs its reader
// only when its compute waits, so a tensor of a few MiB crawled across in
// window-sized pieces while the receiver computed. A window larger than
// any activation lets the sender write a whole message at once; the
// receiver's reader drains every stream into its mailbox in any case, so
// it buffers no more than it did.
const (
	streamWindow = 64 << 20
	connWindow   = 256 << 20
)

// readBuffer is the buffer gRPC reads a connection through, one per
// connection (grpc-go's default is 32 KiB). A read takes what the socket
// holds, up to the buffer: with 32 KiB, a read system call every two
// HTTP/2 frames was the largest cost of a tensor's bytes on loopback; with
// 1 MiB a read takes a whole chunk once it has arrived (docs/speed.md).
// The write buffer stays at gRPC's 32 KiB: a larger one costs a copy more
// than it saves in system calls, and over TLS each 16 KiB record is a
// write of its own anyway.
const readBuffer = 1 << 20

// minPing is the shortest keepalive interval grpc-go lets a client use.
const minPing = 10 * time.Second

// keepalive pings a connection after half the stall timeout without a
// frame (at least every 10 s, grpc-go's least) and drops it when the ping
// is not answered by the end of the stall timeout: a peer that is stopped,
// hung or gone without closing its connection is noticed within the stall
// timeout of its last frame.
func (e *Endpoint) keepalive() keepalive.ClientParameters {
	t := max(e.s.stallTimeout/2, minPing)
	return keepalive.ClientParameters{Time: t, Timeout: e.s.stallTimeout - t, PermitWithoutStream: true}
}

func (e *Endpoint) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(e.s.clientCreds()),
		grpc.WithKeepaliveParams(e.keepalive()),
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(e.s.maxFrame()), grpc.MaxCallSendMsgSize(e.s.maxFrame()), grpc.ForceCodecV2(frameCodec{})),
		experimental.WithBufferPool(bufferPool), grpc.WithReadBufferSize(readBuffer),
		// Peers start in any order: retry a refused connection quickly.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
}

// connect dials the peers above this one and waits for those below. A
// refusal, a mismatch or a certificate that does not verify ends it at
// once; at the connect timeout it names every peer still missing.
func (e *Endpoint) connect(octx context.Context, ocancel context.CancelFunc, dials []transport.Peer) error {
	errc := make(chan error, len(dials))
	for _, p := range dials {
		go func() { errc <- e.dial(octx, p) }()
	}
	pending := len(dials)
	defer func() { // wait for the dials still running
		ocancel()
		for ; pending > 0; pending-- {
			<-errc
		}
	}()
	var silent []string // the dials that gave up at the connect timeout
	for {
		e.mu.Lock()
		var missing []transport.Peer
		for p := range e.accepts {
			if e.peers[p] == nil {
				missing = append(missing, p)
			}
		}
		refused, arrived := e.refused, e.arrived
		e.mu.Unlock()
		slices.Sort(missing)
		if refused != nil {
			return refused
		}
		// Not past the deadline either: a process stopped beyond it finds
		// its timer not yet fired when it goes on.
		if pending == 0 && len(missing) == 0 && len(silent) == 0 && octx.Err() == nil && time.Now().Before(e.deadline) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if le := e.calls.Failure(); le != nil { // a stream broke right after its handshake
				return le
			}
			return nil
		}
		var u *unanswered
		select {
		case err := <-errc:
			pending--
			switch {
			case errors.As(err, &u):
				silent = append(silent, u.msg)
			case err != nil:
				return err
			}
			if pending > 0 || len(missing) > 0 || len(silent) == 0 {
				continue
			}
		case <-arrived:
			continue
		case <-octx.Done():
		}
		if cause := context.Cause(octx); cause != errConnectDeadline {
			return errors.Wrap(cause, "connecting")
		}
		for ; pending > 0; pending-- { // they end now
			if err := <-errc; errors.As(err, &u) {
				silent = append(silent, u.msg)
			} else if err != nil {
				return err
			}
		}
		return e.timedOut(missing, silent)
	}
}

// timedOut is the error of an Open whose connect timeout passed: the peers
// that never dialed in, and what each dial that gave up last heard.
func (e *Endpoint) timedOut(missing []transport.Peer, silent []string) error {
	parts := silent
	if len(missing) == 0 && len(silent) == 0 { // they came, but too late
		parts = []string{"the last of its peers connected only after it"}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("%s did not connect to %v (are they running, and given this stage's address?)", transport.PeerList(missing), e.self)
		if e.refusals != nil {
			if r := e.refusals.lastRefusal(); r != nil {
				msg = fmt.Sprintf("%s; the last connection refused: %v", msg, r)
			}
		}
		parts = append([]string{msg}, parts...)
	}
	return &transport.ConnectTimeoutError{Msg: fmt.Sprintf("not connected within %v (the connect timeout): %s", e.s.connectTimeout, strings.Join(parts, "; "))}
}

// dial opens the stream to stage p, retrying until p answers or octx
// ends; at the connect timeout it returns an *unanswered.
func (e *Endpoint) dial(octx context.Context, p transport.Peer) error {
	addr := e.net.Addrs[p]
	conn, err := grpc.NewClient(addr, e.dialOptions()...)
	if err != nil {
		return errors.Wrapf(err, "%v at %s", p, addr)
	}
	e.mu.Lock()
	e.conns = append(e.conns, conn)
	e.mu.Unlock()
	client := pb.NewLinkClient(conn)
	var heard error // the last failure that was not the deadline's cut
	for {
		err := e.handshake(octx, client, p, addr)
		if err != nil && !errors.Is(err, errHandshakeCut) {
			heard = err
		}
		var m *mismatch
		switch {
		case err == nil:
			return nil
		case errors.As(err, &m):
			return m.err
		case permanent(err):
			return errors.Wrapf(err, "%v at %s: the TLS handshake failed", p, addr)
		}
		select {
		case <-octx.Done():
			if context.Cause(octx) != errConnectDeadline {
				return context.Cause(octx)
			}
			switch {
			case errors.Is(err, errHandshakeCut) && conn.GetState() == connectivity.Ready:
				return &unanswered{fmt.Sprintf("%v at %s took the stream but did not answer the handshake (is it stalled, or overloaded?)", p, addr)}
			case heard == nil:
				return &unanswered{fmt.Sprintf("%v at %s did not complete the connection (is it stalled, or its host unreachable?)", p, addr)}
			}
			return &unanswered{fmt.Sprintf("%v at %s did not answer (is it running, and is the address right?): %s", p, addr, lastWord(heard))}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errHandshakeCut is a handshake that the end of Open's context cut short:
// the peer took the stream but had not answered.
var errHandshakeCut = errors.New("the handshake was cut short")

// lastWord is what a failed dial last heard: gRPC's description of it.
func lastWord(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// mismatch is a handshake that cannot succeed by retrying.
type mismatch struct{ err error }

func (m *mismatch) Error() string { return m.err.Error() }

// handshake opens one stream to p and exchanges hellos.
func (e *Endpoint) handshake(octx context.Context, client pb.LinkClient, p transport.Peer, addr string) error {
	sctx, scancel := context.WithCancel(e.base)
	stop := context.AfterFunc(octx, scancel)
	stream, err := client.Stream(sctx)
	var f *pb.Frame
	if err == nil {
		err = stream.Send(e.hello())
	}
	if err == nil {
		faultpoint.Reach(faultpoint.Point{Name: faultpoint.HelloSent, Stage: int(p)})
		f, err = stream.Recv()
	}
	if status.Code(err) == codes.FailedPrecondition {
		err = &mismatch{errors.Errorf("%v at %s refused the handshake: %s", p, addr, status.Convert(err).Message())}
	}
	if err == nil {
		h := f.GetHello()
		if herr := e.checkHello(h, addr, p); herr != nil {
			err = &mismatch{herr}
		}
	}
	if !stop() { // octx ended: whatever the stream said, it was cut short
		err = errHandshakeCut
	}
	if err != nil {
		scancel()
		return err
	}
	l := e.newLink(p, addr, stream, scancel)
	e.mu.Lock()
	e.peers[p] = l
	e.mu.Unlock()
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		l.write()
	}()
	go func() {
		defer e.wg.Done()
		l.readerEnded(l.read())
	}()
	return nil
}

// server is the gRPC service of a stage: it accepts the streams of the
// peers below it.
type server struct {
	pb.UnimplementedLinkServer
	e *Endpoint
}

func (s server) Stream(stream pb.Link_StreamServer) error {
	e := s.e
	remote := remoteAddr(stream.Context())
	f, err := stream.Recv()
	if err != nil {
		return err
	}
	h := f.GetHello()
	claimed := transport.Peer(h.GetPeer())
	faultpoint.Reach(faultpoint.Point{Name: faultpoint.HelloReceived, Stage: int(claimed)})
	if err := e.checkHello(h, remote, transport.AnyPeer); err != nil {
		return e.refuse(err)
	}
	l := e.newLink(claimed, remote, stream, nil)
	if err := e.accept(l); err != nil {
		return e.refuse(err)
	}
	if err := stream.Send(e.hello()); err != nil {
		l.readerEnded(err)
		return err
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		l.write()
	}()
	l.readerEnded(l.read())
	<-l.writerDone // the stream must not be used once this returns
	return nil
}

// accept registers a peer that dialed in, unless it should not have.
func (e *Endpoint) accept(l *peerLink) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch old := e.peers[l.peer]; {
	case e.calls.Closed() != nil:
		return errors.Errorf("%v is closing", e.self)
	case !e.accepts[l.peer]:
		return errors.Errorf("%v at %s dialed %v, which does not take streams from it (the lower of two linked peers dials; are the processes given the same stage addresses?)", l.peer, l.addr, e.self)
	case old != nil:
		return errors.Errorf("a second %v at %s: %v is already connected from %s (two processes run the same stage?)", l.peer, l.addr, l.peer, old.addr)
	}
	e.peers[l.peer] = l
	close(e.arrived)
	e.arrived = make(chan struct{})
	return nil
}

// refuse ends a stream whose peer failed the handshake; while opening, it
// also fails Open.
func (e *Endpoint) refuse(err error) error {
	e.mu.Lock()
	if !e.opened && e.refused == nil {
		e.refused = errors.Wrap(err, "refused a peer")
		close(e.arrived)
		e.arrived = make(chan struct{})
	}
	e.mu.Unlock()
	return status.Error(codes.FailedPrecondition, err.Error())
}

// Self is the peer this endpoint belongs to.
func (e *Endpoint) Self() transport.Peer { return e.self }

// Send queues m for its destination (m.To, a peer linked to this one) and
// returns; a writer goroutine per stream encodes and sends it, so the
// caller's compute overlaps the transfer (on a process of one P, as a
// pinned stage process runs, Send yields to the writers first: they then
// write before the caller computes on). It fails at once for a body that
// gob cannot encode (register the body's type with gob.Register), a value
// that is neither a *tensor.Dense nor a gorgonia scalar of a supported
// dtype, or a destination with no link; after Close (ErrClosed); and when
// the destination's link broke or the destination closed (a
// *transport.LinkError naming the link). The queue is not bounded: a sender far ahead of its receiver holds
// its messages in memory. A message to this endpoint itself is put in its
// own mailbox as it is, as transport.Local does.
//
// A message's tensors belong to its receiver once sent (package
// transport): here the dense tensors of a message marked Own go back to
// the process's pools (internal/recycle) once their frames are written, and
// a received message's are taken from the pools and the message is marked
// Own, for the receiver to return its tensors when done.
func (e *Endpoint) Send(ctx context.Context, m transport.Message) error {
	if done, err := e.calls.Begin(ctx, e.box, &m); done {
		return err
	}
	e.mu.Lock()
	l := e.peers[m.To]
	e.mu.Unlock()
	if l == nil {
		return e.calls.NoLink(e.self, m.To, m.Kind)
	}
	if len(m.Values) > maxValues {
		return errors.Errorf("%v: %d values in one message, at most %d", m, len(m.Values), maxValues)
	}
	if err := checkEncodable(m.Values); err != nil {
		return errors.Wrapf(err, "%v", m)
	}
	body, err := transport.EncodeBody(m.Body)
	if err != nil {
		return errors.Wrapf(err, "%v", m)
	}
	err = l.enqueue(outgoing{m: m, body: body})
	if runtime.GOMAXPROCS(0) == 1 {
		// The link's writer and gRPC's loopy writer carry the message to
		// the socket; on the process's one P they would wait for the
		// caller to block, which a stage with its next input queued does
		// only after its next action, while its peer waits for this one.
		runtime.Gosched()
	}
	return err
}

// Recv returns the next message of kind k from peer from (AnyPeer: the
// earliest from any peer). It waits at most the receive timeout: a peer
// that sends nothing for that long makes it return a *transport.LinkError
// naming the link, caused by transport.ErrTimeout; a peer whose link broke,
// or that closed its endpoint, with nothing left to read, makes it return
// a *transport.LinkError naming that link — and, for AnyPeer, so does the
// first link that broke once nothing of kind k is queued. A broken link
// fails only the calls that involve it: messages already received from
// other peers, and their links, go on working. After Close it returns
// ErrClosed; when ctx ends, ctx's error.
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
	m, err := e.box.TakeWithin(ctx, from, k, w)
	if err != nil {
		return transport.Message{}, e.calls.RecvError(err, from, from.String(), k, e.s.recvTimeout, "grpcnet.WithRecvTimeout")
	}
	return m, nil
}

// Close flushes what was sent, tells each peer it is leaving, waits (at
// most the receive timeout) until each has read it all, and stops every
// goroutine and connection of the endpoint. Once a link broke the pipeline
// is failing, and once a peer left it is over: Close then waits for the
// other peers at most the connect timeout, if it is shorter, so that a
// stalled peer does not hold it up. Pending and
// later calls fail with ErrClosed. It returns an error naming the links
// whose messages could not be delivered (the links that broke are only
// released). It is safe to call more than once.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.calls.Close()
		links := make([]*peerLink, 0, len(e.peers))
		for _, l := range e.peers {
			links = append(links, l)
		}
		e.mu.Unlock()
		e.box.Fail(transport.ErrClosed)
		e.closeErr = e.flush(links)
		e.teardown(0)
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
		states[i], peers[i], names[i] = l.st, l.peer, l.peer.String()
	}
	return linkstate.Flush(e.self, states, peers, names, e.s.recvTimeout, e.s.connectTimeout)
}

// refusalGrace is how long a stage whose Open failed keeps its server up
// so that the refusals it answered reach their peers.
const refusalGrace = time.Second

// teardown stops everything Open started; with a grace period, the server
// first stops gracefully for at most that long, so that what its handlers
// answered reaches the peers.
func (e *Endpoint) teardown(grace time.Duration) {
	e.cancel()
	if e.srv != nil && grace > 0 {
		done := make(chan struct{})
		go func() {
			e.srv.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(grace):
		}
		e.srv.Stop()
		<-done
	}
	if e.srv != nil {
		e.srv.Stop()
	}
	e.mu.Lock()
	conns := e.conns
	links := make([]*peerLink, 0, len(e.peers))
	for _, l := range e.peers {
		links = append(links, l)
	}
	e.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, l := range links {
		l.stop()
	}
	e.wg.Wait()
}
