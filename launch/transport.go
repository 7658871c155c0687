package launch

import (
	"context"
	"fmt"
	"runtime"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/pipemare/pipemare/transport/shmnet"
)

// Transport is what carries the messages between a pipeline's processes.
type Transport int

const (
	// TransportAuto is shared memory when every process of the pipeline
	// is on loopback — the stage processes a training process starts on
	// its host (LocalProcs), stages started by hand or by a launcher at
	// loopback addresses — on Linux, which train faster over it than over
	// gRPC (docs/speed.md), and gRPC when any address is not (Resolve).
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

// Resolve is the transport that carries the links of a pipeline whose
// processes are at addrs (Place.Addrs) when t is asked for: TransportAuto
// is TransportShm on Linux when every address is loopback (127.0.0.0/8,
// ::1, localhost: grpcnet.Loopback), every process then being on this
// host, and TransportGRPC when any is not (or off Linux, or with no
// addresses); TransportGRPC and TransportShm are as asked. Every process
// of a pipeline, given the same -transport and the same addresses,
// resolves the same: a pipeline never half-uses one transport.
func (t Transport) Resolve(addrs []string) Transport {
	if t != TransportAuto {
		return t
	}
	if runtime.GOOS != "linux" || len(addrs) == 0 {
		return TransportGRPC
	}
	for _, a := range addrs {
		if !grpcnet.Loopback(a) {
			return TransportGRPC
		}
	}
	return TransportShm
}

// For is Resolve for a run placed at w whose processes are at addrs:
// the stage processes a training process starts on its host (LocalProcs)
// are on loopback (StartLocal), before their addresses are known.
func (t Transport) For(w Where, addrs []string) Transport {
	if w == LocalProcs {
		addrs = []string{localhost}
	}
	return t.Resolve(addrs)
}

// localhost stands for the addresses of the stage processes StartLocal
// starts, which listen on loopback.
const localhost = "127.0.0.1:0"

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
			return nil, n.connectError(TransportShm, err)
		}
		return ep, nil
	}
}

// connectError is an error of tr's Open, a peer that did not come in time
// saying to give more connect_timeout, and naming the transport this
// process waited over: a peer over the other one never comes (neither
// can reach the other's listener), so every process needs the same
// transport and stage_addrs, which resolve it alike.
func (n Net) connectError(tr Transport, err error) error {
	if errors.Is(err, transport.ErrConnectTimeout) {
		return runspec.Errorf("%w; {connect_timeout} %v: give more if the processes start further apart; this process waited over %s ({transport} %s): give every process of the pipeline the same {transport} and {stage_addrs}", err, n.ConnectTimeout, tr.carrier(), n.Transport)
	}
	return err
}

// carrier is how a resolved transport is named in messages.
func (t Transport) carrier() string {
	if t == TransportShm {
		return "shared memory"
	}
	return "gRPC"
}
