package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/zoo"
)

// stageCmd serves one stage of a pipeline whose driver is pipemare train
// -stage-addrs (or -procs, which starts this command itself).
func stageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare stage", flag.ContinueOnError)
	var o options
	o.registerRun(fs)
	var n netFlags
	n.register(fs)
	var cpu cpuFlags
	cpu.register(fs, true)
	index := fs.Int("stage", -1, "the stage this process serves, from 0 (-1: the launcher's RANK or JOB_COMPLETION_INDEX)")
	listen := fs.String("listen", "", "address to listen on (default: this stage's own in -stage-addrs; :7000 for port 7000 of every interface; fd:N for a listening socket inherited as file descriptor N)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	env, found, err := launched()
	if err != nil {
		return err
	}
	pl, err := stagePlace(&n, *index, *listen, env, found)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	if err := cpu.apply(); err != nil {
		return usageOr(fs, err)
	}
	r, trainSet, _, cfg, err := o.run()
	if err != nil {
		return err
	}
	p, err := planStages(r, cfg, o.stages)
	if err == nil {
		err = stagesFit(p, o.stages, 0, pl)
	}
	if err != nil {
		return usageOr(fs, err)
	}
	return serveStage(ctx, r, trainSet, cfg, &n, pl, stdout)
}

// stagePlace is where a stage process stands: its index from -stage or
// the launcher's environment, the stages' addresses from -stage-addrs or
// the environment, and where it listens. Errors name the flag.
func stagePlace(n *netFlags, index int, listen string, env launch.Config, found bool) (place, error) {
	pl := place{Stage: index, Listen: listen, AddrsFrom: "-stage-addrs"}
	if err := n.checkTimeout(); err != nil {
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
	case n.stageAddrs != "":
		addrs, err := n.addrs()
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
	return pl, n.checkCredentials(served)
}

// serveStage serves stage pl.stage of the run cfg describes until the
// driver stops it, saying so on stdout; a driver that does not connect
// within -connect-timeout, or sends no first order within twice that,
// ends it with an error.
func serveStage(ctx context.Context, r zoo.Recipe, trainSet zoo.Data, cfg train.Config, n *netFlags, pl place, stdout io.Writer) error {
	cfg.FirstOrderTimeout = n.firstOrder()
	connect := n.connector(pl)
	err := train.ServeStage(ctx, r.Build, trainSet, cfg, pl.Stage, func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		ep, err := connect(ctx, plan)
		if err == nil {
			fmt.Fprintf(stdout, "stage %d of %d: connected to the driver and the stages it exchanges tensors with\n", pl.Stage, len(pl.Addrs))
		}
		return ep, err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stage %d: stopped by the driver\n", pl.Stage)
	return nil
}
