package graphsplit

import (
	"slices"

	"gorgonia.org/gorgonia"
)

// lightenSlack is how much slower, at most, lighten lets the slowest stage
// of a measured plan become for a cut that sends fewer bytes: Plan.Time
// measures computing only, and what a cut sends costs its stages copying,
// and in stage processes encoding and the network.
const lightenSlack = 1.05

// lighten moves each cut of a measured plan to where the fewest bytes of
// activations cross it, among the positions it reaches by moving only
// ops that read no learnable (so every learnable, and with it every
// weight's delay, stays in its stage): a convolution's im2col, a ReLU, a
// max-pool sit between two layers' weights, and the cut before the
// second layer's weights sends the im2col's patches, 9 times the pooled
// map for 3×3 filters. It times the plan with each move, in turn with
// the plan before it (compare), and keeps the move unless the slowest
// stage (the busiest worker, OnWorkers) became slower than lightenSlack
// times the slowest before it: than the slowest before it, for stages in
// one process (InOneProcess), where what a cut sends costs nothing.
func lighten(a *analysis, cfg *config, costs []float64, cuts []int, bal *Balance, measure func(*Plan) ([]StageTime, error)) ([]int, *Balance, error) {
	slack := lightenSlack
	if cfg.oneProcess {
		slack = 1
	}
	for i := range cuts {
		lo, hi := 1, len(a.seq)-1 // the positions cut i may take
		if i > 0 {
			lo = cuts[i-1] + 1
		}
		if i+1 < len(cuts) {
			hi = cuts[i+1] - 1
		}
		to, least := cuts[i], a.crossing(cuts[i])
		for q := cuts[i] - 1; q >= lo && !a.readsLearnable(q); q-- { // ops moved to the later stage
			if b := a.crossing(q); b < least {
				to, least = q, b
			}
		}
		for q := cuts[i] + 1; q <= hi && !a.readsLearnable(q-1); q++ { // ops moved to the earlier stage
			if b := a.crossing(q); b < least {
				to, least = q, b
			}
		}
		if to == cuts[i] {
			continue
		}
		next := slices.Clone(cuts)
		next[i] = to
		was, now, err := compare(a, cfg, costs, cuts, next, measure)
		if err != nil {
			return nil, nil, err
		}
		bal = was
		if cfg.heaviest(now.Times) <= slack*cfg.heaviest(was.Times) {
			cuts, bal = next, now
		}
	}
	return cuts, bal, nil
}

// readsLearnable reports whether the op at position p reads a learnable,
// or a value computed from learnables only.
func (a *analysis) readsLearnable(p int) bool {
	for _, c := range a.children(a.seq[p]) {
		if _, ok := a.learn[c]; ok {
			return true
		}
		if q, ok := a.pos[c]; ok && a.paramOnly(q) {
			return true
		}
	}
	return false
}

// crossing is the bytes of the activations a cut before position q sends:
// the values of ops before q that depend on data and that an op at q or
// after reads.
func (a *analysis) crossing(q int) int64 {
	var bytes int64
	seen := make(map[*gorgonia.Node]bool)
	for _, n := range a.seq[q:] {
		for _, c := range a.children(n) {
			p, ok := a.pos[c]
			if !ok || p >= q || !a.dataDep[c] || seen[c] {
				continue
			}
			seen[c] = true
			bytes += int64(c.Shape().TotalSize()) * int64(c.Dtype().Size())
		}
	}
	return bytes
}
