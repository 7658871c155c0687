package grpcnet

import (
	"net"
	"slices"

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
	Links []transport.Link
	// Identity is the plan's fingerprint and the run's settings that
	// reach a stage (runspec.Spec.Identity): the handshake refuses a peer
	// whose identity differs (transport.Identity.Check, its
	// *transport.MismatchError naming the setting and both values).
	Identity transport.Identity
}

// stages is the number of stages.
func (n Network) stages() int { return len(n.Addrs) }

// validate checks n for peer self and returns its links sorted, each with
// A < B.
func (n Network) validate(self transport.Peer) ([]transport.Link, error) {
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
	return transport.CheckLinks(n.Links, p)
}

// Links returns the links of a pipeline's topology (graphsplit.Plan.Topology of its
// plan): each pair of stages that exchange tensors, once.
func Links(t schedule.Topology) []transport.Link {
	var out []transport.Link
	for i := range t.Consumers {
		for _, peers := range [][][]int{t.Consumers, t.Replicas} {
			if peers == nil {
				continue
			}
			for _, c := range peers[i] {
				if l := (transport.Link{A: transport.Peer(i), B: transport.Peer(c)}); !slices.Contains(out, l) {
					out = append(out, l)
				}
			}
		}
	}
	return out
}
