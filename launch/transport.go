package launch

import (
	"context"
	"fmt"
	"runtime"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/shmnet"
)

// Transport is what carries the messages between a pipeline's processes.
type Transport int

const (
	// TransportAuto is shared memory for the stage processes a training
	// process starts on its host (LocalProcs, on Linux: For), which train
	// faster over it than over gRPC (docs/speed.md), and gRPC for every
	// other placement.
	TransportAuto Transport = iota
	// TransportGRPC is gRPC, even between processes of one host.
	TransportGRPC
	// TransportShm is shared memory (package shmnet): every process of the
	// pipeline runs on this host, as the same user.
	TransportShm
)

var transportNames = []string{TransportAuto: "auto", TransportGRPC: "grpc", TransportShm: "shm"}

func (t Transport) String() string {
	if int(t) < len(transportNames) {
		return transportNames[t]
	}
	return fmt.Sprintf("transport %d", int(t))
}

// ParseTransport reads a Transport's name: auto, grpc or shm.
func ParseTransport(s string) (Transport, error) {
	for i, name := range transportNames {
		if s == name {
			return Transport(i), nil
		}
	}
	return 0, errors.Errorf("%q: auto, grpc or shm", s)
}

// Set sets t from its name (ParseTransport): a Transport is a flag.Value.
func (t *Transport) Set(s string) error {
	v, err := ParseTransport(s)
	if err == nil {
		*t = v
	}
	return err
}

// For is the transport that carries a run placed at w: TransportAuto is
// TransportShm for stage processes of this host (LocalProcs) on Linux,
// where the driver starts every process and tells each of them (a stage
// process is given the result, not auto), and stays TransportAuto —
// gRPC — for stages started elsewhere or by hand; TransportGRPC and
// TransportShm are as asked.
func (t Transport) For(w Where) Transport {
	if t == TransportAuto && w == LocalProcs && runtime.GOOS == "linux" {
		return TransportShm
	}
	return t
}

// OpenShm opens the process's endpoint (shmnet.Open as Peer) of the
// pipeline plan describes over shared memory: every process on this host,
// named after its stages' addresses (shmnet.SocketName), with the links
// between its processes (Layout) and the fingerprint of plan, and opts (timeouts). The caller owns the endpoint.
func (pl Place) OpenShm(ctx context.Context, plan *graphsplit.Plan, opts ...shmnet.Option) (*shmnet.Endpoint, error) {
	addrs, links, err := pl.Layout(plan)
	if err != nil {
		return nil, err
	}
	network := shmnet.Network{Name: shmnet.SocketName(addrs), Stages: len(addrs), Links: links, Identity: pl.Identity(plan)}
	return shmnet.Open(ctx, pl.Peer(), network, opts...)
}

// shmConnector is Connector over shared memory with n's timeouts.
func (n Net) shmConnector(pl Place) ConnectFunc {
	return func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		opts := []shmnet.Option{shmnet.WithConnectTimeout(n.ConnectTimeout)}
		if n.StallTimeout > 0 {
			opts = append(opts, shmnet.WithStallTimeout(n.StallTimeout))
		}
		if n.RecvTimeout > 0 {
			opts = append(opts, shmnet.WithRecvTimeout(n.RecvTimeout))
		}
		ep, err := pl.OpenShm(ctx, plan, opts...)
		if err != nil {
			return nil, n.connectError(err)
		}
		return ep, nil
	}
}

// connectError is an error of either transport's Open, a peer that did
// not come in time saying to give more connect_timeout.
func (n Net) connectError(err error) error {
	if errors.Is(err, transport.ErrConnectTimeout) {
		return runspec.Errorf("%w; {connect_timeout} %v: give more if the processes start further apart", err, n.ConnectTimeout)
	}
	return err
}
