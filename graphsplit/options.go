package graphsplit

import "gorgonia.org/gorgonia"

// Option configures Split.
type Option func(*config)

type config struct {
	stages      int // 0: not set
	setStages   bool
	fine        bool     // one stage per learnable-bearing layer
	cuts        []string // explicit cut points
	model       CostModel
	modelSet    bool
	profileFeed map[*gorgonia.Node]gorgonia.Value
	unguarded   bool // programs run the ops unguarded (tests compare)
	// noSubstitution: stages re-apply the user's ops as they are
	// (substitute.go).
	noSubstitution bool
}

// Stages asks for p stages, balanced by the cost model so that the most
// expensive stage is as cheap as possible. Without any option Split makes a
// single stage.
func Stages(p int) Option { return func(c *config) { c.stages, c.setStages = p, true } }

// FineGrained asks for one stage per learnable-bearing layer: a stage starts
// at every op that applies a weight (a learnable with at least two
// dimensions larger than one — a matmul or convolution filter — or a
// transposed or reshaped copy of one), and the ops that follow it — bias,
// normalisation, activation — stay with it. A weight applied again (a tied
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

// WithCostModel balances the stages of Stages(p) with m instead of the
// default EstimatedCost.
func WithCostModel(m CostModel) Option {
	return func(c *config) { c.model, c.modelSet = m, true }
}

// Profiled balances the stages of Stages(p) by measured time: Split runs
// every op of the graph on values computed from feeds (one value per data
// input; the learnables' own values are used) and times it. See MeasuredCost.
func Profiled(feeds map[*gorgonia.Node]gorgonia.Value) Option {
	return func(c *config) { c.profileFeed = feeds }
}
