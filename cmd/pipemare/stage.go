package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/zoo"
)

// stageCmd serves the stages of a pipeline one process hosts, whose
// driver is pipemare train -stage-addrs (or -procs, which starts this
// command itself).
func stageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare stage", flag.ContinueOnError)
	var o options
	o.registerRun(fs)
	var n launch.Net
	registerNet(fs, &n)
	var cpu cpuFlags
	cpu.register(fs, true)
	index := fs.String("stage", "", "the stage this process serves, from 0, or the stages it hosts, comma-separated (those -placement gives one process: 0,3 for zb-v's first of 2 processes) (default: under a launcher, those -placement gives its RANK or JOB_COMPLETION_INDEX)")
	listen := fs.String("listen", "", "address to listen on, or one per stage of -stage, comma-separated (default: each stage's own in -stage-addrs; :7000 for port 7000 of every interface; fd:N for a listening socket inherited as file descriptor N)")
	spec := fs.String("spec", "", "the run's specification as JSON, in place of the run's flags (train -procs starts its stage processes so; settings.json's spec is one)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := o.fromSpec(*spec); err != nil {
		return usageError(fs, "%v", err)
	}
	stages := []int{-1}
	if *index != "" {
		var err error
		if stages, err = launch.ParseStageList(*index); err != nil {
			return usageError(fs, "-stage: %v", err)
		}
	}
	var listens []string
	if *listen != "" {
		listens = strings.Split(*listen, ",")
	}
	env, found, err := launch.FromEnv(lookupEnv)
	if err != nil {
		return err
	}
	pls, err := n.StagesPlaces(stages, listens, env, found)
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
	resolved := train.Resolved(r, cfg)
	for k := range pls {
		pls[k].Spec = resolved
	}
	costs, err := fitPlan(r, cfg, stagesOf(resolved), 0, pls[0])
	if err == nil && found { // the stages the launcher's rank hosts
		var listed []int
		if *index != "" {
			listed = stages
		}
		if pls, err = launch.Launched(pls[0], listed, costs); err != nil {
			err = usageErr{err}
		}
	}
	if err == nil {
		if err = launch.CheckHosted(pls, costs); err != nil {
			err = usageErr{err}
		}
	}
	if err != nil {
		return usageOr(fs, err)
	}
	return serveStages(ctx, r, trainSet, cfg, n, pls, stdout)
}

// serveStages serves the stages of pls (one process's, launch.Hosting) of
// the run cfg describes until the driver stops them, saying so on
// stdout; a driver that does not connect within -connect-timeout, or
// sends no first order within twice that, ends it with an error.
func serveStages(ctx context.Context, r zoo.Recipe, trainSet zoo.Data, cfg train.Config, n launch.Net, pls []launch.Place, stdout io.Writer) error {
	stages := make([]int, len(pls))
	for k, pl := range pls {
		stages[k] = pl.Stage
	}
	name := "stage " + launch.StageList(stages)
	if len(stages) > 1 {
		name = "stages " + launch.StageList(stages)
	}
	launch.ServeOnOneP(len(pls), n.Transport.Resolve(pls[0].Addrs))
	connect := n.StagesConnector(pls)
	err := train.ServeStages(ctx, r.Build, trainSet, cfg, stages, func(ctx context.Context, plan *graphsplit.Plan) ([]transport.Endpoint, error) {
		eps, err := connect(ctx, plan)
		if err == nil {
			fmt.Fprintf(stdout, "%s of %d: connected to the driver and the stages it exchanges tensors with\n", name, len(plan.Stages))
		}
		return eps, err
	}, asyncvm.WithFirstOrderTimeout(n.FirstOrder()))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: stopped by the driver\n", name)
	return nil
}
