package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/zoo"
)

// trainFlags are train's flags beyond those of the run and its outputs:
// where the stages run, and checkpoints.
type trainFlags struct {
	procs, checkpointEvery int
	procsSet               bool // -procs was given (its default runs the stages in this process)
	maxRestarts            int
	resume                 string
	net                    launch.Net
	cpu                    cpuFlags
}

func (t *trainFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&t.procs, "procs", 0, "run the stages in this many processes of this program on this host, at least 1 and at most the plan's stages (pipemare stage over loopback, mutual TLS with throw-away certificates unless -insecure); each hosts the stages -placement gives it (see -placement; round-robin and v need -stages a multiple of -procs). Without -procs the stages run in this process")
	fs.IntVar(&t.checkpointEvery, "checkpoint-every", 0, "drain the pipeline and write a checkpoint every n minibatches to the checkpoints directory of -out (0: none)")
	fs.StringVar(&t.resume, "resume", "", "continue the run whose -out was this directory, from its latest checkpoint (or from the checkpoint directory given: DIR/checkpoints/step-…), with the flags it was started with; it must hold a checkpoint (a new run is -out DIR). "+rundir.ResumeAuto+": continue -out's run if it has a checkpoint, else start it there (for a launcher that restarts the whole job)")
	fs.IntVar(&t.maxRestarts, "max-restarts", 0, "with -procs and -checkpoint-every: when a stage process dies or stalls, end the others, start the stage processes anew and resume from the last checkpoint, up to n times (report.json's result.restarts records each); under a launcher, its restart policy with -resume auto does this")
	registerNet(fs, &t.net)
	t.cpu.register(fs, false)
}

// checkRestarts refuses a -max-restarts the run cannot honour: negative,
// without checkpoints to resume from, or without stage processes of its
// own to restart.
func (t *trainFlags) checkRestarts(fs *flag.FlagSet) error {
	switch {
	case t.maxRestarts < 0:
		return usageError(fs, "-max-restarts %d: a number of restarts (0: none)", t.maxRestarts)
	case t.maxRestarts > 0 && t.checkpointEvery == 0:
		return usageError(fs, "-max-restarts %d: a restart resumes from the last checkpoint: give -checkpoint-every", t.maxRestarts)
	case t.maxRestarts > 0 && !t.procsSet:
		return usageError(fs, "-max-restarts %d restarts the stage processes -procs starts: give -procs (under a launcher, its restart policy and -resume auto restart the job)", t.maxRestarts)
	}
	return nil
}

// place decides where the stages run from -procs, -pin, -stage-addrs and
// a launcher's environment (launch.Setup: under torchrun or a JobSet the
// process of rank 0 drives and serves its stages, stage 0 first; every
// other process serves its rank's; launch.Launched). Errors of the
// command line are usageErr.
func (t *trainFlags) place() (launch.Where, launch.Place, error) {
	env, found, err := launch.FromEnv(lookupEnv)
	if err != nil {
		return 0, launch.Place{}, err
	}
	w, pl, err := launch.Setup{Net: t.net, Procs: t.procs, ProcsGiven: t.procsSet, Pin: t.cpu.pin}.Decide(env, found)
	if err != nil {
		return 0, pl, usageErr{err}
	}
	if w == launch.LocalProcs { // what carries them, which their driver tells them (stageArgs)
		t.net.Transport = t.net.Transport.For(w, nil)
	}
	return w, pl, nil
}

// stopGrace is how long train waits for its stage processes to exit once
// the driver has stopped them, before it kills them; failGrace once the
// pipeline failed (the driver has closed its links: a stage process still
// running after it is stopped or hung).
const (
	stopGrace = 10 * time.Second
	failGrace = 2 * time.Second
)

// grace is how long to wait for the stage processes to exit once the
// driver returned err.
func grace(err error) time.Duration {
	if err != nil {
		return failGrace
	}
	return stopGrace
}

// connect sets cfg.Connect to reach the stages where j says, starting
// them first when train runs them itself (-procs; under a launcher, the
// stages of rank 0 beside the driver: launch.ServeBeside), recording in
// rep the stages each process hosts when one hosts several. It returns
// stop, which the caller calls once training returned (with its error):
// it ends and waits for what connect started and returns how that ended.
func (t *trainFlags) connect(ctx context.Context, cfg *train.Config, o *options, j trainJob, rep *rundir.Placement, stdout, stderr io.Writer) (stop func(error) error) {
	stop = func(error) error { return nil }
	pl := j.pl
	switch j.where {
	case launch.LocalProcs:
		return t.startLocal(cfg, o, pl.Spec, rep, stdout, stderr)
	case launch.LaunchedFirst: // rank 0's stages as a stage process would serve them
		scfg := *cfg
		stop = launch.ServeBeside(ctx, func(ctx context.Context) error {
			return serveStages(ctx, j.r, j.trainSet, scfg, t.net, j.hosted, io.Discard)
		}, stopGrace)
		pl.Stage = -1
	case launch.Remote:
	default:
		return stop
	}
	connect := t.net.Connector(pl)
	cfg.Connect = func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		if hosts, err := pl.Hosts(plan.Costs()); err == nil && len(hosts) < len(plan.Stages) { // else Connect says what is wrong
			rep.Hosts, rep.PlacedBy = hosts, pl.Spec.Placement
		}
		return connect(ctx, plan)
	}
	return stop
}

// startLocal sets cfg.Connect to start -procs's stage processes once the
// model is cut (launch.LocalDriver), each hosting the stages the run's
// placement gives it, and connect to them, recording in rep where they
// run and saying so on stdout; the stop it returns ends them. The driver
// announces resolved (train.Resolved) at its handshakes.
func (t *trainFlags) startLocal(cfg *train.Config, o *options, resolved runspec.Spec, rep *rundir.Placement, stdout, stderr io.Writer) func(error) error {
	local := t.net // its -transport, passed on to the stage processes
	d := &launch.LocalDriver{
		Config: launch.LocalConfig{Stages: t.procs, Insecure: t.net.Credentials.Insecure, Stderr: stderr,
			Args: func(i int, stages []int, addrs []string, certs string) []string {
				return t.stageArgs(o.spec(), cfg.Cut, local, i, stages, addrs, certs)
			}},
		Procs: t.procs, Spec: resolved,
		Started: func(l *launch.Local) {
			rep.Addresses, rep.PIDs, rep.CPUs, rep.Hosts = l.Addrs, l.PIDs, nil, nil // a restart's processes replace the last
			for i := range l.PIDs {
				if cpus := t.cpu.stageCPUs(i); cpus != "" {
					rep.CPUs = append(rep.CPUs, cpus)
				}
			}
			hosting := ""
			if len(l.PIDs) < len(slices.Concat(l.Hosts...)) {
				rep.Hosts, rep.PlacedBy = l.Hosts, resolved.Placement
				var lists []string
				for _, h := range l.Hosts {
					lists = append(lists, launch.StageList(h))
				}
				hosting = ", hosting stages " + strings.Join(lists, " and ") + ", placed " + resolved.Placement
			}
			fmt.Fprintf(stdout, "started %d stage processes on %s (pids %s%s)\n", t.procs, strings.Join(l.Addrs, ", "), strings.Trim(fmt.Sprint(l.PIDs), "[]"), hosting)
		},
		Dial: func(l *launch.Local) launch.ConnectFunc {
			n := local
			n.Credentials.Dir = l.Certs
			return n.Connector(launch.Place{Addrs: l.Addrs, Stage: -1, Spec: resolved})
		},
	}
	cfg.Connect = func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		ep, err := d.Connect(ctx, plan)
		if err != nil && d.Local() == nil { // the processes did not start
			err = errors.Wrap(err, "-procs")
		}
		return ep, err
	}
	if t.maxRestarts > 0 {
		cfg.MaxRestarts = t.maxRestarts
		cfg.Disconnect = func(err error) error { return d.Stop(grace(err)) }
		n := 0
		cfg.Restarted = func(r train.Restart) {
			n++
			from := "its first step (no checkpoint yet)"
			if r.Checkpoint != "" {
				from = fmt.Sprintf("step %d (%s)", r.FromStep, r.Checkpoint)
			}
			what := "the pipeline failed"
			if r.Stage >= 0 {
				what = fmt.Sprintf("stage %d failed", r.Stage)
			}
			fmt.Fprintf(stdout, "restart %d of %d: %s; resumed from %s, %d steps to redo; the restart took %v\n",
				n, t.maxRestarts, what, from, r.StepsRedone, r.Took.Round(time.Millisecond))
		}
	}
	return func(err error) error { return d.Stop(grace(err)) }
}

// stageArgs are the arguments of stage process i of a train -procs run
// (launch.LocalConfig.Args), a restarted one's too: pipemare stage started
// from the run's spec (-spec), with the cut the driver chose in place of
// its stages and cut (when cut is set), the process's CPUs under -pin,
// the stages it hosts, the stages' addresses, the listeners it inherits
// as file descriptors 3, 4, … (one per stage), the driver's timeouts, so
// that every process of the pipeline waits alike, and the credentials:
// the throw-away certificates in certs, or plaintext when certs is "".
func (t *trainFlags) stageArgs(spec runspec.Spec, cut []int, n launch.Net, i int, stages []int, addrs []string, certs string) []string {
	if cut != nil {
		spec.Stages, spec.Cut = "", runspec.FormatCut(cut)
	}
	args := []string{"stage", "-spec=" + string(spec.JSON())}
	if cpus := t.cpu.stageCPUs(i); cpus != "" {
		args = append(args, "-cpus="+cpus)
	}
	listen := make([]string, len(stages))
	for k := range stages {
		listen[k] = "fd:" + strconv.Itoa(3+k)
	}
	args = append(args, "-stage="+launch.StageList(stages), "-stage-addrs="+strings.Join(addrs, ","), "-listen="+strings.Join(listen, ","),
		"-connect-timeout="+n.ConnectTimeout.String(), "-stall-timeout="+n.StallTimeout.String(), "-recv-timeout="+n.RecvTimeout.String())
	if n.Transport != launch.TransportAuto {
		args = append(args, "-transport="+n.Transport.String())
	}
	if certs == "" {
		return append(args, "-insecure")
	}
	return append(args, "-certs="+certs)
}

// registerNet adds to fs the flags of a process that talks to stages in
// other processes, train's driver and pipemare stage, into n: launch.Net,
// whose checks and connector word their errors by these flags.
func registerNet(fs *flag.FlagSet, n *launch.Net) {
	fs.StringVar(&n.StageAddrs, "stage-addrs", "", "the stage processes' addresses, host:port, comma-separated: one per stage in stage order, stage 0 first, or, when each process hosts several stages (as -placement gives them), one per process, which serves its k-th stage at port+k (the driver dials them and listens on none)")
	fs.StringVar(&n.Credentials.Dir, "certs", "", "mutual TLS with the certificates in this directory, as pipemare certs writes them: ca.pem, and this peer's stage-<i>.pem and stage-<i>-key.pem (the driver's: driver.pem, driver-key.pem)")
	fs.BoolVar(&n.Credentials.Insecure, "insecure", false, "plaintext instead of mutual TLS; refused unless every address is loopback")
	fs.DurationVar(&n.ConnectTimeout, "connect-timeout", transport.DefaultConnectTimeout, "how long a process waits for the others of the pipeline to connect and pass the handshake, and a stage then for its driver's first order (twice as long): a peer that does not come, or is refused, ends every process after it; give the processes' largest start-up gap")
	fs.DurationVar(&n.StallTimeout, "stall-timeout", transport.DefaultStallTimeout, "how long a process of the pipeline may answer nothing, not even the transport's keepalive, before it is taken as stopped or stalled (SIGSTOP, hung, its host frozen) and every process ends naming it; at least 11s over gRPC (its keepalive's floor), 100ms over shared memory. A process that computes for long still answers")
	fs.Var(&n.Transport, "transport", "what carries the messages between the processes of the pipeline: auto (shared memory when every address of -stage-addrs is loopback, as for -procs's stage processes, which measure faster over it; gRPC when any is not), grpc, or shm (shared memory: every process on this host, as one user; the driver of -procs passes it to its stages). Give every process of a pipeline the same -transport and -stage-addrs. Over shared memory -certs, -insecure and -listen are not used")
	fs.DurationVar(&n.RecvTimeout, "recv-timeout", transport.DefaultRecvTimeout, "how long a process waits for the next message of a peer that is alive: give more than the longest work between two messages (a stage's slice of the schedule, an evaluation)")
}

// lookupEnv reads the launcher's environment (launch.FromEnv; a variable
// for tests).
var lookupEnv = os.LookupEnv

// cpuFlags place a process on CPUs: -cpus pins the process itself (train,
// stage), and train's -pin gives each of -procs's stage processes a CPU of
// its own.
type cpuFlags struct {
	cpus string
	pin  bool
}

func (c *cpuFlags) register(fs *flag.FlagSet, stage bool) {
	fs.StringVar(&c.cpus, "cpus", "", "run this process on these CPUs only, like 1 or 0-3 (sched_setaffinity, as taskset does)")
	if !stage {
		fs.BoolVar(&c.pin, "pin", false, "with -procs: pin stage process i to CPU i of those this process may use (round robin); see docs/speed.md for when to")
	}
}

// apply pins the process to -cpus, if given, and sets GOMAXPROCS to
// their number (launch.Pin).
func (c *cpuFlags) apply() error {
	if c.cpus == "" {
		return nil
	}
	cpus, err := affinity.Parse(c.cpus)
	if err != nil {
		return usageErr{errors.Wrap(err, "-cpus")}
	}
	return errors.Wrapf(launch.Pin(cpus), "-cpus %s", c.cpus)
}

// stageCPUs is the -cpus of stage process i under -pin: a CPU of its own
// (launch.OwnCPU); "" without -pin, or when this process's CPUs cannot be
// read.
func (c *cpuFlags) stageCPUs(i int) string {
	if !c.pin {
		return ""
	}
	cpu, err := launch.OwnCPU(i)
	if err != nil {
		return ""
	}
	return strconv.Itoa(cpu)
}

// fitPlan refuses, before anything trains, a run cfg whose plan
// (planCosts) the places cannot host, each process as many stages:
// procs stage processes, or pl's addresses (launch.Setup.Fit); it
// returns the plan's stages' costs, one per stage. Errors of the command
// line are usageErr.
func fitPlan(r zoo.Recipe, cfg train.Config, stages string, procs int, pl launch.Place) ([]float64, error) {
	costs, err := planCosts(r, cfg, stages)
	if err == nil {
		if err = (launch.Setup{Procs: procs}).Fit(costs, pl); err != nil {
			err = usageErr{err}
		}
	}
	return costs, err
}

// planCosts is train.PlanCosts, a cut the model cannot have a usageErr.
func planCosts(r zoo.Recipe, cfg train.Config, stages string) ([]float64, error) {
	costs, err := train.PlanCosts(r, cfg, stages)
	var ce *runspec.Error
	if errors.As(err, &ce) {
		return nil, usageErr{err}
	}
	return costs, err
}

// stageCount is the number of stages of planCosts for r's recipe's run
// with -stages stages ("fine" or a number options.check has checked):
// what compare and sweep check their schedules against.
func stageCount(r zoo.Recipe, stages string) (int, error) {
	cfg := train.Config{Hyper: r.Run}
	cfg.Stages, _ = strconv.Atoi(stages) // 0 for fine
	costs, err := planCosts(r, cfg, stages)
	return len(costs), err
}
