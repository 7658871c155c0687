package graphsplit

import (
	"slices"
	"time"

	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// StageTime is one stage's measured time for one microbatch: its forward
// program, and its backward — the Train program, which recomputes the
// forward from the stage's inputs, or the keeping backward, which reads
// what the keeping forward kept.
type StageTime struct {
	Forward  time.Duration `json:"forward_ns"`
	Backward time.Duration `json:"backward_ns"`
}

// Total is the stage's time per microbatch, forward and backward.
func (t StageTime) Total() time.Duration { return t.Forward + t.Backward }

// Time runs the plan on the one microbatch in feeds (a value for every
// data input, shaped as the graph's) the way a sequential pipeline does —
// every stage's forward in stage order, then every backward from the last
// stage — runs times after a first run that is not counted (it compiles
// the programs and sizes their buffers), and returns each stage's median
// forward and backward times. With keep, a stage that can keep its
// activations (CanKeep) runs its keeping programs, as a runtime keeping
// them does; otherwise it runs Forward and Train. With fuseLast, a last
// stage that runs Forward and Train is timed as a runtime runs it when its
// schedule puts each forward's backward right after it
// (schedule.FusesLast): its Train program alone, whose forward gives the
// cost (internal/stage's fused last stage), so that its forward time is
// that program's, both passes, and its backward 0. Without, it is timed as
// both programs, as for PipeMare, whose last stage runs the next forward
// first. The times are what this machine takes in this process, with the
// GOMAXPROCS it has.
//
// Time leaves the learnables and BatchNorm's running statistics as they
// were. Like any Run of the plan's programs, it must not run concurrently
// with another user of them.
func (p *Plan) Time(feeds map[*gorgonia.Node]gorgonia.Value, keep, fuseLast bool, runs int) (_ []StageTime, err error) {
	if runs < 1 {
		return nil, errors.Errorf("graphsplit: Time: %d runs; need at least one", runs)
	}
	inputs := make(gorgonia.Nodes, len(p.Feeds))
	for i, f := range p.Feeds {
		inputs[i] = f.Node
	}
	if err := checkFeeds(inputs, feeds); err != nil {
		return nil, errors.Wrap(err, "graphsplit: Time")
	}
	progs := make([][2]*Program, len(p.Stages))
	fused := false // the last stage runs its Train program alone
	for s := range p.Stages {
		fwd, bwd, kept, err := p.Programs(s, keep)
		if err != nil {
			return nil, err
		}
		if s == len(p.Stages)-1 {
			fused = fuseLast && !kept
		}
		if kept {
			defer fwd.Close()
			defer bwd.Close()
		}
		progs[s] = [2]*Program{fwd, bwd}
	}
	var bns []*gorgonia.BatchNormOp
	for _, st := range p.Stages {
		bns = append(bns, bnstate.Of(st.Stateful)...)
	}
	defer bnstate.Save(bns).Restore()
	fwd := make([][]time.Duration, len(p.Stages))
	bwd := make([][]time.Duration, len(p.Stages))
	for r := 0; r <= runs; r++ {
		if _, err := p.runOnce(feeds, progs, func(s int, backward bool, d time.Duration) {
			if r == 0 {
				return
			}
			if backward {
				bwd[s] = append(bwd[s], d)
			} else {
				fwd[s] = append(fwd[s], d)
			}
		}); err != nil {
			return nil, errors.Wrap(err, "graphsplit: Time")
		}
	}
	out := make([]StageTime, len(p.Stages))
	for s := range out {
		out[s] = StageTime{Forward: median(fwd[s]), Backward: median(bwd[s])}
	}
	if last := len(out) - 1; fused {
		out[last] = StageTime{Forward: out[last].Backward}
	}
	return out, nil
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// pass is one microbatch run through a plan: the cost and every
// learnable's gradient, in Plan.Learnables order.
type pass struct {
	cost  gorgonia.Value
	grads []gorgonia.Value
}

// runOnce runs one microbatch through the plan's stages in pipeline order
// with progs[s] = {forward, backward} programs of stage s (a stage's
// Forward and Train, or its keeping pair, which progs[s][0].Kept tells),
// calling timed (if not nil) with each program run's duration. Gradients
// of an activation read by several stages, and the contributions of every
// reader of a shared learnable, are summed, the last reader's first.
func (p *Plan) runOnce(feeds map[*gorgonia.Node]gorgonia.Value, progs [][2]*Program, timed func(s int, backward bool, d time.Duration)) (pass, error) {
	acts := make(map[int64]gorgonia.Value)
	for _, f := range p.Feeds {
		acts[f.Key] = feeds[f.Node]
	}
	inputs := make([][]gorgonia.Value, len(p.Stages)) // what each backward reads
	for s, st := range p.Stages {
		in := make([]gorgonia.Value, len(st.Inputs))
		for i, pt := range st.Inputs {
			in[i] = acts[pt.Key]
		}
		start := time.Now()
		res, err := progs[s][0].Run(in, nil)
		if timed != nil {
			timed(s, false, time.Since(start))
		}
		if err != nil {
			return pass{}, err
		}
		for i, pt := range st.Outputs {
			acts[pt.Key] = res.Outputs[i]
		}
		inputs[s] = in
		if progs[s][1].kind == "backward" { // a keeping backward
			inputs[s] = res.Kept
		}
	}
	gradOf := make(map[int64]gorgonia.Value)
	out := pass{cost: acts[p.Cost.ID()], grads: make([]gorgonia.Value, len(p.Learnables))}
	for s := len(p.Stages) - 1; s >= 0; s-- {
		st, bwd := p.Stages[s], progs[s][1]
		og := make([]gorgonia.Value, len(st.Outputs))
		for i, pt := range st.Outputs {
			switch {
			case bwd.OutputGrads[i] == nil:
			case pt.Kind == CostPort:
				og[i], _ = scalarOne(pt.Dtype)
			case gradOf[pt.Key] != nil:
				og[i] = gradOf[pt.Key]
			default: // no later stage has a gradient for it
				og[i] = tensor.New(tensor.WithShape(pt.Shape...), tensor.Of(pt.Dtype))
			}
		}
		start := time.Now()
		res, err := bwd.Run(inputs[s], og)
		if timed != nil {
			timed(s, true, time.Since(start))
		}
		if err != nil {
			return pass{}, err
		}
		for i, pt := range st.Inputs {
			gv := res.InputGrads[i]
			if gv == nil {
				continue
			}
			if prev := gradOf[pt.Key]; prev != nil {
				if gv, err = tensorutil.Sum(prev, gv); err != nil {
					return pass{}, errors.Wrapf(err, "summing the gradients of %s", pt.Name)
				}
			}
			gradOf[pt.Key] = gv
		}
		for i, gv := range res.LearnableGrads {
			j := st.LearnableIndex[i]
			if prev := out.grads[j]; prev != nil {
				if st.Shared[i] == nil {
					return pass{}, errors.Errorf("stage %d: learnable %s has a gradient from another stage but is not shared", s, p.Learnables[j].Name())
				}
				if gv, err = tensorutil.Sum(prev, gv); err != nil {
					return pass{}, errors.Wrapf(err, "summing the gradient of %s", p.Learnables[j].Name())
				}
			}
			out.grads[j] = gv
		}
	}
	return out, nil
}
