package grpcnet

import (
	"fmt"
	"slices"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
)

// wireVersion is the version of the frames; a peer speaking another is
// refused. Version 2: the hello carries the run's settings, and chunks
// travel raw in the frame codec (frameCodec), not in protobuf.
const wireVersion = 2

// hello is what a peer says about itself when a stream opens.
func (e *Endpoint) hello() *pb.Frame {
	id := e.net.Identity
	h := &pb.Hello{Wire: wireVersion, Peer: int32(e.self), Stages: int32(e.net.stages()), Fingerprint: id.Plan}
	for _, l := range e.links {
		h.Links = append(h.Links, &pb.LinkPair{A: int32(l.A), B: int32(l.B)})
	}
	for _, s := range id.Settings {
		h.Settings = append(h.Settings, &pb.Setting{Name: s.Name, Value: s.Value})
	}
	return &pb.Frame{Frame: &pb.Frame_Hello{Hello: h}}
}

// checkHello compares the hello of the peer at addr with what this
// endpoint runs; want is the peer expected there (AnyPeer: any this
// endpoint accepts).
func (e *Endpoint) checkHello(h *pb.Hello, addr string, want transport.Peer) error {
	if h == nil {
		return errors.Errorf("the peer at %s did not start with a hello: is it a pipemare peer?", addr)
	}
	got := transport.Peer(h.Peer)
	who := peerAt(got, addr)
	if h.Wire != wireVersion {
		return errors.Errorf("%s speaks wire version %d, this peer %d: run the same pipemare version everywhere", who, h.Wire, wireVersion)
	}
	if want != transport.AnyPeer && got != want {
		return errors.Errorf("expected %v at %s, got %v: are the stage addresses in stage order?", want, addr, got)
	}
	if int(h.Stages) != e.net.stages() {
		return errors.Errorf("%s runs a pipeline of %d stages, %v one of %d", who, h.Stages, e.self, e.net.stages())
	}
	theirs := transport.Identity{Plan: h.Fingerprint}
	for _, s := range h.Settings {
		theirs.Settings = append(theirs.Settings, transport.Setting{Name: s.Name, Value: s.Value})
	}
	if err := e.net.Identity.Check(theirs, who); err != nil {
		return err
	}
	links := make([]transport.Link, len(h.Links))
	for i, l := range h.Links {
		links[i] = transport.Link{A: transport.Peer(l.A), B: transport.Peer(l.B)}
	}
	if !slices.Equal(links, e.links) {
		return errors.Errorf("%s links stages %s, %v links %s: the processes disagree on which stages exchange tensors",
			who, transport.LinksString(links), e.self, transport.LinksString(e.links))
	}
	return nil
}

func peerAt(p transport.Peer, addr string) string { return fmt.Sprintf("%v at %s", p, addr) }
