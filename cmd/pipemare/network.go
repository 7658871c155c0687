package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
)

// netFlags are the flags of a process that talks to stages in other
// processes: train's driver and pipemare stage.
type netFlags struct {
	stageAddrs, certs string
	insecure          bool
	connectTimeout    time.Duration
}

func (n *netFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.stageAddrs, "stage-addrs", "", "the stages' addresses, host:port, comma-separated in stage order, stage 0 first (the driver dials them and listens on none)")
	fs.StringVar(&n.certs, "certs", "", "mutual TLS with the certificates in this directory, as pipemare certs writes them: ca.pem, and this peer's stage-<i>.pem and stage-<i>-key.pem (the driver's: driver.pem, driver-key.pem)")
	fs.BoolVar(&n.insecure, "insecure", false, "plaintext instead of mutual TLS; refused unless every address is loopback")
	fs.DurationVar(&n.connectTimeout, "connect-timeout", grpcnet.DefaultConnectTimeout, "how long a process waits for the others of the pipeline to connect and pass the handshake, and a stage then for its driver's first order (twice as long): a peer that does not come, or is refused, ends every process after it; give the processes' largest start-up gap")
}

// checkTimeout refuses a -connect-timeout that is not positive.
func (n *netFlags) checkTimeout() error {
	if n.connectTimeout <= 0 {
		return errors.Errorf("-connect-timeout %v: must be positive", n.connectTimeout)
	}
	return nil
}

// firstOrder is how long a stage waits for its driver's first order once
// connected: twice -connect-timeout, since the driver may still be waiting
// that long for another stage (asyncvm.WithFirstOrderTimeout).
func (n *netFlags) firstOrder() time.Duration { return 2 * n.connectTimeout }

// lookupEnv reads the launcher's environment (a variable for tests).
var lookupEnv = os.LookupEnv

// launched reads a launcher's environment (torchrun, JobSet; package
// launch). It reports false when none is set.
func launched() (launch.Config, bool, error) {
	return launch.FromEnv(lookupEnv)
}

// place is where this process stands in a pipeline of stages in several
// processes: Stage −1 is the driver; AddrsFrom is "-stage-addrs" or the
// launcher's environment.
type place = launch.Place

// addrs parses -stage-addrs.
func (n *netFlags) addrs() ([]string, error) {
	addrs, err := launch.ParseAddrs(n.stageAddrs)
	return addrs, errors.Wrap(err, "-stage-addrs")
}

// checkCredentials refuses a command line without a way to secure the
// links, or with plaintext on an address that is not loopback, naming the
// flag. addrs are the addresses this process dials or serves on.
func (n *netFlags) checkCredentials(addrs []string) error {
	switch {
	case n.insecure && n.certs != "":
		return errors.Errorf("-insecure and -certs %s: choose one", n.certs)
	case n.insecure:
		for _, a := range addrs {
			if !grpcnet.Loopback(a) {
				return errors.Errorf("-insecure: plaintext refused: %s is not a loopback address; give -certs DIR (pipemare certs writes one)", a)
			}
		}
	case n.certs == "":
		return errors.New("-certs DIR or -insecure: the links between processes need mutual TLS (pipemare certs writes a CA and certificates), or plaintext on loopback")
	}
	return nil
}

// credentials are the grpcnet options that secure peer p's links
// (checkCredentials has checked the flags).
func (n *netFlags) credentials(p transport.Peer) ([]grpcnet.Option, error) {
	opts, err := launch.Credentials{Dir: n.certs, Insecure: n.insecure}.Options(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && p != transport.Driver:
		return nil, worded{err, "-certs " + n.certs + ": ", " (pipemare certs writes one certificate per host of -hosts, or -stages N for N stages on one host)"}
	case err != nil:
		return nil, errors.Wrapf(err, "-certs %s", n.certs)
	}
	return opts, nil
}

// connector opens pl's endpoint for the plan at pl's addresses (one per
// stage: stagesFit checked): a stage's (listening where pl says) or the
// driver's, waiting for the other peers at most -connect-timeout. It is
// launch's Place.Connector, its errors worded by the flags.
func (n *netFlags) connector(pl place) train.Connector {
	return func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		opts, err := n.credentials(pl.Peer())
		if err != nil {
			return nil, err
		}
		listen, err := pl.ListenOptions()
		if err != nil {
			return nil, worded{err, "-listen ", ""}
		}
		ep, err := pl.Open(ctx, plan, append(append(opts, listen...), grpcnet.WithConnectTimeout(n.connectTimeout))...)
		switch {
		case errors.Is(err, grpcnet.ErrConnectTimeout):
			return nil, worded{err, "", fmt.Sprintf("; -connect-timeout %v: give more if the processes start further apart", n.connectTimeout)}
		case err != nil:
			return nil, err
		}
		return ep, nil
	}
}

// worded is err worded for the command line: words before and after its
// message (errors.Is and As see err).
type worded struct {
	err           error
	before, after string
}

func (w worded) Error() string { return w.before + w.err.Error() + w.after }
func (w worded) Unwrap() error { return w.err }
