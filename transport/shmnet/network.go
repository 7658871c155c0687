package shmnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// Network is what every process of one pipeline on this host must be
// given alike: the run's name, the number of stages, which stages
// exchange tensors, and the identity the handshake compares.
type Network struct {
	// Name is the run's name on this host: stage i listens on the
	// abstract Unix socket "@<Name>-<i>". Two runs on one host must have
	// different names (SocketName makes one from the stages' addresses,
	// which no other running pipeline holds).
	Name string
	// Stages is the number of stages.
	Stages int
	// Links are the pairs of stages that exchange activations or
	// gradients, as grpcnet.Network's: each pair once; the driver is
	// linked to every stage without being listed.
	Links []transport.Link
	// Identity is the plan's fingerprint and the run's settings: the
	// handshake refuses a peer whose identity differs
	// (transport.Identity.Check).
	Identity transport.Identity
}

// SocketName is a Network.Name for a pipeline whose stages hold the given
// addresses (host:port, as grpcnet's Network has them): the same in every
// process given them, and no other pipeline's while its stages hold their
// ports.
func SocketName(addrs []string) string {
	sum := sha256.Sum256([]byte(strings.Join(addrs, ",")))
	return "pipemare-" + hex.EncodeToString(sum[:8])
}

// socket is stage p's socket address.
func (n Network) socket(p transport.Peer) string { return fmt.Sprintf("@%s-%d", n.Name, p) }

// validate checks n for peer self and returns its links sorted, each with
// A < B.
func (n Network) validate(self transport.Peer) ([]transport.Link, error) {
	switch {
	case n.Name == "":
		return nil, errors.New("the network has no name: give every process of the run the same Name (SocketName makes one)")
	case n.Stages < 1:
		return nil, errors.Errorf("a network of %d stages: at least 1", n.Stages)
	case self != transport.Driver && (self < 0 || int(self) >= n.Stages):
		return nil, errors.Errorf("%v is not a peer of a pipeline of %d stages", self, n.Stages)
	}
	return transport.CheckLinks(n.Links, n.Stages)
}
