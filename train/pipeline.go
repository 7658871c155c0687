package train

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/pipemare/pipemare/zoo"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
)

// Connector opens this process's endpoint of a network transport for a
// run's plan (grpcnet.Open, with the plan's fingerprint and links): the
// driver's in Train (Config.Connect), a stage's in ServeStage. It is
// called once the model is built and cut, and the endpoint it returns is
// owned by the caller of Train or ServeStage from then on.
type Connector func(ctx context.Context, plan *graphsplit.Plan) (transport.Endpoint, error)

// normalized is cfg with its defaults (schedule.PipeMare()), or an error if
// a size or a rate is out of range or the methods asked for do not
// compose (check).
func (cfg Config) normalized() (Config, error) {
	if cfg.Schedule.Actions == nil {
		cfg.Schedule = schedule.PipeMare()
	}
	if cfg.Microbatch <= 0 || cfg.Microbatches <= 0 || cfg.Epochs <= 0 || cfg.LR <= 0 {
		return cfg, errors.Errorf("train: microbatch %d, microbatches %d, epochs %d and learning rate %g must be positive", cfg.Microbatch, cfg.Microbatches, cfg.Epochs, cfg.LR)
	}
	if cfg.T2 < 0 || cfg.T2 >= 1 {
		return cfg, errors.Errorf("train: T2 γ = %g must be in [0, 1)", cfg.T2)
	}
	return cfg, cfg.check()
}

// building serialises split: Gorgonia's op constructors (Rectify, Conv2d,
// MaxPool2D) number their groups with an unsynchronised global counter, so
// two models built at once race inside Gorgonia. Holding it lets Trains
// and ServeStages of one process run concurrently.
var building sync.Mutex

// Split builds a fresh model with build and cuts it as cfg says (Stages,
// at Microbatch rows, from Seed's weights): the plan Train and ServeStage
// run, which every process of a run gets alike, so that a caller can
// check the plan — its number of stages — before it trains. Models are
// built one at a time. The caller closes the plan.
func (cfg Config) Split(build zoo.Builder) (*zoo.Model, *graphsplit.Plan, error) {
	building.Lock()
	defer building.Unlock()
	m, err := build(cfg.Microbatch, cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, cfg.cutOptions()...)
	return m, plan, err
}

// cutOptions is how cfg cuts a model: at Cut, or at layer boundaries into
// Stages balanced stages (every layer its own stage when Stages is 0) —
// for a schedule whose workers host several stages each (interleaved,
// zb-v), balanced workers (graphsplit.OnWorkers, as the schedule places
// its stages).
func (cfg Config) cutOptions() []graphsplit.Option {
	if cfg.Cut != nil {
		return []graphsplit.Option{graphsplit.CutAtOps(cfg.Cut...)}
	}
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if cfg.Stages > 0 {
		opts = append(opts, graphsplit.Stages(cfg.Stages))
		if v := cfg.Schedule.Virtual(); v > 1 && cfg.Stages%v == 0 {
			opts = append(opts, graphsplit.OnWorkers(cfg.Schedule.Place, cfg.Stages/v))
		}
	}
	return opts
}

// Balanced cuts the model build makes for cfg into cfg.Stages stages at
// layer boundaries (its workers' stages, for a schedule that hosts several
// on each: cutOptions), balanced by the time each stage takes on this machine
// (graphsplit.Profiled, on the first microbatch of train, with the
// programs cfg.KeepActivations runs), and returns the cut, for Config.Cut,
// with its measured balance. opts are Split's further options, for
// example graphsplit.InOneProcess for a run whose stages share this
// process. The cut depends on the machine and on what else runs while it
// measures; a run that records it (Config.Cut) is reproducible, and every
// process of a pipeline must be given the same.
func Balanced(build zoo.Builder, train zoo.Data, cfg Config, opts ...graphsplit.Option) ([]int, *graphsplit.Balance, error) {
	if cfg.Stages < 1 {
		return nil, nil, errors.Errorf("train: Balanced: %d stages; give a number of stages to balance", cfg.Stages)
	}
	if train.Len() < cfg.Microbatch {
		return nil, nil, errors.Errorf("train: Balanced: %d training examples make no microbatch of %d", train.Len(), cfg.Microbatch)
	}
	building.Lock()
	defer building.Unlock()
	m, err := build(cfg.Microbatch, cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	feeds := zoo.FirstMicrobatch(train, m)
	cfg.Cut = nil // what it chooses
	profile := graphsplit.Profiled(feeds, cfg.KeepActivations, cfg.fusesLast())
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, append(append(cfg.cutOptions(), profile), opts...)...)
	if err != nil {
		return nil, nil, errors.Wrap(err, "train: Balanced")
	}
	defer plan.Close()
	return plan.Cuts(), plan.Balance, nil
}

// fusesLast reports whether the run's schedule (PipeMare when none is
// set) runs its last stage's forward and backward as one program
// (schedule.FusesLast), for timing a cut as the run will run it.
func (cfg Config) fusesLast() bool {
	s := cfg.Schedule
	if s.Actions == nil {
		s = schedule.PipeMare()
	}
	p := max(cfg.Stages, 1)
	if cfg.Cut != nil {
		p = len(cfg.Cut) + 1
	}
	return schedule.FusesLast(s, p, max(cfg.Microbatches, 1))
}

// stepsPerEpoch is the minibatches an epoch of train makes; a run of
// more than MaxSteps is an error.
func (cfg Config) stepsPerEpoch(train zoo.Data) (int, error) {
	steps := train.Len() / (cfg.Microbatch * cfg.Microbatches)
	if steps == 0 {
		return 0, errors.Errorf("train: %d training examples make no minibatch of %d microbatches × %d", train.Len(), cfg.Microbatches, cfg.Microbatch)
	}
	return steps, checkLength("train: epochs", cfg.Epochs, steps)
}

// engine is the run's engine options, without an endpoint: what the
// driver and every stage process of a run pass alike. With injected
// delays it is the options NewInjected takes.
func (cfg Config) engine(stepsPerEpoch int) []asyncvm.Option {
	opts := []asyncvm.Option{
		asyncvm.WithMicrobatches(cfg.Microbatches), asyncvm.WithSolverFactory(cfg.Solver(stepsPerEpoch)), asyncvm.WithSeed(cfg.Seed),
	}
	if cfg.CheckpointEvery > 0 {
		opts = append(opts, asyncvm.WithCheckpoints())
	}
	if cfg.Delays != nil {
		return opts
	}
	opts = append(opts, asyncvm.WithSchedule(cfg.Schedule), asyncvm.WithActivations(cfg.Activations()))
	if cfg.Warmup > 0 {
		opts = append(opts, asyncvm.WithWarmup(cfg.Warmup, schedule.OneFOneB()))
	}
	return opts
}

// Activations is what the run's stages keep between forward and backward.
func (cfg Config) Activations() asyncvm.Activations {
	if cfg.KeepActivations {
		return asyncvm.Keep
	}
	return asyncvm.Recompute
}

// ServeStage serves stage i of the run that cfg, build and train describe
// (train's length sets the learning-rate schedule; its examples are not
// read) on the endpoint connect opens for the run's plan, until the driver
// — a Train with the same cfg and a Config.Connect — stops it: what a
// stage process does. It builds the model and cuts it as the driver does;
// the transport's handshake refuses a driver whose plan differs. It
// returns nil when the driver stopped the stage, otherwise the stage's
// failure or why it lost its driver, naming the stage. opts are the stage
// process's own engine options, not settings of the run (for example
// asyncvm.WithFirstOrderTimeout); they come after the run's. Like Train,
// it computes with graphsplit.UseFastBLAS, holding cfg.Kernels until it
// returns.
func ServeStage(ctx context.Context, build zoo.Builder, train zoo.Data, cfg Config, i int, connect Connector, opts ...asyncvm.Option) error {
	return ServeStages(ctx, build, train, cfg, []int{i}, func(ctx context.Context, plan *graphsplit.Plan) ([]transport.Endpoint, error) {
		ep, err := connect(ctx, plan)
		if err != nil {
			return nil, err
		}
		return []transport.Endpoint{ep}, nil
	}, opts...)
}

// StagesConnector opens the endpoints of the stages one process serves,
// parallel to the stages ServeStages was given, for a run's plan; the
// caller of ServeStages owns them from then on.
type StagesConnector func(ctx context.Context, plan *graphsplit.Plan) ([]transport.Endpoint, error)

// ServeStages is ServeStage for a process that serves several stages of
// the run, each on its endpoint (asyncvm.ServeStages): a stage process
// hosting the stages its worker's placement gives it, which take turns as
// one process does when it hosts whole workers of the schedule. The model
// is built and cut once. It returns nil when the driver stopped every
// stage, else the first stage's error, naming it.
func ServeStages(ctx context.Context, build zoo.Builder, train zoo.Data, cfg Config, stages []int, connect StagesConnector, opts ...asyncvm.Option) error {
	cfg, err := cfg.normalized()
	if err != nil {
		return err
	}
	release, err := cfg.holdKernels()
	if err != nil {
		return err
	}
	defer release()
	if cfg.Delays != nil {
		return errors.New("train: injected delays train in one process; a stage process cannot serve them")
	}
	if len(stages) == 0 {
		return errors.New("train: ServeStages: no stage to serve")
	}
	steps, err := cfg.stepsPerEpoch(train)
	if err != nil {
		return err
	}
	_, plan, err := cfg.Split(build)
	if err != nil {
		return err
	}
	for _, i := range stages {
		if i < 0 || i >= len(plan.Stages) {
			return errors.Errorf("train: stage %d: the plan has stages 0..%d", i, len(plan.Stages)-1)
		}
	}
	eps, err := connect(ctx, plan)
	if err != nil {
		if len(stages) == 1 && strings.HasPrefix(err.Error(), fmt.Sprintf("stage %d: ", stages[0])) { // the transport's errors name their peer
			return errors.Wrap(err, "train")
		}
		return errors.Wrapf(err, "train: %s", stageNames(stages))
	}
	if len(eps) != len(stages) {
		for _, ep := range eps {
			ep.Close()
		}
		return errors.Errorf("train: %s: %d endpoints opened; give one per stage", stageNames(stages), len(eps))
	}
	return asyncvm.ServeStages(ctx, plan, stages, eps, append(cfg.engine(steps), opts...)...)
}

// stageNames names stages for a message: "stage 1", "stages 0, 2".
func stageNames(stages []int) string {
	if len(stages) == 1 {
		return fmt.Sprintf("stage %d", stages[0])
	}
	return "stages " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(stages)), ", "), "[]")
}
