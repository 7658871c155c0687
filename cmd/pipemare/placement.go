package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/zoo"
)

// trainFlags are train's flags beyond those of the run and its outputs:
// where the stages run, and checkpoints.
type trainFlags struct {
	procs, checkpointEvery int
	procsSet               bool // -procs was given (its default runs the stages in this process)
	resume                 string
	net                    netFlags
	cpu                    cpuFlags
}

func (t *trainFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&t.procs, "procs", 0, "run the stages in this many processes of this program on this host, at least 1 (pipemare stage over loopback, mutual TLS with throw-away certificates unless -insecure); one per stage: the plan must have as many (-stages). Without -procs the stages run in this process")
	fs.IntVar(&t.checkpointEvery, "checkpoint-every", 0, "drain the pipeline and write a checkpoint every n minibatches to the checkpoints directory of -out (0: none)")
	fs.StringVar(&t.resume, "resume", "", "continue the run whose -out was this directory, from its latest checkpoint (or from the checkpoint directory given: DIR/checkpoints/step-…), with the flags it was started with; it must hold a checkpoint (a new run is -out DIR). "+rundir.ResumeAuto+": continue -out's run if it has a checkpoint, else start it there (for a launcher that restarts the whole job)")
	t.net.register(fs)
	t.cpu.register(fs, false)
}

// where is where train's stages run.
type where int

const (
	inProcess     where = iota // goroutines of this process
	localProcs                 // -procs: child processes
	remote                     // -stage-addrs: stages started elsewhere
	launchedFirst              // under a launcher, stage 0: the driver, and stage 0 beside it
	launchedStage              // under a launcher, another stage: pipemare stage
)

// place decides where the stages run from -procs, -stage-addrs and a
// launcher's environment (torchrun, a JobSet: the process of stage 0
// drives and serves stage 0; every other process serves its stage). Errors
// of the command line are usageErr.
func (t *trainFlags) place() (where, place, error) {
	env, found, err := launched()
	if err != nil {
		return 0, place{}, err
	}
	n := &t.net
	if err := n.checkTimeout(); err != nil {
		return 0, place{}, usageErr{err}
	}
	switch {
	case t.cpu.pin && t.procs < 1:
		return 0, place{}, usageErr{errors.New("-pin places -procs's stage processes on CPUs of their own: give -procs (pin this process with -cpus)")}
	case t.procs < 1 && t.procsSet:
		return 0, place{}, usageErr{errors.Errorf("-procs %d: the number of stage processes, at least 1 (without -procs the stages run in this process)", t.procs)}
	case t.procs > 0 && n.stageAddrs != "":
		return 0, place{}, usageErr{errors.Errorf("-procs %d and -stage-addrs: -procs starts the stages here, -stage-addrs names stages started elsewhere; choose one", t.procs)}
	case t.procs > 0 && found:
		return 0, place{}, usageErr{errors.Errorf("-procs %d: the %s environment has started the stages already", t.procs, env.Launcher)}
	case t.procs > 0 && n.certs != "":
		return 0, place{}, usageErr{errors.Errorf("-procs %d and -certs: -procs makes throw-away certificates (or runs plaintext with -insecure)", t.procs)}
	case t.procs > 0:
		return localProcs, place{Stage: -1}, nil
	case found:
		pl, err := stagePlace(n, -1, "", env, true)
		if err != nil {
			return 0, pl, usageErr{err}
		}
		if pl.Stage == 0 {
			return launchedFirst, pl, nil
		}
		return launchedStage, pl, nil
	case n.stageAddrs != "":
		addrs, err := n.addrs()
		if err == nil {
			err = n.checkCredentials(addrs)
		}
		if err != nil {
			return 0, place{}, usageErr{err}
		}
		return remote, place{Addrs: addrs, Stage: -1, AddrsFrom: "-stage-addrs"}, nil
	case n.certs != "" || n.insecure:
		return 0, place{}, usageErr{errors.New("-certs and -insecure secure the links to stages in other processes: give -procs or -stage-addrs with them")}
	}
	return inProcess, place{Stage: -1}, nil
}

// placement is what report.json says of where the stages ran (the
// addresses and processes of -procs are filled in once they start).
func (t *trainFlags) placement(w where, pl place) *rundir.Placement {
	p := &rundir.Placement{Where: "in-process", DriverCPUs: t.cpu.cpus}
	switch w {
	case localProcs:
		p.Where = "processes"
	case remote, launchedFirst:
		p.Where, p.Launcher, p.Addresses = "remote", pl.Launcher, pl.Addrs
	}
	if w != inProcess {
		p.Transport = "grpc+mtls"
		if t.net.insecure {
			p.Transport = "grpc (plaintext)"
		}
	}
	return p
}

// stopGrace is how long train waits for its stage processes to exit once
// the driver has stopped them, before it kills them.
const stopGrace = 10 * time.Second

// connect sets cfg.Connect to reach the stages where w says, starting
// them first when train runs them itself (-procs; under a launcher, stage
// 0). It returns stop, which the caller calls once training returned
// (with its error): it ends and waits for what connect started and
// returns how that ended.
func (t *trainFlags) connect(ctx context.Context, cfg *train.Config, o *options, w where, pl place, rep *rundir.Placement, r zoo.Recipe, trainSet zoo.Data, stdout, stderr io.Writer) (stop func(error) error, err error) {
	switch w {
	case remote:
		cfg.Connect = t.net.connector(pl)
	case launchedFirst: // stage 0 beside the driver, as a stage process would serve it
		sctx, cancel := context.WithCancel(ctx)
		served := make(chan error, 1)
		first, scfg := pl, *cfg
		go func() { served <- serveStage(sctx, r, trainSet, scfg, &t.net, first, io.Discard) }()
		pl.Stage = -1
		cfg.Connect = t.net.connector(pl)
		return func(trainErr error) error {
			if trainErr != nil { // the driver may never have reached stage 0
				cancel()
			}
			select {
			case err := <-served:
				cancel()
				return err
			case <-time.After(stopGrace):
				cancel()
				return <-served
			}
		}, nil
	case localProcs:
		var stages *launch.Local
		cfg.Connect = func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			var err error
			stages, err = launch.StartLocal(launch.LocalConfig{Stages: t.procs, Insecure: t.net.insecure, Stderr: stderr,
				Args: func(i int, addrs []string, certs string) []string {
					return stageArgs(o, cfg.Cut, t.cpu.stageCPUs(i), t.net.connectTimeout, i, addrs, certs)
				},
				Exited: func(i int, err error) {
					cancel(errors.Errorf("stage %d exited before the pipeline was up (%v); its error is above", i, err))
				},
			})
			if err != nil {
				return nil, errors.Wrap(err, "-procs")
			}
			rep.Addresses, rep.PIDs = stages.Addrs, stages.PIDs
			for i := range stages.PIDs {
				if cpus := t.cpu.stageCPUs(i); cpus != "" {
					rep.CPUs = append(rep.CPUs, cpus)
				}
			}
			fmt.Fprintf(stdout, "started %d stage processes on %s (pids %s)\n", t.procs, strings.Join(stages.Addrs, ", "), strings.Trim(fmt.Sprint(stages.PIDs), "[]"))
			n := t.net
			n.certs = stages.Certs
			ep, err := n.connector(place{Addrs: stages.Addrs, Stage: -1})(ctx, plan)
			if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
			return ep, err
		}
		return func(error) error {
			if stages == nil {
				return nil
			}
			return stages.Stop(stopGrace)
		}, nil
	}
	return func(error) error { return nil }, nil
}

// stageArgs are the arguments of stage i of train -procs: pipemare stage
// with the run's flags as given to train and the cut train chose (in place
// of -stages), the stages' addresses, the listener it inherits as file
// descriptor 3, its CPUs under -pin, train's -connect-timeout and its
// credentials.
func stageArgs(o *options, cut []int, cpus string, connectTimeout time.Duration, i int, addrs []string, certs string) []string {
	args := []string{"stage"}
	run := flag.NewFlagSet("", flag.ContinueOnError)
	(&options{}).registerRun(run)
	o.fs.Visit(func(f *flag.Flag) {
		if run.Lookup(f.Name) != nil && (cut == nil || f.Name != "stages" && f.Name != "cut") {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	if cut != nil {
		args = append(args, "-cut="+train.FormatCut(cut))
	}
	if cpus != "" {
		args = append(args, "-cpus="+cpus)
	}
	args = append(args, "-stage="+strconv.Itoa(i), "-stage-addrs="+strings.Join(addrs, ","), "-listen=fd:3", "-connect-timeout="+connectTimeout.String())
	if certs == "" {
		return append(args, "-insecure")
	}
	return append(args, "-certs="+certs)
}
