package train

import (
	"fmt"
	"strconv"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// CheckSpec refuses a spec whose values are out of range (runspec.Spec.Check)
// or that names no method of Methods: the checks that need neither the
// recipe nor the data. Errors are *runspec.Error.
func CheckSpec(s runspec.Spec) error {
	if err := s.Check(); err != nil {
		return err
	}
	if s.Method != "" {
		if _, err := ParseMethod(s.Method); err != nil {
			return &runspec.Error{Setting: "method", Value: strconv.Quote(s.Method), Reason: err.Error()}
		}
	}
	return nil
}

// ConfigFor is the one path from a run's specification to the engine's
// configuration: s's recipe r (zoo.RecipeFor(s.Model)) for a training set
// of trainLen examples, with the recipe's numbers, then the method
// (Method.Apply), then the rate, schedule, warm-up and techniques s gives.
// It holds the rules of what may combine with what: T1 by default covers
// every step after the warm-up; a synchronous schedule runs no technique;
// weight prediction refuses T2. It refuses, with a *runspec.Error naming the
// setting, a run that would not train what it names: no minibatch at all,
// more than MaxSteps, a warm-up that leaves no asynchronous step,
// techniques that undo each other; and any value CheckSpec refuses.
func ConfigFor(s runspec.Spec, r zoo.Recipe, trainLen int) (Config, error) {
	if err := CheckSpec(s); err != nil {
		return Config{}, err
	}
	method := Method(r.Method)
	if s.Method != "" {
		method = Method(s.Method)
	}
	c := hyper(s, r)
	steps := trainLen / (c.Microbatch * c.Microbatches)
	if steps == 0 {
		return c, noMinibatch(s, trainLen, c)
	}
	if c.Epochs > MaxSteps/steps {
		return c, &runspec.Error{Setting: "epochs", Value: strconv.Itoa(c.Epochs), Reason: lengthReason(c.Epochs, steps)}
	}
	c, err := method.Apply(c, r.Warmup, steps)
	if err != nil {
		return c, &runspec.Error{Setting: "method", Value: string(method), Reason: err.Error()}
	}
	if s.LR > 0 {
		c.LR = s.LR
	}
	if sch, _ := s.ScheduleNamed(); sch.Actions != nil {
		c.Schedule = sch
	}
	if s.Warmup != nil {
		c.Warmup = *s.Warmup
	}
	if err := leavesAsynchrony(s, r, c, steps); err != nil {
		return c, err
	}
	switch {
	case s.T1 != nil:
		c.T1 = *s.T1
	case c.T1 > 0: // the method's: every step after the warm-up
		c.T1 = c.StepsAfterWarmup(steps)
	}
	if s.T2 != nil {
		c.T2 = *s.T2
	}
	if !c.Schedule.Async { // techniques for asynchrony only
		c = c.WithoutTechniques()
	}
	return c, predictionWithT2(c, string(method))
}

// predictionWithT2 is the rule that weight prediction refuses T2, whose
// backward estimate would undo the prediction: a *runspec.Error naming t2
// and, when method is not "", the run's method; nil when c has not both.
// ConfigFor and Config.check both ask it.
func predictionWithT2(c Config, method string) error {
	if !c.Predict || c.T2 == 0 {
		return nil
	}
	what := "weight prediction"
	if method != "" {
		what += fmt.Sprintf(" ({method} %s)", method)
	}
	return &runspec.Error{Setting: "t2", Value: strconv.FormatFloat(c.T2, 'g', -1, 64),
		Reason: what + " cannot have T2, whose backward estimate would undo it"}
}

// hyper is r's run with s's numbers and cut.
func hyper(s runspec.Spec, r zoo.Recipe) Config {
	c := Config{Hyper: r.Run, Spec: s}
	if s.Cosine != nil {
		c.Cosine = *s.Cosine
	}
	if s.StepDecay {
		c.StepDecay, c.Cosine = true, false
	}
	if s.Seed != nil {
		c.Seed = *s.Seed
	}
	if s.Stash != nil {
		c.KeepActivations = *s.Stash
	}
	c.Kernels = graphsplit.Kernels(s.Kernels)
	for _, f := range []struct{ to, v *int }{{&c.Microbatch, &s.Microbatch}, {&c.Microbatches, &s.Microbatches}, {&c.Epochs, &s.Epochs}} {
		if *f.v > 0 {
			*f.to = *f.v
		}
	}
	if s.Momentum != nil {
		c.Momentum, c.NoMomentum = *s.Momentum, *s.Momentum == 0
	}
	c.Stages, _ = s.StageCount() // CheckSpec made sure
	if cut, _ := runspec.ParseCut(s.Cut); cut != nil {
		c.Cut, c.Stages = cut, len(cut)+1
	}
	return c
}

// leavesAsynchrony refuses an asynchronous run whose warm-up covers all
// of its steps, naming the setting that made it so.
func leavesAsynchrony(s runspec.Spec, r zoo.Recipe, c Config, steps int) error {
	total := c.Epochs * steps
	if !c.Schedule.Async || c.Warmup < total {
		return nil
	}
	if s.Warmup != nil {
		return &runspec.Error{Setting: "warmup", Value: strconv.Itoa(*s.Warmup),
			Reason: fmt.Sprintf("the synchronous warm-up covers the whole run of %d steps (%d epochs × %d), which would train no asynchronous step; give fewer steps, or 0 for none", total, c.Epochs, steps)}
	}
	epochs := "epochs"
	if r.Warmup == 1 {
		epochs = "epoch"
	}
	return &runspec.Error{Setting: "epochs", Value: strconv.Itoa(c.Epochs),
		Reason: fmt.Sprintf("the %s recipe's warm-up of %d %s (%d steps) covers the whole run, which would train no asynchronous step; give {epochs} %d or more, or {warmup} with fewer than %d steps (0: none)", r.Model, r.Warmup, epochs, c.Warmup, r.Warmup+1, total)}
}

// noMinibatch is the error of a run whose training set makes no
// minibatch, naming the setting that made it so.
func noMinibatch(s runspec.Spec, trainLen int, c Config) error {
	rows := c.Microbatch * c.Microbatches
	switch {
	case s.Limit > 0:
		return &runspec.Error{Setting: "limit", Value: strconv.Itoa(s.Limit),
			Reason: fmt.Sprintf("%d training examples make no minibatch of %d microbatches × %d rows; give {limit} %d or more", trainLen, c.Microbatches, c.Microbatch, rows)}
	case s.Microbatches > 0:
		return &runspec.Error{Setting: "microbatches", Value: strconv.Itoa(s.Microbatches),
			Reason: fmt.Sprintf("a minibatch of %d × %d rows is more than the %d training examples", c.Microbatches, c.Microbatch, trainLen)}
	case s.Microbatch > 0:
		return &runspec.Error{Setting: "microbatch", Value: strconv.Itoa(s.Microbatch),
			Reason: fmt.Sprintf("a minibatch of %d × %d rows is more than the %d training examples", c.Microbatches, c.Microbatch, trainLen)}
	}
	return &runspec.Error{Setting: "data", Value: s.Data,
		Reason: fmt.Sprintf("%d training examples make no minibatch of %d microbatches × %d rows", trainLen, c.Microbatches, c.Microbatch)}
}
