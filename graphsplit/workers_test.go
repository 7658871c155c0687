package graphsplit

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// busiest is the most expensive worker of cuts under costs, every stage
// placed by pl on w workers: computed here from the stages' sums, not
// with the code under test.
func busiest(costs []float64, cuts []int, pl schedule.Placement, w int) float64 {
	bounds := append(append([]int{0}, cuts...), len(costs))
	stage := make([]float64, len(bounds)-1)
	for s := range stage {
		for q := bounds[s]; q < bounds[s+1]; q++ {
			stage[s] += costs[q]
		}
	}
	load := make([]float64, w)
	for s, c := range stage {
		load[pl.Worker(s, len(stage), w)] += c
	}
	return slices.Max(load)
}

// randomCosts are n whole costs from 1 to most.
func randomCosts(rng *rand.Rand, n, most int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(1 + rng.Intn(most))
	}
	return out
}

// everyCut calls f with every choice of k cut positions among 1..n−1.
func everyCut(n, k int, f func([]int)) {
	cur := make([]int, k)
	var walk func(i, from int)
	walk = func(i, from int) {
		if i == k {
			f(cur)
			return
		}
		for q := from; q <= n-(k-i); q++ {
			cur[i] = q
			walk(i+1, q+1)
		}
	}
	walk(0, 1)
}

func TestOnWorkersBalancesTheWorkers(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 60; trial++ {
		n := 5 + rng.Intn(14)
		costs := randomCosts(rng, n, 30)
		a := &analysis{seq: make([]*gorgonia.Node, n)} // any op may start a stage
		for _, c := range []struct {
			pl   schedule.Placement
			p, w int
		}{{schedule.VShape, 4, 2}, {schedule.RoundRobin, 4, 2}, {schedule.VShape, 6, 3}, {schedule.Contiguous, 4, 2}} {
			if c.p > n {
				continue
			}
			alone := config{stages: c.p, setStages: true}
			stagesOnly, err := chooseCuts(a, &alone, costs)
			require.NoError(t, err)
			cfg := alone
			cfg.place, cfg.workers = c.pl, c.w
			cuts, err := chooseCuts(a, &cfg, costs)
			require.NoError(t, err)
			require.Len(t, cuts, c.p-1)
			require.True(t, slices.IsSorted(cuts) && cuts[0] > 0 && cuts[len(cuts)-1] < n, "cuts %v of %d ops", cuts, n)
			best := busiest(costs, stagesOnly, c.pl, c.w)
			everyCut(n, c.p-1, func(try []int) { best = min(best, busiest(costs, try, c.pl, c.w)) })
			got := busiest(costs, cuts, c.pl, c.w)
			require.Equal(t, best, got, "%v on %d workers, %d ops %v: cut %v", c.pl, c.w, n, costs, cuts)
			require.LessOrEqual(t, got, busiest(costs, stagesOnly, c.pl, c.w), "never worse than balancing the stages")
		}
	}
}

// With more cuts than it tries one by one, balanceWorkers moves one cut at
// a time: it ends where no single move makes the busiest worker lighter.
func TestOnWorkersSearchEndsAtALocalBest(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	n, p, w := 60, 8, 4
	require.Greater(t, binomial(n-1, p-1), maxEnumerated, "the test needs the one-move search")
	costs := randomCosts(rng, n, 50)
	a := &analysis{seq: make([]*gorgonia.Node, n)}
	cfg := config{stages: p, setStages: true, place: schedule.VShape, workers: w}
	start, err := balanceAt(a.placedCuts(&config{}), costs, p, "")
	require.NoError(t, err)
	cuts := a.balanceWorkers(&cfg, costs, start)
	got := busiest(costs, cuts, schedule.VShape, w)
	require.LessOrEqual(t, got, busiest(costs, start, schedule.VShape, w))
	for i := range cuts {
		for q := 1; q < n; q++ {
			if (i > 0 && q <= cuts[i-1]) || (i+1 < len(cuts) && q >= cuts[i+1]) {
				continue
			}
			try := slices.Clone(cuts)
			try[i] = q
			require.GreaterOrEqual(t, busiest(costs, try, schedule.VShape, w), got, "moving cut %d of %v to %d", i, cuts, q)
		}
	}
}

// A cut OnWorkers may choose keeps every stage op whole: each kernel a
// stage computes when the graph is one stage is computed the same way
// when it is cut there; the positions it leaves out would split one.
func TestOnWorkersKeepsStageOpsWhole(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	a, err := analyze(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	a.substitute = true
	kernels := func(cuts []int) map[int]int { // each substitution's root's position, with how many ops it covers
		a.assign(cuts)
		out := make(map[int]int)
		for s := 0; s < a.nStages; s++ {
			st := &Stage{Index: s}
			for _, n := range a.seq {
				if a.stage(n) == s {
					st.Nodes = append(st.Nodes, n)
				}
			}
			for _, sub := range findSubstitutions(a, st) {
				out[a.pos[sub.root]] = 1 + len(sub.absorbed)
			}
		}
		return out
	}
	whole := kernels(nil)
	cfg := config{stages: 2, setStages: true, fine: true, workers: 1}
	allowed := a.placedCuts(&cfg)
	require.NotEmpty(t, allowed)
	for _, q := range allowed {
		require.Equal(t, whole, kernels([]int{q}), "a cut before op %d (%s)", q, describeOp(a.seq[q]))
	}
	a.substitute = false // the positions a layer's ops reach, none left out
	reached := a.placedCuts(&cfg)
	a.substitute = true
	split := 0
	for _, q := range reached {
		if !slices.Contains(allowed, q) {
			split++
			require.NotEqual(t, whole, kernels([]int{q}), "op %d (%s) was left out", q, describeOp(a.seq[q]))
		}
	}
	require.Positive(t, split, "some positions a layer's ops reach split a kernel (its BatchNorm and ReLU)")
}

func TestOnWorkersRefusesWhatItCannotPlace(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 2)
	require.NoError(t, err)
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{OnWorkers(schedule.VShape, 2)}, "give Stages"},
		{[]Option{Stages(3), OnWorkers(schedule.VShape, 2)}, "3 stages do not divide among 2"},
		{[]Option{Stages(2), OnWorkers(schedule.Contiguous, 3)}, "2 stages need 1 to 2 workers"},
		{[]Option{Stages(2), OnWorkers(schedule.Contiguous, 0)}, "2 stages need 1 to 2 workers"},
		{[]Option{Stages(2), OnWorkers(schedule.Contiguous, 2)}, ""}, // a worker per stage: as Stages alone
		{[]Option{CutAtOps(2), OnWorkers(schedule.VShape, 1)}, "cut points already fix the stages"},
	} {
		plan, err := Split(m.Graph, m.Cost, m.Learnables, c.opts...)
		if c.want == "" {
			require.NoError(t, err)
			require.NoError(t, plan.Close())
			continue
		}
		require.ErrorContains(t, err, c.want)
	}
}

// Profiled measures workers: its balance is the busiest worker's time
// over their mean, and says which worker runs each stage.
func TestProfiledOnWorkersMeasuresTheWorkers(t *testing.T) {
	a := mlpAnalysis(t)
	n := len(a.seq)
	require.GreaterOrEqual(t, n, 4)
	truth := make([]float64, n) // every op 1 ms, the first n/2 ops 3 ms
	costs := make([]float64, n) // the model thinks them equal
	for q := range truth {
		truth[q], costs[q] = 1, 1
		if q < n/2 {
			truth[q] = 3
		}
	}
	cfg := config{stages: 4, setStages: true, place: schedule.VShape, workers: 2}
	cuts, bal, err := profiled(a, &cfg, costs, measuredAs(a, truth))
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 1, 0}, bal.Workers)
	got := busiest(truth, cuts, schedule.VShape, 2)
	best := got
	everyCut(n, 3, func(try []int) { best = min(best, busiest(truth, try, schedule.VShape, 2)) })
	total := 0.0
	for _, c := range truth {
		total += c
	}
	require.InDelta(t, got/(total/2), bal.Spread, 1e-9, "the spread is the busiest worker's")
	if best <= maxSpread*total/2 {
		require.LessOrEqual(t, got, maxSpread*total/2, "a cut within 10 %% of the workers' mean exists: one is found (cut %v)", cuts)
	}
}
