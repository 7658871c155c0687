package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/asyncvm"
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
	var n launch.Net
	registerNet(fs, &n)
	var cpu cpuFlags
	cpu.register(fs, true)
	index := fs.Int("stage", -1, "the stage this process serves, from 0 (-1: the launcher's RANK or JOB_COMPLETION_INDEX)")
	listen := fs.String("listen", "", "address to listen on (default: this stage's own in -stage-addrs; :7000 for port 7000 of every interface; fd:N for a listening socket inherited as file descriptor N)")
	spec := fs.String("spec", "", "the run's specification as JSON, in place of the run's flags (train -procs starts its stage processes so; settings.json's spec is one)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := o.fromSpec(*spec); err != nil {
		return usageError(fs, "%v", err)
	}
	env, found, err := launch.FromEnv(lookupEnv)
	if err != nil {
		return err
	}
	pl, err := n.StagePlace(*index, *listen, env, found)
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
	pl.Spec = train.Resolved(r, cfg)
	if err := fitPlan(r, cfg, stagesOf(pl.Spec), 0, pl); err != nil {
		return usageOr(fs, err)
	}
	return serveStage(ctx, r, trainSet, cfg, n, pl, stdout)
}

// serveStage serves stage pl.Stage of the run cfg describes until the
// driver stops it, saying so on stdout; a driver that does not connect
// within -connect-timeout, or sends no first order within twice that,
// ends it with an error.
func serveStage(ctx context.Context, r zoo.Recipe, trainSet zoo.Data, cfg train.Config, n launch.Net, pl launch.Place, stdout io.Writer) error {
	connect := n.Connector(pl)
	err := train.ServeStage(ctx, r.Build, trainSet, cfg, pl.Stage, func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error) {
		ep, err := connect(ctx, plan)
		if err == nil {
			fmt.Fprintf(stdout, "stage %d of %d: connected to the driver and the stages it exchanges tensors with\n", pl.Stage, len(pl.Addrs))
		}
		return ep, err
	}, asyncvm.WithFirstOrderTimeout(n.FirstOrder()))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stage %d: stopped by the driver\n", pl.Stage)
	return nil
}
