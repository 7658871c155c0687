package graphsplit

import (
	"sort"
	"time"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// MeasuredCost prices each op by the median wall time of its Do, measured by
// Profiled. Ops it has no figure for cost nothing.
type MeasuredCost map[*gorgonia.Node]time.Duration

// OpCost returns the measured seconds of n.
func (m MeasuredCost) OpCost(n *gorgonia.Node) float64 { return m[n].Seconds() }

// profileRuns is how many times each op is timed; the median is kept.
const profileRuns = 5

// measure evaluates the graph op by op on feeds and the learnables' values,
// timing each op's Do. BatchNorm running statistics are restored afterwards,
// so profiling leaves the model as it was.
func measure(a *analysis, feeds map[*gorgonia.Node]gorgonia.Value) (MeasuredCost, error) {
	in, err := newInterpreter(a, feeds)
	if err != nil {
		return nil, errors.Wrap(err, "graphsplit: Profiled")
	}
	defer in.restore()
	out := make(MeasuredCost, len(a.seq))
	in.around = func(n *gorgonia.Node, do func() (gorgonia.Value, error)) (gorgonia.Value, error) {
		var v gorgonia.Value
		times := make([]time.Duration, 0, profileRuns)
		for r := 0; r < profileRuns; r++ {
			start := time.Now()
			res, err := do()
			times = append(times, time.Since(start))
			if err != nil {
				return nil, err
			}
			v = res
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		out[n] = times[len(times)/2]
		return v, nil
	}
	for _, n := range a.seq {
		if _, err := in.eval(n); err != nil {
			return nil, errors.Wrap(err, "graphsplit: Profiled")
		}
	}
	return out, nil
}
