package graphsplit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Balance is how evenly a plan's stages share the work, as measured on the
// machine that profiled it (Profiled).
type Balance struct {
	// Times are the stages' measured times for one microbatch (Plan.Time).
	Times []StageTime `json:"stage_times"`
	// Spread is the slowest stage's total time over the mean: 1 when
	// every stage takes as long, 2 when the slowest takes twice the mean.
	// When the stages share workers (OnWorkers), it is the busiest
	// worker's time, its stages' together, over the workers' mean.
	Spread float64 `json:"spread"`
	// Workers is the worker of each stage when the stages share workers
	// (OnWorkers), else nil.
	Workers []int `json:"stage_workers,omitempty"`
	// Heaviest names the layer (FineGrained's unit: an op that applies a
	// weight and the ops after it up to the next one, named by its first
	// op) with the largest share of the measured time, and Share is that
	// share. When Share exceeds 1/P no cut into P stages at layer
	// boundaries can make the stage that holds it as light as the mean;
	// a convolution's may, cut between its im2col and its product (nudge).
	Heaviest string  `json:"heaviest"`
	Share    float64 `json:"heaviest_share"`
}

// Balanced reports whether no stage's measured time is more than 10 %
// above the mean, or the heaviest layer alone exceeds a fair share of P
// stages.
func (b *Balance) Balanced(p int) bool {
	return b.Spread <= maxSpread || b.Share > 1/float64(p)
}

// String says how even the stages are, in one line.
func (b *Balance) String() string {
	total := time.Duration(0)
	for _, t := range b.Times {
		total += t.Total()
	}
	slowest := "the slowest stage"
	if b.Workers != nil {
		slowest = fmt.Sprintf("the busiest of %d workers", slices.Max(b.Workers)+1)
	}
	s := fmt.Sprintf("measured %v per microbatch in all, %s %.2f× the mean", total.Round(10*time.Microsecond), slowest, b.Spread)
	if p := len(b.Times); b.Spread > maxSpread && b.Share > 1/float64(p) {
		s += fmt.Sprintf("; %s alone takes %.0f%% of the time, more than a fair share (%.0f%% of %d stages), and no cut at layer boundaries balanced it", b.Heaviest, 100*b.Share, 100/float64(p), p)
	}
	return s
}

// maxSpread is how far above the mean Profiled lets the slowest stage be.
const maxSpread = 1.10

// nudgeAbove is how far above the mean the slowest stage of the most even
// cut measured may be before Profiled nudges its boundaries: a cut within
// maxSpread may still cost two workers a tenth of their speed-up (the
// ResNet's 2 stages stopped at 1.07–1.09× the mean, and 1.01× was one
// layer away).
const nudgeAbove = 1.03

// profileRounds bounds Profiled's cut–time–recalibrate rounds;
// profileRuns is how many runs of each program each round's times are the
// median of.
const (
	profileRounds = 5
	profileRuns   = 5
)

// profiled is Split's balancing by measured time. It first times the
// plan cut at every layer (FineGrained's boundaries) with measure (Plan.Time
// on Profiled's feeds) and rescales each layer's ops so that they cost what
// the layer measured, in the proportions the model gives them; that also
// finds the heaviest layer and its share of the time. Then it cuts by the
// costs, times the plan, rescales each stage's ops by how much its measured
// time differs from its modelled one, and cuts again, until no stage is
// more than maxSpread above the mean or the rounds run out, nudges the
// boundaries of the slowest stage of the most even cut measured when that
// stage is more than nudgeAbove above the mean (always, when the stages
// share workers: OnWorkers; its workers then take the stages' place), and
// moves each cut to where it sends the fewest bytes (lighten). It returns
// that cut and its balance.
func profiled(a *analysis, cfg *config, costs []float64, measure func(*Plan) ([]StageTime, error)) ([]int, *Balance, error) {
	layers := a.fineCuts()
	a.assign(layers)
	heavy, share, err := calibrate(a, costs, measure)
	if err != nil {
		return nil, nil, err
	}
	var best []int
	var bestBal *Balance
	for round := 0; round < profileRounds; round++ {
		cuts, err := chooseCuts(a, cfg, costs)
		if err != nil {
			return nil, nil, err
		}
		a.assign(cuts)
		times, err := timeCut(a, costs, measure)
		if err != nil {
			return nil, nil, err
		}
		bal := cfg.measured(times)
		if bestBal == nil || bal.Spread < bestBal.Spread {
			best, bestBal = cuts, bal
		}
		if bal.Spread <= maxSpread {
			break
		}
		rescale(a, costs, times)
	}
	if bestBal.Spread > nudgeAbove || cfg.grouped() {
		if best, bestBal, err = nudge(a, cfg, costs, best, bestBal, measure); err != nil {
			return nil, nil, err
		}
	}
	if best, bestBal, err = lighten(a, cfg, costs, best, bestBal, measure); err != nil {
		return nil, nil, err
	}
	bestBal.Heaviest, bestBal.Share = heavy, share
	return best, bestBal, nil
}

// calibrate times the current assignment (one stage per layer) and
// rescales costs to it; it returns the heaviest stage's first op, named,
// and its share of the time.
func calibrate(a *analysis, costs []float64, measure func(*Plan) ([]StageTime, error)) (string, float64, error) {
	times, err := timeCut(a, costs, measure)
	if err != nil {
		return "", 0, err
	}
	rescale(a, costs, times)
	total, heavy := time.Duration(0), 0
	for s, t := range times {
		total += t.Total()
		if t.Total() > times[heavy].Total() {
			heavy = s
		}
	}
	if total <= 0 {
		return "", 0, nil
	}
	for q := range a.seq {
		if a.stageAt[q] == heavy {
			return describeOp(a.seq[q]), times[heavy].Total().Seconds() / total.Seconds(), nil
		}
	}
	return "", 0, nil
}

// timeCut builds the plan of the current assignment and measures it.
func timeCut(a *analysis, costs []float64, measure func(*Plan) ([]StageTime, error)) ([]StageTime, error) {
	plan, err := assemble(a, costs)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	times, err := measure(plan)
	return times, errors.Wrap(err, "graphsplit: Profiled")
}

// rescale makes each stage's ops cost what the stage measured, in the
// proportions costs gives them.
func rescale(a *analysis, costs []float64, times []StageTime) {
	model := make([]float64, len(times))
	for q := range a.seq {
		model[a.stageAt[q]] += costs[q]
	}
	for q := range a.seq {
		if s := a.stageAt[q]; model[s] > 0 {
			costs[q] *= times[s].Total().Seconds() / model[s]
		}
	}
}

// nudge improves a measured cut by local search: it moves a boundary of
// the slowest stage (of a stage of the busiest worker, OnWorkers) by one
// candidate position towards a neighbour, times the result, and keeps it
// if the slowest stage (the busiest worker) got faster, until no move
// helps or 2P moves have been tried. Rescaling costs by stage cannot tell
// which op of a stage is heavy; this finds the boundary next to it. At
// layer boundaries (FineGrained's unit), a convolution's layer may start
// at its im2col (where the cuts are chosen: atIm2col) or, unless the
// stages talk over a network (OverNetwork), at its product, which sends
// kh·kw times the bytes but splits the work the two do as one kernel: the
// CNN's conv2 is 56 % of its time, and its 2 stages measured 1.29× the
// mean cut before the im2col, 1.07–1.09× cut before the product.
func nudge(a *analysis, cfg *config, costs []float64, cuts []int, bal *Balance, measure func(*Plan) ([]StageTime, error)) ([]int, *Balance, error) {
	var candidates []int
	switch {
	case cfg.grouped():
		candidates = a.placedCuts(cfg)
	case cfg.fine:
		fine := a.fineCuts()
		candidates = a.atIm2col(fine)
		if !cfg.network {
			candidates = append(candidates, fine...)
			slices.Sort(candidates)
			candidates = slices.Compact(candidates)
		}
	default:
		for q := 1; q < len(a.seq); q++ {
			candidates = append(candidates, q)
		}
	}
	for tries := 0; tries < 2*len(bal.Times); {
		improved := false
		for _, move := range slowMoves(cfg, bal.Times) {
			if move.cut < 0 || move.cut >= len(cuts) {
				continue
			}
			next := shift(cuts, move.cut, move.dir, candidates)
			if next == nil {
				continue
			}
			tries++
			was, now, err := compare(a, cfg, costs, cuts, next, measure)
			if err != nil {
				return nil, nil, err
			}
			bal = was
			if cfg.heaviest(now.Times) < cfg.heaviest(was.Times) {
				cuts, bal, improved = next, now, true
				break
			}
		}
		if !improved {
			break
		}
	}
	return cuts, bal, nil
}

// compareRuns is how many times compare measures each of the two cuts.
const compareRuns = 3

// compare measures the plans cut at x and at y in turn, compareRuns times
// each (x y x y …, so that a machine whose speed drifts under the
// measurement slows both alike), and returns the balance of each one's
// run whose busiest worker (slowest stage) is the median of its runs.
func compare(a *analysis, cfg *config, costs []float64, x, y []int, measure func(*Plan) ([]StageTime, error)) (*Balance, *Balance, error) {
	runs := [2][][]StageTime{}
	for range compareRuns {
		for k, cuts := range [2][]int{x, y} {
			a.assign(cuts)
			times, err := timeCut(a, costs, measure)
			if err != nil {
				return nil, nil, err
			}
			runs[k] = append(runs[k], times)
		}
	}
	median := func(rs [][]StageTime) *Balance {
		slices.SortStableFunc(rs, func(p, q []StageTime) int { return cmp.Compare(cfg.heaviest(p), cfg.heaviest(q)) })
		return cfg.measured(rs[len(rs)/2])
	}
	return median(runs[0]), median(runs[1]), nil
}

// move shifts cut number cut by one candidate position in direction dir.
type move struct{ cut, dir int }

// slowMoves are the moves that make the slowest stage, or each stage of
// the busiest worker (OnWorkers), lighter: its start later, its end
// earlier.
func slowMoves(cfg *config, times []StageTime) []move {
	t := totals(times)
	workers := cfg.assign(t)
	l := loads(t, workers)
	busiest := slices.Index(l, slices.Max(l))
	var out []move
	for s, w := range workers {
		if w == busiest {
			out = append(out, move{s - 1, +1}, move{s, -1})
		}
	}
	// A boundary between two stages of one worker moves no work off it.
	return slices.DeleteFunc(out, func(m move) bool {
		return m.cut >= 0 && m.cut+1 < len(workers) && workers[m.cut] == workers[m.cut+1]
	})
}

// shift moves cut i to the neighbouring candidate position in direction dir
// (±1), or returns nil when that would empty a stage.
func shift(cuts []int, i, dir int, candidates []int) []int {
	at := slices.Index(candidates, cuts[i])
	if at < 0 || at+dir < 0 || at+dir >= len(candidates) {
		return nil
	}
	to := candidates[at+dir]
	if (i > 0 && to <= cuts[i-1]) || (i+1 < len(cuts) && to >= cuts[i+1]) {
		return nil
	}
	next := slices.Clone(cuts)
	next[i] = to
	return next
}

// describeOp names an op node for a message: its name and op.
func describeOp(n *gorgonia.Node) string {
	return fmt.Sprintf("%s (%v)", n.Name(), n.Op())
}
