package stageops_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/internal/stageops"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A stage computes the user's BatchNorm (the op object gorgonia.BatchNorm
// returned, whose running statistics it updates) with its broadcast scale
// and bias and a Rectify in one op; the statistics are a node of their own,
// which a backward reads instead of state in the op: the mean and 1/σ per
// channel, and the scale and bias the forward applied. (Rectify gives −0 for
// negative values, as gorgonia's v·0 does.)
func ExampleBatchNorm_Apply() {
	// The user's model: only its BatchNorm op is used here.
	user := gorgonia.NewGraph()
	ux := gorgonia.NewMatrix(user, tensor.Float64, gorgonia.WithShape(4, 2), gorgonia.WithName("x"))
	_, _, _, op, err := gorgonia.BatchNorm(ux, nil, nil, 0.1, 1e-5)
	if err != nil {
		log.Fatal(err)
	}
	// The stage's graph.
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 2), gorgonia.WithName("x"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{1, -1, 2, -2, 3, -3, 4, -4}))))
	scale := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(1, 2), gorgonia.WithName("scale"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 2}))))
	bias := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(1, 2), gorgonia.WithName("bias"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{0, 0.5}))))
	bn := stageops.BatchNorm{Op: op, Scale: scale, Bias: bias, ScaleAxes: []int{0}, BiasAxes: []int{0}, ReLU: true}
	y, stats, err := bn.Apply(x)
	if err != nil {
		log.Fatal(err)
	}
	var yv, sv gorgonia.Value
	gorgonia.Read(y, &yv)
	gorgonia.Read(stats, &sv)
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("mean, 1/σ, scale, bias: %.3f\n", sv.Data())
	fmt.Printf("y: %.3f\n", yv.Data())
	mean, _ := op.Stats()
	fmt.Printf("running mean: %.3f\n", mean.Data())
	// Output:
	// mean, 1/σ, scale, bias: [2.500 -2.500 0.894 0.894 1.000 2.000 0.000 0.500]
	// y: [-0.000 3.183 -0.000 1.394 0.447 -0.000 1.342 -0.000]
	// running mean: [0.250 -0.250]
}
