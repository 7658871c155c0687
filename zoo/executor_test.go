package zoo

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/exectest"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// zooFallbacks are the ops of each zoo model's stage programs (fine-grained,
// as the zoo trains them) that the executor still runs through Do at every
// run, allocating their output, and why: gorgonia's ops without a variant
// that writes into a given buffer, and scalar results (the cost and its
// gradient's first steps). Every zoo model has the scalar arithmetic of its
// mean cross-entropy, the sums of gorgonia's broadcast gradients and the
// reshape of the cost's gradient; the Transformers slice and concatenate
// their attention heads, and the tied one transposes the shared embedding.
// Without the stage ops (/userops) gorgonia's BatchNorm and MaxPool run as
// the tape runs them, and Conv2d transposes its output. A change to this
// list is a change to what a training step allocates.
var zooFallbacks = func() map[string][]string {
	every := []string{
		"gorgonia.elemBinOp: its result is a *gorgonia.F32",
		"gorgonia.elemUnaryOp: its result is a *gorgonia.F32",
		"gorgonia.reshapeOp: it has no variant that writes into a given buffer",
		"gorgonia.sizeOp: its result is a *gorgonia.F32",
		"gorgonia.sumOp: it has no variant that writes into a given buffer",
		"gorgonia.sumOp: its result is a *gorgonia.F32",
	}
	heads := append([]string{
		"*gorgonia.sliceOp: it has no variant that writes into a given buffer",
		"gorgonia.concatOp: it has no variant that writes into a given buffer",
	}, every...)
	transpose := "gorgonia.transposeOp: it has no variant that writes into a given buffer"
	userConv := append([]string{ // gorgonia's stateful ops, and Conv2d's transpose
		"*gorgonia.BatchNormOp: keeps state between runs",
		"*gorgonia.batchnormDiffOp: keeps state between runs",
		"*gorgonia.maxPoolOp: keeps state between runs",
		"*gorgonia.maxPoolDiffOp: keeps state between runs",
		transpose,
	}, every...)
	return map[string][]string{
		"mlp": every, "cnn": every, "resnet": every, "transformer": heads,
		"transformer-tied": append([]string{transpose}, heads...),
		// WithoutOpSubstitution
		"mlp/userops": every, "cnn/userops": userConv, "resnet/userops": userConv, "transformer/userops": heads,
		"transformer-tied/userops": append([]string{transpose}, heads...),
	}
}()

// TestExecutorOnZooModels: every program of every zoo model's stages
// (forward, train, keeping forward and backward) gives on the executor the
// bits gorgonia's tape machine gives, run after run on the embedded data
// (the buffers of the earlier runs reused), and the ops that still allocate
// at every run are zooFallbacks'.
func TestExecutorOnZooModels(t *testing.T) {
	for _, r := range Recipes() {
		for _, subs := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stageops=%v", r.Model, subs), func(t *testing.T) {
				if !subs && testutil.RaceEnabled {
					t.Skip("gorgonia's own ops in one goroutine, the slowest half under the race detector and nothing for it to check; go test ./... runs it")
				}
				executorOn(t, r, subs)
			})
		}
	}
}

func executorOn(t *testing.T, r Recipe, subs bool) {
	m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
	require.NoError(t, err)
	// Four minibatches; under the race detector two, which already reuse
	// every buffer the first allocated (the third and fourth add nothing
	// for it to check, at 20 s).
	runs := 4
	if testutil.RaceEnabled {
		runs = 2
	}
	train, _, err := r.Load("embedded", runs*m.Batch)
	require.NoError(t, err)
	pipe := exectest.New(t, m.Graph, m.Cost, m.Learnables, subs, 3)
	for k := range runs {
		idx := make([]int, m.Batch)
		for i := range idx {
			idx[i] = k*m.Batch + i
		}
		x, y := train.Batch(m, idx)
		pipe.Run(t, map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y})
	}
	var got []string
	for _, p := range pipe.Programs() {
		for _, o := range p.Ops() {
			require.NotEqual(t, "probing", o.How, "%v", o.Op)
			if o.How == "do" {
				got = append(got, fmt.Sprintf("%T: %s", o.Op, o.Why))
			}
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	key := r.Model
	if !subs {
		key += "/userops"
	}
	want := slices.Clone(zooFallbacks[key])
	slices.Sort(want)
	require.Equal(t, want, got)
}
