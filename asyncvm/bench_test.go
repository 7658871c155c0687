package asyncvm

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/schedule"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// benchModel is a model of realistic size for the benchmarks.
type benchModel struct {
	g      *G.ExprGraph
	cost   *G.Node
	learn  G.Nodes
	inputs G.Nodes
}

func glorot(g *G.ExprGraph, name string, shape ...int) *G.Node {
	return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithInit(G.GlorotU(1)))
}

func crossEntropy(logits, y *G.Node) *G.Node {
	logp := G.Must(G.LogSoftMax(logits, 1))
	return G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(y, logp)), 1))))))
}

// benchMLP is 784-256-256-10 with ReLU.
func benchMLP(batch int) benchModel {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, 784), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, 10), G.WithName("y"))
	m := benchModel{g: g, inputs: G.Nodes{x, y}}
	h := x
	for i, sz := range [][2]int{{784, 256}, {256, 256}, {256, 10}} {
		w := glorot(g, fmt.Sprintf("w%d", i), sz[0], sz[1])
		b := G.NewMatrix(g, tensor.Float32, G.WithShape(1, sz[1]), G.WithName(fmt.Sprintf("b%d", i)), G.WithInit(G.Zeroes()))
		m.learn = append(m.learn, w, b)
		h = G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w)), b, nil, []byte{0}))
		if i < 2 {
			h = G.Must(G.Rectify(h))
		}
	}
	m.cost = crossEntropy(h, y)
	return m
}

// benchCNN is a small LeNet-like network on 28×28 images.
func benchCNN(batch int) benchModel {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(batch, 1, 28, 28), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, 10), G.WithName("y"))
	m := benchModel{g: g, inputs: G.Nodes{x, y}}
	w1 := glorot(g, "conv1", 8, 1, 3, 3)
	w2 := glorot(g, "conv2", 16, 8, 3, 3)
	fc := glorot(g, "fc", 16*7*7, 10)
	m.learn = G.Nodes{w1, w2, fc}
	h := G.Must(G.Rectify(G.Must(G.Conv2d(x, w1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Rectify(G.Must(G.Conv2d(h, w2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Reshape(h, tensor.Shape{batch, 16 * 7 * 7}))
	m.cost = crossEntropy(G.Must(G.Mul(h, fc)), y)
	return m
}

func (m benchModel) minibatch(n int) map[*G.Node]G.Value {
	rng := rand.New(rand.NewSource(1))
	out := map[*G.Node]G.Value{}
	for _, in := range m.inputs {
		shape := in.Shape().Clone()
		shape[0] *= n
		t := tensorutil.Zeros(tensor.Float32, shape)
		d := t.Data().([]float32)
		if in.Name() == "y" {
			for r := 0; r < shape[0]; r++ {
				d[r*10+rng.Intn(10)] = 1
			}
		} else {
			for i := range d {
				d[i] = float32(rng.NormFloat64())
			}
		}
		out[in] = t
	}
	return out
}

const benchSteps = 4

// BenchmarkOverhead compares the engine running the Sequential schedule on a
// 4-stage MLP at microbatch 32 (N=4) with the same tape-machine work done by
// hand: every stage's forward program, then every stage's train program,
// then the solver — the work the engine schedules. Compare the two with
// benchstat; the difference is the engine's overhead.
func BenchmarkOverhead(b *testing.B) {
	const n = 4
	b.Run("raw", func(b *testing.B) {
		m := benchMLP(32)
		plan, err := graphsplit.Split(m.g, m.cost, m.learn, graphsplit.FineGrained(), graphsplit.Stages(3))
		if err != nil {
			b.Fatal(err)
		}
		defer plan.Close()
		feeds := m.minibatch(n)
		micro := make([][]G.Value, n)
		for j := range micro {
			for _, f := range plan.Feeds {
				r, _ := tensorutil.Rows(feeds[f.Node].(tensor.Tensor), j*32, 32)
				micro[j] = append(micro[j], r)
			}
		}
		solvers := make([]G.Solver, len(plan.Stages))
		models := make([][]G.ValueGrad, len(plan.Stages))
		accs := make([][]*tensor.Dense, len(plan.Stages))
		for i, st := range plan.Stages {
			solvers[i] = G.NewVanillaSolver(G.WithLearnRate(0.01))
			for _, l := range st.Learnables {
				a := tensorutil.Zeros(l.Dtype(), l.Shape())
				accs[i] = append(accs[i], a)
				models[i] = append(models[i], &valueGrad{value: l.Value(), grad: a})
			}
		}
		scale, _ := tensorutil.ScalarOf(tensor.Float32, 1.0/n)
		b.ResetTimer()
		for b.Loop() {
			for k := 0; k < benchSteps; k++ {
				for j := 0; j < n; j++ {
					acts := map[int64]G.Value{}
					for fi, f := range plan.Feeds {
						acts[f.Key] = micro[j][fi]
					}
					inputs := make([][]G.Value, len(plan.Stages))
					for i, st := range plan.Stages {
						for _, p := range st.Inputs {
							inputs[i] = append(inputs[i], acts[p.Key])
						}
						res, err := st.Forward.Run(inputs[i], nil)
						if err != nil {
							b.Fatal(err)
						}
						for o, p := range st.Outputs {
							acts[p.Key] = res.Outputs[o]
						}
					}
					grads := map[int64]G.Value{}
					for i := len(plan.Stages) - 1; i >= 0; i-- {
						st := plan.Stages[i]
						og := make([]G.Value, len(st.Outputs))
						for o, p := range st.Outputs {
							if p.Kind == graphsplit.CostPort {
								og[o] = scale
							} else {
								og[o] = grads[p.Key]
							}
						}
						res, err := st.Train.Run(inputs[i], og)
						if err != nil {
							b.Fatal(err)
						}
						for q, p := range st.Inputs {
							if res.InputGrads[q] != nil {
								grads[p.Key] = res.InputGrads[q]
							}
						}
						for q, g := range res.LearnableGrads {
							_ = tensorutil.AddInto(accs[i][q], g)
						}
					}
				}
				for i := range solvers {
					if err := solvers[i].Step(models[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(b.N*benchSteps*n*32)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("engine", func(b *testing.B) {
		benchSchedule(b, benchMLP(32), 3, n, schedule.Sequential())
	})
}

// BenchmarkSchedules measures samples/s of every schedule on a small CNN at
// P = 2 and 4, N = 4, microbatch 16, recomputing (cnn: the zero-bubble
// schedules' I recomputes the forward and runs the input gradients' half
// of the backward) and keeping the activations (cnn-stash: I runs only
// that half). For the split schedules it reports I's share of the time
// the stages spent in I and W (I-share).
func BenchmarkSchedules(b *testing.B) {
	for _, acts := range []Activations{Recompute, Keep} {
		model := map[Activations]string{Recompute: "cnn", Keep: "cnn-stash"}[acts]
		for _, p := range []int{2, 4} {
			for _, s := range schedule.All() {
				b.Run(fmt.Sprintf("%s/P%d/%s", model, p, s.Name), func(b *testing.B) {
					benchSchedule(b, benchCNN(16), p, 4, s, WithActivations(acts))
				})
			}
		}
	}
}

func benchSchedule(b *testing.B, m benchModel, p, n int, s schedule.Schedule, opts ...Option) {
	plan, err := graphsplit.Split(m.g, m.cost, m.learn, graphsplit.Stages(p))
	if err != nil {
		b.Fatal(err)
	}
	vm, err := New(plan, append([]Option{WithMicrobatches(n), WithSchedule(s)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer vm.Close()
	feeds := m.minibatch(n)
	batches := make([]map[*G.Node]G.Value, benchSteps)
	for k := range batches {
		batches[k] = feeds
	}
	ctx := context.Background()
	if _, err := vm.Run(ctx, batches); err != nil { // fill the pipeline
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := vm.Run(ctx, batches); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchSteps*n*m.inputs[0].Shape()[0])/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(vm.Report().Utilization, "utilization")
	if s.Split {
		b.ReportMetric(inputShare(vm.Events()), "I-share")
	}
}

// inputShare is the I's share of the time events spent in I's and W's.
func inputShare(events [][]Event) float64 {
	var in, w time.Duration
	for _, evs := range events {
		for _, e := range evs {
			switch e.Action.Op {
			case schedule.OpInput:
				in += e.End - e.Start
			case schedule.OpWeight:
				w += e.End - e.Start
			}
		}
	}
	if in+w == 0 {
		return 0
	}
	return float64(in) / float64(in+w)
}
