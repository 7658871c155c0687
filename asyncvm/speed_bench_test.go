//go:build unix

package asyncvm_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/zoo"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The speed benchmarks: the engine against one tape machine on the whole
// graph, on the zoo's real models and data. Run them pinned to one thread
// and interleaved, and compare with benchstat:
//
//	go test -c -o asyncvm.test ./asyncvm/
//	for i in 1 2 3 4 5 6 7 8 9 10; do
//	  GOMAXPROCS=1 taskset -c 1 ./asyncvm.test -test.run '^$' -test.bench 'EngineTax|Step' -test.count 1
//	done > bench.txt
//	benchstat -col /variant bench.txt
//
// Besides ns/op each reports cpu-ns/op, the CPU time the process spent per
// op (user and system, all threads): on a shared machine, where other
// processes take turns on the core, it is the steadier figure.

// BenchmarkEngineTax measures what the engine costs on the zoo's CNN,
// ResNet and Transformer at their recipes' microbatch, N and fine-grained
// stages: one
// minibatch (N microbatches, the Momentum update) with the Sequential
// schedule, against the same work on one tape machine running the whole
// graph (forward, backward, gradients summed over the N microbatches, one
// solver step). Both read the same embedded Fashion-MNIST images. The
// engine runs with recomputation (the default) and with kept
// activations; the ratio engine ÷ direct is the engine's tax. One op is
// one minibatch; ns/micro is per microbatch.
//
//	GOMAXPROCS=1 go test -run '^$' -bench EngineTax -count 10 ./asyncvm/
func BenchmarkEngineTax(b *testing.B) {
	for _, name := range []string{"cnn", "resnet", "transformer"} {
		r, err := zoo.RecipeFor(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/variant=direct", func(b *testing.B) { benchDirect(b, r, r.Run.Microbatch, r.Run.Microbatches) })
		for _, v := range engineVariants {
			b.Run(fmt.Sprintf("%s/variant=%s", name, v.name), func(b *testing.B) {
				benchEngine(b, r, r.Run.Microbatch, r.Run.Microbatches, v, graphsplit.FineGrained())
			})
		}
	}
}

// BenchmarkStep is one training step (forward, backward, Momentum update)
// of the zoo's MLP and CNN at batch 16 and 64, and of the ResNet at its
// recipe's microbatch — what PyTorch replicas of the models time for one
// step: one tape machine on the whole graph, and the engine (Sequential,
// one microbatch) on one stage and on the fine-grained stages, keeping
// activations (and engine-fine-recompute: recomputing them, as the MLP,
// CNN and ResNet recipes train by default). ns/op is one step.
func BenchmarkStep(b *testing.B) {
	for _, name := range []string{"mlp", "cnn", "resnet"} {
		r, err := zoo.RecipeFor(name)
		if err != nil {
			b.Fatal(err)
		}
		batches := []int{16, 64}
		if name == "resnet" {
			batches = []int{r.Run.Microbatch}
		}
		for _, batch := range batches {
			b.Run(fmt.Sprintf("%s/batch=%d/variant=direct", name, batch), func(b *testing.B) { benchDirect(b, r, batch, 1) })
			v := engineVariants[1]
			b.Run(fmt.Sprintf("%s/batch=%d/variant=engine-1stage", name, batch), func(b *testing.B) { benchEngine(b, r, batch, 1, v) })
			b.Run(fmt.Sprintf("%s/batch=%d/variant=engine-fine", name, batch), func(b *testing.B) {
				benchEngine(b, r, batch, 1, v, graphsplit.FineGrained())
			})
			b.Run(fmt.Sprintf("%s/batch=%d/variant=engine-fine-recompute", name, batch), func(b *testing.B) {
				benchEngine(b, r, batch, 1, engineVariants[0], graphsplit.FineGrained())
			})
			b.Run(fmt.Sprintf("%s/batch=%d/variant=engine-fine-fast", name, batch), func(b *testing.B) {
				release, err := graphsplit.HoldKernels(graphsplit.FastKernels)
				if err != nil {
					b.Skip(err)
				}
				defer release()
				benchEngine(b, r, batch, 1, v, graphsplit.FineGrained())
			})
		}
	}
}

type engineVariant struct {
	name  string
	acts  asyncvm.Activations
	split []graphsplit.Option
}

// engineVariants are how the engine runs: recomputing (the default) or
// keeping activations, with the stage ops or the user's ops.
var engineVariants = []engineVariant{
	{"engine-recompute", asyncvm.Recompute, nil},
	{"engine-keep", asyncvm.Keep, nil},
	{"engine-recompute-userops", asyncvm.Recompute, []graphsplit.Option{graphsplit.WithoutOpSubstitution()}},
}

// taxBatches are the first minibatches of rows·n images of the recipe's
// data, in order.
func taxBatches(b testing.TB, r zoo.Recipe, m *zoo.Model, rows, n, count int) []map[*gorgonia.Node]gorgonia.Value {
	train, _, err := r.Load("embedded", rows*n*count)
	if err != nil {
		b.Fatal(err)
	}
	var out []map[*gorgonia.Node]gorgonia.Value
	n *= rows
	for k := 0; k < count; k++ {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = k*n + i
		}
		x, y := train.Batch(m, idx)
		out = append(out, map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y})
	}
	return out
}

const taxMinibatches = 4

// recipeSolver is the Momentum the recipes train with (train's
// solvers.Momentum: gorgonia's, bit for bit, in one pass over the
// learnables where gorgonia's makes several).
func recipeSolver(r zoo.Recipe) gorgonia.Solver {
	s, err := solvers.NewMomentum(solvers.WithLearnRate(r.Run.LR), solvers.WithMomentum(0.9))
	if err != nil {
		panic(err) // constant, valid options
	}
	return s
}

func benchEngine(b *testing.B, r zoo.Recipe, rows, n int, v engineVariant, split ...graphsplit.Option) {
	m, err := r.Build(rows, r.Run.Seed)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, append(split, v.split...)...)
	if err != nil {
		b.Fatal(err)
	}
	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(schedule.Sequential()),
		asyncvm.WithMicrobatches(n), asyncvm.WithActivations(v.acts),
		asyncvm.WithSolver(func(int) gorgonia.Solver { return recipeSolver(r) }))
	if err != nil {
		b.Fatal(err)
	}
	defer vm.Close()
	batches := taxBatches(b, r, m, rows, n, taxMinibatches)
	ctx := context.Background()
	if _, err := vm.Run(ctx, batches); err != nil { // warm up
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	k := 0
	for b.Loop() {
		if _, err := vm.Step(ctx, batches[k%len(batches)]); err != nil {
			b.Fatal(err)
		}
		k++
	}
	reportTimes(b, rows, n, cpu)
}

func benchDirect(b *testing.B, r zoo.Recipe, rows, n int) {
	m, err := r.Build(rows, r.Run.Seed)
	if err != nil {
		b.Fatal(err)
	}
	grads, err := gorgonia.Grad(m.Cost, m.Learnables...)
	if err != nil {
		b.Fatal(err)
	}
	gv := make([]gorgonia.Value, len(grads))
	for i, g := range grads {
		gorgonia.Read(g, &gv[i])
	}
	tm := gorgonia.NewTapeMachine(m.Graph)
	defer tm.Close()
	acc := make([]*tensor.Dense, len(m.Learnables))
	model := make([]gorgonia.ValueGrad, len(m.Learnables))
	for i, l := range m.Learnables {
		acc[i] = tensorutil.Zeros(l.Dtype(), l.Shape())
		model[i] = &directGrad{value: l.Value(), grad: acc[i]}
	}
	solver := recipeSolver(r)
	batches := taxBatches(b, r, m, rows, n, taxMinibatches)
	micro := make([][2]gorgonia.Value, 0, n*len(batches))
	per := m.X.Shape()[0] / rows // rows of X and Y per example (a word's tokens)
	for _, mb := range batches {
		for j := 0; j < n; j++ {
			x, err := tensorutil.Rows(mb[m.X].(tensor.Tensor), j*rows*per, rows*per)
			if err != nil {
				b.Fatal(err)
			}
			y, err := tensorutil.Rows(mb[m.Y].(tensor.Tensor), j*rows*per, rows*per)
			if err != nil {
				b.Fatal(err)
			}
			micro = append(micro, [2]gorgonia.Value{x, y})
		}
	}
	scale := float32(1) / float32(n)
	step := func(k int) {
		for j := 0; j < n; j++ {
			in := micro[(k%len(batches))*n+j]
			// The engine copies its inputs too (graphsplit binds copies).
			x, _ := tensorutil.Clone(in[0])
			y, _ := tensorutil.Clone(in[1])
			if err := gorgonia.Let(m.X, x); err != nil {
				b.Fatal(err)
			}
			if err := gorgonia.Let(m.Y, y); err != nil {
				b.Fatal(err)
			}
			clear(gv)
			tm.Reset()
			if err := tm.RunAll(); err != nil {
				b.Fatal(err)
			}
			for i, g := range gv {
				if err := tensorutil.AddInto(acc[i], g); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, a := range acc {
			d := a.Data().([]float32)
			for i := range d {
				d[i] *= scale
			}
		}
		if err := solver.Step(model); err != nil {
			b.Fatal(err)
		}
		for _, a := range acc {
			a.Zero()
		}
	}
	for k := 0; k < len(batches); k++ { // warm up as the engine does
		step(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	k := 0
	for b.Loop() {
		step(k)
		k++
	}
	reportTimes(b, rows, n, cpu)
}

type directGrad struct{ value, grad gorgonia.Value }

func (d *directGrad) Value() gorgonia.Value         { return d.value }
func (d *directGrad) Grad() (gorgonia.Value, error) { return d.grad, nil }

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportTimes reports wall time per microbatch (of n an op) and CPU time
// per op since cpu, and both per sample (rows a microbatch).
func reportTimes(b *testing.B, rows, n int, cpu time.Duration) {
	used := float64(cpuTime() - cpu)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/micro")
	b.ReportMetric(used/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*rows), "ns/sample")
	b.ReportMetric(used/float64(b.N*n*rows), "cpu-ns/sample")
}
