package stageops

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkBatchNorm times the fused BatchNorm's kernels (statistics,
// forward, and the gradients of x, scale and bias), with scale, bias and
// ReLU, for the zoo CNN's two BatchNorms at batch 16, float32, on one
// goroutine:
//
//	go test -c -o stageops.test ./internal/stageops/
//	GOMAXPROCS=1 taskset -c 1 ./stageops.test -test.run '^$' -test.bench BatchNorm -test.count 8
func BenchmarkBatchNorm(b *testing.B) {
	defer SetWorkers(0)
	SetWorkers(1)
	for _, shape := range []tensor.Shape{{16, 8, 28, 28}, {16, 16, 14, 14}} {
		rng := rand.New(rand.NewSource(1))
		c := shape[1]
		g := gorgonia.NewGraph()
		x := input(g, "x", randTensor(rng, tensor.Float32, shape, false))
		scale := input(g, "scale", randTensor(rng, tensor.Float32, tensor.Shape{1, c, 1, 1}, false))
		bias := input(g, "bias", randTensor(rng, tensor.Float32, tensor.Shape{1, c, 1, 1}, false))
		_, _, _, op, err := gorgonia.BatchNorm(x, scale, bias, 0.1, 1e-5)
		require.NoError(b, err)
		g2 := gorgonia.NewGraph()
		x2 := input(g2, "x", x.Value().(*tensor.Dense))
		bn := BatchNorm{Op: op, ReLU: true, Scale: input(g2, "scale", scale.Value().(*tensor.Dense)), Bias: input(g2, "bias", bias.Value().(*tensor.Dense)),
			ScaleAxes: []int{0, 2, 3}, BiasAxes: []int{0, 2, 3}}
		y, _, err := bn.Apply(x2)
		require.NoError(b, err)
		r := gorgonia.NewConstant(randTensor(rng, tensor.Float32, shape, false), gorgonia.WithName("r"))
		cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(y, g2.AddNode(r)))))
		_, err = gorgonia.Grad(cost, x2, bn.Scale, bn.Bias)
		require.NoError(b, err)
		vm := gorgonia.NewTapeMachine(g2)
		require.NoError(b, vm.RunAll())
		vm.Close()
		for _, n := range g2.AllNodes() {
			var name string
			switch o := n.Op().(type) {
			case *bnStats:
				name = "stats"
			case *bnApply:
				name = "forward"
			case *bnGrad:
				name = [...]string{gradX: "dx", gradScale: "dscale", gradBias: "dbias"}[o.what]
			default:
				continue
			}
			op := n.Op().(interface {
				UsePreallocDo(gorgonia.Value, ...gorgonia.Value) (gorgonia.Value, error)
			})
			var in []gorgonia.Value
			for it := g2.From(n.ID()); it.Next(); { // its inputs, in order
				in = append(in, it.Node().(*gorgonia.Node).Value())
			}
			out := n.Value()
			b.Run(fmt.Sprintf("%v/%s", shape, name), func(b *testing.B) {
				cpu := testutil.StartCPU()
				for range b.N {
					if _, err := op.UsePreallocDo(out, in...); err != nil {
						b.Fatal(err)
					}
				}
				cpu.ReportPerOp(b)
			})
		}
	}
}
