package main

import (
	"strconv"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// planStages is the number of stages the run cfg describes is cut into,
// cut as Train and ServeStage cut it (train.Config.Split), so that a command
// can refuse a command line that does not fit the plan before it trains
// anything. More stages than r's model has layers is a usageErr naming
// -stages (given as stages).
func planStages(r zoo.Recipe, cfg train.Config, stages string) (int, error) {
	_, plan, err := cfg.Split(r.Build)
	if err != nil && cfg.Cut != nil {
		return 0, usageErr{errors.Errorf("-cut %s: %v", train.FormatCut(cfg.Cut), err)}
	}
	var tm *graphsplit.TooManyStagesError
	if errors.As(err, &tm) {
		return 0, usageErr{errors.Errorf("-stages %s: the %s model cuts into at most %d stages, one per layer (-stages fine)", stages, r.Model, tm.Most)}
	}
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	return len(plan.Stages), nil
}

// stageCount is planStages for r's recipe's run with -stages stages
// ("fine" or a number options.check has checked): what compare and sweep
// check their schedules against.
func stageCount(r zoo.Recipe, stages string) (int, error) {
	cfg := train.Config{Hyper: r.Run}
	if stages != "fine" {
		cfg.Stages, _ = strconv.Atoi(stages)
	}
	return planStages(r, cfg, stages)
}

// stagesFit refuses a plan of n stages (-stages given as stages) whose
// stages the places given do not hold one each: procs stage processes
// (-procs; 0: none), or the stages' addresses in pl (-stage-addrs, or a
// launcher's environment; none: in this process). The error, a usageErr,
// names the flag and the way out.
func stagesFit(n int, stages string, procs int, pl place) error {
	switch {
	case procs > 0 && procs != n:
		return usageErr{errors.Errorf("-procs %d: the plan has %d stages (-stages %s): give -stages %d, or -procs %d", procs, n, stages, procs, n)}
	case len(pl.Addrs) > 0 && len(pl.Addrs) != n:
		return usageErr{errors.Errorf("%s gives %d stage addresses and the plan has %d stages (-stages %s): give -stages %d, or one address per stage", pl.AddrsFrom, len(pl.Addrs), n, stages, len(pl.Addrs))}
	}
	return nil
}
