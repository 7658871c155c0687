package grpcnet

import (
	"context"
	"github.com/pipemare/pipemare/internal/recycle"
	"strings"

	"github.com/pkg/errors"
	"google.golang.org/grpc/peer"

	"github.com/pipemare/pipemare/transport"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
	"github.com/pipemare/pipemare/transport/internal/linkstate"
)

// frameStream is either side of a link's gRPC stream.
type frameStream interface {
	Send(*pb.Frame) error
	Recv() (*pb.Frame, error)
	// SendMsg and RecvMsg take the frame codec's types too (outChunk,
	// inFrame).
	SendMsg(any) error
	RecvMsg(any) error
}

// peerLink is the stream between this endpoint and one peer: a queue that
// Send fills and a writer goroutine empties, and a reader that puts what
// arrives into the endpoint's mailbox.
type peerLink struct {
	e      *Endpoint
	peer   transport.Peer
	addr   string // the peer's address, for messages
	stream frameStream
	end    context.CancelFunc // ends a dialed stream (nil for an accepted one)

	st         *linkstate.State[outgoing] // the queue, the Byes, how the stream ended
	writerDone chan struct{}
}

// outgoing is a message queued for sending, its body already encoded.
type outgoing struct {
	m    transport.Message
	body []byte
}

func (e *Endpoint) newLink(p transport.Peer, addr string, s frameStream, end context.CancelFunc) *peerLink {
	return &peerLink{e: e, peer: p, addr: addr, stream: s, end: end, st: linkstate.New[outgoing](), writerDone: make(chan struct{})}
}

// enqueue queues o for the writer.
func (l *peerLink) enqueue(o outgoing) error {
	return linkstate.Enqueue(l.e.calls, l.st, o, nil, l.peer, l.peer.String(), o.m.Kind)
}

// write sends what is queued, in order, until the stream is over.
func (l *peerLink) write() {
	defer close(l.writerDone)
	for {
		var err error
		var kind transport.Kind
		switch a, o := l.st.Next(); a {
		case linkstate.Done:
			return
		case linkstate.SendByeAck:
			err = l.stream.Send(&pb.Frame{Frame: &pb.Frame_ByeAck{ByeAck: &pb.ByeAck{}}})
		case linkstate.SendMessage:
			kind = o.m.Kind
			err = l.send(o)
		case linkstate.SendBye:
			err = l.stream.Send(&pb.Frame{Frame: &pb.Frame_Bye{Bye: &pb.Bye{}}})
		}
		if err != nil {
			l.ended(&transport.LinkError{From: l.e.self, To: l.peer, Kind: kind, Err: l.broke(err)})
			return
		}
	}
}

// send writes one message's frames. The tensors of a message marked Own
// go back to the process's pools once gRPC no longer needs their bytes:
// those inline in the header once it is encoded, the chunked ones once
// gRPC frees their last chunk (releaser).
func (l *peerLink) send(o outgoing) error {
	header, parts, err := encodeHeader(o.m, o.body, l.e.s.chunk)
	if err != nil {
		return errors.Wrapf(err, "%v", o.m)
	}
	err = l.stream.Send(header)
	released := make([]bool, len(o.m.Values))
	for _, p := range parts {
		n := (len(p.data) + l.e.s.chunk - 1) / l.e.s.chunk
		var r *releaser
		if o.m.Own && p.value >= 0 {
			r = newReleaser(o.m.Values[p.value], n)
			released[p.value] = true
		}
		for off := 0; off < len(p.data); off += l.e.s.chunk {
			if err == nil {
				err = l.stream.SendMsg(&outChunk{data: p.data[off:min(off+l.e.s.chunk, len(p.data))], release: r})
			}
		}
	}
	if err == nil && o.m.Own {
		for i, v := range o.m.Values {
			if !released[i] {
				recycle.Put(v) // encoded into the header: the receiver has its own
			}
		}
	}
	return err
}

// read puts the messages that arrive into the mailbox until the stream
// ends, and returns why it ended.
func (l *peerLink) read() *transport.LinkError {
	var in *incoming
	bad := func(kind transport.Kind, err error) *transport.LinkError {
		return &transport.LinkError{From: l.peer, To: l.e.self, Kind: kind, Err: errors.Wrap(err, "a corrupted or unexpected frame")}
	}
	for {
		var f inFrame
		err := l.stream.RecvMsg(&f)
		kind := transport.Kind(0)
		if in != nil {
			kind = transport.Kind(in.h.Kind)
		}
		if err != nil {
			return &transport.LinkError{From: l.peer, To: l.e.self, Kind: kind, Err: l.broke(err)}
		}
		if f.chunk != nil {
			if in == nil {
				f.chunk.Close()
				return bad(kind, errors.New("a chunk outside a message"))
			}
			err := in.readChunk(f.chunk)
			f.chunk.Close()
			if err != nil {
				return bad(kind, errors.Wrapf(err, "microbatch %d", in.h.Micro))
			}
		}
		switch x := f.frame.Frame.(type) {
		case nil: // a chunk, read above
		case *pb.Frame_Header:
			if in != nil {
				return bad(kind, errors.New("a header inside a message"))
			}
			if in, err = newIncoming(x.Header); err != nil {
				return bad(transport.Kind(x.Header.Kind), errors.Wrapf(err, "microbatch %d", x.Header.Micro))
			}
		case *pb.Frame_Chunk:
			return bad(kind, errors.New("a chunk inside a protobuf frame (a peer of wire version 1?)"))
		case *pb.Frame_Bye:
			if in != nil {
				return bad(kind, errors.New("a bye inside a message"))
			}
			l.st.ByeReceived()
		case *pb.Frame_ByeAck:
			l.st.ByeAckReceived()
		default:
			return bad(kind, errors.Errorf("frame %T", f.frame.Frame))
		}
		if in != nil && in.done() {
			m, err := in.message()
			if err != nil {
				return bad(kind, errors.Wrapf(err, "microbatch %d", in.h.Micro))
			}
			in = nil
			if m.From != l.peer || m.To != l.e.self {
				return bad(m.Kind, errors.Errorf("a message from %v to %v on the link %v → %v", m.From, m.To, l.peer, l.e.self))
			}
			_ = l.e.box.Put(m) // fails only once the endpoint is closed or failed
		}
	}
}

// readerEnded is called once the reader has returned: the stream is over.
func (l *peerLink) readerEnded(err error) {
	var le *transport.LinkError
	if !errors.As(err, &le) {
		le = &transport.LinkError{From: l.peer, To: l.e.self, Err: l.broke(err)}
	}
	l.ended(le)
}

// ended marks the stream over; unless the peer had left or this endpoint
// is closing, the link is broken with le: the calls that involve it fail.
func (l *peerLink) ended(le *transport.LinkError) {
	broke := l.st.End(le)
	if l.end != nil {
		l.end()
	}
	if broke {
		l.e.calls.Fail(le)
	}
}

// broke describes a stream that failed: a peer that did not answer the
// keepalive within the stall timeout is stopped or stalled; any other
// break, its process may have died.
func (l *peerLink) broke(err error) error {
	if strings.Contains(err.Error(), "keepalive ping") {
		return errors.Wrapf(err, "%v at %s answered nothing, not even the keepalive, within %v (the stall timeout): its process is stopped or stalled (SIGSTOP, hung, or its host frozen); restart the pipeline, from the last checkpoint if there is one (or, if it pauses that long on purpose, give a longer stall timeout: grpcnet.WithStallTimeout, which pipemare's stall timeout setting sets)",
			l.peer, l.addr, l.e.s.stallTimeout)
	}
	return errors.Wrapf(err, "the stream to %v at %s broke (its process may have died or its host become unreachable; restart the pipeline, from the last checkpoint if there is one)", l.peer, l.addr)
}

// stop ends the stream's goroutines at teardown.
func (l *peerLink) stop() {
	l.st.Stop()
	if l.end != nil {
		l.end()
	}
}

func remoteAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "an unknown address"
}
