package testutil

import (
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// Floats returns a float64 copy of the data of v, a float64 or float32
// scalar or tensor (float32 elements widened exactly). It fails the test on
// a nil value or any other data.
func Floats(tb testing.TB, v gorgonia.Value) []float64 {
	tb.Helper()
	if v == nil {
		tb.Fatalf("nil value")
		return nil
	}
	switch d := v.Data().(type) {
	case float64:
		return []float64{d}
	case float32:
		return []float64{float64(d)}
	case []float64:
		return append([]float64(nil), d...)
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out
	}
	tb.Fatalf("unsupported value data %T", v.Data())
	return nil
}

// RelErr is max|a−b| / max(max|b|, 1e-30) over two scalars or tensors of as
// many elements (shapes are not compared). It fails the test when Floats
// fails on either or their sizes differ.
func RelErr(tb testing.TB, a, b gorgonia.Value) float64 {
	tb.Helper()
	fa, fb := Floats(tb, a), Floats(tb, b)
	if len(fa) != len(fb) {
		tb.Fatalf("sizes differ: %d vs %d", len(fa), len(fb))
	}
	diff, scale := 0.0, 1e-30
	for i := range fa {
		diff = math.Max(diff, math.Abs(fa[i]-fb[i]))
		scale = math.Max(scale, math.Abs(fb[i]))
	}
	return diff / scale
}

// RequireBits requires got to hold want's bits: the same Go data type
// (float64 or float32, scalar or slice), as many elements by shape and by
// data, and every element bit for bit (so NaNs compare by payload and
// −0 differs from +0). what names the value in the failure message.
func RequireBits(tb testing.TB, want, got gorgonia.Value, what string) {
	tb.Helper()
	if want == nil || got == nil {
		tb.Fatalf("%s: nil value: got %v, want %v", what, got, want)
		return
	}
	wd, gd := want.Data(), got.Data()
	if reflect.TypeOf(wd) != reflect.TypeOf(gd) {
		tb.Fatalf("%s: data of type %T, want %T", what, gd, wd)
		return
	}
	require.Equal(tb, want.Shape().TotalSize(), got.Shape().TotalSize(), "%s: number of elements", what)
	switch w := wd.(type) {
	case float64:
		if g := gd.(float64); math.Float64bits(w) != math.Float64bits(g) {
			tb.Fatalf("%s: %v, want %v", what, g, w)
		}
	case float32:
		if g := gd.(float32); math.Float32bits(w) != math.Float32bits(g) {
			tb.Fatalf("%s: %v, want %v", what, g, w)
		}
	case []float64:
		g := gd.([]float64)
		require.Equal(tb, len(w), len(g), "%s: length of data", what)
		for i := range w {
			if math.Float64bits(w[i]) != math.Float64bits(g[i]) {
				tb.Fatalf("%s: element %d: %v, want %v", what, i, g[i], w[i])
			}
		}
	case []float32:
		g := gd.([]float32)
		require.Equal(tb, len(w), len(g), "%s: length of data", what)
		for i := range w {
			if math.Float32bits(w[i]) != math.Float32bits(g[i]) {
				tb.Fatalf("%s: element %d: %v, want %v", what, i, g[i], w[i])
			}
		}
	default:
		tb.Fatalf("%s: unsupported value data %T", what, wd)
	}
}

// WeightsHasher is what PlanSHA256 hashes: a *graphsplit.Plan (this package
// cannot name it, see the package comment).
type WeightsHasher interface {
	WeightsSHA256() (string, error)
}

// PlanSHA256 is plan.WeightsSHA256(), failing the test on an error.
func PlanSHA256(tb testing.TB, plan WeightsHasher) string {
	tb.Helper()
	h, err := plan.WeightsSHA256()
	require.NoError(tb, err)
	return h
}
