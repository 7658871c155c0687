//go:build !linux

package shmnet

import (
	"context"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport"
)

// Endpoint is the shared-memory endpoint; on this system it cannot be
// opened.
type Endpoint struct{ transport.Endpoint }

// Open fails: the shared-memory transport needs Linux (memfd_create,
// eventfd, SO_PEERCRED); use grpcnet.
func Open(ctx context.Context, self transport.Peer, n Network, opts ...Option) (*Endpoint, error) {
	return nil, errors.Errorf("%v: the shared-memory transport needs Linux; use gRPC", self)
}
