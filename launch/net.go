package launch

import (
	"context"
	"io/fs"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
)

// ConnectFunc opens a process's endpoint once the model is cut: what
// train.Config.Connect (the driver) and train.ServeStage (a stage) take,
// as Place.Connector and Net.Connector return it.
type ConnectFunc = func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error)

// Net is how a process of a pipeline in several processes reaches the
// others, as the pipemare command's flags give it: the stages' addresses
// (-stage-addrs), the credentials (-certs, -insecure) and how long to
// wait for the peers (-connect-timeout, -stall-timeout, -recv-timeout). Its methods check it and open
// the process's endpoint; their errors name those flags, as
// train.Overrides' name the run's, for the command line whose settings
// these are.
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
	// the pipeline fails naming it (grpcnet.WithStallTimeout; 0: grpcnet's
	// default).
	StallTimeout time.Duration
	// RecvTimeout is how long a process waits for a message of a peer
	// that is alive (grpcnet.WithRecvTimeout; 0: grpcnet's default): it
	// must exceed the longest work between two messages.
	RecvTimeout time.Duration
	// Transport carries the messages: gRPC, or shared memory between
	// processes of one host (TransportAuto: ForLocal decides).
	Transport Transport
}

// CheckTimeout refuses a ConnectTimeout that is not positive, a
// StallTimeout below grpcnet.MinStallTimeout and a negative RecvTimeout
// (0 is grpcnet's default for either).
func (n Net) CheckTimeout() error {
	switch {
	case n.ConnectTimeout <= 0:
		return errors.Errorf("-connect-timeout %v: must be positive", n.ConnectTimeout)
	case n.StallTimeout != 0 && n.StallTimeout < grpcnet.MinStallTimeout:
		return errors.Errorf("-stall-timeout %v: must be at least %v (the transport's keepalive pings a peer at most every 10s)", n.StallTimeout, grpcnet.MinStallTimeout)
	case n.RecvTimeout < 0:
		return errors.Errorf("-recv-timeout %v: must be positive (0: the default, %v)", n.RecvTimeout, grpcnet.DefaultRecvTimeout)
	}
	return nil
}

// TimeoutArgs are n's timeouts as the pipemare command's flags
// (-connect-timeout=…, -stall-timeout=…, -recv-timeout=…): what a driver
// hands the stage processes it starts, so that every process of the
// pipeline waits alike.
func (n Net) TimeoutArgs() []string {
	return []string{"-connect-timeout=" + n.ConnectTimeout.String(), "-stall-timeout=" + n.StallTimeout.String(), "-recv-timeout=" + n.RecvTimeout.String()}
}

// FirstOrder is how long a stage waits for its driver's first order once
// connected (train.Config.FirstOrderTimeout): twice ConnectTimeout, since
// the driver may still be waiting that long for another stage.
func (n Net) FirstOrder() time.Duration { return 2 * n.ConnectTimeout }

// Addrs parses StageAddrs (ParseAddrs); the error names -stage-addrs.
func (n Net) Addrs() ([]string, error) {
	addrs, err := ParseAddrs(n.StageAddrs)
	return addrs, errors.Wrap(err, "-stage-addrs")
}

// CheckCredentials refuses a Net without a way to secure the links, with
// both, or with plaintext on an address that is not loopback, naming the
// flag. addrs are the addresses the process dials or serves on.
func (n Net) CheckCredentials(addrs []string) error {
	c := n.Credentials
	switch {
	case c.Insecure && c.Dir != "":
		return errors.Errorf("-insecure and -certs %s: choose one", c.Dir)
	case c.Insecure:
		for _, a := range addrs {
			if !grpcnet.Loopback(a) {
				return errors.Errorf("-insecure: plaintext refused: %s is not a loopback address; give -certs DIR (pipemare certs writes one)", a)
			}
		}
	case c.Dir == "":
		return errors.New("-certs DIR or -insecure: the links between processes need mutual TLS (pipemare certs writes a CA and certificates), or plaintext on loopback")
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
		return nil, worded{err, "-certs " + dir + ": ", " (pipemare certs writes one certificate per host of -hosts, or -stages N for N stages on one host)"}
	case err != nil:
		return nil, errors.Wrapf(err, "-certs %s", dir)
	}
	return opts, nil
}

// Connector is Place.Connector with n's credentials and timeouts, or,
// with TransportShm, Place.OpenShm with n's timeouts
// (CheckCredentials and CheckTimeout have checked them), its errors worded
// by the flags: a certificate missing names -certs, a listener that
// cannot be had -listen, and a peer that did not come in time says to
// give more -connect-timeout (errors.Is and As see the errors beneath).
// pl has one address per stage of the plan.
func (n Net) Connector(pl Place) ConnectFunc {
	if n.Transport == TransportShm {
		return n.shmConnector(pl)
	}
	return func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		opts, err := n.credentials(pl.Peer())
		if err != nil {
			return nil, err
		}
		listen, err := pl.ListenOptions()
		if err != nil {
			return nil, worded{err, "-listen ", ""}
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
			return nil, n.connectError(err)
		}
		return ep, nil
	}
}

// StagePlace is where a stage process stands: stage index (-stage; < 0:
// the launcher's), listening on listen (-listen; "": the launcher's, else
// its own address), at n's StageAddrs or else the launcher's addresses;
// env is the launcher's environment when found (FromEnv). It refuses,
// naming the flag, a stage or addresses that contradict the launcher's, a
// process that does not know its stage or the stages' addresses, a stage
// without an address, and credentials CheckCredentials refuses for the
// addresses it dials and serves on.
func (n Net) StagePlace(index int, listen string, env Config, found bool) (Place, error) {
	pl := Place{Stage: index, Listen: listen, AddrsFrom: "-stage-addrs"}
	if err := n.CheckTimeout(); err != nil {
		return pl, err
	}
	if found {
		pl.Launcher = env.Launcher
		switch {
		case index < 0:
			pl.Stage = env.Stage
		case index != env.Stage:
			return pl, errors.Errorf("-stage %d, but the %s environment makes this process stage %d", index, env.Launcher, env.Stage)
		}
		if listen == "" {
			pl.Listen = env.Listen
		}
	}
	if pl.Stage < 0 {
		return pl, errors.New("-stage: which stage this process serves (or run it under torchrun or a JobSet, which say)")
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
		return pl, errors.New("-stage-addrs: the stages' addresses, host:port, in stage order")
	}
	if found && len(pl.Addrs) != env.Stages {
		return pl, errors.Errorf("-stage-addrs gives %d addresses, the %s environment %d stages", len(pl.Addrs), env.Launcher, env.Stages)
	}
	if pl.Stage >= len(pl.Addrs) {
		return pl, errors.Errorf("-stage %d: -stage-addrs gives the addresses of stages 0..%d", pl.Stage, len(pl.Addrs)-1)
	}
	served := append([]string(nil), pl.Addrs...)
	if pl.Listen != "" && !strings.HasPrefix(pl.Listen, "fd:") {
		served = append(served, pl.Listen)
	}
	return pl, n.CheckCredentials(served)
}

// worded is err worded for the command line: words before and after its
// message (errors.Is and As see err).
type worded struct {
	err           error
	before, after string
}

func (w worded) Error() string { return w.before + w.err.Error() + w.after }
func (w worded) Unwrap() error { return w.err }
