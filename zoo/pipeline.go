package zoo

import (
	"context"
	"sync"

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

// normalized is cfg with its defaults (schedule.PipeMare), or an error if
// a size or a rate is out of range or the methods asked for do not
// compose (check).
func (cfg Config) normalized() (Config, error) {
	if cfg.Schedule.Actions == nil {
		cfg.Schedule = schedule.PipeMare
	}
	if cfg.Microbatch <= 0 || cfg.Microbatches <= 0 || cfg.Epochs <= 0 || cfg.LR <= 0 {
		return cfg, errors.Errorf("zoo: microbatch %d, microbatches %d, epochs %d and learning rate %g must be positive", cfg.Microbatch, cfg.Microbatches, cfg.Epochs, cfg.LR)
	}
	if cfg.T2 < 0 || cfg.T2 >= 1 {
		return cfg, errors.Errorf("zoo: T2 γ = %g must be in [0, 1)", cfg.T2)
	}
	return cfg, cfg.check()
}

// building serialises split: Gorgonia's op constructors (Rectify, Conv2d,
// MaxPool2D) number their groups with an unsynchronised global counter, so
// two models built at once race inside Gorgonia. Holding it lets Trains
// and ServeStages of one process run concurrently.
var building sync.Mutex

// split builds a fresh model with build and cuts it as cfg says: every
// process of a run gets the same plan. Models are built one at a time.
func (cfg Config) split(build Builder) (*Model, *graphsplit.Plan, error) {
	building.Lock()
	defer building.Unlock()
	m, err := build(cfg.Microbatch, cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if cfg.Stages > 0 {
		opts = append(opts, graphsplit.Stages(cfg.Stages))
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	return m, plan, err
}

// stepsPerEpoch is the minibatches an epoch of train makes.
func (cfg Config) stepsPerEpoch(train Data) (int, error) {
	steps := train.Len() / (cfg.Microbatch * cfg.Microbatches)
	if steps == 0 {
		return 0, errors.Errorf("zoo: %d training examples make no minibatch of %d microbatches × %d", train.Len(), cfg.Microbatches, cfg.Microbatch)
	}
	return steps, nil
}

// engine is the run's engine options, without an endpoint: what the
// driver and every stage process of a run pass alike. With injected
// delays it is the options NewInjected takes.
func (cfg Config) engine(stepsPerEpoch int) []asyncvm.Option {
	opts := []asyncvm.Option{
		asyncvm.WithMicrobatches(cfg.Microbatches), asyncvm.WithSolverFactory(cfg.Solver(stepsPerEpoch)), asyncvm.WithSeed(cfg.Seed),
	}
	if cfg.Delays != nil {
		return opts
	}
	opts = append(opts, asyncvm.WithSchedule(cfg.Schedule), asyncvm.WithActivations(cfg.Activations))
	if cfg.Warmup > 0 {
		opts = append(opts, asyncvm.WithWarmup(cfg.Warmup, schedule.OneFOneB))
	}
	return opts
}

// ServeStage serves stage i of the run that cfg, build and train describe
// (train's length sets the learning-rate schedule; its examples are not
// read) on the endpoint connect opens for the run's plan, until the driver
// — a Train with the same cfg and a Config.Connect — stops it: what a
// stage process does. It builds the model and cuts it as the driver does;
// the transport's handshake refuses a driver whose plan differs. It
// returns nil when the driver stopped the stage, otherwise the stage's
// failure or why it lost its driver, naming the stage.
func ServeStage(ctx context.Context, build Builder, train Data, cfg Config, i int, connect Connector) error {
	cfg, err := cfg.normalized()
	if err != nil {
		return err
	}
	if cfg.Delays != nil {
		return errors.New("zoo: injected delays train in one process; a stage process cannot serve them")
	}
	steps, err := cfg.stepsPerEpoch(train)
	if err != nil {
		return err
	}
	_, plan, err := cfg.split(build)
	if err != nil {
		return err
	}
	if i < 0 || i >= len(plan.Stages) {
		return errors.Errorf("zoo: stage %d: the plan has stages 0..%d", i, len(plan.Stages)-1)
	}
	ep, err := connect(ctx, plan)
	if err != nil {
		return errors.Wrapf(err, "zoo: stage %d", i)
	}
	return asyncvm.ServeStage(ctx, plan, i, ep, cfg.engine(steps)...)
}
