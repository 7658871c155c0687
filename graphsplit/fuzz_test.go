package graphsplit

import (
	"math"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// FuzzSplitParity builds random graphs from the supported ops, splits them
// into a random number of stages (balanced, or fine-grained) and checks that
// running the stages one by one gives the whole graph's cost and gradients,
// in float64 or float32 (the top bit of p), and that the plan records
// exactly the learnables its stages share.
func FuzzSplitParity(f *testing.F) {
	f.Add([]byte{1, 3, 5, 0, 4, 2, 3, 0, 4, 5, 1, 8}, uint8(3), false)
	f.Add([]byte{9, 2, 7, 0, 3, 7, 1, 1, 5, 2, 6, 0, 2}, uint8(2), true)
	f.Add([]byte{0, 1, 6, 8, 5, 1, 0, 4}, uint8(9), false)
	// Shared learnables: a linear layer applied twice, a tied transpose,
	// a penalty.
	f.Add([]byte{4, 0, 6, 0, 1, 3, 13, 0, 3, 14, 0, 15, 0, 9}, uint8(4), false)
	f.Add([]byte{4, 0, 6, 0, 1, 3, 13, 0, 3, 14, 0, 15, 0, 9}, uint8(5), true)
	f.Fuzz(func(t *testing.T, data []byte, p uint8, fine bool) {
		dt := tensor.Float64
		if p&128 != 0 {
			dt = tensor.Float32
		}
		m, err := buildRandom(data, dt)
		if err != nil {
			t.Skipf("generator: %v", err) // a shape the ops reject: not a splitter case
		}
		a, err := analyze(m.g, m.cost, m.learnables)
		if err != nil {
			t.Fatalf("analyze: %v", err)
		}
		maxP := len(a.seq)
		var opts []Option
		if fine {
			opts = append(opts, FineGrained())
			if fc := len(a.fineCuts()) + 1; p%2 == 1 && fc > 1 {
				opts = append(opts, Stages(1+int(p)%fc))
			}
		} else {
			opts = append(opts, Stages(1+int(p)%maxP))
		}
		plan, err := Split(m.g, m.cost, m.learnables, opts...)
		if err != nil {
			t.Fatalf("split: %v", err)
		}
		defer plan.Close()
		checkShared(t, plan)
		wantCost, wantGrads, err := reference(m.g, m.cost, m.learnables, m.feeds)
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		if err := checkParity(t, plan, m.feeds, wantCost, wantGrads); err != nil {
			if bug := wholeGraphIsWrong(t, data, opts); bug != "" {
				t.Skipf("not a splitter bug: %s", bug)
			}
			t.Fatal(err)
		}
	})
}

// wholeGraphIsWrong rebuilds the fuzz graph in float64 and checks the whole
// graph's and the plan's cost and gradients against an exact reference:
// gorgonia's own symbolic gradient of the whole graph, evaluated op by op
// on fresh copies (interpreter) instead of by the tape machine. It returns a
// description when the tape machine gets the whole graph wrong — it runs
// in-place ops on memory that a later op still needs — while the plan is
// right, and "" otherwise.
func wholeGraphIsWrong(t *testing.T, data []byte, opts []Option) string {
	m, err := buildRandom(data, tensor.Float64)
	if err != nil {
		return ""
	}
	plan, err := Split(m.g, m.cost, m.learnables, opts...)
	if err != nil {
		return ""
	}
	defer plan.Close()
	planCost, planGrads, err := stagewise(plan, m.feeds)
	if err != nil {
		return ""
	}
	refCost, refGrads, err := reference(m.g, m.cost, m.learnables, m.feeds)
	if err != nil {
		return ""
	}
	// A fresh copy of the graph: reference's Grad removed isolated nodes
	// from m.g, which leaves gorgonia's node index stale.
	fresh, err := buildRandom(data, tensor.Float64)
	if err != nil {
		return ""
	}
	symbolic, err := gorgonia.Grad(fresh.cost, fresh.learnables...)
	if err != nil {
		return ""
	}
	fa, err := analyze(fresh.g, fresh.cost, fresh.learnables)
	if err != nil {
		return ""
	}
	in, err := newInterpreter(fa, fresh.feeds)
	if err != nil {
		t.Fatal(err)
	}
	wantCost, err := in.eval(fresh.cost)
	if err != nil {
		t.Fatal(err)
	}
	if testutil.RelErr(t, planCost, wantCost) > 1e-12 {
		return "" // the plan is wrong: a real failure
	}
	wholeWrong := false
	if testutil.RelErr(t, refCost, wantCost) > 1e-12 {
		wholeWrong = true
	}
	for i, g := range symbolic {
		want, err := in.eval(g)
		if err != nil {
			t.Fatal(err)
		}
		if testutil.RelErr(t, planGrads[i], want) > 1e-12 {
			return ""
		}
		if testutil.RelErr(t, refGrads[i], want) > 1e-12 {
			wholeWrong = true
		}
	}
	if !wholeWrong {
		return ""
	}
	return "gorgonia's tape machine gets the whole graph wrong (in-place reuse of memory still needed) and the plan matches the op-by-op evaluation of the same symbolic gradient"
}

// absErr is max|a−b| over two tensors or scalars; it fails the test when
// testutil.Floats fails on either.
func absErr(tb testing.TB, a, b gorgonia.Value) float64 {
	tb.Helper()
	fa, fb := testutil.Floats(tb, a), testutil.Floats(tb, b)
	d := 0.0
	for i := range fa {
		d = math.Max(d, math.Abs(fa[i]-fb[i]))
	}
	return d
}
