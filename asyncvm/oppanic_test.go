package asyncvm_test

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"testing"

	"github.com/chewxy/hm"
	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// panicky is an identity op that panics in Do (inForward), or whose
// gradient is computed by an op that panics in Do (not inForward): a user's
// buggy op. Gorgonia runs ops in the tape machine's own goroutine, where a
// panic used to end the process.
type panicky struct{ inForward bool }

func (op panicky) Arity() int { return 1 }
func (op panicky) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (op panicky) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return ds[0].(tensor.Shape).Clone(), nil
}
func (op panicky) Do(v ...G.Value) (G.Value, error) {
	if op.inForward {
		panic(fmt.Sprintf("user op bug (forward %v)", op.inForward))
	}
	return v[0].(tensor.Tensor).Clone().(G.Value), nil
}
func (op panicky) ReturnsPtr() bool      { return false }
func (op panicky) CallsExtern() bool     { return false }
func (op panicky) OverwritesInput() int  { return -1 }
func (op panicky) WriteHash(h hash.Hash) { fmt.Fprintf(h, "panicky%v", op.inForward) }
func (op panicky) Hashcode() uint32 {
	if op.inForward {
		return 0x9a11
	}
	return 0x9a12
}
func (op panicky) String() string     { return fmt.Sprintf("panicky(%v)", op.inForward) }
func (op panicky) DiffWRT(int) []bool { return []bool{true} }
func (op panicky) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	n, err := G.ApplyOp(panicky{inForward: true}, grad)
	return G.Nodes{n}, err
}

// panickyModel is three tanh layers x·W₁ → x·W₂ → x·W₃ → mean square
// error, with op panicky applied after layer bad; FineGrained cuts it into
// three stages, the op in stage bad.
func panickyModel(t *testing.T, bad int, inForward bool) (*graphsplit.Plan, G.Nodes) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("y"))
	h := x
	var learnables G.Nodes
	for l := 0; l < 3; l++ {
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName(fmt.Sprintf("w%d", l)), G.WithInit(G.GlorotU(1)))
		learnables = append(learnables, w)
		h = G.Must(G.Tanh(G.Must(G.Mul(h, w))))
		if l == bad {
			var err error
			h, err = G.ApplyOpWithName(panicky{inForward}, "the-buggy-op", h)
			require.NoError(t, err)
		}
	}
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(h, y))))))
	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	require.Len(t, plan.Stages, 3)
	return plan, G.Nodes{x, y}
}

// TestPanickingOpIsAStageError: an op that panics in Do, in the forward or in
// the backward, in each stage, under every schedule, recomputing or stashing
// activations, makes Step or Flush return a *StageError naming that stage
// and the node, and Close stops every goroutine; Evaluate reports a
// forward's panic the same way.
func TestPanickingOpIsAStageError(t *testing.T) {
	const n0 = 2
	ctx := context.Background()
	minibatch := func(in G.Nodes, n, k int) map[*G.Node]G.Value {
		feeds := map[*G.Node]G.Value{}
		for i, node := range in {
			d := make([]float64, n*4*3)
			for j := range d {
				d[j] = float64((j+k+i)%7)/7 - 0.4
			}
			feeds[node] = tensor.New(tensor.WithShape(n*4, 3), tensor.WithBacking(d))
		}
		return feeds
	}
	for _, s := range schedule.All() {
		for _, acts := range []struct {
			a    asyncvm.Activations
			name string
		}{{asyncvm.Recompute, "recompute"}, {asyncvm.Keep, "stash"}} {
			for bad := 0; bad < 3; bad++ {
				for _, inForward := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s/%s/stage%d/forward=%v", s.Name, acts.name, bad, inForward), func(t *testing.T) {
						defer goleak.VerifyNone(t)
						plan, in := panickyModel(t, bad, inForward)
						n := max(n0, schedule.MinN(s, len(plan.Stages)))
						if err := schedule.Check(s, len(plan.Stages), n); err != nil {
							t.Skip(err) // e.g. two stages per worker on an odd number of stages
						}
						vm, err := asyncvm.New(plan, asyncvm.WithSchedule(s), asyncvm.WithMicrobatches(n), asyncvm.WithActivations(acts.a))
						require.NoError(t, err)
						defer vm.Close()
						for k := 0; k < 3 && err == nil; k++ {
							_, err = vm.Step(ctx, minibatch(in, n, k))
						}
						if err == nil {
							err = vm.Flush(ctx)
						}
						require.Error(t, err)
						var se *asyncvm.StageError
						require.True(t, errors.As(err, &se), "%v", err)
						require.Equal(t, bad, se.Stage, "%v", err)
						want := schedule.OpForward
						if !inForward {
							want = schedule.OpBackward
							if s.Split {
								want = schedule.OpInput // the half that runs the input gradient
								if bad == 0 {
									// I and W run the backward's two halves (recomputing,
									// I runs the forward again first); stage 0 sends
									// no input gradient: W runs all of its backward.
									want = schedule.OpWeight
								}
							}
						}
						require.Equal(t, want, se.Action.Op, "%v", err)
						require.ErrorContains(t, err, fmt.Sprintf("stage %d", bad))
						require.ErrorContains(t, err, "user op bug")
						if inForward {
							require.ErrorContains(t, err, `node "the-buggy-op"`)
						} else {
							require.ErrorContains(t, err, "the backward pass (towards the gradient of node")
						}
						require.NoError(t, vm.Close())
					})
				}
			}
		}
	}
	t.Run("Evaluate", func(t *testing.T) {
		defer goleak.VerifyNone(t)
		plan, in := panickyModel(t, 1, true)
		vm, err := asyncvm.New(plan)
		require.NoError(t, err)
		defer vm.Close()
		_, err = vm.Evaluate(ctx, minibatch(in, n0, 0))
		require.ErrorContains(t, err, "stage 1")
		require.ErrorContains(t, err, `op panicky(true) of node "the-buggy-op" panicked: user op bug`)
		require.NoError(t, vm.Close())
	})
}
