package asyncvm_test

import (
	"context"
	"fmt"
	"hash"
	"math"
	"sync/atomic"
	"testing"

	"github.com/chewxy/hm"
	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// counting is an identity op that counts the times it runs (Do: it has no
// variant that writes into a given buffer, so every run calls Do).
type counting struct{ runs *atomic.Int64 }

func (op counting) Arity() int { return 1 }
func (op counting) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (op counting) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return ds[0].(tensor.Shape).Clone(), nil
}
func (op counting) Do(v ...G.Value) (G.Value, error) {
	op.runs.Add(1)
	return v[0].(tensor.Tensor).Clone().(G.Value), nil
}
func (op counting) ReturnsPtr() bool      { return false }
func (op counting) CallsExtern() bool     { return false }
func (op counting) OverwritesInput() int  { return -1 }
func (op counting) WriteHash(h hash.Hash) { fmt.Fprint(h, "counting") }
func (op counting) Hashcode() uint32      { return 0xc0 }
func (op counting) String() string        { return "counting" }
func (op counting) DiffWRT(int) []bool    { return []bool{true} }
func (op counting) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad}, nil
}

// countingModel is two tanh layers x·W₁ → x·W₂ → mean square error, with
// op counting after each layer, cut into p stages (the counting op of
// layer l in stage l when p = 2).
func countingModel(t *testing.T, p int, runs []*atomic.Int64) (*graphsplit.Plan, G.Nodes) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("y"))
	h := x
	var learnables G.Nodes
	for l := 0; l < 2; l++ {
		init := make([]float64, 9)
		for i := range init {
			init[i] = float64((i*5+l)%9)/9 - 0.45
		}
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName(fmt.Sprintf("w%d", l)),
			G.WithValue(tensor.New(tensor.WithShape(3, 3), tensor.WithBacking(init))))
		learnables = append(learnables, w)
		h = G.Must(G.Tanh(G.Must(G.Mul(h, w))))
		var err error
		h, err = G.ApplyOpWithName(counting{runs[l]}, fmt.Sprintf("count%d", l), h)
		require.NoError(t, err)
	}
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(h, y))))))
	opts := []graphsplit.Option{graphsplit.Stages(p)}
	if p > 1 {
		opts = append(opts, graphsplit.FineGrained())
	}
	plan, err := graphsplit.Split(g, cost, learnables, opts...)
	require.NoError(t, err)
	require.Len(t, plan.Stages, p)
	return plan, G.Nodes{x, y}
}

// TestLastStageRunsEachForwardOnce: a last stage that recomputes runs each
// microbatch's forward once, not once for the loss and again before the
// backward, under the schedules whose last stage runs a backward right
// after its forward (or the input gradient of a split backward); the stages
// before it still recompute theirs. The
// losses and the weights are the same bits as when the stages keep their
// activations.
func TestLastStageRunsEachForwardOnce(t *testing.T) {
	ctx := context.Background()
	const n, steps = 2, 3
	minibatch := func(in G.Nodes, k int) map[*G.Node]G.Value {
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
	type outcome struct {
		losses  []float64
		weights string
		runs    []int64
	}
	train := func(t *testing.T, p int, s schedule.Schedule, acts asyncvm.Activations) outcome {
		runs := []*atomic.Int64{{}, {}}
		plan, in := countingModel(t, p, runs)
		vm, err := asyncvm.New(plan, asyncvm.WithSchedule(s), asyncvm.WithMicrobatches(n), asyncvm.WithActivations(acts),
			asyncvm.WithSolver(momentumSolver))
		require.NoError(t, err)
		defer vm.Close()
		var o outcome
		for k := 0; k < steps; k++ {
			l, err := vm.Step(ctx, minibatch(in, k))
			require.NoError(t, err)
			o.losses = append(o.losses, l)
		}
		require.NoError(t, vm.Flush(ctx))
		o.weights, err = plan.WeightsSHA256()
		require.NoError(t, err)
		o.runs = []int64{runs[0].Load(), runs[1].Load()}
		return o
	}
	forwards := int64(n * steps)
	// PipeMare's last stage runs a forward ahead of each backward (F m+1
	// before B m), which reads weights updated since: it recomputes.
	for _, s := range []schedule.Schedule{schedule.Sequential(), schedule.OneFOneB(), schedule.ZBH1(), schedule.ZBH2()} {
		for _, p := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/P=%d", s.Name, p), func(t *testing.T) {
				kept := train(t, p, s, asyncvm.Keep)
				recomputed := train(t, p, s, asyncvm.Recompute)
				require.Equal(t, []int64{forwards, forwards}, kept.runs, "keeping: every forward once")
				want := []int64{2 * forwards, forwards} // stage 0 recomputes; the last stage does not
				if p == 1 {
					want = []int64{forwards, forwards}
				}
				require.Equal(t, want, recomputed.runs, "recomputing: the forwards of stages 0..%d", p-1)
				require.Equal(t, kept.weights, recomputed.weights)
				for k := range kept.losses {
					require.Equal(t, math.Float64bits(kept.losses[k]), math.Float64bits(recomputed.losses[k]), "step %d: %v against %v", k, recomputed.losses[k], kept.losses[k])
				}
			})
		}
	}
}
