package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/stage"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/pipemare/pipemare/transport/pki"
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
		return fmt.Errorf("-connect-timeout %v: must be positive", n.connectTimeout)
	}
	return nil
}

// firstOrder is how long a stage waits for its driver's first order once
// connected: twice -connect-timeout, since the driver may still be waiting
// that long for another stage (asyncvm.WithFirstOrderTimeout).
func (n *netFlags) firstOrder() time.Duration { return 2 * n.connectTimeout }

// lookupEnv reads the launcher's environment (a variable for tests).
var lookupEnv = os.LookupEnv

// place is where this process stands in a pipeline of stages in several
// processes: the stages' addresses, and, for a stage, its index and the
// address it listens on.
type place struct {
	addrs    []string
	stage    int    // −1: the driver
	listen   string // "": the stage's address in addrs; "fd:N": an inherited listener
	launcher string // "torchrun", "jobset" or ""
	// addrsFrom says where addrs come from, for errors: "-stage-addrs", or
	// the launcher's environment.
	addrsFrom string
}

// launched reads a launcher's environment (torchrun, JobSet; package
// launch). It reports false when none is set.
func launched() (launch.Config, bool, error) {
	return launch.FromEnv(lookupEnv)
}

// parseAddrs splits -stage-addrs.
func parseAddrs(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("-stage-addrs: %q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// checkCredentials refuses a command line without a way to secure the
// links, or with plaintext on an address that is not loopback, naming the
// flag. dial are the addresses this process dials or serves on.
func (n *netFlags) checkCredentials(addrs []string) error {
	switch {
	case n.insecure && n.certs != "":
		return fmt.Errorf("-insecure and -certs %s: choose one", n.certs)
	case n.insecure:
		for _, a := range addrs {
			if !grpcnet.Loopback(a) {
				return fmt.Errorf("-insecure: plaintext refused: %s is not a loopback address; give -certs DIR (pipemare certs writes one)", a)
			}
		}
	case n.certs == "":
		return fmt.Errorf("-certs DIR or -insecure: the links between processes need mutual TLS (pipemare certs writes a CA and certificates), or plaintext on loopback")
	}
	return nil
}

// credentials are the grpcnet options that secure peer p's links.
func (n *netFlags) credentials(p transport.Peer) ([]grpcnet.Option, error) {
	if n.insecure {
		return []grpcnet.Option{grpcnet.WithInsecure()}, nil
	}
	roots, cert, err := pki.Load(n.certs, p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && p != transport.Driver:
		return nil, fmt.Errorf("-certs %s: %w (pipemare certs writes one certificate per host of -hosts, or -stages N for N stages on one host)", n.certs, err)
	case err != nil:
		return nil, fmt.Errorf("-certs %s: %w", n.certs, err)
	}
	return []grpcnet.Option{grpcnet.WithTLS(roots, cert)}, nil
}

// connector opens peer p's endpoint for the plan at pl's addresses (one
// per stage: stagesFit checked): a stage's (listening where pl says) or the
// driver's, waiting for the other peers at most -connect-timeout.
func (n *netFlags) connector(p transport.Peer, pl place) train.Connector {
	return func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		opts, err := n.credentials(p)
		if err != nil {
			return nil, err
		}
		if p != transport.Driver {
			switch fd, isFD := strings.CutPrefix(pl.listen, "fd:"); {
			case isFD:
				l, err := inheritedListener(fd)
				if err != nil {
					return nil, err
				}
				opts = append(opts, grpcnet.WithListener(l))
			case pl.listen != "":
				opts = append(opts, grpcnet.WithListenAddr(pl.listen))
			}
		}
		network := grpcnet.Network{Addrs: pl.addrs, Links: grpcnet.Links(stage.Topology(plan)), Fingerprint: plan.Fingerprint()}
		ep, err := grpcnet.Open(ctx, p, network, append(opts, grpcnet.WithConnectTimeout(n.connectTimeout))...)
		if errors.Is(err, grpcnet.ErrConnectTimeout) {
			return nil, fmt.Errorf("%w; -connect-timeout %v: give more if the processes start further apart", err, n.connectTimeout)
		}
		return ep, err
	}
}

// inheritedListener is the listening socket this process inherited as
// file descriptor fd (-listen fd:N; train -procs hands each stage one).
func inheritedListener(fd string) (net.Listener, error) {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		return nil, fmt.Errorf("-listen fd:%s: a file descriptor of 3 or more", fd)
	}
	f := os.NewFile(uintptr(n), "listener")
	if f == nil {
		return nil, fmt.Errorf("-listen fd:%d: no such file descriptor", n)
	}
	defer f.Close() // FileListener dups it
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("-listen fd:%d: not a listening socket: %w", n, err)
	}
	return l, nil
}
