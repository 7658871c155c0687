package grpcnet

import (
	"fmt"
	"slices"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
	pb "github.com/pipemare/pipemare/transport/grpcnet/internal/framepb"
)

// wireVersion is the version of the frames; a peer speaking another is
// refused.
const wireVersion = 1

// hello is what a peer says about itself when a stream opens.
func (e *Endpoint) hello() *pb.Frame {
	h := &pb.Hello{Wire: wireVersion, Peer: int32(e.self), Stages: int32(e.net.stages()), Fingerprint: e.net.Fingerprint}
	for _, l := range e.links {
		h.Links = append(h.Links, &pb.LinkPair{A: int32(l.A), B: int32(l.B)})
	}
	return &pb.Frame{Frame: &pb.Frame_Hello{Hello: h}}
}

// checkHello compares a peer's hello with what this endpoint runs. who
// names the peer for the message ("stage 2 at 10.0.0.3:7002"); want is the
// peer expected (AnyPeer: any this endpoint accepts).
func (e *Endpoint) checkHello(h *pb.Hello, who string, want transport.Peer) error {
	if h == nil {
		return errors.Errorf("%s did not start with a hello: is it a pipemare peer?", who)
	}
	if h.Wire != wireVersion {
		return errors.Errorf("%s speaks wire version %d, this peer %d: run the same pipemare version everywhere", who, h.Wire, wireVersion)
	}
	got := transport.Peer(h.Peer)
	if want != transport.AnyPeer && got != want {
		return errors.Errorf("expected %v, got %v at %s: are the stage addresses in stage order?", want, got, who)
	}
	if int(h.Stages) != e.net.stages() {
		return errors.Errorf("%s runs a pipeline of %d stages, %v runs %d", who, h.Stages, e.self, e.net.stages())
	}
	if h.Fingerprint != e.net.Fingerprint {
		return errors.Errorf("%s cut the model differently: plan fingerprint %s vs %s here: every process must build the same model and split it the same way",
			who, short(h.Fingerprint), short(e.net.Fingerprint))
	}
	links := make([]Link, len(h.Links))
	for i, l := range h.Links {
		links[i] = Link{transport.Peer(l.A), transport.Peer(l.B)}
	}
	if !slices.Equal(links, e.links) {
		return errors.Errorf("%s links stages %s, %v links %s: the processes disagree on which stages exchange tensors",
			who, linksString(links), e.self, linksString(e.links))
	}
	return nil
}

// short abbreviates a long fingerprint.
func short(fp string) string {
	if fp == "" {
		return `""`
	}
	if len(fp) > 12 {
		return fp[:12] + "…"
	}
	return fp
}

func peerAt(p transport.Peer, addr string) string { return fmt.Sprintf("%v at %s", p, addr) }
