package experiment

import (
	"fmt"
	"math"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
)

// Grid is what a sweep trains: every variant at every setting, run length
// and seed, on one model.
type Grid struct {
	// Model is the zoo model (zoo.RecipeFor). Data is the data as pipemare
	// train's -data names it: it goes into each run's flags, the sweep
	// trains on the data it is given. Stages is "fine" (one stage per
	// layer) or a number.
	Model, Data, Stages string
	// Limit and TestLimit are the training and test examples used (0:
	// all), as train's -limit and -test-limit.
	Limit, TestLimit int
	Methods          []Variant
	// Settings are filled (Fill).
	Settings []Setting
	// Epochs are the run lengths, in epochs (0: the recipe's).
	Epochs []int
	Seeds  []int64
	// CheckpointEvery is every run's checkpoint interval in steps (0:
	// none). A checkpoint drains the pipeline, so it is part of what a run
	// trains (train.Config.CheckpointEvery), and of what a cached run must
	// match.
	CheckpointEvery int
	// Target is the test accuracy whose training time the sweep reports.
	Target float64
	// Baseline is the variant the gaps are measured against, in its text
	// form ("": sequential).
	Baseline string
}

// baseline is the baseline's text form.
func (g *Grid) baseline() string {
	if g.Baseline == "" {
		return string(train.MethodSequential)
	}
	return g.Baseline
}

// Run is one training of a grid.
type Run struct {
	Variant Variant
	Setting Setting
	Epochs  int
	Seed    int64
}

// Key names the run in the run cache and the work directory:
// "spike_warmup=0.1-N4-e6-seed1".
func (r Run) Key() string {
	return fmt.Sprintf("%s-%s-e%d-seed%d", r.Variant.key(), r.Setting.key(), r.Epochs, r.Seed)
}

// plan is what a run trains: its specification (the pipemare train run
// of the same configuration) and configuration, or why it cannot run.
type plan struct {
	spec    runspec.Spec
	cfg     train.Config
	refused string
	// steps are the run's optimizer steps, epochSteps an epoch's.
	steps, epochSteps int
}

// plan returns run's plan for recipe r on p stages and trainLen training
// examples. The configuration is the run's specification (spec) through
// train.ConfigFor, as pipemare train builds it: the recipe's run, the
// setting's N and rows, the length and seed, the method, then the
// variant's parameters with their fractions of the run in steps. A run
// that makes no minibatch is an error; one the method cannot train is
// refused (plan.refused says why).
func (g *Grid) plan(r zoo.Recipe, run Run, p, trainLen int) (plan, error) {
	v, s := run.Variant, run.Setting
	pl := plan{spec: g.spec(run)}
	pl.epochSteps = trainLen / (s.MicrobatchRows * s.Microbatches)
	pl.steps = pl.epochSteps * run.Epochs
	if pl.epochSteps == 0 {
		return pl, errors.Errorf("%s: %d training examples make no minibatch of %d × %d rows", run.Key(), trainLen, s.Microbatches, s.MicrobatchRows)
	}
	if v.Warmup != nil {
		w := warmupSteps(*v.Warmup, pl.steps)
		pl.spec.Warmup = &w
	}
	if s.Injected != "" { // injected delays start at the first step
		w := 0
		pl.spec.Warmup = &w
	}
	c, err := train.ConfigFor(pl.spec, r, trainLen)
	if err == nil && v.T1 != nil { // K: a fraction of the steps after the warm-up
		k := t1Steps(*v.T1, c.StepsAfterWarmup(pl.epochSteps))
		pl.spec.T1 = &k
		c, err = train.ConfigFor(pl.spec, r, trainLen)
	}
	if err != nil {
		pl.cfg, pl.refused = c, err.Error()
		return pl, nil
	}
	pl.cfg, pl.refused = g.parameters(run, c, p)
	return pl, nil
}

// spec is run's specification: the grid's model, data, stages and
// examples, the setting's N and rows, the length, the seed, and the
// variant's method, rate, momentum and decay (its warm-up and T1, which
// are fractions of the run, plan sets in steps).
func (g *Grid) spec(run Run) runspec.Spec {
	v, s := run.Variant, run.Setting
	seed := run.Seed
	spec := runspec.Spec{Model: g.Model, Data: g.Data, Method: string(v.Method), Microbatches: s.Microbatches, Microbatch: s.MicrobatchRows,
		Epochs: run.Epochs, Seed: &seed, Momentum: v.Momentum, T2: v.T2, Limit: g.Limit, TestLimit: g.TestLimit}
	if g.Stages != "fine" {
		spec.Stages = g.Stages
	}
	if v.LR != nil {
		spec.LR = *v.LR
	}
	switch v.Decay {
	case "cosine", "constant":
		cosine := v.Decay == "cosine"
		spec.Cosine = &cosine
	case "step":
		spec.StepDecay = true
	}
	return spec
}

// parameters sets what the sweep adds to run's configuration c — injected
// delays, the checkpoints — or says why the run cannot train.
func (g *Grid) parameters(run Run, c train.Config, p int) (train.Config, string) {
	v, s := run.Variant, run.Setting
	if s.Injected != "" {
		if c.Schedule.Name != schedule.PipeMare().Name {
			return c, fmt.Sprintf("injected delays stand for PipeMare's pipeline, and %s runs %s", v.Method, c.Schedule.Name)
		}
		c.Delays = s.source(p)
	}
	if min := schedule.MinN(c.Schedule, p); c.Microbatches < min {
		return c, fmt.Sprintf("%s needs N ≥ %d on %d stages", c.Schedule.Name, min, p)
	}
	c.CheckpointEvery = g.CheckpointEvery
	return c, ""
}

// warmupSteps is a warm-up of a fraction of steps, rounded.
func warmupSteps(fraction float64, steps int) int {
	return int(math.Round(fraction * float64(steps)))
}

// t1Steps is T1's K for a fraction of the asynchronous steps: at least 1
// unless the fraction is 0 (T1 off).
func t1Steps(fraction float64, async int) int {
	if fraction == 0 {
		return 0
	}
	return max(1, int(math.Round(fraction*float64(async))))
}
