package grpcnet

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
)

// Network is what every process of one pipeline must be given alike: where
// the stages listen, which stages exchange tensors, and the run's
// identity. The driver needs no address: it dials the stages.
type Network struct {
	// Addrs[i] is stage i's address, host:port, as the other peers dial it
	// (its certificate must name the host). len(Addrs) is the number of
	// stages.
	Addrs []string
	// Links are the pairs of stages that exchange activations or gradients,
	// in either direction: neighbours, and the stages a skip connection
	// joins. Each pair is listed once; the driver is linked to every stage
	// without being listed.
	Links []Link
	// Identity is the plan's fingerprint and the run's settings that
	// reach a stage (runspec.Spec.Identity): the handshake refuses a peer
	// whose identity differs (transport.Identity.Check, its
	// *transport.MismatchError naming the setting and both values).
	Identity transport.Identity
}

// Link is a pair of stages that exchange messages.
type Link struct{ A, B transport.Peer }

func (l Link) String() string { return fmt.Sprintf("%d-%d", l.A, l.B) }

// sorted returns l with A < B.
func (l Link) sorted() Link {
	if l.B < l.A {
		return Link{l.B, l.A}
	}
	return l
}

// stages is the number of stages.
func (n Network) stages() int { return len(n.Addrs) }

// validate checks n for peer self and returns its links sorted, each with
// A < B.
func (n Network) validate(self transport.Peer) ([]Link, error) {
	p := n.stages()
	if p == 0 {
		return nil, errors.New("the network has no stages: give one address per stage")
	}
	if self != transport.Driver && (self < 0 || int(self) >= p) {
		return nil, errors.Errorf("%v is not a peer of a pipeline of %d stages", self, p)
	}
	for i, a := range n.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, errors.Wrapf(err, "address of stage %d", i)
		}
	}
	links := make([]Link, 0, len(n.Links))
	for _, l := range n.Links {
		s := l.sorted()
		if s.A < 0 || int(s.B) >= p || s.A == s.B {
			return nil, errors.Errorf("link %v: a link joins two different stages of 0..%d", l, p-1)
		}
		if slices.Contains(links, s) {
			return nil, errors.Errorf("link %v is listed twice", l)
		}
		links = append(links, s)
	}
	slices.SortFunc(links, func(x, y Link) int {
		if x.A != y.A {
			return int(x.A - y.A)
		}
		return int(x.B - y.B)
	})
	return links, nil
}

// peersOf returns the peers self exchanges messages with, split into those
// self dials and those that dial self: of two linked peers the lower one
// dials (the driver is the lowest and dials every stage).
func peersOf(self transport.Peer, stages int, links []Link) (dials, accepts []transport.Peer) {
	linked := func(other transport.Peer) bool {
		if self == transport.Driver || other == transport.Driver {
			return true
		}
		return slices.Contains(links, Link{self, other}.sorted())
	}
	for p := transport.Driver; p < transport.Peer(stages); p++ {
		if p == self || !linked(p) {
			continue
		}
		if self < p {
			dials = append(dials, p)
		} else {
			accepts = append(accepts, p)
		}
	}
	return dials, accepts
}

func linksString(links []Link) string {
	s := make([]string, len(links))
	for i, l := range links {
		s[i] = l.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// Links returns the links of a pipeline's topology (graphsplit.Plan.Topology of its
// plan): each pair of stages that exchange tensors, once.
func Links(t schedule.Topology) []Link {
	var out []Link
	for i := range t.Consumers {
		for _, peers := range [][][]int{t.Consumers, t.Replicas} {
			if peers == nil {
				continue
			}
			for _, c := range peers[i] {
				if l := (Link{transport.Peer(i), transport.Peer(c)}); !slices.Contains(out, l) {
					out = append(out, l)
				}
			}
		}
	}
	return out
}
