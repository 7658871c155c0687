package launch

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/pipemare/pipemare/transport/shmnet"
)

// ConnectFunc opens a process's endpoint once the model is cut: what
// train.Config.Connect (the driver) and train.ServeStage (a stage) take,
// as Place.Connector and Net.Connector return it.
type ConnectFunc = func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error)

// Net is how a process of a pipeline in several processes reaches the
// others, as a command line gives it: the stages' addresses
// (stage_addrs), the credentials (certs, insecure) and how long to wait
// for the peers (connect_timeout, stall_timeout, recv_timeout). Its
// methods check it and open the process's endpoint; their errors are
// *runspec.Error naming those settings, as train.ConfigFor's name the
// run's, for a command to word as its flags.
type Net struct {
	// StageAddrs are the stages' addresses, host:port, comma-separated in
	// stage order ("": none given); ParseAddrs reads them.
	StageAddrs string
	// Credentials secure the links: Dir (-certs) or Insecure (-insecure).
	Credentials Credentials
	// ConnectTimeout is how long a process waits for the others of the
	// pipeline to connect and pass the handshake (positive).
	ConnectTimeout time.Duration
	// StallTimeout is how long a peer may answer nothing, not even the
	// transport's keepalive, before it is taken as stopped or stalled and
	// the pipeline fails naming it (grpcnet.WithStallTimeout,
	// shmnet.WithStallTimeout; 0: their default).
	StallTimeout time.Duration
	// RecvTimeout is how long a process waits for a message of a peer
	// that is alive (grpcnet.WithRecvTimeout, shmnet.WithRecvTimeout; 0:
	// their default): it must exceed the longest work between two
	// messages.
	RecvTimeout time.Duration
	// Transport carries the messages: gRPC, or shared memory between
	// processes of one host (TransportShm); TransportAuto resolves to
	// either from the stages' addresses (Transport.Resolve).
	Transport Transport
}

// CheckTimeout refuses a ConnectTimeout that is not positive, a
// StallTimeout below the least of tr, the transport that carries the run
// (Transport.Resolve): grpcnet.MinStallTimeout, gRPC's keepalive floor,
// or shmnet.MinStallTimeout over shared memory; and a negative
// RecvTimeout (0 is the transports' default for either).
func (n Net) CheckTimeout(tr Transport) error {
	least, why := grpcnet.MinStallTimeout, "gRPC's keepalive pings a peer at most every 10s"
	if tr == TransportShm {
		least, why = shmnet.MinStallTimeout, "over shared memory the peers beat four times in it"
	}
	switch {
	case n.ConnectTimeout <= 0:
		return &runspec.Error{Setting: "connect_timeout", Value: n.ConnectTimeout.String(), Reason: "must be positive"}
	case n.StallTimeout != 0 && n.StallTimeout < least:
		return &runspec.Error{Setting: "stall_timeout", Value: n.StallTimeout.String(), Reason: fmt.Sprintf("must be at least %v (%s)", least, why)}
	case n.RecvTimeout < 0:
		return &runspec.Error{Setting: "recv_timeout", Value: n.RecvTimeout.String(), Reason: fmt.Sprintf("must be positive (0: the default, %v)", transport.DefaultRecvTimeout)}
	}
	return nil
}

// FirstOrder is how long a stage waits for its driver's first order once
// connected (asyncvm.WithFirstOrderTimeout): twice ConnectTimeout, since
// the driver may still be waiting that long for another stage.
func (n Net) FirstOrder() time.Duration { return 2 * n.ConnectTimeout }

// Addrs parses StageAddrs (ParseAddrs); the error names -stage-addrs.
func (n Net) Addrs() ([]string, error) {
	addrs, err := ParseAddrs(n.StageAddrs)
	if err != nil {
		return nil, &runspec.Error{Setting: "stage_addrs", Err: err}
	}
	return addrs, nil
}

// CheckCredentials refuses a Net without a way to secure the links, with
// both, or with plaintext on an address that is not loopback, naming the
// flag. addrs are the addresses the process dials or serves on; tr is the
// transport that carries the run (Transport.Resolve). Over shared memory
// (TransportShm) no credentials are needed: it uses no TLS (its peers are
// on this host, and each checks the other runs as its own user), and
// certificates or plaintext given for gRPC are not used, but both given
// at once are still refused.
func (n Net) CheckCredentials(tr Transport, addrs []string) error {
	c := n.Credentials
	switch {
	case c.Insecure && c.Dir != "":
		return &runspec.Error{Setting: "insecure", Value: "and {certs} " + c.Dir, Reason: "choose one"}
	case tr == TransportShm:
	case c.Insecure:
		for _, a := range addrs {
			if !grpcnet.Loopback(a) {
				return &runspec.Error{Setting: "insecure", Reason: "plaintext refused: " + a + " is not a loopback address; give {certs} DIR (pipemare certs writes one)"}
			}
		}
	case c.Dir == "":
		return &runspec.Error{Setting: "certs", Value: "DIR or {insecure}", Reason: "the links between processes need mutual TLS (pipemare certs writes a CA and certificates), or plaintext on loopback"}
	}
	return nil
}

// credentials are Credentials' Options for peer p, their errors naming
// -certs (a stage's missing certificate says how to make one).
func (n Net) credentials(p transport.Peer) ([]grpcnet.Option, error) {
	dir := n.Credentials.Dir
	opts, err := n.Credentials.Options(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && p != transport.Driver:
		return nil, &runspec.Error{Setting: "certs", Value: dir, Reason: "pipemare certs writes one certificate per host of {hosts}, or {stages} N for N stages on one host", Err: err}
	case err != nil:
		return nil, &runspec.Error{Setting: "certs", Value: dir, Err: err}
	}
	return opts, nil
}

// Connector is Place.Connector with n's credentials and timeouts, or,
// when n's Transport resolves to TransportShm for pl's addresses
// (Transport.Resolve), Place.OpenShm with n's timeouts (CheckCredentials
// and CheckTimeout have checked them), its errors naming the setting: a
// certificate missing names certs, a listener that cannot be had listen,
// and a peer that did not come in time says to give more connect_timeout
// (errors.Is and As see the errors beneath).
// pl has one address per process of the pipeline (Place.Addrs).
func (n Net) Connector(pl Place) ConnectFunc {
	if n.Transport.Resolve(pl.Addrs) == TransportShm {
		return n.shmConnector(pl)
	}
	return func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		opts, err := n.credentials(pl.Peer())
		if err != nil {
			return nil, err
		}
		listen, err := pl.ListenOptions()
		if err != nil {
			return nil, &runspec.Error{Setting: "listen", Err: err}
		}
		opts = append(append(opts, listen...), grpcnet.WithConnectTimeout(n.ConnectTimeout))
		if n.StallTimeout > 0 {
			opts = append(opts, grpcnet.WithStallTimeout(n.StallTimeout))
		}
		if n.RecvTimeout > 0 {
			opts = append(opts, grpcnet.WithRecvTimeout(n.RecvTimeout))
		}
		ep, err := pl.Open(ctx, plan, opts...)
		if err != nil {
			return nil, n.connectError(TransportGRPC, err)
		}
		return ep, nil
	}
}

// StagePlace is where a stage process stands: stage index (-stage),
// listening on listen (-listen; "": the launcher's, else its own
// address), at n's StageAddrs or else the launcher's addresses; env is
// the launcher's environment when found (FromEnv). Under a launcher it is
// the place of the process of env.Rank, whatever index says: Stage is the
// rank, which hosts stage 0 beside the driver at rank 0, and Launched
// gives the places of the stages the process hosts once the plan is cut.
// It refuses, naming the flag, addresses that contradict the launcher's,
// a process that does not know its stage or the stages' addresses, a
// stage without an address, and, for the transport its addresses resolve
// (Transport.Resolve), timeouts CheckTimeout refuses and credentials
// CheckCredentials refuses for the addresses it dials and serves on.
func (n Net) StagePlace(index int, listen string, env Config, found bool) (Place, error) {
	pl, err := n.stagePlace(index, listen, env, found)
	if err == nil && pl.Stage >= len(pl.Addrs) {
		return pl, &runspec.Error{Setting: "stage", Value: strconv.Itoa(pl.Stage), Reason: fmt.Sprintf("{stage_addrs} gives the addresses of stages 0..%d", len(pl.Addrs)-1)}
	}
	return pl, err
}

// stagePlace is StagePlace for a process that may host several stages:
// its stage may lie beyond the addresses, one per process.
func (n Net) stagePlace(index int, listen string, env Config, found bool) (Place, error) {
	pl := Place{Stage: index, Listen: listen, AddrsFrom: "{stage_addrs}"}
	if found { // the process's place, its first stage's: Launched places its stages
		pl.Launcher, pl.Stage, pl.Stride = env.Launcher, env.Rank, env.Stride
		if listen == "" {
			pl.Listen = env.Listen
		}
	}
	if pl.Stage < 0 {
		return pl, &runspec.Error{Setting: "stage", Reason: "which stage this process serves (or run it under torchrun or a JobSet, which say)"}
	}
	switch {
	case n.StageAddrs != "":
		addrs, err := n.Addrs()
		if err != nil {
			return pl, err
		}
		pl.Addrs = addrs
	case found && env.Addrs != nil:
		pl.Addrs, pl.AddrsFrom = env.Addrs, "the "+env.Launcher+" environment"
	default:
		return pl, &runspec.Error{Setting: "stage_addrs", Reason: "the stages' addresses, host:port, in stage order"}
	}
	if found && len(pl.Addrs) != env.Procs {
		return pl, &runspec.Error{Setting: "stage_addrs", Reason: fmt.Sprintf("%d addresses, the %s environment %d processes: give one per process", len(pl.Addrs), env.Launcher, env.Procs)}
	}
	tr := n.Transport.Resolve(pl.Addrs)
	if err := n.CheckTimeout(tr); err != nil {
		return pl, err
	}
	served := append([]string(nil), pl.Addrs...)
	if pl.Listen != "" && !strings.HasPrefix(pl.Listen, "fd:") {
		served = append(served, pl.Listen)
	}
	return pl, n.CheckCredentials(tr, served)
}
