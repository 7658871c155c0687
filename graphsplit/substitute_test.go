package graphsplit

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/stageops"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestOpSubstitutionChangesNoBit runs every test model stage by stage for
// every P, with the user's ops re-applied (WithoutOpSubstitution) and with
// stage ops (recomputing, and with keeping programs), and requires the same
// cost, gradients and BatchNorm running statistics bit for bit — and that
// the stage ops were used. With another BLAS than gonum's (-tags openblas)
// the stage ops' GEMMs round differently: they agree with the user's ops to
// the parity tests' tolerance, and keeping with recomputing bit for bit.
func TestOpSubstitutionChangesNoBit(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	exact := stageops.ExactBLAS()
	for _, nb := range testmodels.All() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				probe, err := nb.Build(dt, 4, 1)
				require.NoError(t, err)
				fine, err := Split(probe.Graph, probe.Cost, probe.Learnables, FineGrained())
				require.NoError(t, err)
				for p := 1; p <= len(fine.Stages); p++ {
					if testing.Short() && p != 1 && p != len(fine.Stages) {
						continue
					}
					opts := []Option{FineGrained(), Stages(p)}
					want := runPlan(t, nb.Build, dt, append(opts, WithoutOpSubstitution()), false)
					recomputed := runPlan(t, nb.Build, dt, opts, false)
					kept := runPlan(t, nb.Build, dt, opts, true)
					require.Equal(t, len(want), len(recomputed))
					for i := range want {
						require.True(t, sameBits(recomputed[i], kept[i]), "P=%d value %d: keeping against recomputing", p, i)
						if exact {
							require.True(t, sameBits(want[i], recomputed[i]), "P=%d value %d", p, i)
							continue
						}
						require.LessOrEqual(t, testutil.RelErr(t, recomputed[i], want[i]), tolerance(dt), "P=%d value %d", p, i)
					}
				}
			})
		}
	}
}

// TestEveryCutComputesBatchNormWithAStageOp cuts the test CNN in two at
// every op, inside its BatchNorm, scale, bias and Rectify too, and requires
// every BatchNorm computed by a stage op and the same gradients, keeping,
// as the user's ops recomputing (with another BLAS than gonum's, to the
// parity tests' tolerance). A cut inside the pattern used to leave the
// BatchNorm to gorgonia's op, whose state a keeping stage read from
// whichever microbatch ran last.
func TestEveryCutComputesBatchNormWithAStageOp(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	dt := tensor.Float32
	m, err := testmodels.CNN(dt, 4, 1)
	require.NoError(t, err)
	feeds := make(map[*gorgonia.Node]gorgonia.Value)
	for i, v := range m.Batch(rand.New(rand.NewSource(2))) {
		feeds[m.Inputs[i]] = v
	}
	one, err := Split(m.Graph, m.Cost, m.Learnables, WithoutOpSubstitution())
	require.NoError(t, err)
	defer one.Close()
	_, want, err := stagewise(one, feeds)
	require.NoError(t, err)
	for cut := 1; cut < len(one.a.seq); cut++ {
		plan, err := Split(m.Graph, m.Cost, m.Learnables, CutAtOps(cut))
		require.NoError(t, err)
		if len(plan.Stages[0].Learnables) == 0 {
			// The data's im2col alone has no keeping backward (TestAStageWithNoGradientRecomputes).
			require.NoError(t, plan.Close())
			continue
		}
		keepings := make([]*Keeping, len(plan.Stages))
		for s, st := range plan.Stages {
			keepings[s], err = plan.NewKeeping(s)
			require.NoError(t, err, "cut at %d", cut)
			for _, prog := range []*Program{st.Forward, st.Train, keepings[s].Forward, keepings[s].Backward} {
				for _, n := range prog.Graph.AllNodes() {
					if g, ok := n.Op().(guardedOp); ok && opTypeName(g.Op) == "BatchNormOp" {
						t.Fatalf("cut at %d: stage %d program %s holds gorgonia's BatchNorm", cut, s, prog.kind)
					}
				}
			}
		}
		_, got, err := stagewiseWith(plan, feeds, keepings)
		require.NoError(t, err)
		for i := range want {
			if !stageops.ExactBLAS() { // -tags openblas: the stage ops' GEMMs round otherwise
				require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), tolerance(dt), "cut at %d: gradient %d", cut, i)
				continue
			}
			require.True(t, sameBits(want[i], got[i]), "cut at %d: gradient %d", cut, i)
		}
		require.NoError(t, plan.Close())
	}
}

// runPlan builds a fresh model, splits it and runs one microbatch stage by
// stage; it returns the cost, the gradients and every BatchNorm's running
// statistics. With subst it also checks that no stage program holds a
// BatchNorm, MaxPool, im2col, transpose or softmax of gorgonia's.
func runPlan(t *testing.T, build testmodels.Builder, dt tensor.Dtype, opts []Option, keep bool) []gorgonia.Value {
	t.Helper()
	m, err := build(dt, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, opts...)
	require.NoError(t, err)
	defer plan.Close()
	if plan.a.substitute {
		for _, st := range plan.Stages {
			for _, prog := range []*Program{st.Forward, st.Train} {
				for _, n := range prog.Graph.AllNodes() {
					if n.Op() == nil || isConstant(n) || isSizeOf(n) || opTypeName(n.Op()) == "readOp" {
						continue
					}
					g, ok := n.Op().(guardedOp)
					require.True(t, ok, "stage %d %s: op %v is not guarded", st.Index, prog.kind, n.Op())
					switch opTypeName(g.Op) {
					case "BatchNormOp", "maxPoolOp", "im2colOp", "transposeOp", "softmaxOp":
						t.Fatalf("stage %d program %s still holds gorgonia's %v", st.Index, prog.kind, g.Op)
					}
				}
			}
		}
	}
	var keepings []*Keeping
	if keep {
		for s := range plan.Stages {
			sh, err := plan.NewKeeping(s)
			require.NoError(t, err)
			keepings = append(keepings, sh)
		}
	}
	feeds := make(map[*gorgonia.Node]gorgonia.Value)
	for i, v := range m.Batch(rand.New(rand.NewSource(2))) {
		feeds[m.Inputs[i]] = v
	}
	cost, grads, err := stagewiseWith(plan, feeds, keepings)
	require.NoError(t, err)
	out := append([]gorgonia.Value{cost}, grads...)
	for _, st := range plan.Stages {
		for _, n := range st.Stateful {
			if bn, ok := n.Op().(*gorgonia.BatchNormOp); ok {
				mean, vari := bn.Stats()
				out = append(out, mean.Clone().(gorgonia.Value), vari.Clone().(gorgonia.Value))
			}
		}
	}
	return out
}

func sameBits(a, b gorgonia.Value) bool {
	switch x := a.Data().(type) {
	case float64:
		return math.Float64bits(x) == math.Float64bits(b.Data().(float64))
	case float32:
		return math.Float32bits(x) == math.Float32bits(b.Data().(float32))
	case []float64:
		y := b.Data().([]float64)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
		return len(x) == len(y)
	case []float32:
		y := b.Data().([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
		return len(x) == len(y)
	}
	return false
}

// TestFineGrainedStartsAConvolutionAtItsIm2col: FineGrained starts a
// convolution's layer at its im2col, so that every stage computes its
// convolutions whole (im2col and product) and no stage sends patches
// (kh·kw times the image); a cut between the im2col and the product
// (CutAt) is what the check catches.
func TestFineGrainedStartsAConvolutionAtItsIm2col(t *testing.T) {
	whole := func(plan *Plan) bool { // every stage that has a convolution's product has its im2col
		for _, st := range plan.Stages {
			kinds := map[string]int{}
			for _, n := range st.Train.Graph.AllNodes() {
				if g, ok := n.Op().(guardedOp); ok {
					for _, kind := range []string{"convgemm-dpatch-", "convgemm-dfilter-", "convgemm-", "im2col2d-"} {
						if strings.HasPrefix(g.Op.String(), kind) {
							kinds[kind]++
							break
						}
					}
				}
			}
			if kinds["convgemm-"] != kinds["im2col2d-"] {
				return false
			}
		}
		return true
	}
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	defer fine.Close()
	require.Greater(t, len(fine.Stages), 2)
	require.True(t, whole(fine), "FineGrained cuts no convolution")

	a, err := analyze(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	var product *gorgonia.Node // the second convolution's
	for _, n := range m.Graph.AllNodes() {
		if n.Op() != nil && n.Op().String() == "A × Bᵀ" && isReshape(a.children(n)[0]) {
			if ic := a.children(a.children(n)[0])[0]; ic.Op() != nil && opTypeName(ic.Op()) == "im2colOp" {
				product = n
			}
		}
	}
	require.NotNil(t, product)
	cut, err := Split(m.Graph, m.Cost, m.Learnables, CutAt(product.Name()))
	require.NoError(t, err)
	defer cut.Close()
	require.False(t, whole(cut), "a cut before the product leaves its im2col in the earlier stage")
}

// TestConvolutionOfDataComputesNoPatchGradient: the test CNN's first
// convolution reads the data, whose gradient nothing needs; its stage op
// computes the filter's gradient only (gorgonia's GEMM computes the
// patches' too), and training is the same bits — also where a cut between
// its im2col and its product makes the patches a stage input (with
// another BLAS than gonum's, to the parity tests' tolerance).
func TestConvolutionOfDataComputesNoPatchGradient(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	defer fine.Close()
	kinds := map[string]int{}
	for _, st := range fine.Stages {
		for _, n := range st.Train.Graph.AllNodes() {
			if g, ok := n.Op().(guardedOp); ok {
				for _, kind := range []string{"convgemm-dpatch-", "convgemm-dfilter-"} {
					if strings.HasPrefix(g.Op.String(), kind) {
						kinds[kind]++
					}
				}
			}
		}
	}
	require.Equal(t, map[string]int{"convgemm-dpatch-": 1, "convgemm-dfilter-": 2}, kinds, "the second convolution's patch gradient only")

	a, err := analyze(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	var first string
	for _, n := range a.seq {
		if n.Op() != nil && n.Op().String() == "A × Bᵀ" {
			first = n.Name()
			break
		}
	}
	opts := []Option{CutAt(first)}
	want := runPlan(t, testmodels.CNN, tensor.Float32, append(opts, WithoutOpSubstitution()), false)
	got := runPlan(t, testmodels.CNN, tensor.Float32, opts, false)
	require.Equal(t, len(want), len(got))
	for i := range want {
		if !stageops.ExactBLAS() { // -tags openblas: the stage ops' GEMMs round otherwise (TestOpSubstitutionChangesNoBit)
			require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), tolerance(tensor.Float32), "value %d", i)
			continue
		}
		require.True(t, sameBits(want[i], got[i]), "value %d", i)
	}
}

// TestAStageWithNoGradientRecomputes: a stage that reads only data and no
// learnable (the test CNN cut after its first im2col) has no keeping
// backward — it would be an empty program, which gorgonia cannot compile
// — so it recomputes even where keeping is asked (before, `pipemare train
// -model cnn -cut 1 -stash` failed at start: "Cannot compile an empty
// graph").
func TestAStageWithNoGradientRecomputes(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, CutAtOps(1))
	require.NoError(t, err)
	defer plan.Close()
	require.Empty(t, plan.Stages[0].Learnables, "the cut leaves the data's im2col alone in stage 0")
	require.False(t, plan.CanKeep(0))
	require.True(t, plan.CanKeep(1))
	_, _, kept, err := plan.Programs(0, true)
	require.NoError(t, err)
	require.False(t, kept)
	_, err = plan.NewKeeping(0)
	require.ErrorContains(t, err, "no gradient to compute")
}
