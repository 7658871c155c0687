package exectest

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Pipeline runs a plan's stages, one microbatch at a time, on the
// executor and on the tape: each stage's Forward, its Train and, where it
// can keep, its keeping programs (built once, so that their buffers carry
// over from run to run), on the activations the tape computed before it.
type Pipeline struct {
	Plan     *graphsplit.Plan
	keepings map[int]*graphsplit.Keeping
	rng      *rand.Rand
	runs     int
}

// New splits a model fine-grained (with the stage ops, or without:
// graphsplit.WithoutOpSubstitution) and returns a Pipeline over the plan
// whose output gradients are drawn from seed. The plan and the keeping
// programs are released when the test ends.
func New(t *testing.T, g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes, stageOps bool, seed int64) *Pipeline {
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if !stageOps {
		opts = append(opts, graphsplit.WithoutOpSubstitution())
	}
	plan, err := graphsplit.Split(g, cost, learnables, opts...)
	require.NoError(t, err)
	p := &Pipeline{Plan: plan, keepings: map[int]*graphsplit.Keeping{}, rng: rand.New(rand.NewSource(seed))}
	t.Cleanup(func() {
		for _, k := range p.keepings {
			k.Forward.Close()
			k.Backward.Close()
		}
		plan.Close()
	})
	return p
}

// Run runs one microbatch of feeds through every program of every stage on
// both and requires the same bits in every output, gradient and kept
// tensor, and in the BatchNorm statistics after each run.
func (p *Pipeline) Run(t *testing.T, feeds map[*gorgonia.Node]gorgonia.Value) {
	t.Helper()
	p.runs++
	acts := make(map[int64]gorgonia.Value)
	for _, f := range p.Plan.Feeds {
		acts[f.Key] = feeds[f.Node]
	}
	for _, st := range p.Plan.Stages {
		in := make([]gorgonia.Value, len(st.Inputs))
		for i, port := range st.Inputs {
			in[i] = acts[port.Key]
		}
		grads := make([]gorgonia.Value, len(st.Outputs))
		for i, gph := range st.Train.OutputGrads {
			switch {
			case gph == nil:
			case st.Outputs[i].Kind == graphsplit.CostPort:
				one, err := tensorutil.ScalarOf(gph.Dtype(), 1)
				require.NoError(t, err)
				grads[i] = one
			default:
				grads[i] = p.random(gph.Dtype(), gph.Shape())
			}
		}
		where := fmt.Sprintf("run %d, stage %d", p.runs, st.Index)
		fwd := Same(t, st, st.Forward, in, nil, where+" forward")
		Same(t, st, st.Train, in, grads, where+" train")
		if p.Plan.CanKeep(st.Index) {
			k, ok := p.keepings[st.Index]
			if !ok {
				var err error
				k, err = p.Plan.NewKeeping(st.Index)
				require.NoError(t, err)
				p.keepings[st.Index] = k
			}
			kept := Same(t, st, k.Forward, in, nil, where+" keeping forward")
			Same(t, st, k.Backward, kept.Kept, grads, where+" keeping backward")
		}
		for i, port := range st.Outputs {
			acts[port.Key] = fwd.Outputs[i]
		}
	}
}

// Programs are the programs the pipeline ran: every stage's Forward and
// Train, and the keeping programs it built.
func (p *Pipeline) Programs() []*graphsplit.Program {
	var out []*graphsplit.Program
	for _, st := range p.Plan.Stages {
		out = append(out, st.Forward, st.Train)
		if k, ok := p.keepings[st.Index]; ok {
			out = append(out, k.Forward, k.Backward)
		}
	}
	return out
}

// Same runs program prog of stage st on the executor and on the tape (from
// the same BatchNorm statistics) and requires the same bits in every
// result and in the statistics after; it returns the tape's result, which
// is the caller's.
func Same(t *testing.T, st *graphsplit.Stage, prog *graphsplit.Program, in, grads []gorgonia.Value, where string) graphsplit.Result {
	t.Helper()
	bns := bnstate.Of(st.Stateful)
	require.NoError(t, prog.Compile()) // compiling zeroes the statistics
	before := bnstate.Save(bns)
	got, err := prog.Run(in, grads)
	require.NoError(t, err, where)
	got, err = got.Clone()
	require.NoError(t, err)
	after := bnstate.Save(bns)
	before.Restore()
	want, err := prog.RunOnTape(in, grads)
	require.NoError(t, err, where)
	for _, c := range []struct {
		what      string
		got, want []gorgonia.Value
	}{
		{"output", got.Outputs, want.Outputs}, {"input gradient", got.InputGrads, want.InputGrads},
		{"learnable gradient", got.LearnableGrads, want.LearnableGrads}, {"kept tensor", got.Kept, want.Kept},
	} {
		require.Len(t, c.got, len(c.want), "%s: %ss", where, c.what)
		for i := range c.want {
			SameBits(t, c.want[i], c.got[i], fmt.Sprintf("%s: %s %d", where, c.what, i))
		}
	}
	for i, s := range bnstate.Save(bns).Tensors() {
		SameBits(t, s, after.Tensors()[i], fmt.Sprintf("%s: BatchNorm statistics %d", where, i))
	}
	return want
}

// SameBits requires got to be want: nil for nil, else the same shape and
// elements.
func SameBits(t *testing.T, want, got gorgonia.Value, what string) {
	t.Helper()
	if want == nil || got == nil {
		require.Equal(t, want == nil, got == nil, what)
		return
	}
	require.Equal(t, want.Shape(), got.Shape(), what)
	require.Equal(t, want.Data(), got.Data(), what)
}

func (p *Pipeline) random(dt tensor.Dtype, shape tensor.Shape) gorgonia.Value {
	t := tensorutil.Zeros(dt, shape.Clone())
	switch d := t.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = float32(p.rng.NormFloat64())
		}
	case []float64:
		for i := range d {
			d[i] = p.rng.NormFloat64()
		}
	}
	return t
}
