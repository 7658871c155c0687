package asyncvm_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A model as a Gorgonia user writes it, at the microbatch size (4 rows).
func model() (g *G.ExprGraph, x, y, cost *G.Node, learnables G.Nodes) {
	g = G.NewGraph()
	x = G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	y = G.NewMatrix(g, tensor.Float64, G.WithShape(4, 1), G.WithName("y"))
	w1 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 8), G.WithName("w1"), G.WithValue(fill(3, 8, 0.1)))
	w2 := G.NewMatrix(g, tensor.Float64, G.WithShape(8, 1), G.WithName("w2"), G.WithValue(fill(8, 1, -0.2)))
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
	cost = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(h, w2)), y))))))
	return g, x, y, cost, G.Nodes{w1, w2}
}

func fill(r, c int, s float64) *tensor.Dense {
	d := make([]float64, r*c)
	for i := range d {
		d[i] = s * float64(i%5-2)
	}
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
}

// Train an existing model with the asynchronous schedule.PipeMare() pipeline: cut it in
// two stages, run 2 microbatches per minibatch, one Momentum solver
// per stage (solvers.NewMomentum: gorgonia's Momentum, bit for bit, whose
// state a checkpoint saves).
func Example() {
	graphsplit.UseFastBLAS() // once, before anything computes: the stage ops' BLAS, gonum's bits
	g, x, y, cost, learnables := model()
	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.Stages(2))
	if err != nil {
		log.Fatal(err)
	}
	vm, err := asyncvm.New(plan,
		asyncvm.WithSchedule(schedule.PipeMare()),
		asyncvm.WithMicrobatches(2),
		asyncvm.WithSolverFactory(func(stage int) (G.Solver, error) { // a new solver per stage
			return solvers.NewMomentum(solvers.WithLearnRate(0.05), solvers.WithMomentum(0.5))
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()

	// A minibatch is 2 microbatches of 4 rows: y = sum of x's columns.
	xs := tensor.New(tensor.WithShape(8, 3), tensor.WithBacking([]float64{
		1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0}))
	ys := tensor.New(tensor.WithShape(8, 1), tensor.WithBacking([]float64{1, 1, 1, 2, 2, 2, 3, 0}))
	ctx := context.Background()
	var first, last float64
	for step := 0; step < 200; step++ {
		loss, err := vm.Step(ctx, map[*G.Node]G.Value{x: xs, y: ys})
		if err != nil {
			log.Fatal(err)
		}
		if step == 0 {
			first = loss
		}
		last = loss
	}
	if err := vm.Flush(ctx); err != nil { // apply the pending updates
		log.Fatal(err)
	}
	fmt.Printf("%d stages, loss fell %.0f×\n", len(plan.Stages), first/last)
	for _, sr := range vm.Report().PerStage {
		fmt.Printf("stage %d: forwards read weights %d updates old (τ=%d)\n", sr.Stage, maxKey(sr.Delays), sr.FormulaDelay)
	}
	// The user's learnables hold the trained weights.
	fmt.Println(learnables[0].Value().Shape())
	// Output:
	// 2 stages, loss fell 387×
	// stage 0: forwards read weights 2 updates old (τ=2)
	// stage 1: forwards read weights 1 updates old (τ=1)
	// (3, 8)
}

func maxKey(h map[int]int) int {
	keys := asyncvm.SortedKeys(h)
	return keys[len(keys)-1]
}

// Print the clock × stage grid of a schedule.
func ExampleGrid() {
	fmt.Print(schedule.Grid(schedule.GPipe(), 2, 2, 1))
	// Output:
	// clock  stage0   stage1
	//     0  F0
	//     1  F1       F0
	//     2           F1
	//     3           B0
	//     4  B0       B1 U0
	//     5  B1 U0
}

// Write the actions a VM ran (vm.Events()) as a Chrome trace for Perfetto
// or chrome://tracing; here two hand-made events of a one-stage run, and
// only the last minibatch of 2 microbatches.
func ExampleWriteTrace() {
	events := [][]asyncvm.Event{{
		{Stage: 0, Action: schedule.Forward(0), Schedule: "sequential", Start: 0, End: 1500},
		{Stage: 0, Action: schedule.Forward(2), Schedule: "sequential", Start: 2000, End: 3000},
		{Stage: 0, Action: schedule.Update(1), Schedule: "sequential", Start: 3000, End: 3000},
	}}
	if err := asyncvm.WriteTrace(os.Stdout, events, asyncvm.TraceLastMinibatches(1, 2)); err != nil {
		log.Fatal(err)
	}
	// Output:
	// {"displayTimeUnit":"ms","traceEvents":[
	// {"name":"process_name","ph":"M","ts":0,"pid":1,"tid":0,"args":{"name":"pipeline"}}
	// ,{"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":0,"args":{"name":"stage 0"}}
	// ,{"name":"F2","cat":"F","ph":"X","ts":2,"dur":1,"pid":1,"tid":0,"args":{"microbatch":2,"minibatch":1,"schedule":"sequential"}}
	// ,{"name":"U1","cat":"U","ph":"X","ts":3,"dur":0,"pid":1,"tid":0,"args":{"minibatch":1,"schedule":"sequential"}}
	// ]}
}

// Train on a stream of minibatches: the driver reads the source ahead, so
// no stage waits for the caller between minibatches; each gets every
// minibatch's loss, in order, as soon as it is known. The same 200 steps
// as Example train the same weights, bit for bit.
func ExampleVM_Stream() {
	g, x, y, cost, learnables := model()
	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.Stages(2))
	if err != nil {
		log.Fatal(err)
	}
	vm, err := asyncvm.New(plan,
		asyncvm.WithSchedule(schedule.PipeMare()),
		asyncvm.WithMicrobatches(2),
		asyncvm.WithSolver(func(stage int) G.Solver {
			return G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.5))
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	xs := tensor.New(tensor.WithShape(8, 3), tensor.WithBacking([]float64{
		1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0}))
	ys := tensor.New(tensor.WithShape(8, 1), tensor.WithBacking([]float64{1, 1, 1, 2, 2, 2, 3, 0}))
	minibatches := func(yield func(map[*G.Node]G.Value, error) bool) {
		for step := 0; step < 200; step++ { // a data loader would read files here
			if !yield(map[*G.Node]G.Value{x: xs, y: ys}, nil) {
				return
			}
		}
	}
	var first, last float64
	ctx := context.Background()
	err = vm.Stream(ctx, minibatches, func(step int, loss float64) {
		if step == 0 {
			first = loss
		}
		last = loss
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := vm.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss fell %.0f×\n", first/last)
	// Output:
	// loss fell 387×
}

// Checkpoint a pipeline whose stages run T1 around T2 around Momentum, and
// resume it in a fresh VM from the checkpoints' root. WithCheckpoints
// makes New refuse a solver a checkpoint could not save (gorgonia's own);
// the factory builds a new chain for every stage.
func ExampleVM_Checkpoint() {
	build := func() (*asyncvm.VM, *G.Node, *G.Node) {
		g, x, y, cost, learnables := model()
		plan, err := graphsplit.Split(g, cost, learnables, graphsplit.Stages(2))
		if err != nil {
			log.Fatal(err)
		}
		vm, err := asyncvm.New(plan, asyncvm.WithCheckpoints(), asyncvm.WithMicrobatches(2),
			asyncvm.WithSolverFactory(func(stage int) (G.Solver, error) { // a new chain per stage
				momentum, err := solvers.NewMomentum(solvers.WithLearnRate(0.05))
				if err != nil {
					return nil, err
				}
				t2, err := correction.New(momentum, correction.WithGammaFromD(0.1))
				if err != nil {
					return nil, err
				}
				return rescheduler.New(t2, rescheduler.WithPhase(500))
			}))
		if err != nil {
			log.Fatal(err)
		}
		return vm, x, y
	}
	root, err := os.MkdirTemp("", "checkpoints")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	ctx := context.Background()
	vm, x, y := build()
	defer vm.Close()
	xs := tensor.New(tensor.WithShape(8, 3), tensor.WithBacking(make([]float64, 24)))
	ys := tensor.New(tensor.WithShape(8, 1), tensor.WithBacking(make([]float64, 8)))
	for step := 0; step < 3; step++ {
		if _, err := vm.Step(ctx, map[*G.Node]G.Value{x: xs, y: ys}); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := vm.Checkpoint(ctx, root, checkpoint.Manifest{}, 0); err != nil {
		log.Fatal(err)
	}

	resumed, _, _ := build()
	defer resumed.Close()
	m, err := resumed.Resume(ctx, root) // the root: its LATEST names the newest checkpoint
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed at step", m.Step)
	// Output:
	// resumed at step 3
}
