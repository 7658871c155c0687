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

// BenchmarkIm2Col times building the patch matrix (im2col) and adding its
// gradient back into the image's (col2im) for the zoo CNN's two
// convolutions at batch 16 and the ResNet's blocks' at batch 4, float32,
// on one goroutine:
//
//	go test -c -o stageops.test ./internal/stageops/
//	GOMAXPROCS=1 taskset -c 1 ./stageops.test -test.run '^$' -test.bench Im2Col -test.count 8
func BenchmarkIm2Col(b *testing.B) {
	defer SetWorkers(0)
	SetWorkers(1)
	for _, shape := range []tensor.Shape{{16, 1, 28, 28}, {16, 8, 14, 14}, {4, 16, 7, 7}} {
		rng := rand.New(rand.NewSource(1))
		x := randTensor(rng, tensor.Float32, shape, false)
		g := gorgonia.NewGraph()
		w := gorgonia.NewTensor(g, tensor.Float32, 4, gorgonia.WithShape(4, shape[1], 3, 3), gorgonia.WithName("w"))
		_, err := gorgonia.Conv2d(gorgonia.NodeFromAny(g, x), w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1})
		require.NoError(b, err)
		var icOp gorgonia.Op
		for _, n := range g.AllNodes() {
			if n.Op() != nil && fmt.Sprintf("%T", n.Op()) == "gorgonia.im2colOp" {
				icOp = n.Op()
			}
		}
		ic, err := NewIm2Col(icOp, shape)
		require.NoError(b, err)
		dp := randTensor(rng, tensor.Float32, ic.Shape(), false)
		for _, back := range []bool{false, true} {
			b.Run(fmt.Sprintf("%v/back=%v", shape, back), func(b *testing.B) {
				in, out := x, tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(ic.Shape()...))
				if back {
					in, out = dp, tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape...))
				}
				cpu := testutil.StartCPU()
				for range b.N {
					if back {
						out.Zero()
					}
					if back {
						patches(out.Float32s(), in.Float32s(), ic, true)
					} else {
						patches(in.Float32s(), out.Float32s(), ic, false)
					}
				}
				cpu.ReportPerOp(b)
			})
		}
	}
}
