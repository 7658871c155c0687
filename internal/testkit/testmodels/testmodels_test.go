package testmodels

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"sync"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

const testBatch = 4

var dtypes = []tensor.Dtype{tensor.Float64, tensor.Float32}

// every is every model this package builds.
func every() []NamedBuilder { return append(All(), SharedWeights()...) }

// wantLearnables is the documented number of learnables per model.
var wantLearnables = map[string]int{
	"mlp":       6,
	"cnn":       8,
	"resnet":    16,
	"attention": 9,
	"tied":      6,
	"gru":       6,
	"penalty":   6,
}

// harness compiles a model plus its symbolic gradients into a TapeMachine
// and reads the cost and gradients through Read nodes (node values may be
// overwritten by in-place ops later in the same run).
type harness struct {
	m        *Model
	vm       gorgonia.VM
	cost     gorgonia.Value
	gradVals []gorgonia.Value
}

func newHarness(tb testing.TB, m *Model) *harness {
	tb.Helper()
	grads, err := gorgonia.Grad(m.Cost, m.Learnables...)
	if err != nil {
		tb.Fatalf("%s: Grad: %v", m.Name, err)
	}
	if len(grads) != len(m.Learnables) {
		tb.Fatalf("%s: got %d gradients for %d learnables", m.Name, len(grads), len(m.Learnables))
	}
	h := &harness{m: m, gradVals: make([]gorgonia.Value, len(grads))}
	gorgonia.Read(m.Cost, &h.cost)
	for i, g := range grads {
		gorgonia.Read(g, &h.gradVals[i])
	}
	h.vm = gorgonia.NewTapeMachine(m.Graph)
	tb.Cleanup(func() { h.vm.Close() })
	return h
}

// run executes one forward+backward pass on batch and returns the cost.
func (h *harness) run(tb testing.TB, batch []gorgonia.Value) float64 {
	tb.Helper()
	for i, in := range h.m.Inputs {
		if err := gorgonia.Let(in, batch[i]); err != nil {
			tb.Fatalf("%s: Let %s: %v", h.m.Name, in.Name(), err)
		}
	}
	h.vm.Reset()
	if err := h.vm.RunAll(); err != nil {
		tb.Fatalf("%s: RunAll: %v", h.m.Name, err)
	}
	return scalarOf(tb, h.cost)
}

// grads returns float64 copies of the gradients read in the last run.
func (h *harness) grads(tb testing.TB) [][]float64 {
	tb.Helper()
	out := make([][]float64, len(h.gradVals))
	for i, v := range h.gradVals {
		if v == nil {
			tb.Fatalf("%s: gradient of %s was not read", h.m.Name, h.m.Learnables[i].Name())
		}
		if !v.Shape().Eq(h.m.Learnables[i].Shape()) {
			tb.Fatalf("%s: gradient of %s has shape %v, want %v", h.m.Name, h.m.Learnables[i].Name(), v.Shape(), h.m.Learnables[i].Shape())
		}
		out[i] = testutil.Floats(tb, v)
	}
	return out
}

func scalarOf(tb testing.TB, v gorgonia.Value) float64 {
	tb.Helper()
	fs := testutil.Floats(tb, v)
	if len(fs) != 1 {
		tb.Fatalf("expected a scalar, got %d values", len(fs))
	}
	return fs[0]
}

func build(tb testing.TB, nb NamedBuilder, dt tensor.Dtype, seed int64) *Model {
	tb.Helper()
	m, err := nb.Build(dt, testBatch, seed)
	if err != nil {
		tb.Fatalf("%s/%v: build: %v", nb.Name, dt, err)
	}
	return m
}

func TestModelsForwardBackward(t *testing.T) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				m := build(t, nb, dt, 1)
				checkStructure(t, nb.Name, dt, m)

				h := newHarness(t, m)
				cost := h.run(t, m.Batch(rand.New(rand.NewSource(7))))
				if math.IsNaN(cost) || math.IsInf(cost, 0) || cost <= 0 {
					t.Fatalf("cost = %v, want finite and positive", cost)
				}
				for i, g := range h.grads(t) {
					name := m.Learnables[i].Name()
					nonZero := false
					for _, v := range g {
						if math.IsNaN(v) || math.IsInf(v, 0) {
							t.Fatalf("gradient of %s is not finite: %v", name, g)
						}
						if v != 0 {
							nonZero = true
						}
					}
					if !nonZero {
						t.Errorf("gradient of %s is all zero", name)
					}
				}
			})
		}
	}
}

func checkStructure(t *testing.T, name string, dt tensor.Dtype, m *Model) {
	t.Helper()
	if m.Name != name {
		t.Errorf("Name = %q, want %q", m.Name, name)
	}
	if m.Dtype != dt || m.BatchSize != testBatch {
		t.Errorf("Dtype, BatchSize = %v, %d; want %v, %d", m.Dtype, m.BatchSize, dt, testBatch)
	}
	if !m.Cost.IsScalar() {
		t.Errorf("cost has shape %v, want scalar", m.Cost.Shape())
	}
	if got, want := len(m.Learnables), wantLearnables[name]; got != want {
		t.Errorf("%d learnables, want %d", got, want)
	}
	if len(m.Inputs) != 2 {
		t.Fatalf("%d inputs, want 2 (x, y)", len(m.Inputs))
	}
	if s := m.Inputs[0].Shape(); s[0] != testBatch {
		t.Errorf("x has shape %v, want leading batch dimension %d", s, testBatch)
	}
	if s := m.Inputs[1].Shape(); !s.Eq(tensor.Shape{testBatch, NumClasses}) {
		t.Errorf("y has shape %v, want (%d, %d)", s, testBatch, NumClasses)
	}
	names := map[string]bool{}
	for _, n := range append(append(gorgonia.Nodes{}, m.Learnables...), m.Inputs...) {
		if names[n.Name()] {
			t.Errorf("duplicate node name %q", n.Name())
		}
		names[n.Name()] = true
		if n.Dtype() != dt {
			t.Errorf("%s has dtype %v, want %v", n.Name(), n.Dtype(), dt)
		}
		if n.Graph() != m.Graph {
			t.Errorf("%s is not in the model graph", n.Name())
		}
	}
	for _, n := range m.Learnables {
		if n.Value() == nil {
			t.Errorf("learnable %s has no value", n.Name())
		}
	}
	if (name == "cnn") != (len(m.BatchNorms) > 0) {
		t.Errorf("%d BatchNorm ops recorded", len(m.BatchNorms))
	}
}

func TestDeterministicInit(t *testing.T) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				a := SnapshotValues(build(t, nb, dt, 42).LearnableValues())
				b := SnapshotValues(build(t, nb, dt, 42).LearnableValues())
				c := SnapshotValues(build(t, nb, dt, 43).LearnableValues())
				differs := false
				for i := range a {
					if !a[i].Shape().Eq(b[i].Shape()) {
						t.Fatalf("learnable %d: shapes %v and %v differ", i, a[i].Shape(), b[i].Shape())
					}
					fa, fb, fc := testutil.Floats(t, a[i]), testutil.Floats(t, b[i]), testutil.Floats(t, c[i])
					for j := range fa {
						if fa[j] != fb[j] {
							t.Fatalf("learnable %d entry %d: %v != %v with the same seed", i, j, fa[j], fb[j])
						}
						if fa[j] != fc[j] {
							differs = true
						}
					}
				}
				if !differs {
					t.Errorf("seeds 42 and 43 gave identical learnables")
				}
			})
		}
	}
}

func TestBatch(t *testing.T) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				m := build(t, nb, dt, 1)
				a := m.Batch(rand.New(rand.NewSource(3)))
				b := m.Batch(rand.New(rand.NewSource(3)))
				if len(a) != len(m.Inputs) {
					t.Fatalf("Batch returned %d values for %d inputs", len(a), len(m.Inputs))
				}
				for i, in := range m.Inputs {
					if !a[i].Shape().Eq(in.Shape()) || a[i].Dtype() != dt {
						t.Fatalf("value %d: shape %v dtype %v; want %v %v", i, a[i].Shape(), a[i].Dtype(), in.Shape(), dt)
					}
					fa, fb := testutil.Floats(t, a[i]), testutil.Floats(t, b[i])
					for j := range fa {
						if fa[j] != fb[j] {
							t.Fatalf("value %d entry %d differs across identical rngs", i, j)
						}
					}
				}
				y := testutil.Floats(t, a[len(a)-1])
				for r := 0; r < testBatch; r++ {
					sum, ones := 0.0, 0
					for c := 0; c < NumClasses; c++ {
						v := y[r*NumClasses+c]
						sum += v
						if v == 1 {
							ones++
						}
					}
					if sum != 1 || ones != 1 {
						t.Fatalf("label row %d is not one-hot: %v", r, y[r*NumClasses:(r+1)*NumClasses])
					}
				}
			})
		}
	}
}

// TestRepeatedRuns checks that running the same machine twice on the same
// batch gives identical results, i.e. no hidden state leaks between runs.
func TestRepeatedRuns(t *testing.T) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				m := build(t, nb, dt, 5)
				h := newHarness(t, m)
				other := m.Batch(rand.New(rand.NewSource(10)))
				batch := m.Batch(rand.New(rand.NewSource(11)))
				c1 := h.run(t, batch)
				g1 := h.grads(t)
				h.run(t, other)
				c2 := h.run(t, batch)
				g2 := h.grads(t)
				if c1 != c2 {
					t.Fatalf("cost changed across runs: %v vs %v", c1, c2)
				}
				for i := range g1 {
					for j := range g1[i] {
						if g1[i][j] != g2[i][j] {
							t.Fatalf("gradient of %s[%d] changed across runs: %v vs %v", m.Learnables[i].Name(), j, g1[i][j], g2[i][j])
						}
					}
				}
			})
		}
	}
}

// TestRunsLeaveValuesIntact checks that running a model, with and without
// gradients in the graph, never writes into the caller's input tensors or
// into the learnables (Gorgonia runs some ops in place, and a Reshape view
// of an input shares its memory).
func TestRunsLeaveValuesIntact(t *testing.T) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			for _, withGrad := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/grad=%v", nb.Name, dt, withGrad), func(t *testing.T) {
					m := build(t, nb, dt, 2)
					if withGrad {
						if _, err := gorgonia.Grad(m.Cost, m.Learnables...); err != nil {
							t.Fatal(err)
						}
					}
					vm := gorgonia.NewTapeMachine(m.Graph)
					defer vm.Close()
					batch := m.Batch(rand.New(rand.NewSource(8)))
					inputsBefore := SnapshotValues(batch)
					paramsBefore := SnapshotValues(m.LearnableValues())
					for range 2 {
						for i, v := range batch {
							if err := gorgonia.Let(m.Inputs[i], v); err != nil {
								t.Fatal(err)
							}
						}
						vm.Reset()
						if err := vm.RunAll(); err != nil {
							t.Fatal(err)
						}
					}
					same := func(what string, before []tensor.Tensor, after []gorgonia.Value) {
						for i := range before {
							a, b := testutil.Floats(t, before[i]), testutil.Floats(t, after[i])
							for j := range a {
								if a[j] != b[j] {
									t.Fatalf("%s %d entry %d changed: %v -> %v", what, i, j, a[j], b[j])
								}
							}
						}
					}
					same("input", inputsBefore, batch)
					same("learnable", paramsBefore, m.LearnableValues())
				})
			}
		}
	}
}

// TestFiniteDifferences compares the symbolic gradients with central
// differences for a few entries of every learnable (float64 only).
func TestFiniteDifferences(t *testing.T) {
	const (
		step   = 1e-5
		maxRel = 1e-5
		floor  = 1e-6 // denominators below this are treated as absolute error
	)
	for _, nb := range every() {
		t.Run(nb.Name, func(t *testing.T) {
			m := build(t, nb, tensor.Float64, 9)
			h := newHarness(t, m)
			batch := m.Batch(rand.New(rand.NewSource(21)))
			h.run(t, batch)
			grads := h.grads(t)
			pick := rand.New(rand.NewSource(99))
			for i, l := range m.Learnables {
				data := l.Value().Data().([]float64)
				// The entry with the largest gradient plus a random one.
				arg := 0
				for j, g := range grads[i] {
					if math.Abs(g) > math.Abs(grads[i][arg]) {
						arg = j
					}
				}
				entries := []int{arg}
				if len(data) > 1 {
					other := pick.Intn(len(data) - 1)
					if other >= arg {
						other++
					}
					entries = append(entries, other)
				}
				for _, j := range entries {
					orig := data[j]
					data[j] = orig + step
					plus := h.run(t, batch)
					data[j] = orig - step
					minus := h.run(t, batch)
					data[j] = orig
					numeric := (plus - minus) / (2 * step)
					analytic := grads[i][j]
					den := math.Max(math.Max(math.Abs(numeric), math.Abs(analytic)), floor)
					if rel := math.Abs(numeric-analytic) / den; rel > maxRel {
						t.Errorf("%s[%d]: analytic %.10g, numeric %.10g, relative error %.3g", l.Name(), j, analytic, numeric, rel)
					}
				}
			}
		})
	}
}

// TestConcurrentModels runs independent models from several goroutines at
// once (run with -race). They are built one at a time: gorgonia v0.9.18's
// graph builders (Conv2d, Rectify, …) number their groups with an
// unsynchronised global counter (internal/encoding.NewGroup), so building
// graphs concurrently is a data race in gorgonia itself — the race
// detector caught it here now and then.
func TestConcurrentModels(t *testing.T) {
	var wg sync.WaitGroup
	var building sync.Mutex
	for _, nb := range every() {
		for _, dt := range dtypes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				building.Lock()
				m, err := nb.Build(dt, testBatch, 3)
				if err == nil {
					_, err = gorgonia.Grad(m.Cost, m.Learnables...)
				}
				building.Unlock()
				if err != nil {
					t.Errorf("%s/%v: %v", nb.Name, dt, err)
					return
				}
				var cost gorgonia.Value
				gorgonia.Read(m.Cost, &cost)
				vm := gorgonia.NewTapeMachine(m.Graph)
				defer vm.Close()
				rng := rand.New(rand.NewSource(4))
				for range 3 {
					for i, v := range m.Batch(rng) {
						if err := gorgonia.Let(m.Inputs[i], v); err != nil {
							t.Errorf("%s/%v: Let: %v", nb.Name, dt, err)
							return
						}
					}
					vm.Reset()
					if err := vm.RunAll(); err != nil {
						t.Errorf("%s/%v: RunAll: %v", nb.Name, dt, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
}

func TestSnapshotValues(t *testing.T) {
	m := build(t, All()[0], tensor.Float64, 1)
	live := m.LearnableValues()
	for i, v := range live {
		if v != m.Learnables[i].Value() {
			t.Fatalf("LearnableValues()[%d] is not the live value", i)
		}
	}
	snap := SnapshotValues(live)
	data := live[0].Data().([]float64)
	before := snap[0].Data().([]float64)[0]
	data[0] += 1
	if got := snap[0].Data().([]float64)[0]; got != before {
		t.Fatalf("snapshot changed with the live value: %v -> %v", before, got)
	}
	data[0] -= 1

	s := SnapshotValues([]gorgonia.Value{gorgonia.NewF32(2.5), nil})
	if s[1] != nil || s[0].Dtype() != tensor.Float32 || s[0].Data().(float32) != 2.5 {
		t.Fatalf("unexpected snapshot of scalar/nil values: %v", s)
	}
}

// TestErrorsKeepTheirCause: construction errors wrap what gorgonia
// returned (github.com/pkg/errors), readable through errors.Is and As, with
// the messages "testmodels: <model>: <what>: <cause>".
func TestErrorsKeepTheirCause(t *testing.T) {
	cause := &os.PathError{Op: "op", Path: "p", Err: os.ErrInvalid}
	err := wrap("gru", errors.Wrapf(cause, "step %d: %s", 2, "gates"))
	if got, want := err.Error(), "testmodels: gru: step 2: gates: op p: invalid argument"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	var pe *os.PathError
	if !errors.Is(err, os.ErrInvalid) || !errors.As(err, &pe) || pe != cause {
		t.Errorf("errors.Is/As do not reach the cause through %v", err)
	}
	if _, err := MLP(tensor.Int, testBatch, 1); err == nil || err.Error() != "testmodels: mlp: unsupported dtype int (want Float64 or Float32)" {
		t.Errorf("MLP(Int): %v", err)
	}
}

func TestBuilderErrors(t *testing.T) {
	for _, nb := range every() {
		if _, err := nb.Build(tensor.Int, testBatch, 1); err == nil {
			t.Errorf("%s: no error for dtype Int", nb.Name)
		}
		if _, err := nb.Build(tensor.Float64, 1, 1); err == nil {
			t.Errorf("%s: no error for batch 1", nb.Name)
		}
		if b, ok := ByName(nb.Name); !ok || b == nil {
			t.Errorf("ByName(%q) not found", nb.Name)
		}
	}
	if _, ok := ByName("nope"); ok {
		t.Errorf("ByName(nope) found a builder")
	}
}

// BenchmarkForwardBackward measures one forward+backward pass per model.
func BenchmarkForwardBackward(b *testing.B) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			b.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(b *testing.B) {
				m := build(b, nb, dt, 1)
				h := newHarness(b, m)
				batch := m.Batch(rand.New(rand.NewSource(1)))
				b.ReportAllocs()
				for b.Loop() {
					h.run(b, batch)
				}
			})
		}
	}
}

// BenchmarkBuild measures building a model, adding its gradients and
// compiling a TapeMachine.
func BenchmarkBuild(b *testing.B) {
	for _, nb := range every() {
		b.Run(nb.Name, func(b *testing.B) {
			for b.Loop() {
				m := build(b, nb, tensor.Float64, 1)
				if _, err := gorgonia.Grad(m.Cost, m.Learnables...); err != nil {
					b.Fatal(err)
				}
				gorgonia.NewTapeMachine(m.Graph).Close()
			}
		})
	}
}
