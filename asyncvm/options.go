package asyncvm

import (
	"gorgonia.org/gorgonia"
)

// Option configures New.
type Option func(*config)

type config struct {
	sched   Schedule
	n       int
	solver  func(stage int) gorgonia.Solver
	seed    int64
	masks   []mask
	inject  func(stage int, a Action) error // tests only, see export_test.go
	warmup  int
	warmSch Schedule
}

type mask struct {
	node *gorgonia.Node
	keep float64
}

// WithSchedule chooses the schedule (default PipeMare).
func WithSchedule(s Schedule) Option { return func(c *config) { c.sched = s } }

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
func WithWarmup(steps int, sync Schedule) Option {
	return func(c *config) { c.warmup, c.warmSch = steps, sync }
}
