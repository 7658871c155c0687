package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

var (
	// errUsage means the command line was wrong: the error and the usage
	// were printed on stderr. The exit code is 2.
	errUsage = errors.New("usage")
	// errHelp means -h was asked for: the usage was printed on stdout. The
	// exit code is 0, as for pipemare -h.
	errHelp = errors.New("help")
)

// options are the flags train and compare share.
type options struct {
	model, data, schedule, stages, out string
	cut, placement                     string
	method                             string
	microbatch, microbatches, epochs   int
	lr, momentum, t2                   float64
	t1, warmup                         int
	cosine, stepDecay, stash           bool
	seed                               int64
	kernels                            string
	limit, testLimit, traceSteps       int
	fs                                 *flag.FlagSet
	// given, when set, is the run as a stage process's -spec gives it,
	// in place of the run's flags.
	given *runspec.Spec
}

// register adds the flags of a training command to fs: those of the run
// (registerRun) and of its outputs.
func (o *options) register(fs *flag.FlagSet) {
	o.registerRun(fs)
	fs.IntVar(&o.traceSteps, "trace-steps", 20, "trace.json holds the actions of the last k minibatches (0: the whole run)")
	fs.StringVar(&o.out, "out", "out", "output directory")
}

// registerRun adds the flags that decide what a run trains — the model,
// its data, the cut, the schedule and the solver — to fs: every process
// of a run (train, and each stage) is given the same.
func (o *options) registerRun(fs *flag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.model, "model", "resnet", modelUsage(""))
	fs.StringVar(&o.data, "data", "embedded", "data: embedded (the subsets in the binary), auto ($PIPEMARE_FASHION_DIR, else Debian's dataset-fashion-mnist, else embedded), or a directory")
	fs.StringVar(&o.method, "method", "", "how to train: "+methodNames()+" (default: the model's recipe's; README: the sweep)")
	fs.StringVar(&o.schedule, "schedule", "", "schedule: "+strings.Join(schedule.Names(), ", ")+" (default: the method's; interleaved, zb-v and pipemare-v need an even number of stages)")
	fs.StringVar(&o.stages, "stages", "fine", "number of stages, or fine for one per layer; train balances a number of stages by the time each takes on this machine, in this process or -procs (settings.cut in report.json records the cut)")
	fs.StringVar(&o.cut, "cut", "", "cut before the ops at these positions, like 22 or 22,81 (report.json's settings.cut, pipemare plan -stages P): the same stages on every host and in every rerun")
	fs.StringVar(&o.placement, "placement", "", "which stages each stage process hosts when -procs (or -stage-addrs) gives fewer processes than stages: balanced (blocks of consecutive stages split where the stages' estimated costs divide evenly), contiguous (blocks by count), round-robin or v (default: the schedule's: interleaved round-robin, zb-v v, pipemare-v contiguous, any other balanced; pipemare-v also takes contiguous, round-robin or v: docs/distributed.md)")
	fs.IntVar(&o.microbatch, "microbatch", 0, "rows per microbatch (0: the model's recipe)")
	fs.IntVar(&o.microbatches, "microbatches", 0, "microbatches per minibatch, N (0: the model's recipe)")
	fs.IntVar(&o.epochs, "epochs", 0, "epochs (0: the model's recipe)")
	fs.Float64Var(&o.lr, "lr", 0, "base learning rate (0: the model's recipe)")
	fs.Float64Var(&o.momentum, "momentum", -1, "momentum β, 0 for plain SGD (-1: the model's recipe)")
	fs.BoolVar(&o.cosine, "cosine", true, "anneal the learning rate with a cosine to lr/100 (every recipe does)")
	fs.BoolVar(&o.stepDecay, "step-decay", false, "divide the learning rate by 10 at half and at three quarters of the run, instead of the cosine")
	fs.IntVar(&o.t1, "t1", -1, "T1 rescheduling length K in asynchronous steps (-1: the method's, all the run after the warm-up when it has T1; 0: off)")
	fs.Float64Var(&o.t2, "t2", -1, "T2 correction γ (-1: the method's; 0: off)")
	fs.IntVar(&o.warmup, "warmup", -1, "synchronous warm-up steps, T3 (-1: the model's recipe, 0: off); must leave asynchronous steps")
	fs.BoolVar(&o.stash, "stash", false, "keep the forward's activations for the backward instead of recomputing them, in every stage that can (default: the model's recipe; the transformer's keeps)")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the initial weights and the data order")
	fs.StringVar(&o.kernels, "kernels", "exact", "kernel mode of the matrix products: exact (plain Gorgonia's bits) or fast (fused multiply-adds in their own fixed order, deterministic; AVX2 and FMA3; docs/executor.md)")
	fs.IntVar(&o.limit, "limit", 0, "use only the first n training examples (0: all)")
	fs.IntVar(&o.testLimit, "test-limit", 0, "measure test accuracy on only the first n test examples (0: all)")
}

// parse parses args into fs. On -h it prints the usage on stdout and
// returns errHelp; on a bad flag it prints the error and the usage on
// stderr and returns errUsage.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(msg.Bytes())
		return errHelp
	case err != nil:
		_, _ = stderr.Write(msg.Bytes())
		return errUsage
	case fs.NArg() > 0:
		return usageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// usageError prints a one-line error and the usage on fs's output (stderr)
// and returns errUsage. It is for errors in the command line only.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = inFlags(err)
		}
	}
	fmt.Fprintf(fs.Output(), format+"\n", args...)
	fs.Usage()
	return errUsage
}

// usageErr is an error of the command line found by code that has no
// flag set to print the usage of (usageOr prints it).
type usageErr struct{ error }

func (e usageErr) Unwrap() error { return e.error }

// usageOr returns err, a usageErr printed with the usage as usageError
// does (errUsage), or any other error as it is.
func usageOr(fs *flag.FlagSet, err error) error {
	var ue usageErr
	if errors.As(err, &ue) {
		return usageError(fs, "%v", err)
	}
	return err
}

// set reports which flags the command line gave.
func (o *options) set() map[string]bool {
	set := map[string]bool{}
	if o.fs != nil {
		o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	return set
}

// load returns the model's recipe and its data, after checking the flags
// that need no data. An unknown model or a value out of range is an error
// of the command line (usage); data that cannot be read is not.
func (o *options) load() (zoo.Recipe, zoo.Data, zoo.Data, error) {
	spec := o.spec()
	r, err := zoo.RecipeFor(spec.Model)
	if err != nil {
		return r, nil, nil, usageError(o.fs, "-model %q: %v", spec.Model, err)
	}
	if err := o.check(); err != nil {
		return r, nil, nil, usageError(o.fs, "%v", err)
	}
	data := spec.Data
	if data == "" {
		data = "embedded"
	}
	trainSet, test, err := loadData(r, data, spec.Limit, spec.TestLimit)
	return r, trainSet, test, err
}

// loadData loads r's data as -data names it, the first limit training
// and testLimit test examples (0: all).
func loadData(r zoo.Recipe, data string, limit, testLimit int) (zoo.Data, zoo.Data, error) {
	dir := data
	if dir == "auto" {
		dir = ""
	}
	trainSet, test, err := r.Load(dir, limit)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "-data %s", data)
	}
	if testLimit > 0 && testLimit < test.Len() {
		test = head{test, testLimit}
	}
	return trainSet, test, nil
}

// run is what the flags train: the model's recipe, its data (load) and
// the run's train.Config (config; its errors are of the command line).
func (o *options) run() (zoo.Recipe, zoo.Data, zoo.Data, train.Config, error) {
	r, trainSet, test, err := o.load()
	if err != nil {
		return r, nil, nil, train.Config{}, err
	}
	cfg, err := o.config(schedule.Schedule{}, trainSet.Len())
	if err != nil {
		return r, nil, nil, cfg, usageError(o.fs, "%v", err)
	}
	return r, trainSet, test, cfg, nil
}

// spec is the run the flags describe (runspec.Spec): the model, and the
// run flags the command line gave (flags not given keep the recipe's; a
// -momentum, -t1, -t2 or -warmup of -1 is the recipe's or method's too).
func (o *options) spec() runspec.Spec {
	if o.given != nil {
		return *o.given
	}
	set := o.set()
	s := runspec.Spec{Model: o.model, Data: o.data, Method: o.method, Schedule: o.schedule, Cut: o.cut, Placement: o.placement,
		Microbatch: o.microbatch, Microbatches: o.microbatches, Epochs: o.epochs, LR: o.lr,
		StepDecay: o.stepDecay, Limit: o.limit, TestLimit: o.testLimit}
	if o.stages != "fine" {
		s.Stages = o.stages
	}
	if set["cosine"] {
		s.Cosine = &o.cosine
	}
	if set["stash"] {
		s.Stash = &o.stash
	}
	if set["seed"] {
		s.Seed = &o.seed
	}
	if set["kernels"] {
		s.Kernels = o.kernels
	}
	if o.momentum != -1 {
		s.Momentum = &o.momentum
	}
	if o.t1 != -1 {
		s.T1 = &o.t1
	}
	if o.t2 != -1 {
		s.T2 = &o.t2
	}
	if o.warmup != -1 {
		s.Warmup = &o.warmup
	}
	return s
}

// specArgs are the run flags that start spec's run, -name=value in the
// order of its fields: the command line's form of a spec, which spec
// reads back.
func specArgs(spec runspec.Spec) []string {
	var args []string
	for _, s := range spec.Given() {
		args = append(args, flagOf(s.Name)+"="+s.Value)
	}
	return args
}

// fromSpec makes the run the spec's JSON form js (runspec.Parse) instead
// of the run's flags, which must then not be given; "" keeps the flags.
func (o *options) fromSpec(js string) error {
	if js == "" {
		return nil
	}
	run := flag.NewFlagSet("", flag.ContinueOnError)
	(&options{}).registerRun(run)
	var given string
	o.fs.Visit(func(f *flag.Flag) {
		if run.Lookup(f.Name) != nil && given == "" {
			given = f.Name
		}
	})
	if given != "" {
		return errors.Errorf("-spec and -%s: give the run's settings either way, not both", given)
	}
	s, err := runspec.Parse([]byte(js))
	if err != nil {
		return err
	}
	o.given = &s
	return nil
}

// stagesOf is the -stages of a spec: "fine" when it gives none.
func stagesOf(s runspec.Spec) string {
	if s.Stages == "" {
		return "fine"
	}
	return s.Stages
}

// check refuses flag values outside their range, naming the flag: the
// checks that need no data, made before any is loaded.
func (o *options) check() error {
	if err := train.CheckSpec(o.spec()); err != nil {
		return err
	}
	if o.traceSteps < 0 {
		return errors.Errorf("-trace-steps %d: must be positive (or 0 for the whole run)", o.traceSteps)
	}
	return nil
}

// config is the run the flags describe for a training set of trainLen
// examples (train.ConfigFor), with schedule s, when set, in place of
// -schedule (compare's schedules).
func (o *options) config(s schedule.Schedule, trainLen int) (train.Config, error) {
	spec := o.spec()
	r, err := zoo.RecipeFor(spec.Model)
	if err != nil {
		return train.Config{}, err
	}
	if err := o.check(); err != nil {
		return train.Config{}, err
	}
	if s.Actions != nil {
		spec.Schedule = s.Name
	}
	return train.ConfigFor(spec, r, trainLen)
}

// modelUsage is the usage of a -model flag: every model of the zoo
// (zoo.Models), then what the command adds, in parentheses.
func modelUsage(more string) string {
	names := zoo.Models()
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	if more != "" {
		list += " (" + more + ")"
	}
	return "model: " + list
}

// methodNames lists the methods for the usage.
func methodNames() string {
	var names []string
	for _, m := range train.Methods() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}

// head is the first n examples of a data set.
type head struct {
	zoo.Data
	n int
}

func (h head) Len() int { return h.n }

// settings are the run cfg's settings as report.json records them.
func (o *options) settings(cfg train.Config, trainSet, test zoo.Data) rundir.Settings {
	return rundir.NewSettings(o.spec(), cfg, trainSet.Len(), test.Len())
}
