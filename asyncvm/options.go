package asyncvm

import (
	"github.com/pipemare/pipemare/schedule"
	"gorgonia.org/gorgonia"
)

// Option configures New.
type Option func(*config)

type config struct {
	acts    Activations
	sched   schedule.Schedule
	n       int
	solver  func(stage int) gorgonia.Solver
	seed    int64
	masks   []mask
	inject  func(stage int, a schedule.Action) error // tests only, see export_test.go
	warmup  int
	warmSch schedule.Schedule
	disc    bool
	logDel  bool
}

type mask struct {
	node *gorgonia.Node
	keep float64
}

// WithSchedule chooses the schedule (default PipeMare).
func WithSchedule(s schedule.Schedule) Option { return func(c *config) { c.sched = s } }

// WithMicrobatches sets N, the microbatches per minibatch (default 1). The
// graph is built at the microbatch size; a minibatch fed to Step has N times
// as many rows.
func WithMicrobatches(n int) Option { return func(c *config) { c.n = n } }

// WithSolver gives each stage its own solver, made by newSolver(stage) once,
// before the workers start. A stage's solver steps that stage's learnables,
// always in the same order (Stage.Learnables). Default: gorgonia.NewVanillaSolver
// with learning rate 0.01.
func WithSolver(newSolver func(stage int) gorgonia.Solver) Option {
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
// schedule sync (1F1B-flush or GPipe) before switching to the main schedule,
// in the same engine, without rebuilding anything (PipeMare's T3,
// "PipeMareW"). The switch shows in the report's segments.
func WithWarmup(steps int, sync schedule.Schedule) Option {
	return func(c *config) { c.warmup, c.warmSch = steps, sync }
}

// Activations says what a stage keeps between a microbatch's forward and
// its backward.
//
// Under synchronous schedules and PipeDream both give the same gradients.
// Under PipeMare they are two methods: the backward reads the stage's
// current weights, and Recompute re-derives the stage's activations with
// them too, while Stash keeps the activations the forward computed with the
// older weights — the setting of the PipeMare paper, where only the ops that
// read weights in the backward (the input gradient of a linear layer) see
// the newer ones.
type Activations int

const (
	// Recompute keeps only the stage's inputs and re-runs the forward
	// inside the backward. Exact for every op, stateful ones included, and
	// the least memory. The default.
	Recompute Activations = iota
	// Stash keeps the tensors the backward reads and runs a backward-only
	// program: no second forward, more memory. Stages with stateful ops
	// (BatchNorm, MaxPool, Dropout, GroupNorm, AvgPool) still recompute, as
	// only that is exact for them.
	Stash
)

// WithActivations chooses what stages keep between forward and backward
// (default Recompute).
func WithActivations(a Activations) Option { return func(c *config) { c.acts = a } }

// WithDiscrepancy measures, at every asynchronous backward, how far the
// weights it reads are from the weights its forward read:
// ‖u_bkwd − u_fwd‖ / ‖u_fwd‖ over the stage's learnables, reported as
// StageReport.Discrepancy. It keeps a copy of each weight version in flight
// to do so (not counted in the memory report): a measurement, not a mode to
// train with.
func WithDiscrepancy() Option { return func(c *config) { c.disc = true } }

// WithDelayLog records the delay every forward saw, per stage and
// microbatch (DelayLog), for replaying a run with Injected.
func WithDelayLog() Option { return func(c *config) { c.logDel = true } }
