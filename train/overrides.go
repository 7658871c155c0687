package train

import (
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
)

// Overrides are changes to a model's recipe, as pipemare's run flags give
// them; each field left at its zero value (or at −1, where 0 is a value)
// keeps the recipe's or the method's. Check and Config refuse a value out
// of range, and a run that would not train what it names, with an error
// that names the command line's flag of the field (-lr, -warmup, …).
type Overrides struct {
	// Method is a Method's name ("": the recipe's); Schedule a
	// schedule's ("": the method's).
	Method, Schedule string
	// Stages is "fine" ("" too: one stage per layer) or a number; Cut the
	// op positions to cut before, comma-separated ("": none), which must
	// make Stages stages if both are given.
	Stages, Cut string
	// Microbatch, Microbatches, Epochs and LR replace the recipe's when
	// positive; Momentum when ≥ 0 (0: plain SGD).
	Microbatch, Microbatches, Epochs int
	LR, Momentum                     float64
	// Cosine, KeepActivations and Seed replace the recipe's when set;
	// StepDecay replaces the cosine.
	Cosine, KeepActivations *bool
	Seed                    *int64
	StepDecay               bool
	// T1 and T2 replace the method's when ≥ 0 (0: off), Warmup the
	// recipe's warm-up (in steps; 0: none).
	T1, Warmup int
	T2         float64
	// Limit (training examples kept, 0: all) and Data (where they came
	// from) only word the error of a run that makes no minibatch.
	Limit int
	Data  string
}

// NoOverrides keeps every value of the recipe and the method.
func NoOverrides() Overrides { return Overrides{Momentum: -1, T1: -1, T2: -1, Warmup: -1} }

// Check refuses values out of range, naming the flag: the checks that
// need no data.
func (o Overrides) Check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"microbatch", float64(o.Microbatch)}, {"microbatches", float64(o.Microbatches)}, {"epochs", float64(o.Epochs)}, {"lr", o.LR}} {
		if !(f.v >= 0) { // NaN too
			return errors.Errorf("-%s %g: must be positive (or 0 for the recipe's)", f.name, f.v)
		}
	}
	switch {
	case o.Momentum != -1 && !(o.Momentum >= 0 && o.Momentum < 1):
		return errors.Errorf("-momentum %g: must be in [0, 1) (or -1 for the recipe's)", o.Momentum)
	case o.Warmup < -1:
		return errors.Errorf("-warmup %d: a number of steps, or -1 for the recipe's", o.Warmup)
	case o.T1 < -1:
		return errors.Errorf("-t1 %d: a number of steps, or -1 for the steps after the warm-up", o.T1)
	case o.T2 != -1 && !(o.T2 >= 0 && o.T2 < 1):
		return errors.Errorf("-t2 %g: must be in [0, 1) (0: off; -1: the method's)", o.T2)
	}
	if o.Method != "" {
		if _, err := ParseMethod(o.Method); err != nil {
			return errors.Errorf("-method %q: %v", o.Method, err)
		}
	}
	if _, err := o.schedule(); err != nil {
		return err
	}
	p, err := o.stages()
	if err != nil {
		return err
	}
	cut, err := ParseCut(o.Cut)
	if err != nil {
		return err
	}
	if cut != nil && p > 0 && p != len(cut)+1 {
		return errors.Errorf("-stages %s and -cut %s: the cut makes %d stages; give one of the two", o.Stages, o.Cut, len(cut)+1)
	}
	return nil
}

// stages is Stages as a number (0: fine).
func (o Overrides) stages() (int, error) {
	if o.Stages == "" || o.Stages == "fine" {
		return 0, nil
	}
	p, err := strconv.Atoi(o.Stages)
	if err != nil || p < 1 {
		return 0, errors.Errorf("-stages %q: a positive number or fine", o.Stages)
	}
	return p, nil
}

// schedule is the schedule Schedule names (zero: none named).
func (o Overrides) schedule() (schedule.Schedule, error) {
	if o.Schedule == "" {
		return schedule.Schedule{}, nil
	}
	return ScheduleNamed(o.Schedule)
}

// ScheduleNamed is the schedule of that name, or an error, naming -schedule,
// that lists the names.
func ScheduleNamed(name string) (schedule.Schedule, error) {
	s, ok := schedule.ByName(name)
	if !ok {
		return s, errors.Errorf("-schedule %q: unknown schedule (one of %s)", name, strings.Join(schedule.Names(), ", "))
	}
	return s, nil
}

// Config is r's run with the overrides, for a training set of trainLen
// examples: the recipe's numbers, then the method (Method.Apply), then the
// rate, schedule, warm-up and techniques given. It refuses, naming the
// flag, a run that would not train what it names: no minibatch at all,
// more than MaxSteps, a warm-up that leaves no asynchronous step,
// techniques that undo each other; and any value Check refuses.
func (o Overrides) Config(r zoo.Recipe, trainLen int) (Config, error) {
	if err := o.Check(); err != nil {
		return Config{}, err
	}
	method := Method(r.Method)
	if o.Method != "" {
		method = Method(o.Method)
	}
	c := o.hyper(r)
	steps := trainLen / (c.Microbatch * c.Microbatches)
	if steps == 0 {
		return c, o.noMinibatch(trainLen, c)
	}
	if err := checkLength("-epochs", c.Epochs, steps); err != nil {
		return c, err
	}
	c, err := method.Apply(c, r.Warmup, steps)
	if err != nil {
		return c, errors.Errorf("-method %s: %v", method, err)
	}
	if o.LR > 0 {
		c.LR = o.LR
	}
	if s, _ := o.schedule(); s.Actions != nil {
		c.Schedule = s
	}
	if o.Warmup >= 0 {
		c.Warmup = o.Warmup
	}
	if err := o.leavesAsynchrony(r, c, steps); err != nil {
		return c, err
	}
	switch {
	case o.T1 >= 0:
		c.T1 = o.T1
	case c.T1 > 0: // the method's: every step after the warm-up
		c.T1 = c.StepsAfterWarmup(steps)
	}
	if o.T2 >= 0 {
		c.T2 = o.T2
	}
	if !c.Schedule.Async { // techniques for asynchrony only
		c = c.WithoutTechniques()
	}
	if c.Predict && c.T2 != 0 {
		return c, errors.Errorf("-t2 %g: weight prediction (-method %s) cannot have T2, whose backward estimate would undo it", c.T2, method)
	}
	return c, nil
}

// hyper is r's run with the overrides of its numbers and its cut.
func (o Overrides) hyper(r zoo.Recipe) Config {
	c := Config{Hyper: r.Run}
	if o.Cosine != nil {
		c.Cosine = *o.Cosine
	}
	if o.StepDecay {
		c.StepDecay, c.Cosine = true, false
	}
	if o.Seed != nil {
		c.Seed = *o.Seed
	}
	if o.KeepActivations != nil {
		c.KeepActivations = *o.KeepActivations
	}
	for _, f := range []struct{ to, v *int }{{&c.Microbatch, &o.Microbatch}, {&c.Microbatches, &o.Microbatches}, {&c.Epochs, &o.Epochs}} {
		if *f.v > 0 {
			*f.to = *f.v
		}
	}
	if o.Momentum >= 0 {
		c.Momentum, c.NoMomentum = o.Momentum, o.Momentum == 0
	}
	c.Stages, _ = o.stages() // Check made sure
	if cut, _ := ParseCut(o.Cut); cut != nil {
		c.Cut, c.Stages = cut, len(cut)+1
	}
	return c
}

// leavesAsynchrony refuses an asynchronous run whose warm-up covers all
// of its steps, naming the flag that made it so.
func (o Overrides) leavesAsynchrony(r zoo.Recipe, c Config, steps int) error {
	total := c.Epochs * steps
	if !c.Schedule.Async || c.Warmup < total {
		return nil
	}
	if o.Warmup >= 0 {
		return errors.Errorf("-warmup %d: the synchronous warm-up covers the whole run of %d steps (%d epochs × %d), which would train no asynchronous step; give fewer steps, or 0 for none", o.Warmup, total, c.Epochs, steps)
	}
	epochs := "epochs"
	if r.Warmup == 1 {
		epochs = "epoch"
	}
	return errors.Errorf("-epochs %d: the %s recipe's warm-up of %d %s (%d steps) covers the whole run, which would train no asynchronous step; give -epochs %d or more, or -warmup with fewer than %d steps (0: none)", c.Epochs, r.Model, r.Warmup, epochs, c.Warmup, r.Warmup+1, total)
}

// noMinibatch is the error of a run whose training set makes no
// minibatch, naming the flag that made it so.
func (o Overrides) noMinibatch(trainLen int, c Config) error {
	rows := c.Microbatch * c.Microbatches
	switch {
	case o.Limit > 0:
		return errors.Errorf("-limit %d: %d training examples make no minibatch of %d microbatches × %d rows; give -limit %d or more", o.Limit, trainLen, c.Microbatches, c.Microbatch, rows)
	case o.Microbatches > 0:
		return errors.Errorf("-microbatches %d: a minibatch of %d × %d rows is more than the %d training examples", o.Microbatches, c.Microbatches, c.Microbatch, trainLen)
	case o.Microbatch > 0:
		return errors.Errorf("-microbatch %d: a minibatch of %d × %d rows is more than the %d training examples", o.Microbatch, c.Microbatches, c.Microbatch, trainLen)
	}
	return errors.Errorf("-data %s: %d training examples make no minibatch of %d microbatches × %d rows", o.Data, trainLen, c.Microbatches, c.Microbatch)
}

// ParseCut reads a cut as -cut gives it: op positions from 1,
// comma-separated, increasing ("": none).
func ParseCut(list string) ([]int, error) {
	if list == "" {
		return nil, nil
	}
	var cut []int
	for _, f := range strings.Split(list, ",") {
		q, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || q < 1 || len(cut) > 0 && q <= cut[len(cut)-1] {
			return nil, errors.Errorf("-cut %q: increasing op positions from 1, comma-separated, like 22,81", list)
		}
		cut = append(cut, q)
	}
	return cut, nil
}

// FormatCut writes a cut as ParseCut reads it.
func FormatCut(cut []int) string {
	parts := make([]string, len(cut))
	for i, q := range cut {
		parts[i] = strconv.Itoa(q)
	}
	return strings.Join(parts, ",")
}
