package graphsplit

import (
	"fmt"
	"github.com/pipemare/pipemare/internal/reach"
	"slices"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Split cuts the model (g, cost, learnables) into pipeline stages.
//
// g is built at the microbatch size, cost is a scalar node of g and
// learnables are the input nodes of g that the solver updates. Split does not
// modify g: each stage gets new graphs that re-apply g's op objects and bind
// g's learnable value tensors, so training a plan trains the user's model.
//
// Without options there is one stage. Stages(p) balances p stages with a cost
// model; FineGrained makes one stage per learnable-bearing layer (combined with
// Stages(p) it merges those layers into p balanced stages); CutAt cuts at
// named nodes. A stage may start at any op: a learnable read by ops on both
// sides of a cut is shared by the stages that read it (Plan.Shared).
//
// Bad input — a cost that is not a scalar or not in g, no learnables, a
// learnable the cost does not depend on, P < 1 or more stages than there are
// places to cut, an op that cannot be re-applied, an unknown cut point — gives
// an error that says what is wrong; Split never panics. So does what a
// pipeline cannot train: a scalar data input (data is cut into microbatches
// along its first axis), an op without a symbolic derivative on the cost's
// backward path, and random ops, gorgonia's Dropout included (their draws do
// not come from a seed the engine controls).
func Split(g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes, opts ...Option) (plan *Plan, err error) {
	defer func() {
		if r := recover(); r != nil {
			plan, err = nil, errors.Errorf("graphsplit: gorgonia panicked while splitting: %v", r)
		}
	}()
	if err := reach.Check(); err != nil {
		return nil, errors.Wrap(err, "graphsplit")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.stages < 0 || (cfg.stages == 0 && cfg.setStages) {
		return nil, errors.Errorf("graphsplit: Stages(%d): need at least one stage", cfg.stages)
	}
	if (len(cfg.cuts) > 0 || cfg.cutOpsSet) && (cfg.fine || cfg.stages > 0 || cfg.profiled) {
		return nil, errors.New("graphsplit: CutAt and CutAtOps cannot be combined with Stages, FineGrained or Profiled; cut points already fix the stages")
	}
	if err := cfg.checkWorkers(); err != nil {
		return nil, err
	}
	if len(cfg.cuts) > 0 && cfg.cutOpsSet {
		return nil, errors.New("graphsplit: CutAt and CutAtOps both give cut points; choose one")
	}
	a, err := analyze(g, cost, learnables)
	if err != nil {
		return nil, err
	}
	a.unguarded = cfg.unguarded
	a.substitute = !cfg.noSubstitution
	a.statelessOnly = cfg.statelessOnly
	model := cfg.model
	if model == nil {
		model = EstimatedCost{}
	}
	costs := make([]float64, len(a.seq))
	for p, n := range a.seq {
		costs[p] = model.OpCost(n)
	}
	var cuts []int
	var bal *Balance
	if cfg.profiled {
		if err := checkFeeds(a.feeds, cfg.profileFeed); err != nil {
			return nil, errors.Wrap(err, "graphsplit: Profiled")
		}
		cuts, bal, err = profiled(a, &cfg, costs, func(p *Plan) ([]StageTime, error) {
			return p.Time(cfg.profileFeed, cfg.profileKeep, cfg.profileFuse, profileRuns)
		})
	} else {
		cuts, err = chooseCuts(a, &cfg, costs)
	}
	if err != nil {
		return nil, err
	}
	a.assign(cuts)
	if plan, err = assemble(a, costs); err != nil {
		return nil, err
	}
	plan.Balance = bal
	return plan, nil
}

// checkFeeds says which of the data inputs feeds has no fitting value for.
func checkFeeds(inputs gorgonia.Nodes, feeds map[*gorgonia.Node]gorgonia.Value) error {
	for _, f := range inputs {
		v, ok := feeds[f]
		if !ok || v == nil {
			return errors.Errorf("no value for data input %q", f.Name())
		}
		if err := checkValue(f, v); err != nil {
			return errors.Wrapf(err, "data input %q", f.Name())
		}
	}
	return nil
}

// chooseCuts returns the positions in a.seq where stages 1..P−1 start.
func chooseCuts(a *analysis, cfg *config, costs []float64) ([]int, error) {
	switch {
	case len(cfg.cuts) > 0:
		return a.explicitCuts(cfg.cuts)
	case cfg.cutOpsSet:
		return a.cutsAt(cfg.cutOps)
	case cfg.fine:
		fine := a.fineCuts()
		if cfg.stages == 0 {
			return a.atIm2col(fine), nil
		}
		cuts, err := balanceAt(fine, costs, cfg.stages, "layer boundaries (FineGrained)")
		if err != nil {
			return nil, err
		}
		return a.onWorkers(cfg, costs, a.atIm2col(cuts)), nil
	case cfg.stages > 1:
		anywhere := make([]int, 0, len(a.seq))
		for p := 1; p < len(a.seq); p++ {
			anywhere = append(anywhere, p)
		}
		cuts, err := balanceAt(anywhere, costs, cfg.stages, "places to cut (one op per stage)")
		if err != nil {
			return nil, err
		}
		return a.onWorkers(cfg, costs, cuts), nil
	}
	return nil, nil
}

// onWorkers is cuts balanced for the workers of OnWorkers
// (balanceWorkers) when the stages share them, else cuts.
func (a *analysis) onWorkers(cfg *config, costs []float64, cuts []int) []int {
	if !cfg.grouped() {
		return cuts
	}
	return a.balanceWorkers(cfg, costs, cuts)
}

// TooManyStagesError is Split's error when Stages asks for more stages
// than the graph has places to cut: Most is the most it can be cut into.
type TooManyStagesError struct {
	Asked, Most int
	where       string // the places to cut, for the message
}

func (e *TooManyStagesError) Error() string {
	return fmt.Sprintf("graphsplit: Stages(%d): the graph has only %d %s, so at most %d stages", e.Asked, e.Most-1, e.where, e.Most)
}

// balanceAt picks p−1 of the candidate cut positions so that the most
// expensive stage is as cheap as possible.
func balanceAt(candidates []int, costs []float64, p int, what string) ([]int, error) {
	if p-1 > len(candidates) {
		return nil, errors.WithStack(&TooManyStagesError{Asked: p, Most: len(candidates) + 1, where: what})
	}
	if p == 1 {
		return nil, nil
	}
	bounds := append([]int{0}, candidates...)
	blocks := make([]float64, len(bounds))
	for b := range bounds {
		end := len(costs)
		if b+1 < len(bounds) {
			end = bounds[b+1]
		}
		for q := bounds[b]; q < end; q++ {
			blocks[b] += costs[q]
		}
	}
	var cuts []int
	for _, blk := range balance(blocks, p) {
		cuts = append(cuts, bounds[blk])
	}
	return cuts, nil
}

// cutsAt checks cut positions (CutAtOps) and returns them in order.
func (a *analysis) cutsAt(positions []int) ([]int, error) {
	cuts := slices.Clone(positions)
	slices.Sort(cuts)
	for i, p := range cuts {
		switch {
		case p <= 0 || p >= len(a.seq):
			return nil, errors.Errorf("graphsplit: CutAtOps(%v): position %d is not between 1 and %d, the graph's %d ops", positions, p, len(a.seq)-1, len(a.seq))
		case i > 0 && cuts[i-1] == p:
			return nil, errors.Errorf("graphsplit: CutAtOps(%v): position %d is given twice", positions, p)
		}
	}
	return cuts, nil
}

// Cuts returns where the plan's stages after the first start: for each,
// the position of its first op among the graph's ops in the order Split
// lays them out. CutAtOps(plan.Cuts()...) cuts the same graph the same way.
func (p *Plan) Cuts() []int {
	var cuts []int
	for q := 1; q < len(p.a.seq); q++ {
		if p.a.stageAt[q] != p.a.stageAt[q-1] {
			cuts = append(cuts, q)
		}
	}
	return cuts
}

// assign records which stage each laid-out op belongs to.
func (a *analysis) assign(cuts []int) {
	a.stageAt = make([]int, len(a.seq))
	s, next := 0, 0
	for p := range a.seq {
		if next < len(cuts) && cuts[next] == p {
			s++
			next++
		}
		a.stageAt[p] = s
	}
	a.nStages = s + 1
}

// stage returns the stage of op node n, or -1 for anything else.
func (a *analysis) stage(n *gorgonia.Node) int {
	if p, ok := a.pos[n]; ok {
		return a.stageAt[p]
	}
	return -1
}

// assemble builds the Stages from the assignment.
func assemble(a *analysis, costs []float64) (*Plan, error) {
	plan := &Plan{Cost: a.cost, Dtype: a.cost.Dtype()}
	plan.Learnables = make(gorgonia.Nodes, len(a.learn))
	for l, i := range a.learn {
		plan.Learnables[i] = l
	}
	stages := a.newStages(costs)
	r := a.reads()
	for _, f := range a.feeds {
		plan.Feeds = append(plan.Feeds, port(f, Data, -1, r.consumers[f]))
	}
	for s, st := range stages {
		a.addPorts(st, r.inputs[s], r.consumers)
	}
	if err := assignLearnables(plan, stages, r.readers); err != nil {
		return nil, err
	}
	if err := buildPrograms(a, stages); err != nil {
		return nil, err
	}
	plan.Stages = stages
	plan.a = a
	return plan, nil
}

// newStages returns the assignment's stages, each with its op nodes in
// laid-out order, its stateful ops, and its Model, FLOPs, BackwardFLOPs
// and Bytes costs (summed in that order; seq is topological, so an op's
// inputs are known to depend on a learnable before it is reached).
func (a *analysis) newStages(costs []float64) []*Stage {
	stages := make([]*Stage, a.nStages)
	for s := range stages {
		stages[s] = &Stage{Index: s}
	}
	learnDep := make(map[*gorgonia.Node]bool) // ops that depend on a learnable
	for p, n := range a.seq {
		st := stages[a.stageAt[p]]
		st.Nodes = append(st.Nodes, n)
		st.Cost.Model += costs[p]
		flops := EstimateFLOPs(n)
		st.Cost.FLOPs += flops
		st.Cost.Bytes += EstimateBytes(n)
		for _, c := range a.children(n) {
			if _, ok := a.learn[c]; ok || learnDep[c] {
				learnDep[n] = true
				st.Cost.BackwardFLOPs += flops
			}
		}
		if isStateful(n) {
			st.Stateful = append(st.Stateful, n)
		}
	}
	return stages
}

// stageReads is who reads what across the stages.
type stageReads struct {
	readers   map[*gorgonia.Node][]int // learnable → reading stages, ascending
	consumers map[*gorgonia.Node][]int // activation or feed → reading stages, ascending
	inputs    []gorgonia.Nodes         // per stage, its inputs in first-use order
}

// reads finds, walking the ops in laid-out order, which stages read each
// learnable, which stages read each activation or data input from outside
// (neither replicable expressions nor a stage's own ops count), and each
// stage's inputs.
func (a *analysis) reads() stageReads {
	r := stageReads{
		readers:   make(map[*gorgonia.Node][]int),
		consumers: make(map[*gorgonia.Node][]int),
		inputs:    make([]gorgonia.Nodes, a.nStages),
	}
	seenIn := make([]map[*gorgonia.Node]bool, a.nStages) // per stage
	for s := range seenIn {
		seenIn[s] = make(map[*gorgonia.Node]bool)
	}
	for p, n := range a.seq {
		s := a.stageAt[p]
		for _, c := range a.children(n) {
			if _, ok := a.learn[c]; ok {
				if rs := r.readers[c]; len(rs) == 0 || rs[len(rs)-1] != s {
					r.readers[c] = append(rs, s) // stages only grow along seq
				}
				continue
			}
			if a.replicable[c] || seenIn[s][c] {
				continue
			}
			if c.IsVar() || a.stage(c) < s {
				seenIn[s][c] = true
				r.inputs[s] = append(r.inputs[s], c)
				r.consumers[c] = append(r.consumers[c], s)
			}
		}
	}
	return r
}

// addPorts sets st's Inputs (one port per node of inputs, in order: data
// or an activation of an earlier stage) and Outputs (the cost, and every
// op another stage consumes, in st's node order), and adds the
// activations' bytes to its InBytes and OutBytes.
func (a *analysis) addPorts(st *Stage, inputs gorgonia.Nodes, consumers map[*gorgonia.Node][]int) {
	for _, c := range inputs {
		if c.IsVar() {
			st.Inputs = append(st.Inputs, port(c, Data, -1, consumers[c]))
			continue
		}
		pt := port(c, Activation, a.stage(c), consumers[c])
		st.Inputs = append(st.Inputs, pt)
		st.Cost.InBytes += pt.Bytes()
	}
	for _, n := range st.Nodes {
		if n == a.cost {
			st.Outputs = append(st.Outputs, port(n, CostPort, st.Index, nil))
			continue
		}
		if cs := consumers[n]; len(cs) > 0 {
			pt := port(n, Activation, st.Index, cs)
			st.Outputs = append(st.Outputs, pt)
			st.Cost.OutBytes += pt.Bytes()
		}
	}
}

// assignLearnables gives each learnable of plan, in order, to the stages
// that read it (readers), recording a learnable read by several as
// Shared (owned by the first). A learnable no stage reads is an error.
func assignLearnables(plan *Plan, stages []*Stage, readers map[*gorgonia.Node][]int) error {
	for i, l := range plan.Learnables {
		rs := readers[l]
		if len(rs) == 0 {
			return errors.Errorf("graphsplit: learnable %d (%q) is read only through shape or constant expressions, so it gets no gradient; drop it from the learnables", i, l.Name())
		}
		var sh *Shared
		if len(rs) > 1 {
			sh = &Shared{Index: i, Node: l, Owner: rs[0], Readers: rs}
			plan.Shared = append(plan.Shared, sh)
		}
		for _, s := range rs {
			st := stages[s]
			st.Learnables = append(st.Learnables, l)
			st.LearnableIndex = append(st.LearnableIndex, i)
			st.Shared = append(st.Shared, sh)
			st.Cost.ParamBytes += int64(l.Shape().TotalSize()) * int64(l.Dtype().Size())
		}
	}
	return nil
}

// buildPrograms builds every stage's Forward and Train programs, last
// stage first: a stage's gradient placeholders take the shapes of the
// gradients its consumers compute.
func buildPrograms(a *analysis, stages []*Stage) error {
	gradShapes := make(map[int64]tensor.Shape)
	for s := len(stages) - 1; s >= 0; s-- {
		st := stages[s]
		var err error
		if st.Forward, err = newProgram(a, st, false, nil); err != nil {
			return err
		}
		if st.Train, err = newProgram(a, st, true, gradShapes); err != nil {
			return err
		}
		for i, gr := range st.Train.InputGrads {
			if _, seen := gradShapes[st.Inputs[i].Key]; gr != nil && !seen {
				gradShapes[st.Inputs[i].Key] = gr.Shape()
			}
		}
	}
	return nil
}

func port(n *gorgonia.Node, kind PortKind, producer int, consumers []int) Port {
	return Port{
		Key: n.ID(), Name: n.Name(), Kind: kind,
		Shape: n.Shape(), Dtype: n.Dtype(),
		Producer: producer, Consumers: append([]int(nil), consumers...),
		Node: n,
	}
}

// isStateful reports whether n's op keeps state between its forward and its
// backward, or across runs.
func isStateful(n *gorgonia.Node) bool {
	switch opTypeName(n.Op()) {
	case "BatchNormOp", "maxPoolOp", "GroupNormOp", "avgPoolOp":
		return true
	}
	return false
}
