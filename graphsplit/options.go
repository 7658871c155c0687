package graphsplit

import (
	"github.com/pipemare/pipemare/schedule"
	"gorgonia.org/gorgonia"
)

// Option configures Split.
type Option func(*config)

type config struct {
	stages      int // 0: not set
	setStages   bool
	fine        bool     // one stage per learnable-bearing layer
	cuts        []string // explicit cut points
	cutOps      []int    // explicit cut positions
	cutOpsSet   bool
	model       CostModel
	modelSet    bool
	profileFeed map[*gorgonia.Node]gorgonia.Value
	profileKeep bool
	profileFuse bool // Plan.Time's fuseLast
	profiled    bool
	unguarded   bool // programs run the ops unguarded (tests compare)
	// noSubstitution: stages re-apply the user's ops as they are
	// (substitute.go).
	noSubstitution bool
	// statelessOnly: stages compute only BatchNorm and MaxPool with stage
	// ops (plain: no fused scale, bias or Rectify), as keeping needs, and
	// re-apply every other op of the user's (tests compare).
	statelessOnly bool
	// place and workers: the workers the stages run on (OnWorkers;
	// workers.go), 0 workers when not said.
	place      schedule.Placement
	workers    int
	workersSet bool
	// oneProcess: the stages run in one process (InOneProcess).
	oneProcess bool
	// network: the stages' messages cross a network transport
	// (OverNetwork).
	network bool
}

// Stages asks for p stages, balanced by the cost model so that the most
// expensive stage is as cheap as possible. Without any option Split makes a
// single stage.
func Stages(p int) Option { return func(c *config) { c.stages, c.setStages = p, true } }

// FineGrained asks for one stage per learnable-bearing layer: a stage starts
// at every op that applies a weight (a learnable with at least two
// dimensions larger than one — a matmul or convolution filter — or a
// transposed or reshaped copy of one), and the ops that follow it — bias,
// normalisation, activation — stay with it; a convolution's layer starts
// at its im2col, so that no stage sends patches (kh·kw times the image).
// With Stages, the cuts are chosen among those layer boundaries (as if
// each were at the weight's op, so the im2col's cost does not move one)
// and then start at the im2col. A weight applied again (a tied
// output projection, a recurrence's weights at every time step) starts a
// layer again, and the stages share it (Plan.Shared). This is the PipeMare
// paper's setting (its ResNet-50 had about 107 stages).
func FineGrained() Option { return func(c *config) { c.fine = true } }

// CutAt makes each named node the first node of a new stage. Names are the
// nodes' Name() in the original graph; each must name an op node the cost
// depends on.
func CutAt(names ...string) Option {
	return func(c *config) { c.cuts = append(c.cuts, names...) }
}

// CutAtOps cuts before the ops at the given positions of the graph's ops
// in the order Split lays them out (Plan.Cuts reports a plan's): the same
// graph built the same way cut at the same positions gives the same plan.
// It is how a measured cut (Profiled) is recorded and reproduced.
func CutAtOps(positions ...int) Option {
	return func(c *config) { c.cutOps = append(c.cutOps, positions...); c.cutOpsSet = true }
}

// WithCostModel balances the stages of Stages(p) with m instead of the
// default EstimatedCost.
func WithCostModel(m CostModel) Option {
	return func(c *config) { c.model, c.modelSet = m, true }
}

// Profiled balances the stages of Stages(p) by the time they take on this
// machine: Split cuts by the cost model, times every stage's programs on
// feeds (one microbatch: a value for every data input; Plan.Time), rescales
// the ops' costs by how much each stage's measured time differs from its
// modelled one, and cuts again — until no stage is more than 10 % above the
// mean, or after a few rounds, keeping the most even cut measured; then it
// moves each cut over the ops between two layers that read no learnable
// (an im2col, a ReLU, a max-pool) to where the fewest bytes cross it, if
// the slowest stage stays within 5 % (gets no slower, InOneProcess): every
// learnable stays in its stage, so a synchronous schedule trains the same
// weights (an asynchronous one that recomputes may not, where a ReLU or a
// max-pool moved). keep times the keeping programs, for a runtime that
// keeps activations; fuseLast times a recomputing last stage as one Train
// program, for a schedule that runs each of its forwards' backward right
// after it (schedule.FusesLast; Plan.Time). The plan's Balance says how even it came out, and names the op (with
// FineGrained, the layer) that is heavier than a fair share, if one is.
//
// A measured cut depends on the machine, and on what else ran while it
// measured: two Splits may cut differently. Record the cut (Plan.Cuts)
// and pass it to CutAtOps where runs must agree — every process of a pipeline
// must cut alike — or be reproduced.
func Profiled(feeds map[*gorgonia.Node]gorgonia.Value, keep, fuseLast bool) Option {
	return func(c *config) {
		c.profileFeed, c.profileKeep, c.profileFuse, c.profiled = feeds, keep, fuseLast, true
	}
}

// InOneProcess says that the plan's stages will run in one process, where
// a message between stages is handed over, not copied: Profiled then moves
// a cut to where it sends fewer bytes only if no stage (no worker, with
// OnWorkers) gets slower, where stages in processes accept up to 5 %
// slower for it (lighten). Without Profiled it changes nothing.
func InOneProcess() Option { return func(c *config) { c.oneProcess = true } }

// OverNetwork says that the plan's stages will run in processes that send
// their messages over a network transport (gRPC), where every byte costs
// both ends' CPU: Profiled then starts a convolution's layer at its im2col
// only, never cutting between it and its product, which would send kh·kw
// times the bytes (the CNN's 2 stages over gRPC on one host trained 8 %
// slower cut there, balanced, than before the im2col, unbalanced;
// docs/speed.md). Without Profiled it changes nothing.
func OverNetwork() Option { return func(c *config) { c.network = true } }
