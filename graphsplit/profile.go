package graphsplit

import (
	"sort"
	"time"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MeasuredCost prices each op by the median wall time of its Do, measured by
// Profiled. Ops it has no figure for cost nothing.
type MeasuredCost map[*gorgonia.Node]time.Duration

// OpCost returns the measured seconds of n.
func (m MeasuredCost) OpCost(n *gorgonia.Node) float64 { return m[n].Seconds() }

// profileRuns is how many times each op is timed; the median is kept.
const profileRuns = 5

// measure evaluates the graph op by op on feeds and the learnables' values,
// timing each op's Do. BatchNorm running statistics are saved and restored,
// so profiling leaves the model as it was.
func measure(a *analysis, feeds map[*gorgonia.Node]gorgonia.Value) (MeasuredCost, error) {
	vals := make(map[*gorgonia.Node]gorgonia.Value)
	for _, f := range a.feeds {
		v, ok := feeds[f]
		if !ok {
			return nil, errors.Errorf("graphsplit: Profiled: no value for data input %q", f.Name())
		}
		if err := checkValue(f, v); err != nil {
			return nil, errors.Wrapf(err, "graphsplit: Profiled: data input %q", f.Name())
		}
		vals[f] = v
	}
	for l := range a.learn {
		vals[l] = l.Value()
	}
	type stats struct {
		op         *gorgonia.BatchNormOp
		mean, vari tensor.Tensor
	}
	var saved []stats
	defer func() {
		for _, s := range saved {
			_ = s.op.SetStats(s.mean, s.vari)
		}
	}()
	out := make(MeasuredCost, len(a.seq))
	var eval func(n *gorgonia.Node) (gorgonia.Value, error)
	eval = func(n *gorgonia.Node) (gorgonia.Value, error) {
		if v, ok := vals[n]; ok {
			return v, nil
		}
		if isConstant(n) {
			return n.Value(), nil
		}
		kids := a.children(n)
		in := make([]gorgonia.Value, len(kids))
		for i, c := range kids {
			v, err := eval(c)
			if err != nil {
				return nil, err
			}
			in[i] = v
		}
		if bn, ok := n.Op().(*gorgonia.BatchNormOp); ok {
			m, v := bn.Stats()
			saved = append(saved, stats{bn, m.Clone().(tensor.Tensor), v.Clone().(tensor.Tensor)})
		}
		var times []time.Duration
		var v gorgonia.Value
		runs := profileRuns
		if _, ok := a.pos[n]; !ok {
			runs = 1 // replicable: not priced
		}
		for r := 0; r < runs; r++ {
			args := make([]gorgonia.Value, len(in))
			for i, x := range in { // Do may reuse its inputs: give it copies
				c, err := gorgonia.CloneValue(x)
				if err != nil {
					return nil, errors.Wrapf(err, "graphsplit: Profiled: node %q", n.Name())
				}
				args[i] = c
			}
			start := time.Now()
			res, err := n.Op().Do(args...)
			times = append(times, time.Since(start))
			if err != nil {
				return nil, errors.Wrapf(err, "graphsplit: Profiled: op %v of node %q failed", n.Op(), n.Name())
			}
			v = res
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		if _, ok := a.pos[n]; ok {
			out[n] = times[len(times)/2]
		}
		vals[n] = v
		return v, nil
	}
	for _, n := range a.seq {
		if _, err := safeEval(eval, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func safeEval(eval func(*gorgonia.Node) (gorgonia.Value, error), n *gorgonia.Node) (v gorgonia.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: Profiled: op %v of node %q panicked: %v", n.Op(), n.Name(), r)
		}
	}()
	return eval(n)
}
