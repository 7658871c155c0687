package launch

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/pipemare/pipemare/transport/pki"
)

// Place is where one peer stands in a pipeline whose stages run in
// several processes: the stages' addresses, which processes host which
// stages, which peer this is, and where it listens. A command fills it
// from its flags or from a launcher's environment (FromEnv's Config);
// Connector then opens the peer's endpoint. A process that hosts several
// stages has a Place for each (StagesConnector).
type Place struct {
	// Addrs are the addresses of the processes that host the stages,
	// host:port, as the other peers dial them: one per stage of the plan,
	// in stage order, when each hosts one; else one per process, each
	// hosting the stages of the plan the run's placement gives it
	// (Hosts), its k-th stage (in stage order) at host:port+k·Stride.
	Addrs []string
	// Stride is the ports between the consecutive stages of a process
	// that hosts several (0 is 1): a launcher's (Config.Stride) under a
	// launcher, else 1.
	Stride int
	// Stage is the stage this process serves, from 0, or -1 for the
	// driver, which dials the stages and listens on none.
	Stage int
	// Listen is where a stage listens: "" on its own address in Addrs; an
	// address such as ":7000" (every interface, as in a pod); or "fd:N", a
	// listening socket inherited as file descriptor N (StartLocal hands
	// each of its stages one as fd:3). The driver ignores it.
	Listen string
	// Launcher is the launcher whose environment placed the process
	// ("torchrun", "jobset"; Config.Launcher), or "".
	Launcher string
	// AddrsFrom says where Addrs come from, for messages that question
	// them: a setting as runspec.Error's reasons name one
	// ("{stage_addrs}"), or "the torchrun environment"; "" if unsaid.
	AddrsFrom string
	// Spec is the run every process of the pipeline must have been
	// started with, resolved (train.Resolved: every setting that reaches a
	// stage at the value it has there): the handshake refuses a peer with
	// another (Identity).
	Spec runspec.Spec
}

// Identity is what the process announces at every handshake and requires
// of its peers, for the pipeline plan describes: the plan's fingerprint
// and Spec's settings that reach a stage (runspec.Spec.Identity). Every
// transport's setup takes its identity from here.
func (pl Place) Identity(plan *graphsplit.Plan) transport.Identity {
	return pl.Spec.Identity(plan.Fingerprint())
}

// Hosts lists, for a plan whose stages have these costs
// (graphsplit.Plan.Costs), the stages each of the processes at Addrs
// hosts, in stage order, as the run's placement (Spec; Hosts below) gives
// them.
func (pl Place) Hosts(costs []float64) ([][]int, error) {
	hosts, err := Hosts(pl.Spec, costs, len(pl.Addrs), "stage_addrs")
	var re *runspec.Error
	if pl.Launcher != "" && pl.AddrsFrom != "{stage_addrs}" && errors.As(err, &re) && re.Setting == "stage_addrs" {
		// The processes are the launcher's, not a flag's.
		return nil, &runspec.Error{Setting: "stages", Reason: fmt.Sprintf("the %s environment starts %d processes: %s", pl.Launcher, len(pl.Addrs), re.Reason)}
	}
	return hosts, err
}

// Hosts lists the stages each of w processes hosts of a plan whose
// stages have these costs (graphsplit.Plan.Costs, one per stage), in
// stage order, as spec's placement (runspec.Placed) gives them: blocks
// split where the costs divide evenly (balanced), contiguous blocks
// (whose sizes differ by one at most when w does not divide the stages),
// round robin or a V (w must divide the stages). It refuses, with a
// *runspec.Error of setting (the processes' number: procs, stage_addrs),
// more processes than stages and a w the placement cannot share the
// stages among.
func Hosts(spec runspec.Spec, costs []float64, w int, setting string) ([][]int, error) {
	placement, err := placementOf(spec)
	if err != nil {
		return nil, err
	}
	p := len(costs)
	switch {
	case w < 1 || w > p:
		return nil, &runspec.Error{Setting: setting, Value: strconv.Itoa(w), Reason: fmt.Sprintf("%d processes for the plan's %d stages: give at most %d", w, p, p)}
	case p%w != 0 && (placement == schedule.RoundRobin || placement == schedule.VShape):
		return nil, &runspec.Error{Setting: setting, Value: strconv.Itoa(w), Reason: fmt.Sprintf("placed %v, every process hosts as many of the plan's %d stages: give {stages} a multiple of %d, or processes that divide %d", placement, p, w, p)}
	}
	return placement.Hosts(costs, w), nil
}

// placementOf is spec's placement (runspec.Placed for its schedule).
func placementOf(spec runspec.Spec) (schedule.Placement, error) {
	sch, err := spec.ScheduleNamed()
	if err != nil {
		return 0, err
	}
	return runspec.Placed(spec.Placement, sch)
}

// Layout is what the peer's network transport is given for plan: each
// stage's address (its process's address in Addrs, port+k·Stride for its
// k-th stage) and the links of the plan's topology that join two
// processes — a link between two stages of one process is not on the
// network (transport.Colocated carries it). Every peer of the pipeline
// has the same layout; the handshake compares the links. Its errors are
// Hosts'.
func (pl Place) Layout(plan *graphsplit.Plan) ([]string, []transport.Link, error) {
	p := len(plan.Stages)
	hosts, err := pl.Hosts(plan.Costs())
	if err != nil {
		return nil, nil, err
	}
	worker := make([]int, p)
	addrs := make([]string, p)
	for j, stages := range hosts {
		worker[stages[0]], addrs[stages[0]] = j, pl.Addrs[j]
		if len(stages) == 1 {
			continue
		}
		for k, i := range stages {
			a, err := pl.nth(pl.Addrs[j], k, len(stages))
			if err != nil {
				return nil, nil, &runspec.Error{Setting: "stage_addrs", Value: pl.Addrs[j], Reason: err.Error()}
			}
			worker[i], addrs[i] = j, a
		}
	}
	var links []transport.Link
	for _, l := range grpcnet.Links(plan.Topology()) {
		if worker[l.A] != worker[l.B] {
			links = append(links, l)
		}
	}
	return addrs, links, nil
}

// nth is the address of the k-th of the n stages of the process at addr
// (host:port, or :port to listen on every interface): its port+k·Stride.
func (pl Place) nth(addr string, k, n int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	first, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		return "", errors.New("host:port with a port number, the first of the process's stages")
	}
	stride := max(pl.Stride, 1)
	if last := first + (n-1)*stride; last > 65535 {
		return "", errors.Errorf("its %d stages would listen up to port %d: give a first port of at most %d", n, last, 65535-(n-1)*stride)
	}
	return net.JoinHostPort(host, strconv.Itoa(first+k*stride)), nil
}

// Peer is the transport peer the process is: transport.Driver for Stage
// -1, else stage Stage.
func (pl Place) Peer() transport.Peer {
	if pl.Stage < 0 {
		return transport.Driver
	}
	return transport.Peer(pl.Stage)
}

// ListenOptions are the grpcnet options that make a stage serve where
// Listen says: none for "" (its address in Addrs) and for the driver,
// grpcnet.WithListenAddr for an address, grpcnet.WithListener for an
// inherited socket "fd:N" (N ≥ 3), which the endpoint then owns. An error
// names the Listen given ("fd:x: …"); nothing is left open.
func (pl Place) ListenOptions() ([]grpcnet.Option, error) {
	if pl.Stage < 0 || pl.Listen == "" {
		return nil, nil
	}
	fd, isFD := strings.CutPrefix(pl.Listen, "fd:")
	if !isFD {
		return []grpcnet.Option{grpcnet.WithListenAddr(pl.Listen)}, nil
	}
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		return nil, errors.Errorf("fd:%s: a file descriptor of 3 or more", fd)
	}
	f := os.NewFile(uintptr(n), "listener")
	if f == nil {
		return nil, errors.Errorf("fd:%d: no such file descriptor", n)
	}
	defer f.Close() // FileListener dups it
	l, err := net.FileListener(f)
	if err != nil {
		return nil, errors.Wrapf(err, "fd:%d: not a listening socket", n)
	}
	return []grpcnet.Option{grpcnet.WithListener(l)}, nil
}

// Open opens the process's endpoint (grpcnet.Open as Peer) of the
// pipeline plan describes, at Addrs (one per stage of plan), with the
// links of plan and the process's Identity, and opts: the credentials (Credentials'
// Options), ListenOptions for a stage, timeouts. The caller owns the
// endpoint. Connector is Open with the options a Place and Credentials
// say; a command that words the errors of each step itself calls the
// steps.
func (pl Place) Open(ctx context.Context, plan *graphsplit.Plan, opts ...grpcnet.Option) (*grpcnet.Endpoint, error) {
	addrs, links, err := pl.Layout(plan)
	if err != nil {
		return nil, err
	}
	network := grpcnet.Network{Addrs: addrs, Links: links, Identity: pl.Identity(plan)}
	return grpcnet.Open(ctx, pl.Peer(), network, opts...)
}

// Connector returns what train.Config.Connect (the driver) and
// train.ServeStage (a stage) take to reach the pipeline's other processes:
// a function that, once the model is cut, opens the process's endpoint
// for the plan — c's Options, ListenOptions, then Open — waiting at most
// connectTimeout (≤ 0: grpcnet's default) for the other peers to connect
// and pass the handshake (a timeout is transport.ErrConnectTimeout). The
// credentials are loaded and an inherited listener taken when it is
// called, not before. The caller of Train or ServeStage owns the
// endpoint; on an error it is nil.
func (pl Place) Connector(c Credentials, connectTimeout time.Duration) func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
	return func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		opts, err := c.Options(pl.Peer())
		if err != nil {
			return nil, err
		}
		listen, err := pl.ListenOptions()
		if err != nil {
			return nil, err
		}
		opts = append(opts, listen...)
		if connectTimeout > 0 {
			opts = append(opts, grpcnet.WithConnectTimeout(connectTimeout))
		}
		ep, err := pl.Open(ctx, plan, opts...)
		if err != nil {
			return nil, err
		}
		return ep, nil
	}
}

// Credentials secure the links between a pipeline's processes: mutual TLS
// with the certificates in Dir, or plaintext (Insecure), which grpcnet
// allows on loopback only. Exactly one must be given.
type Credentials struct {
	// Dir is a directory of certificates as pki.Write lays it out (ca.pem,
	// and each peer's <peer>.pem and <peer>-key.pem; StartLocal's Certs).
	Dir string
	// Insecure runs every link in plaintext.
	Insecure bool
}

// Options are the grpcnet options that secure peer p's links:
// grpcnet.WithInsecure, or grpcnet.WithTLS with the CA and p's certificate
// read from Dir (pki.Load). A file missing from Dir is an error that
// errors.Is fs.ErrNotExist, as pki.Load reports it.
func (c Credentials) Options(p transport.Peer) ([]grpcnet.Option, error) {
	switch {
	case c.Insecure && c.Dir != "":
		return nil, errors.Errorf("certificates in %s and plaintext: choose one", c.Dir)
	case c.Insecure:
		return []grpcnet.Option{grpcnet.WithInsecure()}, nil
	case c.Dir == "":
		return nil, errors.New("no credentials: a directory of certificates, or plaintext on loopback")
	}
	roots, cert, err := pki.Load(c.Dir, p)
	if err != nil {
		return nil, err
	}
	return []grpcnet.Option{grpcnet.WithTLS(roots, cert)}, nil
}

// ParseAddrs splits a comma-separated list of the stages' addresses,
// host:port in stage order, as a command line gives them; spaces around
// an address are dropped. An element that is not host:port with a port
// is an error quoting it.
func ParseAddrs(list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, errors.Errorf("%q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}
