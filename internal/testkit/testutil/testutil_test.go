package testutil

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// failed is the panic a fakeTB's Fatalf and FailNow raise to stop the
// helper under test, as the real ones stop the goroutine.
type failed struct{ msg string }

// fakeTB records a helper's failure instead of failing the test.
type fakeTB struct {
	testing.TB
	errs []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) FailNow() { panic(failed{fmt.Sprint(f.errs)}) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	f.FailNow()
}

// failure runs fn with a fakeTB and returns its failure message, "" if it
// passed.
func failure(t *testing.T, fn func(tb testing.TB)) (msg string) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(failed)
			if !ok {
				panic(p)
			}
			msg = f.msg
		}
	}()
	fn(&fakeTB{TB: t})
	return ""
}

func vec64(v ...float64) gorgonia.Value {
	return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))
}

func vec32(v ...float32) gorgonia.Value {
	return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))
}

func TestFloats(t *testing.T) {
	require.Equal(t, []float64{1.5}, Floats(t, gorgonia.NewF64(1.5)))
	require.Equal(t, []float64{0.25}, Floats(t, gorgonia.NewF32(0.25)))
	require.Equal(t, []float64{1, 2}, Floats(t, vec32(1, 2)))
	v := vec64(1, 2)
	f := Floats(t, v)
	require.Equal(t, []float64{1, 2}, f)
	f[0] = 9
	require.Equal(t, 1.0, v.Data().([]float64)[0], "Floats copies")

	require.Contains(t, failure(t, func(tb testing.TB) { Floats(tb, nil) }), "nil value")
	ints := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2}))
	require.Contains(t, failure(t, func(tb testing.TB) { Floats(tb, ints) }), "unsupported value data []int")
}

func TestRelErr(t *testing.T) {
	require.Equal(t, 0.0, RelErr(t, vec64(1, -2), vec64(1, -2)))
	require.InDelta(t, 0.5/4, RelErr(t, vec64(1, 4.5), vec32(1.5, 4)), 1e-15)
	require.InDelta(t, 1e30, RelErr(t, gorgonia.NewF64(1), gorgonia.NewF64(0)), 1e15, "the 1e-30 floor")
	require.Contains(t, failure(t, func(tb testing.TB) { RelErr(tb, vec64(1, 2), vec64(1)) }), "sizes differ: 2 vs 1")
	require.Contains(t, failure(t, func(tb testing.TB) { RelErr(tb, vec64(1), nil) }), "nil value")
}

func TestRequireBits(t *testing.T) {
	nan := math.Float64frombits(0x7ff8000000000abc)
	for _, v := range []gorgonia.Value{gorgonia.NewF64(nan), gorgonia.NewF32(2), vec64(1, nan, math.Inf(1)), vec32(3, -4)} {
		require.Empty(t, failure(t, func(tb testing.TB) { RequireBits(tb, v, v, "same") }))
	}
	for _, c := range []struct {
		want, got gorgonia.Value
		msg       string
	}{
		{gorgonia.NewF64(0), gorgonia.NewF64(math.Copysign(0, -1)), "x: -0, want 0"},
		{gorgonia.NewF32(1), gorgonia.NewF32(2), "x: 2, want 1"},
		{gorgonia.NewF64(1), gorgonia.NewF32(1), "x: data of type float32, want float64"},
		{vec64(1, 2), vec32(1, 2), "x: data of type []float32, want []float64"},
		{vec64(1, 2), vec64(1, 2, 3), "number of elements"},
		{vec32(1, 2), vec32(1, 3), "x: element 1: 3, want 2"},
		{vec64(1, math.NaN()), vec64(1, nan), "x: element 1: NaN, want NaN"},
		{vec64(1), nil, "x: nil value"},
		{tensor.New(tensor.WithShape(1), tensor.WithBacking([]int{1})), tensor.New(tensor.WithShape(1), tensor.WithBacking([]int{1})), "x: unsupported value data []int"},
	} {
		require.Contains(t, failure(t, func(tb testing.TB) { RequireBits(tb, c.want, c.got, "x") }), c.msg, "%v vs %v", c.want, c.got)
	}
}

type hasher struct {
	h   string
	err error
}

func (h hasher) WeightsSHA256() (string, error) { return h.h, h.err }

func TestPlanSHA256(t *testing.T) {
	require.Equal(t, "abc", PlanSHA256(t, hasher{h: "abc"}))
	require.Contains(t, failure(t, func(tb testing.TB) { PlanSHA256(tb, hasher{err: fmt.Errorf("boom")}) }), "boom")
}
