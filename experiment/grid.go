package experiment

import (
	"fmt"
	"math"
	"strconv"

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

// plan is what a run trains: its configuration and the pipemare train
// flags that train the same run, or why it cannot run.
type plan struct {
	cfg     train.Config
	args    []string
	refused string
	// steps are the run's optimizer steps, epochSteps an epoch's.
	steps, epochSteps int
}

// plan returns run's plan for recipe r on p stages and trainLen training
// examples. The configuration is built as pipemare train builds it from
// the flags plan.args: the recipe's run, the setting's N and rows, the
// length and seed, the method (train.Method.Apply), then the variant's
// parameters. A run that makes no minibatch is an error; one the method
// cannot train is refused (plan.refused says why).
func (g *Grid) plan(r zoo.Recipe, run Run, p, trainLen int) (plan, error) {
	v, s := run.Variant, run.Setting
	c := train.Config{Hyper: r.Run}
	c.Seed, c.Epochs = run.Seed, run.Epochs
	c.Microbatch, c.Microbatches = s.MicrobatchRows, s.Microbatches
	if g.Stages != "fine" {
		c.Stages, _ = strconv.Atoi(g.Stages) // the command line made sure
	}
	if v.Momentum != nil {
		c.Momentum, c.NoMomentum = *v.Momentum, *v.Momentum == 0
	}
	switch v.Decay {
	case "cosine", "step", "constant":
		c.Cosine, c.StepDecay = v.Decay == "cosine", v.Decay == "step"
	}
	pl := plan{epochSteps: trainLen / (c.Microbatch * c.Microbatches)}
	pl.steps = pl.epochSteps * c.Epochs
	if pl.epochSteps == 0 {
		return pl, errors.Errorf("%s: %d training examples make no minibatch of %d × %d rows", run.Key(), trainLen, c.Microbatches, c.Microbatch)
	}
	c, err := v.Method.Apply(c, r.Warmup, pl.epochSteps)
	if err != nil {
		pl.cfg, pl.refused = c, err.Error()
	} else {
		pl.cfg, pl.refused = g.parameters(run, c, p, pl)
	}
	pl.args = g.args(run, pl.cfg)
	return pl, nil
}

// parameters sets the variant's parameters on the method's configuration c
// of run, as train's flags do, or says why the run cannot train.
func (g *Grid) parameters(run Run, c train.Config, p int, pl plan) (train.Config, string) {
	v, s := run.Variant, run.Setting
	if v.LR != nil {
		c.LR = *v.LR
	}
	if v.Warmup != nil {
		c.Warmup = warmupSteps(*v.Warmup, pl.steps)
	}
	if s.Injected != "" {
		c.Warmup = 0
	}
	if c.Schedule.Async && c.Warmup >= pl.steps {
		return c, fmt.Sprintf("the warm-up of %d steps covers the whole run of %d", c.Warmup, pl.steps)
	}
	switch {
	case v.T1 != nil:
		c.T1 = t1Steps(*v.T1, c.StepsAfterWarmup(pl.epochSteps))
	case c.T1 > 0:
		c.T1 = c.StepsAfterWarmup(pl.epochSteps)
	}
	if v.T2 != nil {
		c.T2 = *v.T2
	}
	if !c.Schedule.Async {
		c.T1, c.T2, c.Warmup, c.Spike, c.Predict = 0, 0, 0, false, false
	}
	if c.Predict && c.T2 != 0 {
		return c, fmt.Sprintf("weight prediction cannot have T2 (γ = %g), whose backward estimate would undo it", c.T2)
	}
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

// args are the pipemare train flags of run, whose configuration is c.
// With injected delays, which train has no flag for, the setting's label
// says which; their warm-up is off.
func (g *Grid) args(run Run, c train.Config) []string {
	v, s := run.Variant, run.Setting
	a := []string{"-model", g.Model, "-data", g.Data, "-method", string(v.Method), "-stages", g.Stages,
		"-microbatches", strconv.Itoa(s.Microbatches), "-microbatch", strconv.Itoa(s.MicrobatchRows),
		"-epochs", strconv.Itoa(run.Epochs), "-seed", strconv.FormatInt(run.Seed, 10)}
	if g.Limit > 0 {
		a = append(a, "-limit", strconv.Itoa(g.Limit))
	}
	if g.TestLimit > 0 {
		a = append(a, "-test-limit", strconv.Itoa(g.TestLimit))
	}
	if v.Warmup != nil || s.Injected != "" {
		a = append(a, "-warmup", strconv.Itoa(c.Warmup))
	}
	if v.T1 != nil {
		a = append(a, "-t1", strconv.Itoa(c.T1))
	}
	float := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if v.T2 != nil {
		a = append(a, "-t2", float(*v.T2))
	}
	if v.LR != nil {
		a = append(a, "-lr", float(*v.LR))
	}
	if v.Momentum != nil {
		a = append(a, "-momentum", float(*v.Momentum))
	}
	switch v.Decay {
	case "cosine":
		a = append(a, "-cosine")
	case "step":
		a = append(a, "-step-decay")
	case "constant":
		a = append(a, "-cosine=false")
	}
	if g.CheckpointEvery > 0 {
		a = append(a, "-checkpoint-every", strconv.Itoa(g.CheckpointEvery))
	}
	return a
}
