package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// errUsage means the flags were wrong and the usage was printed.
var errUsage = errors.New("usage")

// options are the flags train and compare share.
type options struct {
	model, data, schedule, stages, out string
	microbatch, microbatches, epochs   int
	lr, momentum, t2                   float64
	t1, warmup                         int
	cosine, stash                      bool
	seed                               int64
	limit                              int
	fs                                 *flag.FlagSet
}

func (o *options) register(fs *flag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.model, "model", "resnet", "model: mlp, cnn, resnet or transformer")
	fs.StringVar(&o.data, "data", "embedded", "data: embedded (the subsets in the binary), auto ($PIPEMARE_FASHION_DIR, else Debian's dataset-fashion-mnist, else embedded), or a directory")
	fs.StringVar(&o.schedule, "schedule", "pipemare", "schedule: sequential, gpipe, 1f1b, pipedream or pipemare")
	fs.StringVar(&o.stages, "stages", "fine", "number of stages, or fine for one per layer")
	fs.IntVar(&o.microbatch, "microbatch", 0, "rows per microbatch (0: the model's recipe)")
	fs.IntVar(&o.microbatches, "microbatches", 0, "microbatches per minibatch, N (0: the model's recipe)")
	fs.IntVar(&o.epochs, "epochs", 0, "epochs (0: the model's recipe)")
	fs.Float64Var(&o.lr, "lr", 0, "base learning rate (0: the model's recipe)")
	fs.Float64Var(&o.momentum, "momentum", -1, "momentum β, 0 for plain SGD (-1: the model's recipe)")
	fs.BoolVar(&o.cosine, "cosine", true, "anneal the learning rate with a cosine to lr/100 (every recipe does)")
	fs.IntVar(&o.t1, "t1", -1, "T1 rescheduling length K in asynchronous steps (-1: all the run after the warm-up, 0: off)")
	fs.Float64Var(&o.t2, "t2", 0.9, "T2 correction γ (0: off)")
	fs.IntVar(&o.warmup, "warmup", -1, "synchronous warm-up steps, T3 (-1: the model's recipe, 0: off)")
	fs.BoolVar(&o.stash, "stash", false, "stash activations in stateless stages instead of recomputing (default: the model's recipe; the transformer's stashes)")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the initial weights and the data order")
	fs.IntVar(&o.limit, "limit", 0, "use only the first n training examples (0: all)")
	fs.StringVar(&o.out, "out", "out", "output directory")
}

// parse parses args into fs, printing a one-line error and the usage on
// failure.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

func bad(fs *flag.FlagSet, stderr io.Writer, format string, args ...interface{}) error {
	fmt.Fprintf(stderr, format+"\n", args...)
	fs.Usage()
	return errUsage
}

// builder returns the zoo model and its data.
func (o *options) builder() (zoo.Builder, zoo.Data, zoo.Data, error) {
	r, err := zoo.RecipeFor(o.model)
	if err != nil {
		return nil, nil, nil, err
	}
	dir := o.data
	if dir == "auto" {
		dir = ""
	}
	train, test, err := r.Load(dir, o.limit)
	if err != nil {
		return nil, nil, nil, err
	}
	return r.Build, train, test, nil
}

// config turns the flags into a zoo.Config for schedule s, starting from
// the model's recipe (zoo.RecipeFor): flags left at their defaults keep the
// recipe's values.
func (o *options) config(s schedule.Schedule, trainLen int) (zoo.Config, error) {
	r, err := zoo.RecipeFor(o.model)
	if err != nil {
		return zoo.Config{}, err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"microbatch", float64(o.microbatch)}, {"microbatches", float64(o.microbatches)}, {"epochs", float64(o.epochs)}, {"lr", o.lr}} {
		if !(f.v >= 0) { // NaN too
			return zoo.Config{}, fmt.Errorf("-%s %g: must be positive (or 0 for the recipe's)", f.name, f.v)
		}
	}
	if o.momentum != -1 && !(o.momentum >= 0 && o.momentum < 1) {
		return zoo.Config{}, fmt.Errorf("-momentum %g: must be in [0, 1) (or -1 for the recipe's)", o.momentum)
	}
	if o.warmup < -1 || o.t1 < -1 {
		return zoo.Config{}, fmt.Errorf("-warmup %d, -t1 %d: a number of steps, or -1 for the default", o.warmup, o.t1)
	}
	set := map[string]bool{}
	if o.fs != nil {
		o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	c := r.Run
	c.Schedule, c.T2 = s, o.t2
	if set["cosine"] {
		c.Cosine = o.cosine
	}
	if set["seed"] {
		c.Seed = o.seed
	}
	if o.microbatch > 0 {
		c.Microbatch = o.microbatch
	}
	if o.microbatches > 0 {
		c.Microbatches = o.microbatches
	}
	if o.epochs > 0 {
		c.Epochs = o.epochs
	}
	if o.lr > 0 {
		c.LR = o.lr
	}
	if o.momentum >= 0 {
		c.Momentum, c.NoMomentum = o.momentum, o.momentum == 0
	}
	if o.stages != "fine" {
		p, err := strconv.Atoi(o.stages)
		if err != nil || p < 1 {
			return c, fmt.Errorf("-stages %q: a positive number or fine", o.stages)
		}
		c.Stages = p
	}
	if set["stash"] {
		c.Activations = asyncvm.Recompute
		if o.stash {
			c.Activations = asyncvm.Keep
		}
	}
	steps := trainLen / (c.Microbatch * c.Microbatches)
	c.Warmup = o.warmup
	if o.warmup < 0 {
		c.Warmup = r.Warmup * steps
	}
	c.T1 = o.t1
	if o.t1 < 0 {
		c.T1 = c.StepsAfterWarmup(steps)
	}
	if !s.Async { // techniques for asynchrony only
		c.T1, c.T2, c.Warmup = 0, 0, 0
	}
	return c, nil
}

func scheduleNamed(name string) (schedule.Schedule, error) {
	s, ok := schedule.ByName(name)
	if !ok {
		var names []string
		for _, s := range schedule.All() {
			names = append(names, s.Name)
		}
		return s, fmt.Errorf("unknown schedule %q (one of %s)", name, strings.Join(names, ", "))
	}
	return s, nil
}
