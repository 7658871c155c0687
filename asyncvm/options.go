package asyncvm

import (
	"time"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Option configures New.
type Option func(*config)

type config struct {
	acts    Activations
	sched   schedule.Schedule
	n       int
	solver  func(stage int) (gorgonia.Solver, error)
	seed    int64
	masks   []mask
	inject  func(stage int, a schedule.Action) error // tests only, see export_test.go
	warmup  int
	warmSch schedule.Schedule
	disc    bool
	logDel  bool
	saving  bool // WithCheckpoints

	// Stages elsewhere (WithEndpoint), and a stage served (ServeStage).
	endpoint   transport.Endpoint
	firstOrder time.Duration

	// Delay injection (NewInjected).
	delays   delay.Source
	announce func(stage int, s schedule.Schedule) float64
	set      map[string]bool // options given, for NewInjected's refusals
}

type mask struct {
	node *gorgonia.Node
	keep float64
}

// WithSchedule chooses the schedule (default schedule.PipeMare()). A
// schedule that places several stages on a worker (interleaved, zb-v,
// pipemare-v) runs its stages' lists as any other, each stage on its own
// goroutines (or process): what it trains depends only on those lists. In
// one process, a worker's stages of interleaved and zb-v take turns, one
// action at a time in the worker's order (schedule.Turns).
func WithSchedule(s schedule.Schedule) Option {
	return func(c *config) { c.sched = s; c.set["WithSchedule"] = true }
}

// WithMicrobatches sets N, the microbatches per minibatch (default 1). The
// graph is built at the microbatch size; a minibatch fed to Step has N times
// as many rows.
func WithMicrobatches(n int) Option { return func(c *config) { c.n = n } }

// WithSolver gives each stage its own solver, made by newSolver(stage) once,
// before the stages start. A stage's solver steps that stage's learnables,
// always in the same order (Stage.Learnables). Default: solvers.NewSGD
// with learning rate 0.01 (gorgonia's VanillaSolver, bit for bit, with a
// state Save can save).
func WithSolver(newSolver func(stage int) gorgonia.Solver) Option {
	return WithSolverFactory(func(stage int) (gorgonia.Solver, error) { return newSolver(stage), nil })
}

// WithSolverFactory is WithSolver for a factory that can fail (a decorator
// refusing its options): New returns the factory's error, naming the stage.
func WithSolverFactory(newSolver func(stage int) (gorgonia.Solver, error)) Option {
	return func(c *config) { c.solver = newSolver }
}

// WithSeed seeds everything the engine draws (dropout masks). Default 1.
func WithSeed(seed int64) Option { return func(c *config) { c.seed = seed } }

// WithDropoutMask makes the engine fill data input node (a feed of the plan,
// shaped like the activation it masks) for every microbatch with an inverted
// dropout mask: each element is 1/keep with probability keep, else 0, drawn
// from the seed, the microbatch number and the node. This is how a model opts
// into dropout: multiply the activation by the mask input with
// gorgonia.HadamardProd instead of using gorgonia.Dropout (whose backward is
// wrong). The mask is a stage input, so a recomputed forward sees the same
// mask. Callers do not feed the node.
func WithDropoutMask(node *gorgonia.Node, keep float64) Option {
	return func(c *config) { c.masks = append(c.masks, mask{node, keep}) }
}

// WithWarmup trains the first steps minibatches with the synchronous
// schedule sync (schedule.OneFOneB() or schedule.GPipe()) before switching to
// the main schedule, in the same engine, without rebuilding anything
// (PipeMare's T3, "PipeMareW"). The switch shows in the report's segments.
func WithWarmup(steps int, sync schedule.Schedule) Option {
	return func(c *config) { c.warmup, c.warmSch = steps, sync; c.set["WithWarmup"] = true }
}

// Activations says what a stage keeps between a microbatch's forward and
// its backward.
//
// Under synchronous schedules and PipeDream both give the same gradients.
// Under PipeMare they are two methods: the backward reads the stage's
// current weights, and Recompute re-derives the stage's activations with
// them too, while Keep keeps the activations the forward computed with the
// older weights — the setting of the PipeMare paper, where only the ops that
// read weights in the backward (the input gradient of a linear layer) see
// the newer ones.
type Activations int

const (
	// Recompute keeps only the stage's inputs and re-runs the forward
	// inside the backward. Exact for every op, stateful ones included, and
	// the least memory. The default.
	Recompute Activations = iota
	// Keep keeps the tensors the backward reads and runs a backward-only
	// program: no second forward, more memory. A stage whose stateful ops
	// all have stateless stage ops (BatchNorm and MaxPool do, unless
	// graphsplit.WithoutOpSubstitution; graphsplit.Plan.CanKeep says) keeps
	// too; one with other stateful ops (Dropout, GroupNorm, AvgPool) still
	// recomputes, as only that is exact for them.
	Keep
)

// WithActivations chooses what stages keep between forward and backward
// (default Recompute).
func WithActivations(a Activations) Option {
	return func(c *config) { c.acts = a; c.set["WithActivations"] = true }
}

// WithDiscrepancy measures, at every asynchronous backward, how far the
// weights it reads are from the weights its forward read:
// ‖u_bkwd − u_fwd‖ / ‖u_fwd‖ over the stage's learnables, reported as
// StageReport.Discrepancy. It keeps a copy of the weights each forward in
// flight read to do so (not counted in the memory report): a measurement,
// not a mode to train with.
func WithDiscrepancy() Option { return func(c *config) { c.disc = true } }

// WithCheckpoints says that the VM's state will be saved (Checkpoint,
// Save): New, and ServeStage for its stage, refuse a stage whose solver
// cannot save its state (solvers.Saveable: a gorgonia solver, alone or
// inside T1 and T2), naming the stage and the solver to use instead,
// rather than the first Checkpoint failing after training ran.
func WithCheckpoints() Option { return func(c *config) { c.saving = true } }

// WithDelayLog records the delay every forward saw, per stage and
// microbatch (DelayLog), for replaying a run with NewInjected.
func WithDelayLog() Option { return func(c *config) { c.logDel = true } }

// WithEndpoint makes the VM drive stages that run elsewhere — in other
// processes, on other hosts — through ep, the driver's endpoint of a
// network transport (grpcnet.Open with transport.Driver), instead of
// starting them in this process. Each stage runs ServeStage with the same
// plan and the same options. The VM owns ep: Close closes it.
func WithEndpoint(ep transport.Endpoint) Option { return func(c *config) { c.endpoint = ep } }

// DefaultFirstOrderTimeout is how long a stage that ServeStage serves
// waits for its driver's first order unless WithFirstOrderTimeout says
// otherwise: twice grpcnet's default connect timeout, since a driver may
// still be waiting that long for the other stages when this one is up.
const DefaultFirstOrderTimeout = time.Minute

// WithFirstOrderTimeout bounds how long a stage that ServeStage serves
// waits for the driver's first order once its endpoint is open (default
// DefaultFirstOrderTimeout): a driver that connected and then stalled, or
// vanished without its connection closing, makes ServeStage return an
// error naming the stage. Give at least twice the connect timeout of the
// driver's endpoint, which may still wait that long for another stage.
// The driver ignores it.
func WithFirstOrderTimeout(d time.Duration) Option { return func(c *config) { c.firstOrder = d } }

// newConfig applies opts and checks them against plan.
func newConfig(plan *graphsplit.Plan, opts []Option) (config, error) {
	cfg := config{sched: schedule.PipeMare(), n: 1, seed: 1, set: map[string]bool{}}
	if plan == nil || len(plan.Stages) == 0 {
		return cfg, errors.New("asyncvm: plan has no stages")
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.n < 1 {
		return cfg, errors.Errorf("asyncvm: WithMicrobatches(%d): need at least one microbatch per minibatch", cfg.n)
	}
	if cfg.sched.Actions == nil {
		return cfg, errors.New("asyncvm: WithSchedule: schedule has no action lists")
	}
	if min := schedule.MinN(cfg.sched, len(plan.Stages)); cfg.n < min {
		return cfg, errors.Errorf("asyncvm: schedule %s on %d stages needs at least %d microbatches per minibatch (WithMicrobatches), got %d", cfg.sched.Name, len(plan.Stages), min, cfg.n)
	}
	if err := schedule.Check(cfg.sched, len(plan.Stages), cfg.n); err != nil {
		return cfg, errors.Wrap(err, "asyncvm: WithSchedule")
	}
	if cfg.sched.ForwardDelay > 1 {
		return cfg, errors.Errorf("asyncvm: schedule %s: a forward delay of %d is not supported (0 or 1)", cfg.sched.Name, cfg.sched.ForwardDelay)
	}
	if cfg.warmup < 0 || (cfg.warmup > 0 && (cfg.warmSch.Actions == nil || cfg.warmSch.Async)) {
		return cfg, errors.New("asyncvm: WithWarmup needs a non-negative number of steps and a synchronous schedule (schedule.OneFOneB() or schedule.GPipe())")
	}
	if cfg.firstOrder < 0 {
		return cfg, errors.Errorf("asyncvm: WithFirstOrderTimeout(%v): it must be positive", cfg.firstOrder)
	}
	if cfg.solver == nil {
		cfg.solver = func(int) (gorgonia.Solver, error) { return solvers.NewSGD(solvers.WithLearnRate(0.01)) }
	}
	for _, m := range cfg.masks {
		if m.keep <= 0 || m.keep > 1 {
			return cfg, errors.Errorf("asyncvm: WithDropoutMask(%s, %g): keep must be in (0, 1]", m.node.Name(), m.keep)
		}
		if feedIndex(plan, m.node) < 0 {
			return cfg, errors.Errorf("asyncvm: WithDropoutMask(%s): not a data input of the plan", m.node.Name())
		}
	}
	return cfg, nil
}

// stageConfig is stage i's runtime configuration.
func (c *config) stageConfig(i int) (stage.Config, error) {
	s, err := c.solver(i)
	if err != nil {
		return stage.Config{}, errors.Wrap(err, "the solver factory")
	}
	if s == nil {
		return stage.Config{}, errors.New("the solver factory returned nil")
	}
	if c.saving {
		if err := solvers.Saveable(s); err != nil {
			return stage.Config{}, errors.Wrap(err, "WithCheckpoints: the solver factory's solver cannot be checkpointed")
		}
	}
	sc := stage.Config{
		Microbatches: c.n, Solver: s, KeepActivations: c.acts == Keep,
		SplitBackward: c.sched.Split || (c.warmup > 0 && c.warmSch.Split),
		Discrepancy:   c.disc, DelayLog: c.logDel, ForwardDelays: c.delays,
	}
	if c.inject != nil {
		sc.Hook = func(a schedule.Action) error { return c.inject(i, a) }
	}
	return sc, nil
}

// feedIndex is the position of node in plan.Feeds, or −1.
func feedIndex(plan *graphsplit.Plan, node *gorgonia.Node) int {
	for i, f := range plan.Feeds {
		if f.Node == node {
			return i
		}
	}
	return -1
}
