package graphsplit

import (
	"slices"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// OnWorkers says that the plan's stages will run on w workers (goroutine
// sets, stage processes, hosts), placed by pl (schedule.Placement.Assign
// of the stages' costs): with Stages(p), Split then balances the workers,
// not the stages. The cut makes the busiest worker's stages, together, as
// cheap as it can, and, among the cuts that do, the most expensive stage;
// Profiled measures the workers' sums too. Two stages in a V (worker 0
// hosts stages 0 and 3, worker 1 stages 1 and 2: ZB-V's placement) can be
// uneven and their worker even, where cutting four even stages may leave
// a worker with more than half of the work.
//
// A worker's stages then may also start at any op of the positions
// Profiled's lightening reaches from a layer boundary (ops that read no
// learnable: an im2col, a ReLU, a max-pool), unless the cut would split
// ops that a stage computes as one kernel (a BatchNorm with its scale,
// bias and ReLU; a convolution's product and its layout): every learnable
// stays in its layer's stage, and every stage op stays whole. Without
// FineGrained, any op may start a stage that splits no stage op.
//
// One worker per stage (w = p) cuts as Stages alone does. w must be
// between 1 and p, and divide p when pl is a V or round robin. It needs
// Stages, and no cut points.
func OnWorkers(pl schedule.Placement, w int) Option {
	return func(c *config) { c.place, c.workers, c.workersSet = pl, w, true }
}

// checkWorkers refuses OnWorkers without Stages or with cut points, and w
// workers that pl cannot place p stages on.
func (c *config) checkWorkers() error {
	if !c.workersSet {
		return nil
	}
	p, w := c.stages, c.workers
	switch {
	case len(c.cuts) > 0 || c.cutOpsSet:
		return errors.Errorf("graphsplit: OnWorkers(%v, %d) balances the cut Stages chooses; cut points already fix the stages", c.place, w)
	case p < 1:
		return errors.Errorf("graphsplit: OnWorkers(%v, %d) places the stages of Stages(p); give Stages", c.place, w)
	case w < 1 || w > p:
		return errors.Errorf("graphsplit: OnWorkers(%v, %d): %d stages need 1 to %d workers", c.place, w, p, p)
	case p%w != 0 && (c.place == schedule.RoundRobin || c.place == schedule.VShape):
		return errors.Errorf("graphsplit: OnWorkers(%v, %d): placed %v, every worker hosts as many stages, and %d stages do not divide among %d", c.place, w, c.place, p, w)
	}
	return nil
}

// grouped reports whether the stages share workers, so that balancing
// the workers differs from balancing the stages.
func (c *config) grouped() bool { return c.workers > 0 && c.workers < c.stages }

// assign is the worker of each stage of these costs (OnWorkers): stage s
// is worker s when every stage has its worker.
func (c *config) assign(stage []float64) []int {
	if c.grouped() {
		return c.place.Assign(stage, c.workers)
	}
	out := make([]int, len(stage))
	for s := range out {
		out[s] = s
	}
	return out
}

// loads is each worker's share of stage costs placed by workers (assign),
// in worker order.
func loads(stage []float64, workers []int) []float64 {
	out := make([]float64, slices.Max(workers)+1)
	for s, w := range workers {
		out[w] += stage[s]
	}
	return out
}

// loads is each worker's share of stage costs (OnWorkers), in worker
// order: the stages' own costs when every stage has its worker.
func (c *config) loads(stage []float64) []float64 { return loads(stage, c.assign(stage)) }

// heaviest is the busiest worker's time per microbatch, of measured
// stage times (loads).
func (c *config) heaviest(times []StageTime) float64 {
	return slices.Max(c.loads(totals(times)))
}

// evenness is the busiest worker's time over the mean (loads): 1 when
// every worker takes as long.
func (c *config) evenness(times []StageTime) float64 {
	l := c.loads(totals(times))
	sum := 0.0
	for _, x := range l {
		sum += x
	}
	if sum == 0 {
		return 1
	}
	return slices.Max(l) / (sum / float64(len(l)))
}

// measured is the Balance of measured stage times: their evenness, and
// which worker hosts each stage when the stages share workers.
func (c *config) measured(times []StageTime) *Balance {
	b := &Balance{Times: times, Spread: c.evenness(times)}
	if c.grouped() {
		b.Workers = c.assign(totals(times))
	}
	return b
}

// totals is each stage's forward and backward time, in seconds.
func totals(times []StageTime) []float64 {
	out := make([]float64, len(times))
	for s, t := range times {
		out[s] = t.Total().Seconds()
	}
	return out
}

// stageCosts sums the ops' costs of each stage of cuts.
func stageCosts(costs []float64, cuts []int) []float64 {
	out := make([]float64, len(cuts)+1)
	s := 0
	for q, c := range costs {
		for s < len(cuts) && q >= cuts[s] {
			s++
		}
		out[s] += c
	}
	return out
}

// maxEnumerated bounds the cuts balanceWorkers tries one by one; past
// it, it improves one cut at a time.
const maxEnumerated = 200000

// balanceWorkers returns the cut, among the positions placedCuts allows,
// whose busiest worker costs least, then whose most expensive stage
// does, then the first in order; from start (a cut of the same number of
// stages), which it returns when nothing is better. It tries every cut
// when there are at most maxEnumerated, else moves one cut at a time to
// its best position until no move helps.
func (a *analysis) balanceWorkers(cfg *config, costs []float64, start []int) []int {
	cand := a.placedCuts(cfg)
	type key struct{ worker, stage float64 }
	score := func(cuts []int) key {
		st := stageCosts(costs, cuts)
		return key{slices.Max(cfg.loads(st)), slices.Max(st)}
	}
	better := func(x, y key) bool { return x.worker < y.worker || (x.worker == y.worker && x.stage < y.stage) }
	best, bestKey := slices.Clone(start), score(start)
	k := len(start)
	if binomial(len(cand), k) <= maxEnumerated {
		cur := make([]int, k)
		var walk func(i, from int)
		walk = func(i, from int) {
			if i == k {
				if s := score(cur); better(s, bestKey) {
					best, bestKey = slices.Clone(cur), s
				}
				return
			}
			for j := from; j <= len(cand)-(k-i); j++ {
				cur[i] = cand[j]
				walk(i+1, j+1)
			}
		}
		walk(0, 0)
		return best
	}
	for moved := true; moved; {
		moved = false
		for i := range best {
			lo, hi := 0, len(a.seq)
			if i > 0 {
				lo = best[i-1]
			}
			if i+1 < k {
				hi = best[i+1]
			}
			for _, q := range cand {
				if q <= lo || q >= hi || q == best[i] {
					continue
				}
				try := slices.Clone(best)
				try[i] = q
				if s := score(try); better(s, bestKey) {
					best, bestKey, moved = try, s, true
				}
			}
		}
	}
	return best
}

// binomial is n choose k, or maxEnumerated+1 once it passes maxEnumerated.
func binomial(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > maxEnumerated {
			return maxEnumerated + 1
		}
	}
	return r
}

// placedCuts are the positions a stage of OnWorkers may start at, in
// order: with FineGrained, the layer boundaries (fineCuts, and where
// atIm2col moves them) and the positions reached from them over ops that
// read no learnable, as lighten moves a cut; otherwise every position.
// A position that would split a stage op's kernel is left out.
func (a *analysis) placedCuts(cfg *config) []int {
	var out []int
	if !cfg.fine {
		for q := 1; q < len(a.seq); q++ {
			out = append(out, q)
		}
	} else {
		fine := a.fineCuts()
		for _, c := range append(slices.Clone(fine), a.atIm2col(fine)...) {
			out = append(out, c)
			for q := c - 1; q >= 1 && !a.readsLearnable(q); q-- {
				out = append(out, q)
			}
			for q := c + 1; q < len(a.seq) && !a.readsLearnable(q-1); q++ {
				out = append(out, q)
			}
		}
		slices.Sort(out)
		out = slices.Compact(out)
	}
	inside := a.insideKernels()
	return slices.DeleteFunc(out, func(q int) bool { return inside[q] })
}

// insideKernels marks the positions a cut before which would split a
// stage op's kernel: those after the first and up to the last op a
// substitution (substitute.go) computes, matched with every op in one
// stage. Nothing is marked without substitution.
func (a *analysis) insideKernels() []bool {
	inside := make([]bool, len(a.seq)+1)
	if !a.substitute {
		return inside
	}
	saved, n := a.stageAt, a.nStages
	defer func() { a.stageAt, a.nStages = saved, n }()
	a.assign(nil)
	subs := findSubstitutions(a, &Stage{Index: 0, Nodes: a.seq})
	seen := make(map[*substitution]bool)
	for _, s := range subs {
		if seen[s] {
			continue
		}
		seen[s] = true
		lo, hi := len(a.seq), -1
		for _, x := range append(gorgonia.Nodes{s.root}, s.absorbed...) {
			if p, ok := a.pos[x]; ok {
				lo, hi = min(lo, p), max(hi, p)
			}
		}
		for q := lo + 1; q <= hi; q++ {
			inside[q] = true
		}
	}
	return inside
}
