package stageops

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/pipemare/pipemare/internal/tape"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The tests build each op twice — with gorgonia's own ops and with this
// package's — on the same values, run forward and backward (the cost is
// Σ y⊙R for a random R, so the output gradient is R), and require every
// output and every gradient bit for bit.

func randTensor(rng *rand.Rand, dt tensor.Dtype, shape tensor.Shape, quantize bool) *tensor.Dense {
	t := tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	for i := 0; i < shape.TotalSize(); i++ {
		v := rng.NormFloat64()
		if quantize { // ties and exact zeros
			v = math.Round(v*2) / 2
		}
		if dt == tensor.Float32 {
			t.Float32s()[i] = float32(v)
		} else {
			t.Float64s()[i] = v
		}
	}
	return t
}

// sprinkle sets about a third of t's elements to values drawn from
// specials (NaN, infinities, the lowest finite value, −0: what a
// comparison may treat apart).
func sprinkle(rng *rand.Rand, t *tensor.Dense, specials []float64) {
	for i := 0; i < t.Shape().TotalSize(); i++ {
		if rng.Intn(3) != 0 {
			continue
		}
		v := specials[rng.Intn(len(specials))]
		if t.Dtype() == tensor.Float32 {
			t.Float32s()[i] = float32(v)
		} else {
			t.Float64s()[i] = v
		}
	}
}

// side is one of the two graphs: its inputs (with values), its output and
// what its run gives.
type side struct {
	g      *gorgonia.ExprGraph
	inputs gorgonia.Nodes
	out    *gorgonia.Node
}

// run computes out and the gradients of Σ out⊙r with respect to the inputs.
func (s side) run(t *testing.T, r *tensor.Dense) []gorgonia.Value {
	t.Helper()
	rn := gorgonia.NewConstant(r.Clone(), gorgonia.WithName("r"))
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(s.out, s.g.AddNode(rn)))))
	grads, err := gorgonia.Grad(cost, s.inputs...)
	require.NoError(t, err)
	vals := make([]gorgonia.Value, len(grads)+1)
	gorgonia.Read(s.out, &vals[0])
	for i, g := range grads {
		gorgonia.Read(g, &vals[i+1])
	}
	vm := gorgonia.NewTapeMachine(s.g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	want := make([]gorgonia.Value, len(vals))
	for i, v := range vals {
		want[i] = v.(tensor.Tensor).Clone().(gorgonia.Value)
	}
	onExecutor(t, s.g, vals, want)
	return want
}

// onExecutor runs g on the stage programs' executor (internal/tape) three
// times — the third writes into the buffers it adopted at the second,
// poisoned before — and requires the values read into vals to be want's
// bits every time, and this package's ops to write into their buffers
// (UsePreallocDo).
func onExecutor(t *testing.T, g *gorgonia.ExprGraph, vals, want []gorgonia.Value) {
	t.Helper()
	p := tape.Compile(g, false)
	defer p.Close()
	for run := 0; run < 3; run++ {
		clear(vals)
		p.Poison()
		require.NoError(t, p.Run())
		for i := range want {
			testutil.RequireBits(t, want[i], vals[i], fmt.Sprintf("executor run %d, value %d", run, i))
		}
	}
	for _, o := range p.Ops() {
		if ty := reflect.TypeOf(o.Op); ty.Kind() == reflect.Pointer && ty.Elem().PkgPath() == reflect.TypeOf(named{}).PkgPath() {
			require.Equal(t, "prealloc", o.How, "%v: %s", o.Op, o.Why)
		}
	}
}

func requireSame(t *testing.T, want, got []gorgonia.Value, names ...string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		what := "output"
		if i > 0 {
			what = "gradient of " + names[i-1]
		}
		testutil.RequireBits(t, want[i], got[i], what)
	}
}

// requireClose is requireSame for ops computed through a BLAS other than
// gonum's, which cuts and orders the stage ops' GEMMs differently from
// gorgonia's: every value within a few units of rounding of the largest
// (relative 1e-5 in float32, 1e-12 in float64).
func requireClose(t *testing.T, want, got []gorgonia.Value, names ...string) {
	t.Helper()
	if ExactBLAS() {
		requireSame(t, want, got, names...)
		return
	}
	require.Len(t, got, len(want))
	for i := range want {
		tol := 1e-12
		if want[i].Dtype() == tensor.Float32 {
			tol = 1e-5
		}
		w, g := asFloat64s(want[i]), asFloat64s(got[i])
		diff, scale := 0.0, 1e-30
		for j := range w {
			diff, scale = math.Max(diff, math.Abs(w[j]-g[j])), math.Max(scale, math.Abs(w[j]))
		}
		require.LessOrEqual(t, diff/scale, tol, "value %d", i)
	}
}

func asFloat64s(v gorgonia.Value) []float64 {
	if d, ok := v.Data().([]float64); ok {
		return d
	}
	var out []float64
	for _, x := range v.Data().([]float32) {
		out = append(out, float64(x))
	}
	return out
}

func input(g *gorgonia.ExprGraph, name string, v *tensor.Dense) *gorgonia.Node {
	return gorgonia.NewTensor(g, v.Dtype(), v.Dims(), gorgonia.WithShape(v.Shape()...), gorgonia.WithName(name), gorgonia.WithValue(v.Clone()))
}

var dtypes = []tensor.Dtype{tensor.Float32, tensor.Float64}

func TestBatchNormIsGorgonias(t *testing.T) {
	for _, dt := range dtypes {
		for _, shape := range []tensor.Shape{{4, 3, 5, 5}, {2, 8, 7, 3}, {16, 6}} {
			for _, affine := range []bool{false, true} {
				for _, relu := range []bool{false, true} {
					if relu && !affine {
						continue
					}
					t.Run(fmt.Sprintf("%v/%v/affine=%v/relu=%v", dt, shape, affine, relu), func(t *testing.T) {
						testBatchNorm(t, dt, shape, affine, relu)
					})
				}
			}
		}
	}
}

// TestBatchNormOnWorkersIsGorgonias: a tensor large enough for parallel to
// share the channels out among goroutines (with GOMAXPROCS ≥ 2), where the
// scale's and bias's gradients write their terms into one buffer of the op
// (a plane per channel): the same bits, and, under the race detector (2 s
// there: the smallest tensor parallel splits), no two goroutines on one
// plane.
func TestBatchNormOnWorkersIsGorgonias(t *testing.T) {
	testBatchNorm(t, tensor.Float32, tensor.Shape{2, 4, 64, 64}, true, true)
}

func testBatchNorm(t *testing.T, dt tensor.Dtype, shape tensor.Shape, affine, relu bool) {
	rng := rand.New(rand.NewSource(1))
	c := shape[1]
	pshape := tensor.Shape{1, c, 1, 1}
	axes := []int{0, 2, 3}
	if shape.Dims() == 2 {
		pshape, axes = tensor.Shape{1, c}, []int{0}
	}
	xv := randTensor(rng, dt, shape, false)
	sv, bv := randTensor(rng, dt, pshape, false), randTensor(rng, dt, pshape, false)

	build := func(ours bool) (side, *gorgonia.BatchNormOp) {
		g := gorgonia.NewGraph()
		x := input(g, "x", xv)
		s := side{g: g, inputs: gorgonia.Nodes{x}}
		var scale, bias *gorgonia.Node
		if affine {
			scale, bias = input(g, "scale", sv), input(g, "bias", bv)
			s.inputs = append(s.inputs, scale, bias)
		}
		// gorgonia.BatchNorm always builds its scale and bias; without
		// affine, the reference reads its op's output directly.
		y, _, _, op, err := gorgonia.BatchNorm(x, scale, bias, 0.1, 1e-5)
		require.NoError(t, err)
		if !affine {
			y = nil
			for _, n := range g.AllNodes() {
				if n.Op() == op {
					y = n
				}
			}
		}
		if ours {
			g2 := gorgonia.NewGraph()
			x2 := input(g2, "x", xv)
			s = side{g: g2, inputs: gorgonia.Nodes{x2}}
			bn := BatchNorm{Op: op, ReLU: relu}
			if affine {
				bn.Scale, bn.Bias = input(g2, "scale", sv), input(g2, "bias", bv)
				bn.ScaleAxes, bn.BiasAxes = axes, axes
				s.inputs = append(s.inputs, bn.Scale, bn.Bias)
			}
			y2, _, err := bn.Apply(x2)
			require.NoError(t, err)
			s.out = y2
			return s, op
		}
		if relu {
			var err error
			y, err = gorgonia.Rectify(y)
			require.NoError(t, err)
		}
		s.out = y
		return s, op
	}
	ref, refOp := build(false)
	ours, ourOp := build(true)
	r := randTensor(rng, dt, shape, false)
	names := []string{"x", "scale", "bias"}
	for run := 0; run < 2; run++ { // the running statistics carry over
		want, got := ref.run(t, r), ours.run(t, r)
		requireSame(t, want, got, names...)
		wm, wv := refOp.Stats()
		gm, gv := ourOp.Stats()
		testutil.RequireBits(t, wm, gm, "running mean")
		testutil.RequireBits(t, wv, gv, "running variance")
	}
	// Inference mode: the forward uses the running statistics.
	require.NoError(t, refOp.SetTraining(false))
	require.NoError(t, ourOp.SetTraining(false))
	refVals, ourVals := forward(t, ref), forward(t, ours)
	testutil.RequireBits(t, refVals, ourVals, "inference output")
}

// forward runs a side's output only, with a tape machine in inference mode.
func forward(t *testing.T, s side) gorgonia.Value {
	var v gorgonia.Value
	gorgonia.Read(s.out, &v)
	vm := gorgonia.NewTapeMachine(s.g, gorgonia.EvalMode())
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	return v
}

func TestMaxPoolIsGorgonias(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct {
			shape          tensor.Shape
			kernel         tensor.Shape
			pad, stride    []int
			quantize, name string
		}{
			{tensor.Shape{2, 3, 8, 8}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "", "2x2"},
			{tensor.Shape{2, 3, 8, 8}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "ties", "2x2-ties"},
			{tensor.Shape{2, 2, 9, 7}, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}, "ties", "3x3-overlap-pad"},
			{tensor.Shape{1, 2, 6, 6}, tensor.Shape{3, 2}, []int{0, 1}, []int{1, 2}, "", "3x2-stride1"},
			{tensor.Shape{2, 3, 8, 8}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "specials", "2x2-specials"},
			{tensor.Shape{2, 2, 9, 7}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "ties", "2x2-odd"}, // a last row and column no window reads
			// 17 windows a row: two groups of 8 in AVX2, one in Go.
			{tensor.Shape{1, 2, 20, 34}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "ties", "2x2-wide-ties"},
			{tensor.Shape{1, 1, 6, 35}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "specials", "2x2-wide-specials"}, // few windows: gorgonia's gradient panics on one with nothing above the lowest value
		} {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				rng := rand.New(rand.NewSource(2))
				xv := randTensor(rng, dt, c.shape, c.quantize != "")
				if c.quantize == "specials" {
					sprinkle(rng, xv, []float64{math.NaN(), math.Inf(-1), math.Inf(1), -math.MaxFloat32, math.Copysign(0, -1)})
				}
				g := gorgonia.NewGraph()
				x := input(g, "x", xv)
				y, err := gorgonia.MaxPool2D(x, c.kernel, c.pad, c.stride)
				require.NoError(t, err)
				ref := side{g: g, inputs: gorgonia.Nodes{x}, out: y}

				mp, err := NewMaxPool(y.Op())
				require.NoError(t, err)
				g2 := gorgonia.NewGraph()
				x2 := input(g2, "x", xv)
				y2, _, err := mp.Apply(x2)
				require.NoError(t, err)
				require.Equal(t, y.Shape(), y2.Shape())
				ours := side{g: g2, inputs: gorgonia.Nodes{x2}, out: y2}
				r := randTensor(rng, dt, y.Shape(), false)
				requireSame(t, ref.run(t, r), ours.run(t, r), "x")
			})
		}
	}
}

// TestConvIsGorgonias is bit for bit with gonum's BLAS (gorgonia's
// default); see requireClose for another.
func TestConvIsGorgonias(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	for _, dt := range dtypes {
		for i, c := range []struct {
			x, w                  tensor.Shape
			pad, stride, dilation []int
		}{
			{tensor.Shape{4, 1, 12, 12}, tensor.Shape{8, 1, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}},
			{tensor.Shape{3, 8, 14, 14}, tensor.Shape{16, 8, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}},  // K = 72 > 64
			{tensor.Shape{2, 9, 10, 10}, tensor.Shape{70, 9, 3, 3}, []int{1, 1}, []int{2, 2}, []int{1, 1}},  // C' > 64
			{tensor.Shape{2, 3, 11, 9}, tensor.Shape{5, 3, 3, 3}, []int{0, 2}, []int{1, 2}, []int{2, 1}},    // odd
			{tensor.Shape{16, 4, 16, 16}, tensor.Shape{32, 4, 1, 1}, []int{0, 0}, []int{1, 1}, []int{1, 1}}, // 1×1
			{tensor.Shape{1, 2, 5, 4}, tensor.Shape{3, 2, 2, 2}, []int{3, 3}, []int{3, 2}, []int{1, 1}},     // windows off the image
			{tensor.Shape{2, 2, 6, 5}, tensor.Shape{4, 2, 3, 3}, []int{0, 2}, []int{1, 1}, []int{1, 1}},     // 3 wide: 2 edge columns each side
			{tensor.Shape{1, 1, 4, 2}, tensor.Shape{2, 1, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}},     // 3 wide on a narrower image
			{tensor.Shape{1, 1, 9, 7}, tensor.Shape{3, 1, 3, 3}, []int{1, 1}, []int{2, 1}, []int{1, 1}},     // batch 1, 1 channel, stride 2 down
			{tensor.Shape{1, 8, 5, 5}, tensor.Shape{3, 8, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}},     // K = 72 > 64 in a product gonum does not block
		} {
			t.Run(fmt.Sprintf("%v/%v*%v", dt, c.x, c.w), func(t *testing.T) {
				rng := rand.New(rand.NewSource(3))
				xv, wv := randTensor(rng, dt, c.x, true), randTensor(rng, dt, c.w, false)
				g := gorgonia.NewGraph()
				x, w := input(g, "x", xv), input(g, "w", wv)
				y, err := gorgonia.Conv2d(x, w, c.w[2:], c.pad, c.stride, c.dilation)
				require.NoError(t, err)
				ref := side{g: g, inputs: gorgonia.Nodes{x, w}, out: y}

				var im2colOp gorgonia.Op
				for _, n := range g.AllNodes() {
					if n.Op() != nil && fmt.Sprintf("%T", n.Op()) == "gorgonia.im2colOp" {
						im2colOp = n.Op()
					}
				}
				ic, err := NewIm2Col(im2colOp, c.x)
				require.NoError(t, err)
				g2 := gorgonia.NewGraph()
				x2, w2 := input(g2, "x", xv), input(g2, "w", wv)
				p, err := ic.Apply(x2)
				require.NoError(t, err)
				k := c.w[1] * c.w[2] * c.w[3]
				f := gorgonia.Must(gorgonia.Reshape(w2, tensor.Shape{c.w[0], k}))
				y2, err := NewConvGEMM(c.x[0], y.Shape()[2], y.Shape()[3], c.w[0], k).Apply(p, f)
				require.NoError(t, err)
				require.Equal(t, y.Shape(), y2.Shape())
				ours := side{g: g2, inputs: gorgonia.Nodes{x2, w2}, out: y2}
				r := randTensor(rng, dt, y.Shape(), true)
				requireClose(t, ref.run(t, r), ours.run(t, r), "x", "filter")

				if i != 1 && i != 8 { // K > 64 blocked; batch 1, one channel, stride 2
					return
				}
				// The filter's gradient alone (WithoutPatchGrad): gorgonia's,
				// differentiated with respect to the filter only.
				g3 := gorgonia.NewGraph()
				x3, w3 := input(g3, "x", xv), input(g3, "w", wv)
				y3, err := gorgonia.Conv2d(x3, w3, c.w[2:], c.pad, c.stride, c.dilation)
				require.NoError(t, err)
				g4 := gorgonia.NewGraph()
				x4, w4 := input(g4, "x", xv), input(g4, "w", wv)
				p4, err := ic.Apply(x4)
				require.NoError(t, err)
				f4 := gorgonia.Must(gorgonia.Reshape(w4, tensor.Shape{c.w[0], k}))
				y4, err := NewConvGEMM(c.x[0], y.Shape()[2], y.Shape()[3], c.w[0], k).WithoutPatchGrad().Apply(p4, f4)
				require.NoError(t, err)
				requireClose(t, side{g: g3, inputs: gorgonia.Nodes{w3}, out: y3}.run(t, r), side{g: g4, inputs: gorgonia.Nodes{w4}, out: y4}.run(t, r), "filter")
			})
		}
	}
}

func TestReLUIsGorgonias(t *testing.T) {
	for _, dt := range dtypes {
		for _, shape := range []tensor.Shape{{5, 7}, {2, 3, 4, 4}} {
			t.Run(fmt.Sprintf("%v/%v", dt, shape), func(t *testing.T) {
				rng := rand.New(rand.NewSource(4))
				xv := randTensor(rng, dt, shape, true) // exact zeros and negatives
				g := gorgonia.NewGraph()
				x := input(g, "x", xv)
				y, err := gorgonia.Rectify(x)
				require.NoError(t, err)
				g2 := gorgonia.NewGraph()
				x2 := input(g2, "x", xv)
				y2, err := ReLU(x2)
				require.NoError(t, err)
				r := randTensor(rng, dt, shape, false)
				requireSame(t, side{g, gorgonia.Nodes{x}, y}.run(t, r), side{g2, gorgonia.Nodes{x2}, y2}.run(t, r), "x")
			})
		}
	}
}

func TestBiasAddIsGorgonias(t *testing.T) {
	for _, dt := range dtypes {
		for _, c := range []struct {
			x, b    tensor.Shape
			pattern []byte
			axes    []int
		}{
			{tensor.Shape{16, 7}, tensor.Shape{1, 7}, []byte{0}, []int{0}},
			{tensor.Shape{3, 5, 4, 6}, tensor.Shape{1, 5, 1, 1}, []byte{0, 2, 3}, []int{0, 2, 3}},
		} {
			t.Run(fmt.Sprintf("%v/%v", dt, c.x), func(t *testing.T) {
				rng := rand.New(rand.NewSource(5))
				xv, bv := randTensor(rng, dt, c.x, false), randTensor(rng, dt, c.b, false)
				g := gorgonia.NewGraph()
				x, b := input(g, "x", xv), input(g, "b", bv)
				y, err := gorgonia.BroadcastAdd(x, b, nil, c.pattern)
				require.NoError(t, err)
				g2 := gorgonia.NewGraph()
				x2, b2 := input(g2, "x", xv), input(g2, "b", bv)
				y2, err := BiasAdd(x2, b2, c.axes)
				require.NoError(t, err)
				r := randTensor(rng, dt, c.x, false)
				requireSame(t, side{g, gorgonia.Nodes{x, b}, y}.run(t, r), side{g2, gorgonia.Nodes{x2, b2}, y2}.run(t, r), "x", "bias")
			})
		}
	}
}

// TestMask: mask is 1 for every value Rectify passes (+0, −0, positive
// values up to +Inf) and 0 for the others (negative values, −Inf, NaN of
// either sign), in float32 and float64.
func TestMask(t *testing.T) {
	pass := []float64{0, math.Copysign(0, -1), 1, math.Inf(1), math.SmallestNonzeroFloat64, math.MaxFloat64, 1e-310}
	stop := []float64{-1, math.Inf(-1), math.NaN(), -math.NaN(), -math.SmallestNonzeroFloat64, -math.MaxFloat64, -1e-310}
	for want, vs := range [][]float64{stop, pass} {
		for _, v := range vs {
			require.Equal(t, float64(want), mask(v), "%v", v)
			if f := float32(v); f != 0 || v == 0 { // a float64 subnormal is a float32 ±0
				require.Equal(t, float32(want), mask(f), "%v", f)
			}
		}
	}
	for _, b := range []uint32{0x80000000, 0x00000001, 0x7f7fffff} {
		require.Equal(t, float32(1), mask(math.Float32frombits(b)), "%#x", b)
	}
	for _, b := range []uint32{0x80000001, 0x7f800001, 0xff800001, 0x7fc00000, 0xffc00000, 0xff7fffff} {
		require.Equal(t, float32(0), mask(math.Float32frombits(b)), "%#x", b)
	}
}

func TestSoftMaxIsGorgonias(t *testing.T) {
	for _, dt := range dtypes {
		// Rows of one, rows whose first element is their largest (where
		// gorgonia's shift starts from the tensor's first element instead),
		// and an attention's scores.
		for _, shape := range []tensor.Shape{{5, 7}, {2, 3, 1}, {1, 9}, {2, 17, 17}} {
			for _, log := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/log=%v", dt, shape, log), func(t *testing.T) {
					rng := rand.New(rand.NewSource(5))
					xv := randTensor(rng, dt, shape, false)
					d := shape[len(shape)-1]
					for r := 1; r < shape.TotalSize()/d; r += 2 { // some rows lead with their largest
						if dt == tensor.Float32 {
							xv.Float32s()[r*d] = 4
						} else {
							xv.Float64s()[r*d] = 4
						}
					}
					g := gorgonia.NewGraph()
					x := input(g, "x", xv)
					var y *gorgonia.Node
					var err error
					if log {
						y, err = gorgonia.LogSoftMax(x)
					} else {
						y, err = gorgonia.SoftMax(x)
					}
					require.NoError(t, err)
					g2 := gorgonia.NewGraph()
					x2 := input(g2, "x", xv)
					y2, err := SoftMax(x2, log)
					require.NoError(t, err)
					r := randTensor(rng, dt, shape, false)
					requireSame(t, side{g, gorgonia.Nodes{x}, y}.run(t, r), side{g2, gorgonia.Nodes{x2}, y2}.run(t, r), "x")
				})
			}
		}
	}
}
